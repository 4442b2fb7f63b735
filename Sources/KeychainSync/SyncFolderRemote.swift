import KeychainCore
import Glibc

/// A remote that is a folder on this machine (a path or a `file://` URL): a bare repository
/// that others may be able to write (a group's shared folder, a USB stick, a synced folder).
/// `git push` and `git fetch` would start receive-pack and upload-pack inside it, as this user,
/// reading its `config` and running its `hooks/`; so no git ever runs there, and the folder is
/// read and written as data only. A fetch copies the folder's object files into a bare
/// repository of this device's (in the clone's `.git`) and fetches from that copy; a push writes
/// one pack made in the clone and then moves the branch under git's own lock file, so that
/// devices still pushing with git are kept out the same way.
struct SyncFolderRemote {
    /// The folder the remote names (the user's: it may be a link they made).
    let path: String
    /// Whether the repository is the folder's `.git` (a folder that is not bare). Opened without
    /// following a link: a `.git` link planted in the folder must not send pushes elsewhere.
    let inGitFolder: Bool
    /// This device's copy: a bare repository with the folder's objects, its own config, no hook.
    let copy: String

    /// The folder a remote names, or nil when git reaches it through a transport of its own
    /// (`ssh://`, `https://`, `host:path`, `helper::address`), whose hooks run on the server.
    /// A relative path is the clone's, as it was when git resolved it from there.
    init?(remote: String, clone: String) {
        var path = remote
        if remote.hasPrefix("file://") {
            path = String(remote.dropFirst("file://".count))
        } else if let colon = remote.firstIndex(of: ":"), !remote[..<colon].contains("/") {
            return nil
        }
        guard !path.isEmpty else { return nil }
        if !path.hasPrefix("/") { path = clone + "/" + path }
        var st = stat()
        inGitFolder = stat(path + "/objects", &st) != 0 && lstat(path + "/.git", &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
        self.path = path
        copy = clone + "/.git/folder-remote"
    }

    static let branchFile = SyncGit.branch
    static let lockFile = SyncGit.branch + ".lock"

    // MARK: Fetching

    /// Fetches the folder's branch into the clone's `refs/remotes/origin/keychain`; false when
    /// the folder has no such branch yet.
    func fetch(into git: SyncGit) throws -> Bool {
        // The tip first, then the objects: a pusher writes its objects before it moves the branch.
        guard let tip = try tip() else { return false }
        var last = ""
        for _ in 0..<2 {
            try prepareCopy()
            try copyObjects()
            try PlainFiles.write(copy + "/refs/heads/" + SyncGit.branch, Array((tip + "\n").utf8))
            let (status, output) = try git.run([
                "fetch", "-q", "--prune", copy, "+refs/heads/\(SyncGit.branch):refs/remotes/origin/\(SyncGit.branch)"
            ])
            if status == 0 { return true }
            last = output
            // A file of the folder's that did not hold what its name says would stay in the copy
            // (only new names are copied): once the folder is whole again, start afresh from it.
            PlainFiles.removeTree(copy)
        }
        throw KeychainError(.io, "cannot reach the remote: " + SyncState.printable(last.split(separator: "\n").last.map(String.init) ?? "git fetch failed"))
    }

    /// The object id the folder's branch names (a loose ref first, then `packed-refs`).
    func tip() throws -> String? {
        let root = try openRepository()
        defer { close(root) }
        let heads = Self.folder(root, "refs/heads")
        if heads >= 0 {
            defer { close(heads) }
            if let bytes = Self.readFile(heads, Self.branchFile, limit: 4096) {
                let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
                guard Self.isObjectName(line) else { throw KeychainError(.io, "cannot reach the remote: its branch is not an object name") }
                return line
            }
        }
        guard let packed = Self.readFile(root, "packed-refs", limit: 64 << 20) else { return nil }
        for line in String(decoding: packed, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, fields[1] == "refs/heads/" + SyncGit.branch, Self.isObjectName(String(fields[0])) { return String(fields[0]) }
        }
        return nil
    }

    private func prepareCopy() throws {
        for dir in ["", "/objects", "/objects/pack", "/refs", "/refs/heads"] where access(copy + dir, F_OK) != 0 {
            guard mkdir(copy + dir, 0o700) == 0 else { throw KeychainError(.io, "cannot make \(copy + dir)") }
        }
        if access(copy + "/config", F_OK) != 0 {
            try PlainFiles.write(copy + "/HEAD", Array("ref: refs/heads/\(SyncGit.branch)\n".utf8))
            try PlainFiles.write(copy + "/config", Array("[core]\n\trepositoryformatversion = 0\n\tbare = true\n".utf8))
        }
    }

    /// Copies the loose objects and the packs (`.pack` and `.idx`) the copy lacks; nothing
    /// else of the folder's (`objects/info/alternates` would name other folders to read).
    private func copyObjects() throws {
        let root = try openRepository()
        defer { close(root) }
        var budget = CopyBudget()
        let objects = Self.folder(root, "objects")
        guard objects >= 0 else { throw notRepository }
        defer { close(objects) }
        for name in Self.names(objects) {
            if name == "pack" {
                let pack = Self.folder(objects, name)
                guard pack >= 0 else { continue }
                defer { close(pack) }
                let packs = Self.packs(pack)
                for base in packs {
                    let target = copy + "/objects/pack/" + base
                    guard access(target + ".idx", F_OK) != 0 else { continue }
                    // The index last: git finds a pack by its index. A pack that a device
                    // consolidating the folder removed meanwhile is skipped: its objects are in
                    // the pack that replaced it, written before.
                    guard try Self.copyFile(pack, base + ".pack", to: target + ".pack", budget: &budget) else { continue }
                    if try !Self.copyFile(pack, base + ".idx", to: target + ".idx", budget: &budget) { unlink(target + ".pack") }
                }
                // The copy follows the folder: packs it no longer has go here too, or the copy
                // would keep every pack a consolidation replaced.
                let kept = Set(packs)
                for file in PlainFiles.list(copy + "/objects/pack") where file.hasSuffix(".idx") && !kept.contains(String(file.dropLast(".idx".count))) {
                    let base = copy + "/objects/pack/" + String(file.dropLast(".idx".count))
                    unlink(base + ".idx")
                    unlink(base + ".pack")
                }
            } else if name.count == 2, Self.isHex(name) {
                let loose = Self.folder(objects, name)
                guard loose >= 0 else { continue }
                defer { close(loose) }
                let files = Self.names(loose).filter { ($0.count == 38 || $0.count == 62) && Self.isHex($0) }
                for file in files {
                    let target = copy + "/objects/" + name + "/" + file
                    guard access(target, F_OK) != 0 else { continue }
                    if access(copy + "/objects/" + name, F_OK) != 0 { mkdir(copy + "/objects/" + name, 0o700) }
                    _ = try Self.copyFile(loose, file, to: target, budget: &budget)
                }
                // As for packs: what the folder no longer has goes from the copy too.
                let kept = Set(files)
                for file in PlainFiles.list(copy + "/objects/" + name) where !kept.contains(file) { unlink(copy + "/objects/" + name + "/" + file) }
            }
        }
        // Loose objects of folders the remote no longer has.
        for name in PlainFiles.list(copy + "/objects") where name.count == 2 && Self.isHex(name) {
            if faccessat(objects, name, F_OK, AT_SYMLINK_NOFOLLOW) != 0 { PlainFiles.removeTree(copy + "/objects/" + name) }
        }
    }

    /// What one fetch may copy from the folder: whoever can write it must not fill this user's
    /// disk or use up its inodes (a sparse terabyte costs them nothing, its copy is real). A
    /// keychain's repository is megabytes; these are two orders of magnitude above.
    struct CopyBudget {
        static let bytes = 1 << 30
        static let files = 200_000
        var bytesLeft = CopyBudget.bytes
        var filesLeft = CopyBudget.files

        /// Takes a file of `size` bytes, `blocks` of 512 on disk; throws when the fetch would
        /// copy more than a keychain's repository can hold, or a file mostly holes.
        mutating func take(_ name: String, size: Int, blocks: Int) throws {
            if size > 1 << 20 && blocks * 512 < size / 2 {
                throw KeychainError(.io, "cannot reach the remote: objects/\(name) is a sparse file of \(size) bytes, not an object file")
            }
            bytesLeft -= size
            filesLeft -= 1
            guard bytesLeft >= 0, filesLeft >= 0 else {
                throw KeychainError(
                    .io, "cannot reach the remote: it holds more than \(Self.bytes >> 20) MiB or \(Self.files) object files, more than a keychain makes")
            }
        }
    }

    // MARK: Pushing

    /// Packs in the folder at which a push writes one pack of everything instead of one of what
    /// is new, and removes the others: one pack per push would slow every fetch for ever.
    static let packLimit = 24

    /// Seconds after which the branch's lock is taken for one a stopped push left behind.
    static let staleLock = 600

    /// Sends the clone's HEAD: one pack of what the fetched tip lacks, then the branch moved
    /// from that tip to HEAD; false when the folder's branch is no longer that tip (another
    /// device pushed first: the caller fetches and merges again).
    func push(from git: SyncGit) throws -> Bool {
        let head = try Self.firstLine(git.must(["rev-parse", "--verify", "HEAD"]))
        let (status, output) = try git.run(["rev-parse", "--verify", "-q", "refs/remotes/origin/\(SyncGit.branch)"])
        let expected = status == 0 ? Self.firstLine(output) : nil
        if head == expected { return try tip() == head }
        let root = try openRepository()
        defer { close(root) }
        let pack = Self.folder(root, "objects/pack")
        guard pack >= 0 else { throw notRepository }
        defer { close(pack) }
        // Listed before the new pack is written: only these may go once the branch has moved.
        let before = Self.packs(pack)
        // Only in a folder that holds nothing but this branch: the one pack has only what the
        // branch reaches, and another branch's objects in the removed packs would be lost.
        let consolidate = before.count >= Self.packLimit && Self.holdsOnlyTheBranch(root)
        let out = copy + "-out"
        PlainFiles.removeTree(out)
        guard mkdir(out, 0o700) == 0 else { throw KeychainError(.io, "cannot make \(out)") }
        defer { PlainFiles.removeTree(out) }
        let exclude = consolidate ? "" : (expected.map { "^" + $0 + "\n" } ?? "")
        try PlainFiles.write(out + "/revs", Array(("HEAD\n" + exclude).utf8))
        let revs = open(out + "/revs", O_RDONLY | O_CLOEXEC)
        guard revs >= 0 else { throw KeychainError(.io, "cannot read \(out)/revs") }
        defer { close(revs) }
        let name = try "pack-" + Self.firstLine(git.must(["pack-objects", "--revs", "-q", out + "/pack"], input: revs))
        guard Self.isObjectName(String(name.dropFirst("pack-".count))) else { throw KeychainError(.io, "git pack-objects named no pack") }
        let published = try Self.publish(out + "/" + name + ".pack", in: pack, as: name + ".pack")
        if try Self.publish(out + "/" + name + ".idx", in: pack, as: name + ".idx") == false && published {
            throw KeychainError(.io, "cannot push to the remote: \(name).idx was there without its pack")
        }
        guard try moveBranch(root, from: expected, to: head) else {
            // Nothing names the pack now; it was ours alone, and a lost race should leave no trace.
            if published {
                unlinkat(pack, name + ".idx", 0)
                unlinkat(pack, name + ".pack", 0)
            }
            return false
        }
        try git.must(["update-ref", "refs/remotes/origin/\(SyncGit.branch)", head])
        if consolidate {
            // Everything the branch reaches is in the new pack, written before the branch moved:
            // a reader that listed an old pack and finds it gone skips it. A pusher whose pack
            // goes had not moved the branch yet, and now cannot (it moved from under it). A
            // pack git keeps (.keep: a receive-pack at work) stays; one that cannot go, stays.
            for base in before where base != name && faccessat(pack, base + ".keep", F_OK, AT_SYMLINK_NOFOLLOW) != 0 {
                for suffix in [".idx", ".pack", ".rev", ".bitmap", ".mtimes"] { unlinkat(pack, base + suffix, 0) }
            }
        }
        return true
    }

    /// Whether `refs/heads/keychain` (and its lock) is the folder's only ref, loose or packed.
    private static func holdsOnlyTheBranch(_ root: Int32) -> Bool {
        func onlyTheBranch(_ dir: Int32, _ prefix: String, depth: Int) -> Bool {
            guard depth < 8 else { return false }
            for name in names(dir) {
                let ref = prefix + name
                if ref == "heads/" + branchFile || ref == "heads/" + lockFile { continue }
                let sub = folder(dir, name)
                guard sub >= 0 else { return false }
                defer { close(sub) }
                guard onlyTheBranch(sub, ref + "/", depth: depth + 1) else { return false }
            }
            return true
        }
        let refs = folder(root, "refs")
        guard refs >= 0 else { return false }
        defer { close(refs) }
        guard onlyTheBranch(refs, "", depth: 0) else { return false }
        guard let packed = readFile(root, "packed-refs", limit: 64 << 20) else {
            return faccessat(root, "packed-refs", F_OK, AT_SYMLINK_NOFOLLOW) != 0
        }
        return String(decoding: packed, as: UTF8.self).split(separator: "\n").allSatisfy { line in
            line.hasPrefix("#") || line.hasPrefix("^") || line.split(separator: " ").last == "refs/heads/" + SyncGit.branch
        }
    }

    /// The packs of a folder by base name (`pack-<id>`), found by their index as git finds them.
    private static func packs(_ dir: Int32) -> [String] {
        names(dir).compactMap { file in
            guard file.hasPrefix("pack-"), file.hasSuffix(".idx") else { return nil }
            let base = String(file.dropLast(".idx".count))
            return isObjectName(String(base.dropFirst("pack-".count))) ? base : nil
        }
    }

    /// Moves the branch from `expected` (nil: none) to `new` under `refs/heads/keychain.lock`,
    /// the lock git takes for the same ref; false when the branch moved on or another writer
    /// holds the lock.
    private func moveBranch(_ root: Int32, from expected: String?, to new: String) throws -> Bool {
        let heads = Self.folder(root, "refs/heads")
        guard heads >= 0 else { throw notRepository }
        defer { close(heads) }
        let lock = openat(heads, Self.lockFile, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lock >= 0 else {
            if errno == EEXIST {
                // Held for seconds by a push at work; one much older was left by a push that
                // stopped half way, and would refuse every push from now on without a word.
                var st = stat()
                if fstatat(heads, Self.lockFile, &st, AT_SYMLINK_NOFOLLOW) == 0, time(nil) - st.st_mtim.tv_sec > Self.staleLock {
                    throw KeychainError(
                        .io,
                        "cannot push to the remote: \(path)/refs/heads/\(Self.lockFile) is \((time(nil) - st.st_mtim.tv_sec) / 60) minutes old, left by a push that stopped; remove it once no device is pushing"
                    )
                }
                return false
            }
            throw KeychainError(.io, "cannot push to the remote: cannot lock its branch: \(String(cString: strerror(errno)))")
        }
        var moved = false
        defer {
            close(lock)
            if !moved { unlinkat(heads, Self.lockFile, 0) }
        }
        fchmod(lock, Self.fileMode(in: heads, owner: 0o600))
        guard try tip() == expected else { return false }
        guard PlainFiles.writeAll(lock, Array((new + "\n").utf8)), fsync(lock) == 0 else {
            throw KeychainError(.io, "cannot push to the remote: cannot write its branch")
        }
        guard renameat(heads, Self.lockFile, heads, Self.branchFile) == 0 else {
            throw KeychainError(.io, "cannot push to the remote: cannot move its branch: \(String(cString: strerror(errno)))")
        }
        moved = true
        fsync(heads)
        return true
    }

    /// Writes `source` into the folder `dir` under `name` through a temporary name (`tmp_`,
    /// which git's gc clears when left behind); false when `name` was there already.
    private static func publish(_ source: String, in dir: Int32, as name: String) throws -> Bool {
        if faccessat(dir, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 { return false }
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw KeychainError(.io, "cannot read \(source)") }
        defer { close(input) }
        let temporary = "tmp_keychain_" + (try Crypto.random(8)).hex
        let fd = openat(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o400)
        guard fd >= 0 else { throw KeychainError(.io, "cannot push to the remote: cannot write in its objects/pack: \(String(cString: strerror(errno)))") }
        fchmod(fd, fileMode(in: dir, owner: 0o400))
        // In steps: a pack of everything (a consolidation) may be larger than is worth holding.
        let written = PlainFiles.copyAll(from: input, to: fd) && fsync(fd) == 0
        close(fd)
        guard written, renameat(dir, temporary, dir, name) == 0 else {
            unlinkat(dir, temporary, 0)
            throw KeychainError(.io, "cannot push to the remote: cannot write \(name)")
        }
        return true
    }

    // MARK: Files of the folder, as data

    private var notRepository: KeychainError {
        KeychainError(.io, "cannot reach the remote: \(path) is not a git repository (`git init --bare` makes one)")
    }

    private func openRepository() throws -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw notRepository }
        guard inGitFolder else { return fd }
        defer { close(fd) }
        let git = Self.folder(fd, ".git")
        guard git >= 0 else { throw notRepository }
        return git
    }

    /// A folder below `dir`, each step opened without following a link: whoever owns the remote
    /// could otherwise point `refs/heads` or `objects/pack` into this user's home.
    private static func folder(_ dir: Int32, _ relative: String) -> Int32 {
        var fd = dup(dir)
        for part in relative.split(separator: "/") where fd >= 0 {
            let next = openat(fd, String(part), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            close(fd)
            fd = next
        }
        return fd
    }

    /// A regular file's bytes (never a link or a FIFO), nil when it is missing or larger.
    private static func readFile(_ dir: Int32, _ name: String, limit: Int) -> Bytes? {
        let fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= limit else { return nil }
        var out: Bytes = []
        var buffer = Bytes(repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return out }
            out += buffer[0..<n]
            if out.count > limit { return nil }
        }
    }

    /// Copies a regular file of the folder's into this device's copy, through a temporary name;
    /// false when it is gone or no regular file (a fetch then misses its objects, and says so).
    private static func copyFile(_ dir: Int32, _ name: String, to target: String, budget: inout CopyBudget) throws -> Bool {
        let source = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard source >= 0 else { return false }
        defer { close(source) }
        var st = stat()
        guard fstat(source, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return false }
        try budget.take(name, size: Int(st.st_size), blocks: Int(st.st_blocks))
        let temporary = target + ".tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot write \(temporary)") }
        // In steps, within the fetch's budget: a pack the folder's owner made huge is refused.
        let copied = PlainFiles.copyAll(from: source, to: fd)
        close(fd)
        guard copied, rename(temporary, target) == 0 else {
            unlink(temporary)
            throw KeychainError(.io, "cannot copy objects/\(name) of the remote into \(target)")
        }
        return true
    }

    private static func names(_ dir: Int32) -> [String] {
        let fd = dup(dir)
        guard fd >= 0 else { return [] }
        guard let stream = fdopendir(fd) else {
            close(fd)
            return []
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// What git itself does in a shared repository: readable by whoever may read the folder.
    private static func fileMode(in dir: Int32, owner: mode_t) -> mode_t {
        var st = stat()
        guard fstat(dir, &st) == 0 else { return owner }
        return owner | (st.st_mode & 0o044)
    }

    private static func firstLine(_ text: String) -> String {
        text.split(separator: "\n").first.map(String.init) ?? ""
    }

    static func isObjectName(_ s: String) -> Bool { (s.count == 40 || s.count == 64) && isHex(s) }

    private static func isHex(_ s: String) -> Bool { s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } }
}
