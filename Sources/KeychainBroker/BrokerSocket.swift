import CLinux
import Glibc
import KeychainCore

/// The Unix-socket calls both ends share: SOCK_SEQPACKET, close-on-exec, bounded messages.
package enum BrokerSocket {
    static let seqpacket = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)

    package static func address(_ path: String) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let raw = Array(path.utf8)
        guard raw.count < MemoryLayout.size(ofValue: address.sun_path) else { throw KeychainError.param("\(path): too long for a socket") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: raw) }
        return address
    }

    /// A connected descriptor, or errno's error.
    static func connect(to path: String) throws -> Int32 {
        var address = try address(path)
        let fd = socket(AF_UNIX, seqpacket, 0)
        guard fd >= 0 else { throw KeychainError(.notAvailable, "socket: \(String(cString: strerror(errno)))") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw KeychainError(.notAvailable, "the keychain broker at \(path) does not answer (\(reason))")
        }
        return fd
    }

    /// SO_PEERCRED's uid and pid.
    package static func peer(of fd: Int32) -> (uid: UInt32, pid: Int32)? {
        var uid: UInt32 = 0, pid: Int32 = 0
        guard clinux_peer_credentials(fd, &uid, &pid) == 0 else { return nil }
        return (uid, pid)
    }

    /// SO_PEERPIDFD (Linux 6.5): the connecting process itself, never a later one with its pid;
    /// -1 where the kernel has none.
    package static func peerPidfd(of fd: Int32) -> Int32 {
        var pidfd: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        // SO_PEERPIDFD is 77 in <asm-generic/socket.h>; Debian 12's headers predate it.
        guard getsockopt(fd, SOL_SOCKET, 77, &pidfd, &length) == 0 else { return -1 }
        // The kernel hands it out without O_CLOEXEC only if asked; set it anyway.
        _ = fcntl(pidfd, F_SETFD, FD_CLOEXEC)
        return pidfd
    }

    /// One message, at most `BrokerWire.maximumMessage` bytes; nil at the end of the connection,
    /// an error for a longer one (its rest is dropped by the kernel: SEQPACKET keeps boundaries).
    static func receive(_ fd: Int32) throws -> Bytes? {
        var buffer = Bytes(repeating: 0, count: BrokerWire.maximumMessage + 1)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_TRUNC)) }
        if n < 0 { throw SocketError(errno: errno) }
        if n == 0 { return nil }
        guard n <= BrokerWire.maximumMessage else {
            buffer.wipe()
            throw KeychainError.decode("message longer than \(BrokerWire.maximumMessage) bytes")
        }
        buffer.removeSubrange(n..<buffer.count)
        return buffer
    }

    static func send(_ fd: Int32, _ bytes: Bytes) throws {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n != bytes.count { throw SocketError(errno: n < 0 ? errno : EMSGSIZE) }
    }

    /// The first uid of ordinary users: /etc/login.defs' UID_MIN, else 1000.
    package static var uidMin: UInt32 {
        guard let bytes = PlainFiles.read("/etc/login.defs") else { return 1000 }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if words.count >= 2, words[0] == "UID_MIN", let value = UInt32(words[1]) { return value }
        }
        return 1000
    }
}

struct SocketError: Error {
    var errno: Int32
    var isReset: Bool { errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN }
}
