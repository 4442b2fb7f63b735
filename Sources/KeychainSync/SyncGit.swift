import KeychainCore
import KeychainProcess
internal import CLinux
import Glibc

/// The device's clone of the remote, driven through the `git` command: git's own transports and
/// the user's credentials (ssh keys, credential helpers) do all the talking. Commits carry a
/// fixed neutral author and date and a fixed message, so history says nothing of items or times.
struct SyncGit {
    let folder: String
    static let branch = "keychain"

    /// `git` from the caller's PATH (the user's choice, as for any git command they run).
    static func executable() throws -> String {
        let path = KeychainFile.environment("PATH") ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") where dir.hasPrefix("/") {
            let candidate = String(dir) + "/git"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        throw KeychainError(.notAvailable, "git is not installed (sync runs git)")
    }

    /// What names the repository git works in (`git rev-parse --local-env-vars`, and the
    /// namespace and discovery limits): a caller inside a git hook or `git rebase -x` has them set
    /// for its own repository, whose index or objects the clone's commands would otherwise use.
    static let repositoryVariables: Set<String> = [
        "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_OBJECT_DIRECTORY", "GIT_DIR",
        "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_INDEX_VERSION"
    ]

    /// The caller's environment, without what points git at another repository, with what makes
    /// commits neutral and git never prompt on a terminal it may not have (the timer has none).
    static func environment() -> [String] {
        var out: [String] = []
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            let name = String(s.prefix { $0 != "=" })
            if !name.hasPrefix("GIT_AUTHOR_") && !name.hasPrefix("GIT_COMMITTER_") && !repositoryVariables.contains(name) {
                out.append(s)
            }
            p += 1
        }
        return out + [
            "GIT_AUTHOR_NAME=keychain", "GIT_AUTHOR_EMAIL=keychain@localhost", "GIT_COMMITTER_NAME=keychain",
            "GIT_COMMITTER_EMAIL=keychain@localhost", "GIT_AUTHOR_DATE=2001-01-01T00:00:00+0000",
            "GIT_COMMITTER_DATE=2001-01-01T00:00:00+0000", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"
        ]
    }

    /// Runs git in the clone; its status and what it printed (stdout and stderr, at most 1 MiB).
    @discardableResult
    func run(_ arguments: [String], input: Int32 = -1, seconds: Double = 600) throws -> (status: Int32, output: String) {
        let git = try Self.executable()
        var fds: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&fds) == 0 else { throw KeychainError(.io, "cannot make a pipe for git") }
        defer { close(fds[0]) }
        let child: ChildProcess
        do {
            child = try ChildProcess.start(
                git,
                // The clone's own .git and nothing else: a clone that lost it must fail, not
                // find a repository above it (a home kept in git) and check the remote out there.
                // Whatever the remote's tree says: no symbolic links on disk (a link named records
                // could point into the home folder), no line-ending or filter conversions; and no
                // hooks, from the clone or a hooks path in the user's configuration.
                [
                    "-C", folder, "--git-dir=.git", "--work-tree=.", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c",
                    "core.symlinks=false", "-c", "core.hooksPath=/dev/null", "-c", "submodule.recurse=false"
                ] + arguments,
                stdio: (input, fds[1], fds[1]), environment: Self.environment())
        } catch {
            close(fds[1])
            throw error
        }
        close(fds[1])
        let deadline = SystemClock.monotonic() + seconds
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var pollfd = Glibc.pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        while true {
            let left = Int32(max(0, (deadline - SystemClock.monotonic()) * 1000))
            guard left > 0, poll(&pollfd, 1, left) > 0 else { break }
            let n = Glibc.read(fds[0], &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            if collected.count < 1 << 20 { collected += buffer[0..<n] }
        }
        guard let status = child.wait(until: max(deadline, SystemClock.monotonic() + 1)) else {
            child.stop()
            throw KeychainError(.io, "git \(arguments.first ?? "") did not finish in \(Int(seconds)) s")
        }
        return (status, String(decoding: collected, as: UTF8.self))
    }

    /// Runs git and throws with git's own words when it fails.
    @discardableResult
    func must(_ arguments: [String], input: Int32 = -1) throws -> String {
        let (status, output) = try run(arguments, input: input)
        guard status == 0 else {
            let last = SyncState.printable(output.split(separator: "\n").last.map(String.init) ?? "exit status \(status)")
            throw KeychainError(.io, "git \(arguments.first ?? ""): \(last)")
        }
        return output
    }

    /// A fresh clone folder, 0700, tracking `remote`.
    static func create(_ folder: String, remote: String) throws -> SyncGit {
        if access(folder, F_OK) == 0 {
            throw KeychainError(.duplicateItem, "\(folder) exists: this keychain already has a sync clone (`security sync leave` removes it)")
        }
        try KeychainFile.prepareDirectory(for: folder + "/x")
        let git = SyncGit(folder: folder)
        try git.must(["init", "-q", "-b", branch])
        try git.must(["remote", "add", "origin", remote])
        // info/attributes outranks the tree's .gitattributes: a remote that adds one cannot make
        // checkout run a filter (git-lfs and the like) on what it wrote.
        try PlainFiles.write(folder + "/.git/info/attributes", Array("* binary -filter -ident !working-tree-encoding !eol\n".utf8))
        return git
    }

    /// The remote when it is a folder on this machine, which git must not run in (see
    /// SyncFolderRemote); nil for git's own transports.
    func folderRemote(push: Bool = false) throws -> SyncFolderRemote? {
        // As git resolves it (url.*.insteadOf, a pushurl): what git would have reached.
        let (status, output) = try run(["remote", "get-url"] + (push ? ["--push"] : []) + ["origin"])
        guard status == 0, let url = output.split(separator: "\n").first else { return nil }
        return SyncFolderRemote(remote: String(url), clone: folder)
    }

    /// Fetches the remote branch; false when the remote has none yet.
    func fetch() throws -> Bool {
        if let remote = try folderRemote() { return try remote.fetch(into: self) }
        let (status, output) = try run(["fetch", "-q", "--prune", "origin", "+refs/heads/\(Self.branch):refs/remotes/origin/\(Self.branch)"])
        if status == 0 { return true }
        if output.contains("couldn't find remote ref") { return false }
        let last = SyncState.printable(output.split(separator: "\n").last.map(String.init) ?? "exit status \(status)")
        throw KeychainError(.io, "cannot reach the remote: \(last)")
    }

    /// The work tree becomes the fetched tip, nothing of ours left in it.
    func resetToRemote() throws {
        try must(["checkout", "-q", "-B", Self.branch, "refs/remotes/origin/\(Self.branch)"])
        try must(["reset", "-q", "--hard", "refs/remotes/origin/\(Self.branch)"])
        try must(["clean", "-q", "-f", "-d", "-x"])
    }

    /// Commits everything in the work tree; false when nothing changed.
    func commitAll() throws -> Bool {
        // Ignored files too: a .gitignore from the remote (or the user's global excludes) would
        // otherwise keep what this device wrote out of the commit, while it takes it for sent.
        try must(["add", "-A", "-f", "."])
        let (status, _) = try run(["diff", "--cached", "--quiet"])
        if status == 0 { return false }
        try must(["commit", "-q", "--no-verify", "-m", "keychain sync"])
        return true
    }

    /// Pushes; false when the remote moved on (the caller fetches and merges again).
    func push() throws -> Bool {
        if let remote = try folderRemote(push: true) { return try remote.push(from: self) }
        let (status, output) = try run(["push", "-q", "--no-verify", "origin", "HEAD:refs/heads/\(Self.branch)"])
        if status == 0 { return true }
        if output.contains("rejected") || output.contains("non-fast-forward") || output.contains("fetch first") || output.contains("cannot lock ref") {
            return false
        }
        let last = SyncState.printable(output.split(separator: "\n").last.map(String.init) ?? "exit status \(status)")
        throw KeychainError(.io, "cannot push to the remote: \(last)")
    }

    // MARK: Files of the work tree

    func path(_ name: String) -> String { folder + "/" + name }

    /// A file of the tree, refused when any folder on the way is not a plain folder.
    func read(_ name: String) -> Bytes? {
        guard plainFolders(name) else { return nil }
        return PlainFiles.read(path(name))
    }

    private func plainFolders(_ name: String) -> Bool {
        var prefix = folder
        for part in name.split(separator: "/").dropLast() {
            prefix += "/" + part
            var st = stat()
            guard lstat(prefix, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return false }
        }
        return true
    }

    func write(_ name: String, _ bytes: Bytes) throws {
        if !plainFolders(name), let slash = name.firstIndex(of: "/") {
            // Whatever stands where a folder should be goes (git checks a link out as a file).
            PlainFiles.removeTree(path(String(name[..<slash])))
        }
        // And whatever stands where the file goes: a folder the remote put at `group` or
        // keys/<id> would otherwise fail every exchange that writes it back.
        var st = stat()
        if lstat(path(name), &st) == 0, (st.st_mode & S_IFMT) != S_IFREG { PlainFiles.removeTree(path(name)) }
        try PlainFiles.write(path(name), bytes)
    }

    func remove(_ name: String) { unlink(path(name)) }

    func list(_ dir: String) -> [String] { plainFolders(dir + "/x") ? PlainFiles.list(path(dir)) : [] }
}

extension Bytes {
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out = Bytes()
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = Self.nibble(digits[i]), let lo = Self.nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        self = out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        default: return nil
        }
    }
}
