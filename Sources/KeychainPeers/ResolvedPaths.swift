internal import Glibc

/// Paths `FileTrust.resolve` found safe for a writer, remembered across evaluations: the next
/// caller that maps the same library (every program maps libc, the loader, its runtime) costs one
/// lstat of the file instead of a walk that opens and checks every directory above it, which
/// was most of the broker's time evaluating a new caller and its parents.
///
/// An entry holds while lstat finds the same inode with the same change time: a file's owner,
/// mode and links cannot change without its ctime moving, and the directories above a path the
/// walk found safe for this writer can only be made unsafe by root (an unsafe one was never
/// remembered). lstat is of this process's namespace, as the walk was: a path that names
/// another inode in the caller's mount namespace is not the remembered file, and the caller's
/// checks compare inodes.
final class ResolvedPaths: @unchecked Sendable {
    static let shared = ResolvedPaths()
    /// Distinct (path, writer) pairs kept: more empties the memo, which only costs walks.
    static let limit = 4096

    private struct Key: Hashable {
        var path: String
        var writer: FileWriter
    }

    private struct Seen: Equatable {
        var device: UInt64
        var inode: UInt64
        var ctimeSeconds: Int
        var ctimeNanoseconds: Int
    }

    private var entries: [Key: Seen] = [:]
    /// Walks done (tests: what was remembered is not walked again).
    private(set) var walks = 0
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(lock, nil) }

    /// `FileTrust.resolve(path, for: writer)` in this process's namespace, remembered.
    func resolve(_ path: String, for writer: FileWriter) -> FileTrust.Resolution {
        let key = Key(path: path, writer: writer)
        if let (seen, facts) = Self.look(path), remembered(key) == seen { return .file(facts) }
        let resolution = FileTrust.resolve(path, for: writer)
        pthread_mutex_lock(lock)
        walks += 1
        pthread_mutex_unlock(lock)
        // Remembered only as lstat finds it after the walk: the same inode the walk ended on.
        if case .file(let walked) = resolution, let (seen, facts) = Self.look(path), facts.isSameFile(as: walked) {
            remember(key, seen)
        }
        return resolution
    }

    /// What lstat says of `path` now.
    private static func look(_ path: String) -> (Seen, FileFacts)? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT != S_IFLNK else { return nil }
        let seen = Seen(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), ctimeSeconds: info.st_ctim.tv_sec,
            ctimeNanoseconds: info.st_ctim.tv_nsec)
        let facts = FileFacts(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), owner: info.st_uid, group: info.st_gid, mode: info.st_mode,
            links: UInt64(info.st_nlink))
        return (seen, facts)
    }

    private func remembered(_ key: Key) -> Seen? {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return entries[key]
    }

    private func remember(_ key: Key, _ seen: Seen) {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        if entries[key] == nil, entries.count >= Self.limit { entries = [:] }
        entries[key] = seen
    }
}
