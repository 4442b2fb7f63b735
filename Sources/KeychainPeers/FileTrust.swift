internal import CLinux
internal import Glibc

/// What a decision about a file rests on, from one fstat: which inode it is, who owns it, who may
/// write it.
package struct FileFacts: Equatable, Sendable {
    package var device: UInt64
    package var inode: UInt64
    package var owner: UInt32
    package var group: UInt32
    package var mode: UInt32
    package var links: UInt64

    package init(device: UInt64, inode: UInt64, owner: UInt32, group: UInt32, mode: UInt32, links: UInt64) {
        self.device = device
        self.inode = inode
        self.owner = owner
        self.group = group
        self.mode = mode
        self.links = links
    }

    /// Facts of an open descriptor (an O_PATH one will do); nil when fstat fails.
    package init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), owner: info.st_uid, group: info.st_gid,
            mode: info.st_mode, links: UInt64(info.st_nlink))
    }

    package var isRegularFile: Bool { mode & S_IFMT == S_IFREG }
    package var isDirectory: Bool { mode & S_IFMT == S_IFDIR }

    package func isSameFile(as other: FileFacts) -> Bool { device == other.device && inode == other.inode }
}

/// The user a caller runs as: whose writes a file must be safe from.
package struct FileWriter: Hashable, Sendable {
    package var uid: UInt32
    /// The caller's groups (its `Gid:` and `Groups:`).
    package var groups: [UInt32]

    package init(uid: UInt32, groups: [UInt32]) {
        self.uid = uid
        self.groups = groups
    }
}

/// Whether a program or library is root's, as the pure predicates the broker's checks rest on,
/// and the walk that finds a path's file in this process's own mount namespace.
package enum FileTrust {
    /// Its content is root's choice alone: owned by uid 0 and writable by neither group nor others.
    package static func isRootsOwn(_ file: FileFacts) -> Bool {
        file.owner == 0 && file.mode & 0o022 == 0
    }

    /// Whether `writer` could change this file's content (owner, group or other write bit). Root
    /// owns every file it could replace anyway, so nothing is counted as writable for uid 0.
    package static func isWritable(_ file: FileFacts, by writer: FileWriter) -> Bool {
        if file.mode & 0o002 != 0 { return true }
        guard writer.uid != 0 else { return false }
        return file.owner == writer.uid || (file.mode & 0o020 != 0 && writer.groups.contains(file.group))
    }

    /// A directory the writer cannot rename or replace an entry of. One anyone may write is refused
    /// even with the sticky bit (`/tmp`): what a trusted path names must not live where every user
    /// creates files. One the writer owns is refused even without a write bit: the owner can chmod.
    package static func isSafeDirectory(_ directory: FileFacts, for writer: FileWriter) -> Bool {
        guard directory.isDirectory, directory.mode & 0o002 == 0 else { return false }
        return !isWritable(directory, by: writer)
    }

    /// What a path names, walked one component at a time without following symbolic links.
    package enum Resolution: Equatable {
        /// The file, every directory above it safe for the writer (or not checked).
        case file(FileFacts)
        /// A directory on the way the writer could change.
        case unsafeDirectory
        /// No such file, a symbolic link on the way, or a path not in canonical form.
        case missing
    }

    /// Walks `path` (absolute and canonical, as /proc/PID/exe and maps give it) from `root`, a
    /// directory descriptor (this process's "/" by default). With a writer, every directory on
    /// the way, `/` included, must be safe for it; without one, only the file's facts are read.
    package static func resolve(_ path: String, for writer: FileWriter?, from root: Int32? = nil) -> Resolution {
        guard path.utf8.first == UInt8(ascii: "/"), path.utf8.count <= Int(PATH_MAX) else { return .missing }
        let names = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard !names.isEmpty, !names.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else { return .missing }
        var directory = clinux_open_path(root ?? AT_FDCWD, root == nil ? "/" : ".", O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return .missing }
        defer { close(directory) }
        for (index, name) in names.enumerated() {
            if let writer {
                guard let facts = FileFacts(descriptor: directory) else { return .missing }
                guard isSafeDirectory(facts, for: writer) else { return .unsafeDirectory }
            }
            let last = index == names.count - 1
            let next = clinux_open_path(directory, String(name), O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY))
            guard next >= 0 else { return .missing }
            close(directory)
            directory = next
        }
        guard let facts = FileFacts(descriptor: directory), facts.mode & S_IFMT != S_IFLNK else { return .missing }
        return .file(facts)
    }
}
