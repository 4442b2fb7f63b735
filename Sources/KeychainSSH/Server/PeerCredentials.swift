internal import CLinux
internal import Glibc

extension AgentPeer {
    /// The peer of a connected Unix socket, from SO_PEERCRED: the kernel's record of who called
    /// connect(2), which a client cannot forge, unlike anything it could send.
    static func of(socket fd: Int32) -> AgentPeer? {
        var uid: UInt32 = 0
        var pid: Int32 = 0
        guard clinux_peer_credentials(fd, &uid, &pid) == 0 else { return nil }
        return AgentPeer(uid: uid, pid: pid, executable: pid > 0 ? executable(of: pid) : nil)
    }

    private static func executable(of pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
