import Glibc

/// The kernel's word (inotify(7)) on whether the keychains folder, the default-keychain choice or
/// the chosen keychain may have changed since the last scan: a look costs one read that finds
/// nothing, where a `FolderStamp` walks three paths. The kernel queues an event before the call
/// that made the change returns, so a client told about a new keychain finds it at once.
///
/// It watches the folder that holds each path, or, where that folder does not exist yet, the
/// nearest one above it that does (for the folder's creation). A path with a symbolic link in
/// it is not armed: a link pointed elsewhere changes nothing in the folders watched. Then, or
/// when the kernel refuses (max_user_instances or max_user_watches reached), the registry
/// keeps to its stamps.
final class FolderWatch {
    private var fd: Int32 = -1
    private var buffer = [UInt8](repeating: 0, count: 4096)

    /// What a change to a folder's entries, or to the folder itself, sends; a file written in
    /// place adds IN_CLOSE_WRITE, asked for only where contents count (the choice file): every
    /// tool that opens a keychain closes it written, and each would cost the next search a scan.
    private static let entryEvents = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    deinit { disarm() }

    var isArmed: Bool { fd >= 0 }

    /// Watches the folder of each file from now on (with `contents`, writes to files in it too);
    /// false, and disarmed, when any cannot be watched.
    func arm(_ files: [(path: String, contents: Bool)]) -> Bool {
        disarm()
        guard files.allSatisfy({ Self.hasNoLink($0.path) }) else { return false }
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return false }
        for (path, contents) in files {
            // IN_MASK_ADD: two files in one folder watch it for what either needs.
            let mask = Self.entryEvents | UInt32(IN_MASK_ADD) | (contents ? UInt32(IN_CLOSE_WRITE) : 0)
            guard let folder = Self.existingFolder(holding: path), inotify_add_watch(fd, folder, mask) >= 0 else {
                disarm()
                return false
            }
        }
        return true
    }

    /// Whether anything may have changed since `arm`: true when the kernel queued an event
    /// (the queue is emptied; the caller rescans and arms again), or when it cannot tell.
    func changed() -> Bool {
        guard fd >= 0 else { return true }
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EAGAIN { return false }
        disarm()
        return true
    }

    func disarm() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// The folder `path` is in, or its nearest existing ancestor.
    private static func existingFolder(holding path: String) -> String? {
        var folder = parent(of: path)
        while true {
            var st = stat()
            if stat(folder, &st) == 0 { return (st.st_mode & S_IFMT) == S_IFDIR ? folder : nil }
            guard errno == ENOENT || errno == ENOTDIR, folder != "/" else { return nil }
            folder = parent(of: folder)
        }
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Whether no existing component of `path` is a symbolic link.
    private static func hasNoLink(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            var st = stat()
            if lstat(prefix, &st) != 0 { return errno == ENOENT }
            if (st.st_mode & S_IFMT) == S_IFLNK { return false }
        }
        return true
    }
}
