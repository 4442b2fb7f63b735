internal import CLinux
internal import Glibc
internal import KeychainPeers

extension AgentPeer {
    /// The peer of a connected Unix socket, from SO_PEERCRED: the kernel's record of who called
    /// connect(2), which a client cannot forge, unlike anything it could send. Its executable and
    /// parents are read now, while the pid still names it, and it is pinned by a pidfd.
    static func of(socket fd: Int32) -> AgentPeer? {
        var uid: UInt32 = 0
        var pid: Int32 = 0
        guard clinux_peer_credentials(fd, &uid, &pid) == 0 else { return nil }
        guard pid > 0 else { return AgentPeer(uid: uid, pid: pid, executable: nil) }
        return AgentPeer(
            uid: uid, pid: pid, executable: ProcessLineage.executable(of: pid), parents: ProcessLineage.parents(of: pid),
            pidfd: PeerPidfd(adopting: pidfd(of: fd, pid: pid)))
    }

    /// SO_PEERPIDFD (Linux 6.5): the process that connected, never a later one with its pid;
    /// else the process that has the pid now (the broker then reads it as it reads a caller whose
    /// kernel gave no pidfd). -1 when neither.
    private static func pidfd(of fd: Int32, pid: Int32) -> Int32 {
        var pidfd: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        // SO_PEERPIDFD is 77 in <asm-generic/socket.h>; Debian 12's headers predate it.
        if getsockopt(fd, SOL_SOCKET, 77, &pidfd, &length) == 0, pidfd >= 0 {
            _ = fcntl(pidfd, F_SETFD, FD_CLOEXEC)
            return pidfd
        }
        return clinux_pidfd_open(pid)
    }
}
