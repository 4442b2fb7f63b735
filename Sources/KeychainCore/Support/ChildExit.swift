internal import CLinux
import Glibc

/// How a wait for a child process ended.
package enum ChildExit: Equatable {
    /// It exited; the raw status waitpid(2) gave.
    case exited(status: Int32)
    /// Still running at the deadline. Without `killingAtDeadline`, not reaped; with it, sent
    /// SIGKILL and reaped if it died within `killGrace` (a process stuck in the kernel, on a
    /// FUSE mount whose daemon does not answer, does not die at once: it is then left unreaped
    /// rather than let the caller, perhaps a login, wait for it without end).
    case running
    /// No longer this process's to wait for (an application that ignores SIGCHLD has its children
    /// reaped by the kernel): how it ended is unknown.
    case lost

    /// Waits for `pid` until `deadline` (CLOCK_MONOTONIC seconds) and reaps it.
    ///
    /// A pidfd becomes readable the moment the child exits, so the wait ends then: a polling loop
    /// ends up to a tick late, and a PAM login waits on two workers in a row.
    package static func wait(for pid: pid_t, until deadline: Double, killingAtDeadline: Bool = false) -> ChildExit {
        let pidfd = clinux_pidfd_open(pid)
        defer { if pidfd >= 0 { close(pidfd) } }
        let exit = wait(for: pid, pidfd: pidfd, until: deadline)
        guard exit == .running, killingAtDeadline else { return exit }
        // Through the pidfd where there is one: the pid alone may name another process by now,
        // if the application reaped this one itself.
        if pidfd < 0 || clinux_pidfd_send_signal(pidfd, SIGKILL) < 0 && errno == ENOSYS { kill(pid, SIGKILL) }
        return wait(for: pid, pidfd: pidfd, until: SystemClock.monotonic() + killGrace) == .lost ? .lost : .running
    }

    /// How long a child sent SIGKILL at its deadline is waited for.
    static let killGrace = 2.0

    private static func wait(for pid: pid_t, pidfd: Int32, until deadline: Double) -> ChildExit {
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { return .exited(status: status) }
            if reaped < 0 && errno != EINTR { return .lost }
            let left = deadline - SystemClock.monotonic()
            // Not `left <= 0`: a deadline that is not a number has passed too.
            if !(left > 0) { return .running }
            if pidfd >= 0 {
                // At most a second at a time: waitpid above is what says it ended.
                var poller = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                _ = poll(&poller, 1, Int32((min(left, 1) * 1000).rounded(.up)))
            } else {
                usleep(UInt32(min(left, 0.002) * 1_000_000))
            }
        }
    }

    /// Its exit code as a shell gives it (128 + the signal for one killed by a signal); nil while
    /// running or when unknown.
    package var code: Int32? {
        guard case .exited(let status) = self else { return nil }
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
