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

    /// A Unix socket's message may be at most its send buffer: raised toward the wire's bound
    /// (the kernel caps it at twice net.core.wmem_max, 416 KiB by default, which then bounds a
    /// message in practice; rows and keybags are a few KiB).
    package static func allowLargeMessages(_ fd: Int32) {
        var size = Int32(BrokerWire.maximumMessage)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// A connected descriptor, or errno's error.
    /// `timeout` (seconds) bounds the connect and every send and receive after it.
    static func connect(to path: String, timeout: Double? = nil) throws -> Int32 {
        var address = try address(path)
        let fd = socket(AF_UNIX, seqpacket, 0)
        guard fd >= 0 else { throw KeychainError(.notAvailable, "socket: \(String(cString: strerror(errno)))") }
        if let timeout {
            var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
            for option in [SO_RCVTIMEO, SO_SNDTIMEO] { setsockopt(fd, SOL_SOCKET, option, &limit, socklen_t(MemoryLayout<timeval>.size)) }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw KeychainError(.notAvailable, "the keychain broker at \(path) does not answer (\(reason))")
        }
        allowLargeMessages(fd)
        return fd
    }

    /// SO_PEERCRED's uid and pid.
    package static func peer(of fd: Int32) -> (uid: UInt32, pid: Int32)? {
        var uid: UInt32 = 0, pid: Int32 = 0
        guard clinux_peer_credentials(fd, &uid, &pid) == 0 else { return nil }
        return (uid, pid)
    }

    /// Has the kernel say, with every message received on `fd`, which process sent it: a
    /// connection may be used by a process other than the one that made it (inherited, passed,
    /// or taken with pidfd_getfd by any process allowed to trace it).
    package static func passCredentials(_ fd: Int32) {
        _ = clinux_pass_credentials(fd)
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
    /// an error for a longer one (dropped whole: SEQPACKET keeps boundaries). Its size is peeked
    /// first, so a small message costs a small buffer.
    package static func receive(_ fd: Int32) throws -> Bytes? {
        var sender: Int32 = -1
        return try receive(fd, sender: &sender)
    }

    /// `receive`, and the pid of the process that sent the message (-1 when the kernel said
    /// none: SO_PASSCRED is off on `fd`).
    package static func receive(_ fd: Int32, sender: inout Int32) throws -> Bytes? {
        var passed: Int32 = -1
        let message = try receive(fd, sender: &sender, passed: &passed)
        if passed >= 0 { close(passed) }
        return message
    }

    /// `receive`, and the one descriptor the message carried (a deputy's relayed pidfd; -1 when
    /// none), which the caller closes.
    package static func receive(_ fd: Int32, sender: inout Int32, passed: inout Int32) throws -> Bytes? {
        sender = -1
        passed = -1
        let size = recv(fd, nil, 0, Int32(MSG_PEEK) | Int32(MSG_TRUNC))
        if size < 0 { throw SocketError(errno: errno) }
        // An empty message is no request either: both end the connection.
        if size == 0 { return nil }
        guard size <= BrokerWire.maximumMessage else {
            _ = recv(fd, nil, 0, 0)
            throw KeychainError.decode("message longer than \(BrokerWire.maximumMessage) bytes")
        }
        var buffer = Bytes(repeating: 0, count: size)
        var from: Int32 = -1, given: Int32 = -1
        let n = buffer.withUnsafeMutableBytes { clinux_receive_with_descriptor(fd, $0.baseAddress, $0.count, &from, &given) }
        sender = from
        if n < 0 { throw SocketError(errno: errno) }
        passed = given
        guard n == size else {
            if given >= 0 { close(given) }
            passed = -1
            buffer.wipe()
            throw KeychainError.decode("message changed while read")
        }
        return buffer
    }

    package static func send(_ fd: Int32, _ bytes: Bytes) throws {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n != bytes.count { throw SocketError(errno: n < 0 ? errno : EMSGSIZE) }
    }

    /// `send`, with `passed` (a descriptor, borrowed) in the same message.
    static func send(_ fd: Int32, _ bytes: Bytes, passing passed: Int32) throws {
        let n = bytes.withUnsafeBytes { clinux_send_with_descriptor(fd, $0.baseAddress, $0.count, passed) }
        if n != bytes.count { throw SocketError(errno: n < 0 ? errno : EMSGSIZE) }
    }

    /// The first uid of ordinary users: /etc/login.defs' UID_MIN, else 1000.
    package static var uidMin: UInt32 {
        guard let bytes = PlainFiles.read("/etc/login.defs") else { return 1000 }
        return uidMin(in: bytes) ?? 1000
    }

    /// UID_MIN's value in login.defs' bytes. Found in the bytes, not by splitting the file into
    /// strings: Debian's is 13 KiB of comments, and every client reads it once per process (a
    /// tenth of the git helper's own time through the broker, split into strings).
    package static func uidMin(in bytes: [UInt8]) -> UInt32? {
        let key = Array("UID_MIN".utf8)
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            defer { start = end + 1 }
            let line = bytes[start..<end].drop(while: blank)
            guard line.starts(with: key) else { continue }
            let rest = line.dropFirst(key.count)
            guard let first = rest.first, blank(first) else { continue }
            let digits = rest.drop(while: blank).prefix(while: { !blank($0) && $0 != UInt8(ascii: "\r") })
            guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { continue }
            return UInt32(String(decoding: digits, as: UTF8.self))
        }
        return nil
    }
}

struct SocketError: Error {
    var errno: Int32
    var isReset: Bool { errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN }
}
