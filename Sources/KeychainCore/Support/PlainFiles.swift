import Glibc

/// Plain files and folders of the keychain's own (a sync clone's records, its state): read and
/// written without following links, bounded in size.
package enum PlainFiles {
    package static func read(_ path: String) -> Bytes? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size < 80 << 20 else { return nil }
        var out = Bytes(repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < out.count {
            let n = out.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return out
    }

    package static func write(_ path: String, _ bytes: Bytes) throws {
        let dir = KeychainFile.parent(of: path)
        if access(dir, F_OK) != 0 { mkdir(dir, 0o700) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard writeAll(fd, bytes) else { throw KeychainError(.io, "cannot write \(path)") }
    }

    /// Puts `bytes` at `path` in place of what was there, whole or not at all: written to a new
    /// file beside it, synced, then renamed over it, so a crash or a full disk never leaves half
    /// a file where a whole one was. The new file is made with `mode` and never through a link.
    package static func replace(_ path: String, with bytes: Bytes, mode: mode_t = 0o600, temporarySuffix: String = ".new") throws {
        let temporary = path + temporarySuffix
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw KeychainError(.io, "cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = writeAll(fd, bytes)
        fchmod(fd, mode)
        let synced = fsync(fd) == 0
        close(fd)
        guard written, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw KeychainError(.io, "cannot write \(path)")
        }
    }

    /// Writes all of `bytes` to `fd` (through interruptions and short writes); false on an error.
    package static func writeAll(_ fd: Int32, _ bytes: Bytes) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            done += n
        }
        return true
    }

    /// Copies what is left of `source` into `target` in steps of 64 KiB, never whole in memory;
    /// false on an error of either.
    package static func copyAll(from source: Int32, to target: Int32) -> Bool {
        var buffer = Bytes(repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(source, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return n == 0 }
            guard writeAll(target, Bytes(buffer[0..<n])) else { return false }
        }
    }

    /// The plain names in a folder (none for a missing folder).
    package static func list(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    package static func removeTree(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            for name in list(path) { removeTree(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}
