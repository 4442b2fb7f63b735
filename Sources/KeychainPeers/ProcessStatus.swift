/// The lines of /proc/PID/status a decision about a caller reads (any user may read them).
package struct ProcessStatus: Equatable, Sendable {
    /// The pid of the process tracing this one, 0 when none (as this process's pid namespace sees
    /// it; a tracer outside it reads as 0 too, so only "not 0" says anything).
    package var tracer: Int32
    /// Its gids (real, effective, saved, filesystem: it may switch among them) and supplementary
    /// groups: whose group-writable files it could write.
    package var groups: [UInt32]

    /// Nil when the file cannot be read (the process is gone), is longer than any real one, or lacks
    /// a line.
    package static func read(of pid: Int32) -> ProcessStatus? {
        // Groups: holds at most NGROUPS_MAX numbers; a user in more than some thousands is refused.
        guard let bytes = ProcFiles.read("/proc/\(pid)/status", limit: 128 << 10) else { return nil }
        return parse(bytes)
    }

    package static func parse(_ bytes: [UInt8]) -> ProcessStatus? {
        var tracer: Int32?
        var gids: [UInt32]?
        var groups: [UInt32]?
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        where line.hasPrefix("TracerPid:") || line.hasPrefix("Gid:") || line.hasPrefix("Groups:") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let key = parts.first else { continue }
            switch key {
            case "TracerPid:": tracer = parts.count > 1 ? Int32(parts[1]) : nil
            case "Gid:": gids = parts.dropFirst().compactMap { UInt32($0) }
            case "Groups:": groups = parts.dropFirst().compactMap { UInt32($0) }
            default: continue
            }
        }
        guard let tracer, let gids, !gids.isEmpty, let groups else { return nil }
        return ProcessStatus(tracer: tracer, groups: gids + groups)
    }
}
