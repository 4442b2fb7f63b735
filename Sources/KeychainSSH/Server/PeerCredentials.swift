internal import CLinux
internal import KeychainPeers

extension AgentPeer {
    /// The peer of a connected Unix socket, from SO_PEERCRED: the kernel's record of who called
    /// connect(2), which a client cannot forge, unlike anything it could send. Its executable and
    /// parents are read now, while the pid still names it.
    static func of(socket fd: Int32) -> AgentPeer? {
        var uid: UInt32 = 0
        var pid: Int32 = 0
        guard clinux_peer_credentials(fd, &uid, &pid) == 0 else { return nil }
        guard pid > 0 else { return AgentPeer(uid: uid, pid: pid, executable: nil) }
        return AgentPeer(uid: uid, pid: pid, executable: ProcessLineage.executable(of: pid), parents: ProcessLineage.parents(of: pid))
    }
}
