import Foundation
import Glibc
import KeychainCore
import KeychainSSH

/// Just enough of a socket to let the real ssh-add and ssh-keygen talk to an Agent in a test:
/// one connection at a time, each message handed to AgentConnection.reply(to:). The real server
/// (SO_PEERCRED, limits, many clients) is the executable's, not this.
final class SocketHarness: @unchecked Sendable {
    let path: String
    private let listener: Int32
    private let agent: Agent

    init(agent: Agent) throws {
        self.agent = agent
        path = OpenSSHTools.scratch + "/agent-\(UUID().uuidString.prefix(8)).sock"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 4) == 0 else { throw SSHKeyError("cannot listen on \(path)") }
        let (descriptor, served) = (listener, agent)
        // The thread holds the descriptor, not the harness, so that the harness's deinit closes it.
        Thread.detachNewThread { Self.serve(descriptor, served) }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(path)
    }

    private static func serve(_ listener: Int32, _ agent: Agent) {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let connection = AgentConnection(agent: agent, peer: AgentPeer(uid: getuid(), pid: 0, executable: nil))
            while let message = readMessage(client), let answer = connection.reply(to: message) {
                var framed = ByteWriter()
                framed.blob(answer)
                guard PlainFiles.writeAll(client, framed.bytes) else { break }
            }
            close(client)
        }
    }

    private static func readMessage(_ fd: Int32) -> Bytes? {
        guard let header = readFully(fd, 4) else { return nil }
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard length <= AgentLimits.maximumMessage else { return nil }
        return readFully(fd, length)
    }

    private static func readFully(_ fd: Int32, _ count: Int) -> Bytes? {
        var out = Bytes(repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, count - done) }
            guard n > 0 else { return nil }
            done += n
        }
        return out
    }

    /// Runs an OpenSSH tool with SSH_AUTH_SOCK naming this socket.
    func run(_ arguments: [String], input: Bytes = []) throws -> (status: Int32, output: String) {
        try OpenSSHTools.run(["/usr/bin/env", "SSH_AUTH_SOCK=" + path, "SSH_ASKPASS=/bin/false", "DISPLAY="] + arguments, input: input)
    }
}
