import CLinux
import Glibc
import SessionBus

/// The kernel's word (inotify(7)) on whether the keychains folder, the default-keychain choice or
/// the chosen keychain may have changed since the last scan: a look costs one read that finds
/// nothing, where a `FolderStamp` walks three paths. The kernel queues an event before the call
/// that made the change returns, so a client told about a new keychain finds it at once.
///
/// It watches the folder that holds each path, or, where that folder does not exist yet, the
/// nearest one above it that does (for the folder's creation), and every folder above that for
/// its own move or removal (a path then names another folder). It is not armed, and the
/// registry keeps to its stamps, where a watch would not see every change: a path with a
/// symbolic link in it (pointed elsewhere, it changes nothing in the folders watched), a
/// network filesystem (another machine's changes send no event), or when the kernel refuses
/// (max_user_instances or max_user_watches reached). A filesystem mounted over a folder of the
/// path is not seen either; the stamps' device numbers would be.
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
        var above = Set<String>()
        for (path, contents) in files {
            // IN_MASK_ADD: two files in one folder watch it for what either needs.
            let mask = Self.entryEvents | UInt32(IN_MASK_ADD) | (contents ? UInt32(IN_CLOSE_WRITE) : 0)
            guard let folder = Self.existingFolder(holding: path), Self.isLocal(folder), inotify_add_watch(fd, folder, mask) >= 0 else {
                disarm()
                return false
            }
            above.formUnion(Self.ancestors(of: folder))
        }
        // The folders the files share above them (the home folder, the root) watched once each.
        guard above.allSatisfy({ inotify_add_watch(fd, $0, Self.selfEvents) >= 0 }) else {
            disarm()
            return false
        }
        return true
    }

    private static let selfEvents = UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_MASK_ADD | IN_ONLYDIR)

    /// Filesystems whose files other machines change (statfs(2) magic numbers): NFS, SMB, CIFS,
    /// SMB2, FUSE (sshfs and the like), Ceph, AFS, Coda, 9P, GFS2, OCFS2, Lustre.
    private static let remoteFilesystems: Set<Int> = [
        0x6969, 0x517B, 0xFF53_4D42, 0xFE53_4D42, 0x6573_5546, 0x00C3_6400, 0x5346_414F, 0x7375_7245, 0x0102_1997,
        0x0116_1970, 0x7461_636F, 0x0BD0_0BD0
    ]

    /// Whether `path` is on a filesystem only this machine changes (false when it cannot tell).
    static func isLocal(_ path: String) -> Bool {
        let type = clinux_filesystem_type(path)
        return type >= 0 && !remoteFilesystems.contains(type)
    }

    /// Every folder above `folder`, up to the root.
    private static func ancestors(of folder: String) -> [String] {
        var found: [String] = []
        var current = folder
        while current != "/" {
            current = parent(of: current)
            found.append(current)
        }
        return found
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
