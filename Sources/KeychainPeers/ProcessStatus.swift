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

    /// The number on the line "TracerPid:", as `parse` reads it; nil without one.
    package static func tracer(in bytes: [UInt8]) -> Int32? {
        let key = Array("TracerPid:".utf8)
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            defer { start = end + 1 }
            guard end - start > key.count, bytes[start..<start + key.count].elementsEqual(key) else { continue }
            var value: Int64 = 0
            var digits = 0
            for byte in bytes[(start + key.count)..<end] {
                if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                    if digits == 0 { continue }
                    break
                }
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 10 else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                digits += 1
            }
            return digits > 0 && value <= Int64(Int32.max) ? Int32(value) : nil
        }
        return nil
    }

    /// The three lines it needs, found in the bytes: the whole file split into strings was a
    /// fifth of the broker's time evaluating a new caller (the caller and each of its parents).
    package static func parse(_ bytes: [UInt8]) -> ProcessStatus? {
        var tracer: Int32?
        var gids: [UInt32]?
        var groups: [UInt32]?
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            defer { start = end + 1 }
            let line = bytes[start..<end]
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let key = line[..<colon]
            guard key.elementsEqual("TracerPid".utf8) || key.elementsEqual("Gid".utf8) || key.elementsEqual("Groups".utf8) else { continue }
            let words = line[(colon + 1)...].split(whereSeparator: blank).map { String(decoding: $0, as: UTF8.self) }
            switch key.count {
            case "TracerPid".utf8.count: tracer = words.first.flatMap { Int32($0) }
            case "Gid".utf8.count: gids = words.compactMap { UInt32($0) }
            default: groups = words.compactMap { UInt32($0) }
            }
        }
        guard let tracer, let gids, !gids.isEmpty, let groups else { return nil }
        return ProcessStatus(tracer: tracer, groups: gids + groups)
    }
}
