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

    package init(uid: UInt32, pid: Int32, executable: String?, parents: [String] = []) {
        self.uid = uid
        self.pid = pid
        self.executable = executable
        self.parents = parents
    }
}
