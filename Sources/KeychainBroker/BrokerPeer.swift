import CLinux
import Glibc
import KeychainCore

/// One connected client, as the kernel recorded it at connect(2): its uid, pid and (where the
/// kernel gives one, SO_PEERPIDFD) a pidfd. Who it is, is evaluated once and kept while the
/// process runs the same image: a /proc/PID/maps descriptor opened at the first evaluation reads
/// nothing once the process has exec'd, which then asks again.
package final class BrokerPeer {
    package let uid: UInt32
    package let pid: Int32
    package let pidfd: Int32
    private var maps: Int32 = -1
    private var cached: (any CallerFacts)?

    /// Takes `pidfd` over (closed with this object).
    package init(uid: UInt32, pid: Int32, pidfd: Int32 = -1) {
        self.uid = uid
        self.pid = pid
        self.pidfd = pidfd
    }

    deinit {
        if pidfd >= 0 { close(pidfd) }
        if maps >= 0 { close(maps) }
    }

    package func facts(_ evaluate: CallerEvaluator) -> any CallerFacts {
        if let cached, maps >= 0 {
            var byte: UInt8 = 0
            if pread(maps, &byte, 1, 0) == 1 { return cached }
        }
        if maps >= 0 { close(maps) }
        maps = open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC)
        let facts = evaluate(pid, pidfd, uid)
        cached = facts
        return facts
    }
}
