internal import Glibc

/// The descriptors that tie a `Caller` to the process it was read from, kept for as long as the
/// connection lives: a pidfd (the pid stays its own), the process's maps opened when it was read
/// (which read nothing once it exec'd another program or exited) and its status (which names its
/// tracer, and reads nothing once that process is gone, whoever has its pid since).
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
    /// Field 22 of /proc/PID/stat, read once pinned.
    let startTime: UInt64?
    private let maps: Int32
    /// /proc/PID/status, opened once pinned. A descriptor of /proc holds the process it was
    /// opened for (its struct pid), not the number: once that process is reaped a read fails,
    /// even when the pid was given to another. So a read proves the same live process and names
    /// its tracer in one call, where opening the file by path on every request, and /proc/PID/stat
    /// for the start time, cost twice as much (about 19 and 8 microseconds, against 10).
    private let status: Int32

    /// `pidfd` is borrowed (duplicated here; the caller keeps and closes its own). Without one the
    /// process that has `pid` now is pinned, and the caller it yields is warned `unidentified`,
    /// unless `startedBy` (boot ticks, taken when the connection was accepted) says when the
    /// connecting process existed: SO_PEERCRED's pid is then believed for a process that had
    /// started by that moment (kernels before 6.5 have no SO_PEERPIDFD; a pid reused between the
    /// connect and the accept, the broker's own latency, is the residual race).
    package convenience init(pid: Int32, pidfd: Int32?, startedBy: UInt64? = nil) {
        let process: PinnedProcess?
        if let pidfd {
            let pinned = PinnedProcess(adopting: pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 3) : -1)
            process = pinned?.pid == pid ? pinned : nil
        } else {
            process = PinnedProcess(pid: pid)
        }
        self.init(pid: pid, process: process, pidfdGiven: pidfd != nil, startedBy: startedBy)
    }

    /// The process a pidfd passed to this one pins (a deputy's client), pinned already: shared,
    /// not pinned again.
    package convenience init(pinned: PinnedProcess) {
        self.init(pid: pinned.pid, process: pinned, pidfdGiven: true, startedBy: nil)
    }

    private init(pid: Int32, process: PinnedProcess?, pidfdGiven: Bool, startedBy: UInt64?) {
        self.pid = pid
        self.process = process
        let maps = process == nil ? -1 : open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC | O_NOCTTY)
        var status = maps < 0 ? -1 : open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC | O_NOCTTY)
        // Both opened by the pid: alive after the opens, the pinned process had the pid all along.
        if status >= 0, process?.isAlive != true {
            close(status)
            status = -1
        }
        self.maps = maps
        self.status = status
        startTime = status < 0 ? nil : ProcessIdentity.startTime(of: pid)
        if pidfdGiven {
            pinnedAtConnect = true
        } else if let startedBy, let startTime {
            pinnedAtConnect = startTime <= startedBy
        } else {
            pinnedAtConnect = false
        }
    }

    deinit {
        if maps >= 0 { close(maps) }
        if status >= 0 { close(status) }
    }

    /// The process is not reaped yet: only what `CallerTrust.stillSame` needs first, for a
    /// sweep of handles kept for processes that may have left.
    package var isAlive: Bool { process?.isAlive == true }

    /// The process still runs the program it ran when the handle was made. The maps descriptor
    /// holds the memory map of that moment; exec replaces it and exit drops it, and a read then
    /// gives 0 bytes (a few microseconds, so cheap enough for every request).
    var isSameImage: Bool {
        guard maps >= 0 else { return false }
        var byte: UInt8 = 0
        return pread(maps, &byte, 1, 0) == 1
    }

    /// The files (device, inode) the pinned process maps executable now, read through the maps
    /// descriptor of pinning; nil once it has exec'd or exited.
    var executableFiles: Set<[UInt64]>? {
        guard maps >= 0 else { return nil }
        return ExecutableMappings.files(through: maps)
    }

    /// The pid of the process tracing the pinned one (0 for none), read through the descriptor
    /// opened at pinning; nil once that process is gone.
    var tracer: Int32? {
        guard status >= 0 else { return nil }
        // TracerPid is the ninth line; the file's first 4 KiB hold it on every kernel since 2.6.
        var bytes = [UInt8](repeating: 0, count: 4096)
        let n = pread(status, &bytes, bytes.count, 0)
        guard n > 0 else { return nil }
        return ProcessStatus.tracer(in: Array(bytes[..<n]))
    }
}
