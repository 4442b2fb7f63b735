internal import CLinux
internal import Glibc

/// The files a process has mapped executable, from /proc/PID/maps: its program, the dynamic
/// loader and every library, including what LD_PRELOAD, LD_AUDIT or LD_LIBRARY_PATH brought in.
/// Read from maps because the broker may not read another user's environ.
package enum ExecutableMappings {
    package struct Mapping: Equatable, Sendable {
        /// As the kernel names it in the process's mount namespace; ends in " (deleted)" when the
        /// file was unlinked, and a newline in a name shows as `\012`.
        package var path: String
        package var device: UInt64
        package var inode: UInt64

        /// Its file, as the judging's sets of files key it: (device, inode).
        package var file: [UInt64] { [device, inode] }
    }

    /// Distinct files read at most: more is nothing a real program maps, and not checked.
    package static let fileLimit = 1024
    /// Bytes of maps read at most (a process's mappings are bounded by vm.max_map_count, each line
    /// by PATH_MAX; this bounds the time spent on one that maps everything it can).
    package static let byteLimit = 16 << 20

    /// The file-backed mappings with `x` in their permissions, each file once; nil when the file
    /// could not be read, a line was malformed, or a limit was passed.
    package static func read(_ path: String, querying: Bool = true) -> [Mapping]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if querying {
            switch queried(fd) {
            case .found(let found): return found
            case .failed: return nil
            case .unsupported: break
            }
        }
        return text(fd)
    }

    /// The files (device, inode) mapped executable now, through `maps`, a process's maps opened
    /// earlier: what `CallerTrust.stillSame` compares with the files judged. Unnamed where the
    /// kernel can query (the names are what costs); nil when the process is gone or exec'd (the
    /// descriptor then reads nothing) or the read failed.
    package static func files(through maps: Int32) -> Set<[UInt64]>? {
        switch queried(maps, named: false) {
        case .found(let found): return Set(found.map(\.file))
        case .failed: return nil
        case .unsupported: return text(maps).map { Set($0.map(\.file)) }
        }
    }

    /// The mappings from maps' text, read from its start whatever `fd`'s offset.
    static func text(_ fd: Int32) -> [Mapping]? {
        var found: [Mapping] = []
        var seen = Set<[UInt64]>()
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var total = 0
        while true {
            let n = pread(fd, &buffer, buffer.count, off_t(total))
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            total += n
            guard total <= byteLimit else { return nil }
            if n == 0 { return pending.isEmpty && total > 0 ? found : nil }
            pending += buffer[..<n]
            var start = pending.startIndex
            while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                guard let line = parse(pending[start..<end]) else { return nil }
                start = end + 1
                guard case .executable(let mapping) = line, seen.insert(mapping.file).inserted else { continue }
                guard found.count < fileLimit else { return nil }
                found.append(mapping)
            }
            pending.removeSubrange(..<start)
            // One line holds at most a path of PATH_MAX (escaped) and its fixed fields.
            guard pending.count <= 4 * Int(PATH_MAX) else { return nil }
        }
    }

    /// Queries made at most (one a mapping that is executable and file-backed, or a new file).
    static let queryLimit = 1 << 17

    enum Queried {
        case found([Mapping])
        case failed
        /// The kernel has no PROCMAP_QUERY (before Linux 6.11): the text is read instead.
        case unsupported
    }

    /// The same mappings by PROCMAP_QUERY, one call for each, where the kernel has it: the
    /// broker judges a new process on every SSH signature through a deputy, and formatting every
    /// mapping of it as text, then parsing that, was a quarter of the judging. Named as the text
    /// names them (a newline as `\012`, " (deleted)" kept), so both ways find the same.
    /// `named` false: no names asked for, each mapping's path left empty.
    static func queried(_ maps: Int32, named: Bool = true) -> Queried {
        var found: [Mapping] = []
        var seen = Set<[UInt64]>()
        var address: UInt64 = 0
        var name = [CChar](repeating: 0, count: named ? Int(PATH_MAX) : 1)
        let capacity = named ? UInt32(name.count) : 0
        for _ in 0..<queryLimit {
            var end: UInt64 = 0
            var major: UInt32 = 0
            var minor: UInt32 = 0
            var inode: UInt64 = 0
            guard clinux_procmap_query_executable(maps, address, &end, &major, &minor, &inode, &name, capacity) == 0 else {
                if errno == ENOENT { return .found(found) }
                return address == 0 && (errno == ENOTTY || errno == EINVAL) ? .unsupported : .failed
            }
            guard end > address else { return .failed }
            address = end
            // Unnamed, the buffer was not filled: no name to make.
            let path = named ? String(cString: name).replacingNewlines() : ""
            guard inode != 0, path.first == "/" || !named else { continue }
            let mapping = Mapping(path: path, device: device(major: UInt64(major), minor: UInt64(minor)), inode: inode)
            guard seen.insert(mapping.file).inserted else { continue }
            guard found.count < fileLimit else { return .failed }
            found.append(mapping)
        }
        return .failed
    }

    /// What one line of maps says.
    package enum Line: Equatable {
        /// A file mapped with `x` in its permissions.
        case executable(Mapping)
        /// Anything else: data, anonymous memory, [vdso].
        case other
    }

    /// One line of maps, `start-end perms offset major:minor inode [path]`; nil when malformed.
    package static func parse(_ line: ArraySlice<UInt8>) -> Line? {
        let space = UInt8(ascii: " ")
        // Most lines are data or anonymous memory: told apart by the third letter of the
        // permissions, before anything is converted.
        if let gap = line.firstIndex(of: space), line.endIndex - gap > 5, line[gap + 3] != UInt8(ascii: "x"), line[gap + 5] == space {
            return .other
        }
        var fields: [ArraySlice<UInt8>] = []
        var rest = line[...]
        while fields.count < 5 {
            rest = rest.drop(while: { $0 == space })
            let field = rest.prefix(while: { $0 != space })
            guard !field.isEmpty else { return nil }
            fields.append(field)
            rest = rest[field.endIndex...]
        }
        let path = rest.drop(while: { $0 == space })
        let perms = fields[1]
        guard perms.count == 4, let inode = UInt64(String(decoding: fields[4], as: UTF8.self)) else { return nil }
        let numbers = fields[3].split(separator: UInt8(ascii: ":"))
        guard numbers.count == 2, let major = UInt64(String(decoding: numbers[0], as: UTF8.self), radix: 16),
            let minor = UInt64(String(decoding: numbers[1], as: UTF8.self), radix: 16)
        else { return nil }
        guard perms[perms.startIndex + 2] == UInt8(ascii: "x"), inode != 0, path.first == UInt8(ascii: "/") else { return .other }
        return .executable(Mapping(path: String(decoding: path, as: UTF8.self), device: device(major: major, minor: minor), inode: inode))
    }

    /// glibc's makedev: the st_dev that stat gives for the device maps names `major:minor`.
    package static func device(major: UInt64, minor: UInt64) -> UInt64 {
        ((major & 0xffff_f000) << 32) | ((major & 0xfff) << 8) | ((minor & 0xffff_ff00) << 12) | (minor & 0xff)
    }
}

extension String {
    /// A newline as maps' text shows it in a name (seq_file_path escapes it as octal).
    fileprivate func replacingNewlines() -> String {
        guard contains("\n") else { return self }
        return split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\\012")
    }
}
