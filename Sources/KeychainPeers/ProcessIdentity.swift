internal import Glibc

/// Who a peer process is: what a decision about a caller rests on, read through a pidfd held for as
/// long as the identity is used.
package struct ProcessIdentity {
    /// How the process was found: how far it is known to be the peer.
    package enum Provenance: Equatable, Sendable {
        /// The kernel's record of the process that connected, as a pidfd (SO_PEERPIDFD, or the
        /// bus's ProcessFD, which the bus took from it): the peer itself, never a later process.
        case connectingProcess
        /// The process that had the peer's pid when it was looked up (dbus before 1.15.8 gives only
        /// a pid). It started before the connection was seen, so it is the peer unless that exited
        /// and the pid came round again (a whole cycle of the pid space; only root chooses a pid)
        /// before the connection was seen: a bus or service stalled that long is not ruled out.
        /// Good enough to restrict a caller by; not proof to trust one with.
        case pidLookup
    }

    /// The sandbox the process runs in.
    package enum Sandbox: Equatable, Sendable {
        /// None that Flatpak or snapd made.
        case none
        /// A Flatpak app (its id) or a snap (`snap.NAME`).
        case app(String)
        /// One that could not be read for certain (an undumpable process's root, a `/.flatpak-info`
        /// without a valid name): nothing may be assumed.
        case undetermined
    }

    /// The program the process runs, as the kernel's /proc/PID/exe names it.
    package struct Executable: Equatable, Sendable {
        package var path: String
        package var device: UInt64
        package var inode: UInt64
    }

    package let process: PinnedProcess
    package let provenance: Provenance
    /// When the process started, in clock ticks since boot (field 22 of /proc/PID/stat).
    package let startTime: UInt64
    /// Nil when the kernel would not say (an undumpable process, one of another user).
    package let executable: Executable?
    package let sandbox: Sandbox

    package var pid: Int32 { process.pid }

    /// Reads the pinned process; nil when it was reaped before the reads were done (they may then be
    /// of another process that was given its pid).
    package static func read(_ process: PinnedProcess, provenance: Provenance) -> ProcessIdentity? {
        guard let started = startTime(of: process.pid) else { return nil }
        let identity = ProcessIdentity(
            process: process, provenance: provenance, startTime: started,
            executable: executable(of: process.pid), sandbox: sandbox(of: process.pid))
        guard process.isAlive, startTime(of: process.pid) == started else { return nil }
        return identity
    }

    /// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot.
    package static func startTime(of pid: Int32) -> UInt64? {
        guard let fields = ProcessLineage.statFields(of: pid), fields.count > 19 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }

    /// Now, in the clock ticks since boot that /proc/PID/stat counts a process's start in.
    package static func ticksSinceBoot() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        let perSecond = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        return UInt64(now.tv_sec) * perSecond + UInt64(now.tv_nsec) * perSecond / 1_000_000_000
    }

    private static func executable(of pid: Int32) -> Executable? {
        var info = stat()
        guard let path = ProcessLineage.executable(of: pid), stat("/proc/\(pid)/exe", &info) == 0 else { return nil }
        return Executable(path: path, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Told apart as xdg-desktop-portal tells it: `/.flatpak-info` in the process's root (Flatpak
    /// puts it in the app's sandbox and in its D-Bus proxy's), then a snap's AppArmor label or
    /// `snap.NAME.*` cgroup (snapd's scopes). Any answer but "none" that cannot be read for certain
    /// is undetermined.
    private static func sandbox(of pid: Int32) -> Sandbox {
        switch flatpakInfo(of: pid) {
        case .unreadable: return .undetermined
        case .contents(let contents): return SandboxIDs.flatpakAppID(contents).map(Sandbox.app) ?? .undetermined
        case .absent: break
        }
        if let label = ProcFiles.read("/proc/\(pid)/attr/current", limit: 4096),
            let id = SandboxIDs.appArmorAppID(String(decoding: label, as: UTF8.self))
        {
            return .app(id)
        }
        guard let cgroups = ProcFiles.read("/proc/\(pid)/cgroup", limit: 65536) else { return .undetermined }
        return SandboxIDs.cgroupAppID(String(decoding: cgroups, as: UTF8.self)).map(Sandbox.app) ?? .none
    }

    /// What the process's root holds at `/.flatpak-info`.
    package enum FlatpakInfo: Equatable {
        case absent
        case unreadable
        case contents([UInt8])
    }

    /// `/.flatpak-info` in the process's root (its mount namespace's view). Anyone who can make a
    /// user namespace can put one there: a claim to check, never an identity by itself.
    package static func flatpakInfo(of pid: Int32) -> FlatpakInfo {
        let root = open("/proc/\(pid)/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return .unreadable }
        defer { close(root) }
        let info = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)
        guard info >= 0 else { return errno == ENOENT ? .absent : .unreadable }
        defer { close(info) }
        return ProcFiles.read(info, limit: 65536).map(FlatpakInfo.contents) ?? .unreadable
    }
}
