import Glibc

/// Files that someone else may have made and that are only read: a keyring, a wallet and the
/// files beside it, a credential store, a docker configuration. Whoever named the file can make
/// it a FIFO (open(2) would wait for a writer that never comes, and read(2) after it), a
/// terminal or another device; so it is opened without waiting and taken only when the open
/// descriptor is a regular file, and read no further than `limit`.
package enum ForeignFile {
    /// The file's bytes and its status, both from the one descriptor read. The errors name no
    /// path: the caller says which file it was.
    package static func read(_ path: String, limit: Int) throws -> (bytes: Bytes, status: stat) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { throw KeychainError(.io, "cannot read it: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw KeychainError(.io, "cannot read it: \(String(cString: strerror(errno)))") }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw KeychainError(.io, "not a regular file (\(kind(st.st_mode))); refused unread") }
        let refused = KeychainError.decode("it is larger than \(limit >= 1 << 20 ? "\(limit >> 20) MiB" : "\(limit) bytes"); refused unread")
        guard st.st_size <= limit else { throw refused }
        // Room for the whole file at once: a copy left behind by a reallocation would not be wiped.
        var out = Bytes()
        out.reserveCapacity(Int(st.st_size))
        var buffer = Bytes(repeating: 0, count: 1 << 16)
        defer { buffer.wipe() }
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 {
                out.wipe()
                throw KeychainError(.io, "cannot read it: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            out += buffer[0..<n]
            // It grew while read.
            if out.count > limit {
                out.wipe()
                throw refused
            }
        }
        return (out, st)
    }

    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFDIR: return "a folder"
        case S_IFCHR, S_IFBLK: return "a device"
        case S_IFSOCK: return "a socket"
        default: return "of another kind"
        }
    }
}
