internal import Glibc

/// The peer of one connection, as the server learns it from the socket (contract 2 of the agent's
/// work: the protocol code names the program that asks in a confirmation prompt and in the log).
package struct AgentPeer: Sendable, Equatable {
    package var uid: UInt32
    package var pid: Int32
    /// /proc/PID/exe at accept time; nil when the kernel would not say (another user's process
    /// seen by a non-root agent, or a process that has exited already).
    package var executable: String?
    /// The executables of its parents at accept time, nearest first (see `ProcessLineage`).
    package var parents: [String]
    /// The connecting process pinned (SO_PEERPIDFD, else pidfd_open at accept), which the agent
    /// passes to the broker with each signature's key request, so that the broker judges the
    /// program itself; nil when the kernel gave none.
    package var pidfd: PeerPidfd?

    package init(uid: UInt32, pid: Int32, executable: String?, parents: [String] = [], pidfd: PeerPidfd? = nil) {
        self.uid = uid
        self.pid = pid
        self.executable = executable
        self.parents = parents
        self.pidfd = pidfd
    }

    /// Who it is; the descriptor that pins it is no part of that.
    package static func == (lhs: AgentPeer, rhs: AgentPeer) -> Bool {
        lhs.uid == rhs.uid && lhs.pid == rhs.pid && lhs.executable == rhs.executable && lhs.parents == rhs.parents
    }
}

/// A pidfd kept for as long as the connection's peer value lives.
package final class PeerPidfd: @unchecked Sendable {
    package let descriptor: Int32

    /// Takes `descriptor` over.
    package init?(adopting descriptor: Int32) {
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }
}
