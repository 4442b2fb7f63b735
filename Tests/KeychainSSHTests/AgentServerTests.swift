import Foundation
import Glibc
import KeychainCore
import KeychainPeers
import KeychainSSH
import XCTest

/// The socket server against real Unix sockets in a temporary folder: framing, limits, peers.
final class AgentServerTests: XCTestCase {
    private var folder = ""
    private var path: String { folder + "/agent.socket" }
    private var server: AgentServer?
    private var serverThread: Thread?
    private let logged = LogLines()

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "agent-server-\(getpid())-\(UUID().uuidString.prefix(8))"
        XCTAssertEqual(mkdir(folder, 0o700), 0)
    }

    override func tearDown() {
        server?.stop()
        while serverThread?.isFinished == false { usleep(1000) }
        server = nil
        unlink(path)
        rmdir(folder)
    }

    /// Starts a server at `path` whose handler is `handler` for every peer; the peers it saw are
    /// kept in `peers`.
    @discardableResult
    private func serve(maximumConnections: Int = AgentServer.maximumConnections, handler: @escaping @Sendable (Bytes) -> Bytes?) throws -> Peers {
        let socket = try AgentSocket.listen(at: path, strictFolder: true, replaceStale: false)
        let peers = Peers()
        let logged = self.logged
        let factory: AgentServer.HandlerFactory = { peer in
            peers.append(peer)
            return handler
        }
        let server = try AgentServer(
            listening: socket.descriptor, maximumConnections: maximumConnections, log: { logged.append($0) }, handlerFactory: factory)
        let thread = Thread { server.run() }
        thread.start()
        self.server = server
        serverThread = thread
        return peers
    }

    func testAnswersEachFrameWithItsHandlersReply() throws {
        try serve { message in [0x99] + message.reversed() }
        let client = try Client(path)
        XCTAssertEqual(client.exchange([1, 2, 3]), [0x99, 3, 2, 1])
        XCTAssertEqual(client.exchange([]), [0x99], "an empty message is the handler's to answer")
        XCTAssertEqual(client.exchange([7]), [0x99, 7], "the connection stays open between messages")
    }

    func testAFrameOverTheLimitClosesTheConnection() throws {
        try serve { _ in [5] }
        let largest = try Client(path)
        XCTAssertEqual(largest.exchange(Bytes(repeating: 0, count: AgentServer.maximumMessage)), [5], "256 KiB itself is allowed")
        let client = try Client(path)
        client.send(header: UInt32(AgentServer.maximumMessage + 1))
        XCTAssertTrue(client.isClosed(), "the agent closes instead of waiting for 256 KiB + 1")
        XCTAssertTrue(logged.lines.contains { $0.contains("\(AgentServer.maximumMessage + 1) bytes") }, "\(logged.lines)")
        let huge = try Client(path)
        huge.send(header: UInt32.max)
        XCTAssertTrue(huge.isClosed())
    }

    func testANilReplyClosesTheConnection() throws {
        try serve { message in message == [1] ? nil : [6] }
        let client = try Client(path)
        XCTAssertEqual(client.exchange([2]), [6])
        client.send(frame: [1])
        XCTAssertTrue(client.isClosed())
    }

    func testRecordsThePeersUidPidAndExecutable() throws {
        let peers = try serve { _ in [6] }
        let client = try Client(path)
        XCTAssertEqual(client.exchange([1]), [6])
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let parents = ProcessLineage.parents(of: getpid())
        XCTAssertFalse(parents.isEmpty, "the test runner has a parent")
        XCTAssertEqual(peers.all, [AgentPeer(uid: geteuid(), pid: getpid(), executable: executable, parents: parents)])
    }

    func testASlowHandlerHoldsOnlyItsOwnConnection() throws {
        let release = DispatchSemaphore(value: 0)
        try serve { message in
            if message == [1] { release.wait() }
            return message
        }
        let waiting = try Client(path)
        waiting.send(frame: [1])
        let other = try Client(path)
        XCTAssertEqual(other.exchange([2]), [2], "a client waiting on a prompt does not block the others")
        release.signal()
        XCTAssertEqual(waiting.receive(), [1])
    }

    func testConnectionsOverTheLimitAreClosedAtOnce() throws {
        try serve(maximumConnections: 2) { $0 }
        let first = try Client(path)
        let second = try Client(path)
        XCTAssertEqual(first.exchange([1]), [1])
        XCTAssertEqual(second.exchange([2]), [2])
        let third = try Client(path)
        XCTAssertTrue(third.isClosed())
        XCTAssertTrue(logged.lines.contains { $0.contains("2 connections already open") }, "\(logged.lines)")
        first.close()
        var answered: Bytes?
        for _ in 0..<200 where answered == nil {
            usleep(10_000)
            if let fourth = try? Client(path) { answered = fourth.exchange([4]) }
        }
        XCTAssertEqual(answered, [4], "a closed connection frees its place")
    }

    func testTheSocketIsOwnerOnly() throws {
        try serve { $0 }
        var info = stat()
        XCTAssertEqual(lstat(path, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
    }

    func testAnotherUsersConnectionIsRefusedWithOneLogLine() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root to connect as another user") }
        try serve { _ in [6] }
        // The modes are loosened on purpose: the uid check must hold even where they do not (a
        // socket someone chmod-ed, a folder handed over by systemd with other modes).
        XCTAssertEqual(chmod(folder, 0o755), 0)
        XCTAssertEqual(chmod(path, 0o666), 0)
        let nobody: uid_t = 65534
        var address = Client.address(path)
        let child = fork()
        if child == 0 {
            // Only system calls between fork and _exit: the test process has threads.
            guard setgid(nobody) == 0, setuid(nobody) == 0 else { _exit(10) }
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard connected == 0 else { _exit(11) }
            var frame: [UInt8] = [0, 0, 0, 1, 11]
            _ = write(fd, &frame, frame.count)
            var answer = [UInt8](repeating: 0, count: 16)
            // End of file, or a reset when the agent closed with the frame unread: no answer either way.
            _exit(read(fd, &answer, answer.count) <= 0 ? 0 : 12)
        }
        var status: Int32 = 0
        XCTAssertEqual(waitpid(child, &status, 0), child)
        XCTAssertEqual(status >> 8 & 0xff, 0, "the other user got an answer (12) or could not connect (11)")
        let refusals = logged.lines.filter { $0.contains("uid \(nobody)") }
        XCTAssertEqual(refusals.count, 1, "\(logged.lines)")
        let client = try Client(path)
        XCTAssertEqual(client.exchange([11]), [6], "the agent's own user is still served")
    }

    func testTheStrictFolderCheck() throws {
        XCTAssertNoThrow(try AgentSocket.checkFolder(folder, strict: true))
        XCTAssertEqual(chmod(folder, 0o750), 0)
        XCTAssertThrowsError(try AgentSocket.checkFolder(folder, strict: true), "a folder its group may enter")
        XCTAssertThrowsError(try AgentSocket.listen(at: path, strictFolder: true, replaceStale: false))
        XCTAssertEqual(chmod(folder, 0o700), 0)
        let link = folder + "-link"
        XCTAssertEqual(symlink(folder, link), 0)
        defer { unlink(link) }
        XCTAssertThrowsError(try AgentSocket.checkFolder(link, strict: true), "a symbolic link someone could point elsewhere")
        if geteuid() == 0 {
            XCTAssertEqual(chown(folder, 65534, 65534), 0)
            XCTAssertThrowsError(try AgentSocket.checkFolder(folder, strict: true), "another user's folder")
            XCTAssertThrowsError(try AgentSocket.checkFolder(folder, strict: false), "another user's folder, even for -a")
            XCTAssertEqual(chown(folder, 0, 0), 0)
        }
    }

    func testTheLooseFolderCheckForAPathTheCallerChose() throws {
        XCTAssertEqual(chmod(folder, 0o777), 0)
        XCTAssertThrowsError(try AgentSocket.checkFolder(folder, strict: false), "anyone could swap the socket")
        XCTAssertEqual(chmod(folder, 0o1777), 0)
        XCTAssertNoThrow(try AgentSocket.checkFolder(folder, strict: false), "a sticky folder like /tmp, as ssh-agent -a allows")
        XCTAssertThrowsError(try AgentSocket.checkFolder(folder, strict: true))
        XCTAssertEqual(chmod(folder, 0o700), 0)
    }

    func testMakePrivateFolderRefusesAnExistingLooseOne() throws {
        let inner = folder + "/keychain"
        XCTAssertNoThrow(try AgentSocket.makePrivateFolder(inner))
        var info = stat()
        XCTAssertEqual(lstat(inner, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertEqual(chmod(inner, 0o755), 0)
        XCTAssertThrowsError(try AgentSocket.makePrivateFolder(inner))
        rmdir(inner)
    }

    func testAStaleSocketIsReplacedAndALiveOneIsNot() throws {
        let stale = try AgentSocket.listen(at: path, strictFolder: true, replaceStale: false)
        close(stale.descriptor)
        XCTAssertThrowsError(try AgentSocket.listen(at: path, strictFolder: true, replaceStale: false), "ssh-agent -a refuses an existing file")
        let fresh = try AgentSocket.listen(at: path, strictFolder: true, replaceStale: true)
        XCTAssertThrowsError(try AgentSocket.listen(at: path, strictFolder: true, replaceStale: true)) { error in
            XCTAssertTrue("\(error)".contains("already answers"), "\(error)")
        }
        close(fresh.descriptor)
        unlink(path)
        XCTAssertEqual(mkdir(path, 0o700), 0)
        XCTAssertThrowsError(try AgentSocket.listen(at: path, strictFolder: true, replaceStale: true), "never removes what is not a socket")
        rmdir(path)
    }

    func testSocketActivationTakesDescriptorThreeOnlyForThisProcess() throws {
        setenv("LISTEN_PID", "\(getpid() + 1)", 1)
        setenv("LISTEN_FDS", "1", 1)
        XCTAssertNil(try AgentSocket.inherited(), "LISTEN_PID names another process")
        XCTAssertNil(getenv("LISTEN_FDS"), "the variables are not passed on")
        let socket = try AgentSocket.listen(at: path, strictFolder: true, replaceStale: false)
        let saved = dup(3)
        defer {
            if saved >= 0 {
                dup2(saved, 3)
                close(saved)
            } else {
                close(3)
            }
            close(socket.descriptor)
        }
        XCTAssertEqual(dup2(socket.descriptor, 3), 3)
        setenv("LISTEN_PID", "\(getpid())", 1)
        setenv("LISTEN_FDS", "2", 1)
        XCTAssertThrowsError(try AgentSocket.inherited(), "one socket, not two")
        setenv("LISTEN_PID", "\(getpid())", 1)
        setenv("LISTEN_FDS", "1", 1)
        let inherited = try XCTUnwrap(AgentSocket.inherited())
        XCTAssertEqual(inherited.descriptor, 3)
        XCTAssertNil(inherited.path, "systemd's socket is systemd's to remove")
    }
}

private final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var lines: [String] { lock.withLock { stored } }
    func append(_ line: String) { lock.withLock { stored.append(line) } }
}

private final class Peers: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [AgentPeer] = []
    var all: [AgentPeer] { lock.withLock { stored } }
    func append(_ peer: AgentPeer) { lock.withLock { stored.append(peer) } }
}

/// A client of the agent's framing, with a time limit on every read so that a server that fails
/// to answer fails the test instead of hanging it.
private final class Client {
    private var fd: Int32

    static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        return address
    }

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = Client.address(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw AgentServerError("connect: \(String(cString: strerror(errno)))")
        }
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    func send(header length: UInt32) {
        var bytes: [UInt8] = [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        _ = Glibc.send(fd, &bytes, 4, Int32(MSG_NOSIGNAL))
    }

    func send(frame message: Bytes) {
        send(header: UInt32(message.count))
        var done = 0
        while done < message.count {
            let sent = message.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + done, message.count - done, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            done += sent
        }
    }

    func receive() -> Bytes? {
        guard let header = read(4) else { return nil }
        return read(header.reduce(0) { $0 << 8 | Int($1) })
    }

    func exchange(_ message: Bytes) -> Bytes? {
        send(frame: message)
        return receive()
    }

    /// True when the server closed: end of file, not a time-out.
    func isClosed() -> Bool {
        var byte: UInt8 = 0
        return Glibc.read(fd, &byte, 1) == 0
    }

    private func read(_ count: Int) -> Bytes? {
        var buffer = Bytes(repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, count - done) }
            guard got > 0 else { return nil }
            done += got
        }
        return buffer
    }
}
