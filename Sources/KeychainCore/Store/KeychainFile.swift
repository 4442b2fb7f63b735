import Glibc

/// Where keychains live and the file-system rules they obey.
package enum KeychainFile {
    /// `$KEYCHAIN_PATH`, else the keychain chosen with `security default-keychain -s`, else
    /// `$XDG_DATA_HOME/keychains/login.keychain-db` (~/.local/share without XDG_DATA_HOME).
    package static func defaultPath() -> String {
        if let p = environment("KEYCHAIN_PATH"), !p.isEmpty { return p }
        if let chosen = readSmallFile(defaultChoiceFile()), chosen.hasPrefix("/") { return chosen }
        return loginPath()
    }

    /// The login keychain: the one the PAM module unlocks with the login password.
    package static func loginPath() -> String { directory() + "/login.keychain-db" }

    /// Whether two paths name one file (`a//b`, `a/./b`, links): compared by device and inode.
    package static func sameFile(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        var first = stat(), second = stat()
        guard stat(a, &first) == 0, stat(b, &second) == 0 else { return false }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    /// Where `security default-keychain -s` records its choice.
    package static func defaultChoiceFile() -> String {
        let config = environment("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? homeDirectory() + "/.config"
        return config + "/keychain/default-keychain"
    }

    package static func setDefaultPath(_ path: String?) throws {
        let file = defaultChoiceFile()
        guard var path else {
            unlink(file)
            return
        }
        // Kept in its one canonical spelling, so that every front end recognizes the default.
        if let resolved = realpath(path, nil) {
            path = String(cString: resolved)
            free(resolved)
        }
        try prepareDirectory(for: file)
        try PlainFiles.replace(file, with: Array((path + "\n").utf8), temporarySuffix: ".tmp")
    }

    /// A keychain named as macOS names them: a path as it is, a bare name in the keychains folder
    /// ("work" and "work.keychain" both mean work.keychain-db there).
    package static func resolve(_ name: String) -> String {
        if name.contains("/") { return name }
        if name.hasSuffix(".keychain-db") { return directory() + "/" + name }
        if name.hasSuffix(".keychain") { return directory() + "/" + name + "-db" }
        return directory() + "/" + name + ".keychain-db"
    }

    /// The keychain of a name that a file's author chose (a keyring's or a wallet's file name,
    /// a wallet another provider lists): in the keychains folder, always. Such a name is never a
    /// path, so a file cannot choose where a keychain is made (one whose password its author
    /// knows, in a folder others can write, on the search list): a name holding "/" or NUL (which
    /// the C calls would cut), or that is empty, "." or "..", is refused.
    package static func resolveBareName(_ name: String) throws -> String {
        guard !name.isEmpty, name != ".", name != "..", !name.utf8.contains(UInt8(ascii: "/")), !name.utf8.contains(0) else {
            throw KeychainError.param("\"\(name)\" is not a plain name for a keychain (a \"/\" or NUL in it, or \".\" or \"..\"); refused")
        }
        return resolve(name)
    }

    /// The keychains in the keychains folder, and the default one wherever it is.
    package static func list() -> [String] { list(including: defaultPath()) }

    /// The same, with the default keychain already read by the caller (which keeps it).
    package static func list(including chosen: String) -> [String] {
        var found: [String] = []
        if let dir = opendir(directory()) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
                if name.hasSuffix(".keychain-db") { found.append(directory() + "/" + name) }
            }
            closedir(dir)
        }
        if exists(chosen), !found.contains(chosen) { found.append(chosen) }
        return found.sorted()
    }

    package static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self).trimmingNewlines()
    }

    /// The folder that holds the user's keychains.
    package static func directory() -> String {
        if let x = environment("XDG_DATA_HOME"), x.hasPrefix("/") { return x + "/keychains" }
        return homeDirectory() + "/.local/share/keychains"
    }

    /// $HOME, else the home folder /etc/passwd gives the user. Not getpwuid(3): in the statically
    /// linked tools it would load glibc's NSS modules at run time, which must then be of the glibc
    /// the tool was linked with. A user known only through NSS (LDAP, sssd) gets $HOME from login.
    package static func homeDirectory() -> String {
        if let h = environment("HOME"), !h.isEmpty { return h }
        return passwdHome(uid: geteuid()) ?? "/"
    }

    /// The home folder of `uid` in a passwd(5) file.
    static func passwdHome(uid: uid_t, passwd: String = "/etc/passwd") -> String? {
        guard let file = fopen(passwd, "re") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            // name:password:uid:gid:gecos:home:shell
            let fields = String(cString: line).split(separator: ":", omittingEmptySubsequences: false)
            if fields.count >= 6, UInt32(fields[2]) == uid, fields[5].hasPrefix("/") { return String(fields[5]) }
        }
        return nil
    }

    package static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    package static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Makes the folder (and missing parents) 0700, and refuses one that others could write to.
    /// `ancestor`: the folder holds the folder of `path`, not `path` itself.
    package static func prepareDirectory(for path: String, ancestor: Bool = false) throws {
        let dir = parent(of: path)
        var st = stat()
        if stat(dir, &st) != 0 {
            try prepareDirectory(for: dir, ancestor: true)
            guard mkdir(dir, 0o700) == 0 || errno == EEXIST else {
                throw KeychainError(.io, "cannot create \(dir): \(String(cString: strerror(errno)))")
            }
        }
        try checkOwnership(dir, isDirectory: true, asAncestor: ancestor)
    }

    /// The files SQLite opens beside a keychain: another user's, or a link, would see (or feed)
    /// every page written, the keybag's clear key D included.
    static let sidecarSuffixes = ["-wal", "-shm", "-journal"]

    /// Checks the keychain's folder and files through a descriptor of the folder, and returns the
    /// path to give SQLite: the folder's real path (no symbolic link left, for SQLITE_OPEN_NOFOLLOW)
    /// and the main file's identity, to compare once SQLite has opened it.
    ///
    /// The folder must be the user's and writable by nobody else: a sticky world-writable folder
    /// such as /tmp is accepted as an ancestor only, because anyone may create the `-wal` or
    /// `-shm` of a keychain there before it is opened. Once the folder is known to be the user's
    /// alone, no other user can create, swap or link anything in it between these checks and
    /// SQLite's opens; the user's own processes can, as they can change the file itself.
    static func verifiedLocation(of path: String) throws -> (sqlitePath: String, device: UInt64, inode: UInt64) {
        let dir = parent(of: path)
        let name = String(path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...])
        var lst = stat()
        guard lstat(dir, &lst) == 0 else { throw KeychainError(.noSuchKeychain, "no keychain at \(path)") }
        let isLink = lst.st_mode & S_IFMT == S_IFLNK
        if isLink, lst.st_uid != geteuid(), lst.st_uid != 0 {
            throw KeychainError(.param, "refusing \(dir): it is a symbolic link owned by another user")
        }
        let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (isLink ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { throw KeychainError(.noSuchKeychain, "no keychain at \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { throw KeychainError(.param, "\(dir) is not a folder") }
        try requirePrivate(st, dir, what: "the keychain's folder", groupOrOthers: 0o022)

        var file = stat()
        guard fstatat(fd, name, &file, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw KeychainError(.noSuchKeychain, "no keychain at \(path)")
        }
        if file.st_mode & S_IFMT == S_IFLNK {
            // The user's own link (or root's) to a keychain elsewhere: the target, its folder and
            // the files beside it are what SQLite will use, so they are what gets checked.
            guard file.st_uid == geteuid() || file.st_uid == 0 else {
                throw KeychainError(.param, "refusing \(path): it is a symbolic link owned by another user")
            }
            guard let target = realpath(path, nil) else { throw KeychainError(.noSuchKeychain, "no keychain at \(path)") }
            defer { free(target) }
            let resolved = String(cString: target)
            guard resolved != path else { throw KeychainError(.param, "refusing \(path): a link to itself") }
            return try verifiedLocation(of: resolved)
        }
        guard file.st_mode & S_IFMT == S_IFREG else { throw KeychainError(.param, "refusing \(path): not a regular file") }
        try requirePrivate(file, path, what: "the keychain", groupOrOthers: 0o022)
        for suffix in sidecarSuffixes {
            var side = stat()
            guard fstatat(fd, name + suffix, &side, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            guard side.st_mode & S_IFMT == S_IFREG else {
                throw KeychainError(.param, "refusing \(path + suffix): not a regular file (a link?); remove it")
            }
            try requirePrivate(side, path + suffix, what: "a file of the keychain", groupOrOthers: 0o066)
        }

        guard let real = realpath(dir, nil) else { throw KeychainError(.io, "cannot resolve \(dir)") }
        let realDir = String(cString: real)
        free(real)
        var again = stat()
        guard stat(realDir, &again) == 0, again.st_dev == st.st_dev, again.st_ino == st.st_ino else {
            throw KeychainError(.param, "refusing \(dir): it changed while it was being checked")
        }
        return ((realDir == "/" ? "" : realDir) + "/" + name, UInt64(file.st_dev), UInt64(file.st_ino))
    }

    private static func requirePrivate(_ st: stat, _ path: String, what: String, groupOrOthers mask: mode_t) throws {
        guard st.st_uid == geteuid() else {
            throw KeychainError(.param, "refusing \(path) as \(what): it belongs to uid \(st.st_uid), not to you")
        }
        guard st.st_mode & mask == 0 else {
            let access = mask & 0o044 != 0 ? "readable or writable" : "writable"
            throw KeychainError(.param, "refusing \(path) as \(what): it is \(access) by group or others (chmod go-rwx)")
        }
    }

    /// A keychain or its folder must belong to the user and be writable by nobody else; a
    /// symbolic link is followed only if it, too, belongs to the user or to root. A sticky
    /// world-writable folder (/tmp) passes only as an ancestor of the keychain's folder.
    static func checkOwnership(_ path: String, isDirectory: Bool, asAncestor: Bool = false) throws {
        var lst = stat()
        guard lstat(path, &lst) == 0 else { throw KeychainError(.noSuchKeychain, "no keychain at \(path)") }
        if lst.st_mode & S_IFMT == S_IFLNK, lst.st_uid != geteuid(), lst.st_uid != 0 {
            throw KeychainError(.param, "refusing \(path): it is a symbolic link owned by another user")
        }
        var st = stat()
        guard stat(path, &st) == 0 else { throw KeychainError(.noSuchKeychain, "no keychain at \(path)") }
        if isDirectory {
            // Parents such as /tmp are shared; only the keychain's own folder has to be private.
            guard st.st_mode & S_IFMT == S_IFDIR else { throw KeychainError(.param, "\(path) is not a folder") }
            if asAncestor, st.st_mode & 0o002 != 0, st.st_mode & S_ISVTX != 0 { return }
        } else {
            guard st.st_mode & S_IFMT == S_IFREG else { throw KeychainError(.param, "refusing \(path): not a regular file") }
        }
        guard st.st_uid == geteuid() else {
            throw KeychainError(.param, "refusing \(path): it belongs to uid \(st.st_uid), not to you")
        }
        guard st.st_mode & 0o022 == 0 else {
            throw KeychainError(.param, "refusing \(path): it is writable by group or others (chmod go-w)")
        }
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let p = String(path[..<slash])
        return p.isEmpty ? "/" : p
    }

    /// Creates the empty file 0600 whatever the umask; fails if something is already there.
    static func createFile(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { throw KeychainError(.duplicateKeychain, "a keychain already exists at \(path)") }
            throw KeychainError(.io, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        fchmod(fd, 0o600)
        close(fd)
    }

    /// Beside a keychain: the public keys of the SSH keys kept in it, for listing while locked.
    package static let sshPublicListSuffix = ".ssh-keys"

    package static func remove(_ path: String) throws {
        try checkOwnership(path, isDirectory: false)
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
        // Its sync clone: the group's state went with the file, and a keychain made again at
        // this path would find the clone in its way.
        PlainFiles.removeTree(path + ".sync")
        unlink(path + ".sync.lock")
        // The SSH agent's public list of the keys kept here (SSHKeyVault): it would list keys that
        // no longer exist, and a keychain made again at this path would list them while locked.
        unlink(path + sshPublicListSuffix)
        unlink(path + sshPublicListSuffix + ".new")
    }
}

extension String {
    func trimmingNewlines() -> String {
        var s = Substring(self)
        while let last = s.last, last == "\n" || last == "\r" || last == " " { s.removeLast() }
        return String(s)
    }
}
