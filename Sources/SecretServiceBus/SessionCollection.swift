import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus

/// The `session` collection (libsecret's SECRET_COLLECTION_SESSION, which gnome-keyring has too):
/// items a client wants kept only while the service runs, found at collection/session and through
/// the `session` alias. They live in a keychain of the service's own, outside the keychains folder
/// (so `security` never lists it), sealed under a random password that only this process's memory
/// holds: when the service is gone, the file can no longer be opened, and it is removed.
package enum SessionCollection {
    package static let name = "session"
    private static let prefix = "keychain-session-"

    /// $XDG_RUNTIME_DIR (the user's own tmpfs, emptied at logout), else /tmp.
    private static let parent: String = {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") { return runtime }
        return "/tmp"
    }()
    /// One folder per run, made by mkdtemp (0700, a name nobody can claim first in a shared /tmp);
    /// the pid in its name tells a later run whose leftovers it is.
    private static let folder: String? = {
        var template = Array("\(parent)/\(prefix)\(getpid())-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            folderError = String(cString: strerror(errno))
            return nil
        }
        return String(cString: made)
    }()
    private static var folderError = ""
    /// Where the keychain goes (the name matters only when `folder` exists: makeStore refuses otherwise).
    static var file: String { (folder ?? parent) + "/session.keychain-db" }

    /// Makes the keychain on first use; the leftovers of runs that died without removing theirs go
    /// first.
    static func makeStore() throws -> KeychainStore {
        guard folder != nil else {
            throw ServiceError.failed("cannot make a folder for the session collection in \(parent): \(folderError)")
        }
        removeLeftovers()
        return try KeychainStore.createEphemeral(at: file)
    }

    /// On the way out: the file cannot be opened without this process anyway; this removes it.
    package static func remove() {
        if let folder { remove(folder) }
    }

    private static func remove(_ folder: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(folder + "/session.keychain-db" + suffix) }
        rmdir(folder)
    }

    /// Folders of this user's earlier runs whose process no longer exists.
    private static func removeLeftovers() {
        guard let dir = opendir(parent) else { return }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            guard name.hasPrefix(prefix), let pid = pid_t(name.dropFirst(prefix.count).prefix(while: { $0 != "-" })),
                pid != getpid()
            else { continue }
            var info = stat()
            guard lstat(parent + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else { continue }
            if kill(pid, 0) == -1 && errno == ESRCH { remove(parent + "/" + name) }
        }
    }
}
