import Glibc

/// The kernel's table of this network namespace's unix sockets, by sock_diag (NETLINK_SOCK_DIAG,
/// Linux 3.3): each socket's address and the socket it is connected to, which /proc/net/unix does
/// not give. The layouts are linux/netlink.h's, linux/sock_diag.h's and linux/unix_diag.h's.
enum UnixSockets {
    struct Socket {
        /// The address it is bound to, or was accepted on (abstract ones start with a zero byte).
        var name: [UInt8]?
        /// The inode of the socket at the other end.
        var peer: UInt32?
    }

    private static let netlinkSockDiag: Int32 = 4
    private static let sockDiagByFamily: UInt16 = 20
    private static let requestDump: UInt16 = 0x1 | 0x300  // NLM_F_REQUEST | NLM_F_DUMP
    private static let done: UInt16 = 3, error: UInt16 = 2  // NLMSG_DONE, NLMSG_ERROR
    private static let showName: UInt32 = 1, showPeer: UInt32 = 4  // UDIAG_SHOW_*
    private static let attributeName: UInt16 = 0, attributePeer: UInt16 = 2  // UNIX_DIAG_*

    /// Every unix socket by inode; nil when the kernel would not say.
    static func table() -> [UInt32: Socket]? {
        let fd = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkSockDiag)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // nlmsghdr (16 bytes), then unix_diag_req (24): family, protocol, pad, every state,
        // no one inode, what to show, no cookie.
        var request: [UInt8] = []
        func append<T>(_ value: T) { withUnsafeBytes(of: value) { request += $0 } }
        append(UInt32(40))
        append(sockDiagByFamily)
        append(requestDump)
        append(UInt32(1))
        append(UInt32(0))
        append(UInt8(AF_UNIX))
        append(UInt8(0))
        append(UInt16(0))
        append(UInt32.max)
        append(UInt32(0))
        append(showName | showPeer)
        append(UInt32.max)
        append(UInt32.max)
        guard send(fd, request, request.count, 0) == request.count else { return nil }
        var sockets: [UInt32: Socket] = [:]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            var offset = 0
            while offset + 16 <= count {
                let length = Int(buffer.load(UInt32.self, at: offset))
                let type = buffer.load(UInt16.self, at: offset + 4)
                guard length >= 16, offset + length <= count else { return nil }
                if type == done { return sockets }
                if type == error { return nil }
                if type == sockDiagByFamily, length >= 32 {
                    // unix_diag_msg (16 bytes): family, type, state, pad, inode, cookie; then attributes.
                    let inode = buffer.load(UInt32.self, at: offset + 20)
                    var socket = Socket()
                    var at = offset + 32
                    while at + 4 <= offset + length {
                        let size = Int(buffer.load(UInt16.self, at: at))
                        let kind = buffer.load(UInt16.self, at: at + 2)
                        guard size >= 4, at + size <= offset + length else { break }
                        if kind == attributeName { socket.name = Array(buffer[(at + 4)..<(at + size)]) }
                        if kind == attributePeer, size >= 8 { socket.peer = buffer.load(UInt32.self, at: at + 4) }
                        at += (size + 3) & ~3
                    }
                    sockets[inode] = socket
                }
                offset += (length + 3) & ~3
            }
        }
    }
}

extension [UInt8] {
    /// The `T` at `offset`, in the host's byte order (netlink's).
    fileprivate func load<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
    }
}
