internal import Glibc

/// The descriptors that tie a `Caller` to the process it was read from, kept for as long as the
/// connection lives: a pidfd (the pid stays its own) and the process's maps opened when it was
/// read (which read nothing once it exec'd another program or exited).
///
/// Made before the process is read (`CallerTrust.evaluate`), so that an exec at any moment after
/// is seen: the reads are then of the image the handle holds, or the handle says it is gone.
package final class CallerHandle {
    package let pid: Int32
    /// Nil when the process could not be pinned: gone already, or a pidfd that names another pid.
    let process: PinnedProcess?
    /// The pidfd was the kernel's record of the process that connected (SO_PEERPIDFD), not the
    /// process that has the pid now.
    let pinnedAtConnect: Bool
    /// Whether `CallerTrust.stillSame` must read the start time again. Not with the connecting
    /// process's own pidfd (SO_PEERPIDFD): it names that process and no other for its whole life,
    /// so its liveness and the maps descriptor's read prove the same live image, and a read of
    /// /proc/PID/stat per request adds nothing. Without one the pid is all the broker was given,
    /// and the start time is what ties it to the process read.
    package let checksStartTime: Bool
    /// Field 22 of /proc/PID/stat, read once pinned.
    let startTime: UInt64?
    private let maps: Int32

    /// `pidfd` is borrowed (duplicated here; the caller keeps and closes its own). Without one the
    /// process that has `pid` now is pinned, and the caller it yields is warned `unidentified`,
    /// unless `startedBy` (boot ticks, taken when the connection was accepted) says when the
    /// connecting process existed: SO_PEERCRED's pid is then believed for a process that had
    /// started by that moment (kernels before 6.5 have no SO_PEERPIDFD; a pid reused between the
    /// connect and the accept, the broker's own latency, is the residual race).
    package init(pid: Int32, pidfd: Int32?, startedBy: UInt64? = nil) {
        self.pid = pid
        if let pidfd {
            let pinned = PinnedProcess(adopting: pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 3) : -1)
            process = pinned?.pid == pid ? pinned : nil
        } else {
            process = PinnedProcess(pid: pid)
        }
        maps = process == nil ? -1 : open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC | O_NOCTTY)
        startTime = maps < 0 ? nil : ProcessIdentity.startTime(of: pid)
        checksStartTime = pidfd == nil || process == nil
        if pidfd != nil {
            pinnedAtConnect = true
        } else if let startedBy, let startTime {
            pinnedAtConnect = startTime <= startedBy
        } else {
            pinnedAtConnect = false
        }
    }

    deinit { if maps >= 0 { close(maps) } }

    /// The process still runs the program it ran when the handle was made. The maps descriptor
    /// holds the memory map of that moment; exec replaces it and exit drops it, and a read then
    /// gives 0 bytes (a few microseconds, so cheap enough for every request).
    var isSameImage: Bool {
        guard maps >= 0 else { return false }
        var byte: UInt8 = 0
        return pread(maps, &byte, 1, 0) == 1
    }
}
