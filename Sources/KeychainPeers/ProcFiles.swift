internal import Glibc

/// Small files of /proc (or of a process's root), read whole and bounded.
package enum ProcFiles {
    package static func read(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return read(fd, limit: limit)
    }

    /// Nil on a read error or past `limit`: longer than any real one, so not trusted to say anything.
    package static func read(_ fd: Int32, limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes += buffer[..<n]
        }
        return nil
    }
}
