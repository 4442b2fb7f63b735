internal import CLinux
import Glibc

/// How a wait for a child process ended.
package enum ChildExit: Equatable {
    /// It exited; the raw status waitpid(2) gave.
    case exited(status: Int32)
    /// Still running at the deadline, and not reaped.
    case running
    /// No longer this process's to wait for (an application that ignores SIGCHLD has its children
    /// reaped by the kernel): how it ended is unknown.
    case lost

    /// Waits for `pid` until `deadline` (CLOCK_MONOTONIC seconds) and reaps it.
    ///
    /// A pidfd becomes readable the moment the child exits, so the wait ends then: a polling loop
    /// ends up to a tick late, and a PAM login waits on two workers in a row.
    package static func wait(for pid: pid_t, until deadline: Double) -> ChildExit {
        let pidfd = clinux_pidfd_open(pid)
        defer { if pidfd >= 0 { close(pidfd) } }
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { return .exited(status: status) }
            if reaped < 0 && errno != EINTR { return .lost }
            let left = deadline - SystemClock.monotonic()
            if left <= 0 { return .running }
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
