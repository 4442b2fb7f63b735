internal import Glibc

/// A process and its parents as /proc names them: who asks, for the person to read. Read when the
/// process connects, while the kernel's record of it is fresh; what a pid names later may be
/// another process.
package enum ProcessLineage {
    /// /proc/PID/exe; nil when the kernel would not say (another user's process seen by a
    /// non-root reader, a process that made itself undumpable, or one that has exited).
    package static func executable(of pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The parent's pid (field 4 of /proc/PID/stat).
    package static func parent(of pid: Int32) -> Int32? {
        guard let fields = statFields(of: pid), fields.count > 1 else { return nil }
        return Int32(String(decoding: fields[1], as: UTF8.self))
    }

    /// The session's id (field 6 of /proc/PID/stat): its leader's pid.
    package static func session(of pid: Int32) -> Int32? {
        guard let fields = statFields(of: pid), fields.count > 3 else { return nil }
        return Int32(String(decoding: fields[3], as: UTF8.self))
    }

    /// The parent's pid and the session's id from one read of /proc/PID/stat.
    package static func parentAndSession(of pid: Int32) -> (parent: Int32?, session: Int32?)? {
        guard let fields = statFields(of: pid), fields.count > 3 else { return nil }
        return (Int32(String(decoding: fields[1], as: UTF8.self)), Int32(String(decoding: fields[3], as: UTF8.self)))
    }

    /// The fields of /proc/PID/stat from the third (the state) on: those after the command name,
    /// which may hold spaces and parentheses, so it ends at the last ')'.
    package static func statFields(of pid: Int32) -> [ArraySlice<UInt8>]? {
        guard let stat = ProcFiles.read("/proc/\(pid)/stat", limit: 4096), let end = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        return stat[(end + 1)...].split(separator: UInt8(ascii: " "))
    }

    /// The executables of `pid`'s parents, nearest first: up to `limit`, ending before init
    /// (pid 1, or the kernel's 0) and at the first parent that cannot be named.
    package static func parents(of pid: Int32, limit: Int = 8) -> [String] {
        var out: [String] = []
        var current = pid
        while out.count < limit, let parent = parent(of: current), parent > 1, let executable = executable(of: parent) {
            out.append(executable)
            current = parent
        }
        return out
    }
}
