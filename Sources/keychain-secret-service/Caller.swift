import CSDBus
import Glibc
import KeychainCore
import SecretServiceItems

/// Who sent a call: an unconfined program of the user, or an app in a Flatpak or Snap sandbox.
///
/// A sandboxed app reaches secrets only through this service (its sandbox hides the keychain
/// files and the kernel keyring), so here it can be kept to its own items. It is told apart as
/// xdg-desktop-portal tells it: by the peer's pid from the bus, then `/.flatpak-info` in that
/// process's root (Flatpak puts it in the app's sandbox and in its D-Bus proxy's), or a
/// `snap.NAME.*` cgroup (snapd's scopes). Nothing here confines an unconfined process of the same
/// user: it can read the keychain files and the kernel's keys directly.
enum Caller: Equatable {
    case unconfined
    /// A sandboxed app, by its app id (`org.example.App`, or `snap.NAME`).
    case app(String)
    /// Sandboxed, but which app could not be told (a `/.flatpak-info` without a valid name, a pid
    /// that was replaced while it was looked at, no pid from the bus): refused everything.
    case unidentified

    /// The owner its items carry; nil for an unconfined program, which sees every item.
    var owner: String? {
        switch self {
        case .app(let id): return id
        case .unconfined, .unidentified: return nil
        }
    }

    var isConfined: Bool { self != .unconfined }

    /// The caller behind a bus connection's unique name, which appeared on the bus no later than
    /// `appeared` (clock ticks since boot, as /proc gives a process's start).
    ///
    /// The bus gives the pid of the process that connected. If that process has exited and its pid
    /// was reused, the new process started after the connection appeared: so a process that
    /// started later is not taken for the caller. Its start time must also not change while it
    /// is looked at.
    ///
    /// A snap's AppArmor label, which the bus records when the connection is made, needs no pid.
    static func of(connection name: String, on bus: OpaquePointer, appeared: UInt64) -> Caller {
        var creds: OpaquePointer?
        guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_PID | SD_BUS_CREDS_SELINUX_CONTEXT), &creds) >= 0,
            let creds
        else { return .unidentified }
        defer { sd_bus_creds_unref(creds) }
        var label: UnsafePointer<CChar>?
        if sd_bus_creds_get_selinux_context(creds, &label) >= 0, let label, let id = appArmorAppID(String(cString: label)) {
            return .app(id)
        }
        var pid: pid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0, pid > 0,
            let started = startTime(of: pid), started <= appeared
        else { return .unidentified }
        let caller = sandbox(of: pid)
        guard startTime(of: pid) == started else { return .unidentified }
        return caller
    }

    /// Now, in the clock ticks since boot that /proc/PID/stat counts a process's start in.
    static func ticksSinceBoot() -> UInt64 {
        UInt64(SystemClock.sinceBoot() * Double(max(sysconf(Int32(_SC_CLK_TCK)), 1)))
    }

    /// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot.
    static func startTime(of pid: pid_t) -> UInt64? {
        guard let stat = read("/proc/\(pid)/stat", limit: 4096),
            let end = stat.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        // After the command name (which may hold spaces and parentheses): state is field 3.
        let fields = stat[(end + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 19 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }

    /// Any answer but "no sandbox" that cannot be read for certain (an undumpable process's root,
    /// a file that cannot be read) leaves the caller unidentified, and so refused.
    static func sandbox(of pid: pid_t) -> Caller {
        let root = open("/proc/\(pid)/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return .unidentified }
        defer { close(root) }
        let info = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)
        if info >= 0 {
            let contents = read(info, limit: 65536)
            close(info)
            return contents.flatMap(flatpakAppID).map(Caller.app) ?? .unidentified
        }
        guard errno == ENOENT else { return .unidentified }
        // snapd confines with AppArmor (profile `snap.NAME.APP`) and tracks with cgroups
        // (`snap.NAME.APP-….scope`), the latter best-effort: either names the snap.
        if let label = read("/proc/\(pid)/attr/current", limit: 4096), let id = appArmorAppID(String(decoding: label, as: UTF8.self)) {
            return .app(id)
        }
        guard let cgroups = read("/proc/\(pid)/cgroup", limit: 65536) else { return .unidentified }
        return cgroupAppID(String(decoding: cgroups, as: UTF8.self)).map(Caller.app) ?? .unconfined
    }

    /// `snap.NAME` for a process confined by a snap's AppArmor profile (`snap.NAME.APP (enforce)`).
    static func appArmorAppID(_ label: String) -> String? {
        guard label.hasPrefix("snap.") else { return nil }
        let profile = label.split(separator: " ").first ?? ""
        let parts = profile.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, isAppID(String(parts[1])) else { return nil }
        return "snap." + parts[1]
    }

    /// The `name` of the `[Application]` group of a Flatpak keyfile.
    static func flatpakAppID(_ bytes: [UInt8]) -> String? {
        var group = ""
        for raw in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let line = raw.trimmingSpaces
            if line.hasPrefix("[") && line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
            } else if group == "Application", line.hasPrefix("name=") {
                let id = String(line.dropFirst("name=".count)).trimmingSpaces
                return isAppID(id) ? id : nil
            }
        }
        return nil
    }

    /// `snap.NAME` for a process in one of snapd's scopes (`snap.NAME.APP-….scope`), or the app id
    /// of Flatpak's own scope (`app-flatpak-ID-N.scope`).
    static func cgroupAppID(_ cgroups: String) -> String? {
        for line in cgroups.split(separator: "\n") {
            for element in line.split(separator: "/") {
                if element.hasPrefix("snap.") {
                    let parts = element.split(separator: ".", omittingEmptySubsequences: false)
                    if parts.count >= 3, isAppID(String(parts[1])) { return "snap." + parts[1] }
                } else if element.hasPrefix("app-flatpak-"), element.hasSuffix(".scope") {
                    let rest = element.dropFirst("app-flatpak-".count).dropLast(".scope".count)
                    if let dash = rest.lastIndex(of: "-"), isAppID(String(rest[..<dash])) { return String(rest[..<dash]) }
                }
            }
        }
        return nil
    }

    /// Letters, digits, `.`, `_` and `-`, as Flatpak and snapd allow in their ids.
    static func isAppID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 255
            && id.utf8.allSatisfy { byte in
                (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }

    private static func read(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return read(fd, limit: limit)
    }

    private static func read(_ fd: Int32, limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes += buffer[..<n]
        }
        // Longer than any real one: not trusted to say anything.
        return nil
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}

extension String {
    var trimmingSpaces: String { self[...].trimmingSpaces }
}
