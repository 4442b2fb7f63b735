internal import CLinux
internal import Glibc

/// A process held by a pidfd: the pid names it, and no later process given the same pid, for as
/// long as this object lives.
///
/// A bare pid can be handed to another process once its owner is reaped; a pidfd cannot. So what
/// is read of a process through /proc/PID is checked afterwards with `isAlive`: while the pidfd's
/// process has not been reaped, PID was still its own, and the reads were of it.
package final class PinnedProcess {
    /// The process's pid in this process's pid namespace.
    package let pid: Int32
    private let descriptor: Int32

    /// Takes `pidfd` over (it is closed with this object, or at once when nil is returned). Nil
    /// when it names no process this one can see: reaped already, or in a pid namespace this one
    /// does not see into (its fdinfo says -1 or 0).
    package init?(adopting pidfd: Int32) {
        guard pidfd >= 0 else { return nil }
        guard let pid = Self.pid(of: pidfd), pid > 0 else {
            close(pidfd)
            return nil
        }
        self.pid = pid
        descriptor = pidfd
    }

    /// The process that has `pid` now, pinned: who that is says nothing of who had the pid before.
    package convenience init?(pid: Int32) {
        guard pid > 0 else { return nil }
        let pidfd = clinux_pidfd_open(pid)
        guard pidfd >= 0 else { return nil }
        self.init(adopting: pidfd)
        // pidfd_open pins whoever has the pid at the call: the same one fdinfo names.
        guard self.pid == pid else { return nil }
    }

    deinit { close(descriptor) }

    /// The pidfd itself, borrowed for as long as this object lives: what a deputy passes to the
    /// broker for the process it serves.
    package var pidfd: Int32 { descriptor }

    /// Not yet reaped (running, stopped or a zombie): the pid is still its own.
    package var isAlive: Bool {
        // Signal 0 checks only; EPERM means alive too (another user's process).
        clinux_pidfd_send_signal(descriptor, 0) == 0 || errno == EPERM
    }

    /// The pid by PIDFD_GET_INFO, else the `Pid:` line of the pidfd's fdinfo (Linux 5.2): -1 or 0
    /// once the process was reaped, 0 when it lives in a pid namespace this one does not see.
    /// The broker reads one for every process a deputy relays.
    private static func pid(of pidfd: Int32) -> pid_t? {
        let asked = clinux_pidfd_pid(pidfd)
        if asked >= 0 { return asked }
        guard let bytes = ProcFiles.read("/proc/self/fdinfo/\(pidfd)", limit: 4096) else { return nil }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("Pid:") {
            return pid_t(String(line.dropFirst("Pid:".count).filter { $0 != " " && $0 != "\t" }))
        }
        return nil
    }
}
