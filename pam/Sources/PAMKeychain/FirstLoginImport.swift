import Glibc
import KeychainCore
import SecretServiceItems

/// gnome-keyring's login keyring into the login keychain, once, at a login: when the login
/// password has just opened the login keychain and the same password opens
/// ~/.local/share/keyrings/login.keyring (as pam_gnome_keyring unlocks it), its items come over
/// with no prompt, each as `security import-secrets --keyring` brings it (label, attributes,
/// secret, dates; what is already there is not added again). A file beside the login keychain
/// records that it was done, so later logins only look for that file.
///
/// Run in the worker, as the user (AsUser): the files are read and written with the user's
/// credentials, never as root following paths the user controls. Bounded: a keyring file larger
/// than `maximumFileSize` is not read, the KDF cost is capped by the reader, and the worker is
/// killed after `timeout` seconds. An import that did not end with every item in is recorded
/// too (`attempt`: which file, by its identity, and how it ended; written before the items are
/// read, so a worker killed at its time limit leaves it): a keyring that cannot come in at a
/// login (a hostile one, too large to import in the time) would otherwise cost every login the
/// whole time limit. Only a changed file is tried again, once; `security import-secrets
/// --keyring` brings one in by hand. Errors are only logged: a login never waits for it beyond
/// the timeout and never fails because of it.
enum FirstLoginImport {
    static let timeout = 10.0
    /// Keyring files hold passwords and keys: far less than this.
    static let maximumFileSize = 8 << 20

    static func keyring(_ account: AsUser.Account) -> String { account.home + "/.local/share/keyrings/login.keyring" }
    /// Written once the keyring's items came (or were already there): the import is not tried again.
    static func record(_ account: AsUser.Account) -> String { account.home + "/.local/share/keychains/.login-keyring-imported" }
    /// Written when an import began and did not end with every item in: the keyring file's
    /// identity on its first line, how it ended on the next. Its import is not run again while
    /// the file is that same file.
    static func attempt(_ account: AsUser.Account) -> String { account.home + "/.local/share/keychains/.login-keyring-tried" }

    /// What the worker hands back: items added, already there, failed; or why nothing was done.
    enum Result {
        case nothingToDo
        case wrongPassword
        case failed(String)
        /// The file could not be read: nothing was tried, nothing recorded.
        case unreadable(String)
        case imported(added: Int, alreadyThere: Int, failed: Int)
    }

    /// Whether there is a keyring file, no record of its import and no record of an attempt on
    /// this same file. Runs as the user, in the worker of the unlock, so that a login with nothing
    /// to import forks no second worker.
    static func isPending(_ account: AsUser.Account) -> Bool {
        var st = stat()
        guard lstat(record(account), &st) != 0, errno == ENOENT, lstat(keyring(account), &st) == 0 else { return false }
        guard stat(keyring(account), &st) == 0, let tried = readAttempt(account) else { return true }
        return tried != identity(st)
    }

    /// What tells one keyring file from a later one: its device and inode, size, and times of
    /// change (ctime too, which the user cannot set back).
    static func identity(_ st: stat) -> String {
        "keyring \(st.st_dev) \(st.st_ino) \(st.st_size) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) \(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
    }

    /// Runs in the worker, as the user.
    static func run(_ account: AsUser.Account, password: [UInt8]) -> Result {
        guard isPending(account) else { return .nothingToDo }
        var bytes: [UInt8]
        let file: String
        do {
            (bytes, file) = try read(keyring(account))
        } catch {
            return .unreadable("\(error)")
        }
        defer { bytes.wipe() }
        var loaded: GnomeKeyring
        do {
            loaded = try GnomeKeyring.read(bytes, password: password)
        } catch let error as KeychainError where error.code == .authFailed {
            // Not recorded: the KDF's cost is capped, and a later login password may open it.
            return .wrongPassword
        } catch {
            return ended(account, file, .failed("\(error)"))
        }
        defer { for index in loaded.items.indices { loaded.items[index].secret.wipe() } }
        // Before the items: a worker killed at its time limit leaves this line as the record.
        writeAttempt(account, file, "begun at \(time(nil)); did not end within \(Int(timeout)) s")
        // What fails on this side (the keychain busy with another writer, no randomness) is not
        // the file's doing: not recorded, so that the next login tries again.
        let store: KeychainStore
        var index: SecretImportIndex
        do {
            store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
            index = try SecretImportIndex()
        } catch {
            unlink(attempt(account))
            return .failed("\(error)")
        }
        var added = 0, alreadyThere = 0, failed = loaded.unreadable.count
        for item in loaded.items {
            do {
                switch try store.importSecretItem(
                    label: item.label, attributes: item.attributes, secret: item.secret,
                    created: item.created, modified: item.modified, index: &index)
                {
                case .added: added += 1
                case .alreadyThere: alreadyThere += 1
                }
            } catch {
                failed += 1
            }
        }
        let outcome = Result.imported(added: added, alreadyThere: alreadyThere, failed: failed)
        if failed > loaded.unreadable.count {
            // Items the keychain refused now: the next login tries again (what came is then
            // already there, a look-up each).
            unlink(attempt(account))
            return outcome
        }
        // Items of the file that cannot be read: the same file will not do better.
        guard failed == 0 else { return ended(account, file, outcome) }
        writeRecord(account, "imported \(added + alreadyThere) items of \(keyring(account)) at \(time(nil))\n")
        unlink(attempt(account))
        return .imported(added: added, alreadyThere: alreadyThere, failed: failed)
    }

    /// An import that did not bring every item: recorded with how it ended, for this file.
    private static func ended(_ account: AsUser.Account, _ file: String, _ result: Result) -> Result {
        writeAttempt(account, file, "ended at \(time(nil)): " + String(decoding: encode(result), as: UTF8.self))
        return result
    }

    /// The result as the worker's reply: a few ASCII bytes.
    static func encode(_ result: Result) -> [UInt8] {
        switch result {
        case .nothingToDo: return Array("none".utf8)
        case .wrongPassword: return Array("wrong".utf8)
        case .failed(let why): return Array(("failed " + why).utf8.prefix(1024))
        case .unreadable(let why): return Array(("unreadable " + why).utf8.prefix(1024))
        case .imported(let added, let already, let failed): return Array("imported \(added) \(already) \(failed)".utf8)
        }
    }

    static func decode(_ reply: [UInt8]) -> Result? {
        let text = String(decoding: reply, as: UTF8.self)
        if text == "none" { return .nothingToDo }
        if text == "wrong" { return .wrongPassword }
        if text.hasPrefix("failed ") { return .failed(String(text.dropFirst("failed ".count))) }
        if text.hasPrefix("unreadable ") { return .unreadable(String(text.dropFirst("unreadable ".count))) }
        let parts = text.split(separator: " ")
        guard parts.count == 4, parts[0] == "imported", let a = Int(parts[1]), let b = Int(parts[2]), let c = Int(parts[3]) else { return nil }
        return .imported(added: a, alreadyThere: b, failed: c)
    }

    /// The file's bytes and its identity, both from the one descriptor read.
    private static func read(_ path: String) throws -> (bytes: [UInt8], identity: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { throw KeychainError(.io, "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw KeychainError(.io, "\(path) is not a regular file") }
        let file = identity(st)
        guard st.st_size <= maximumFileSize else { throw KeychainError.decode("\(path) is larger than \(maximumFileSize >> 20) MiB") }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        if done < bytes.count {
            bytes.withUnsafeMutableBytes { _ = memset($0.baseAddress! + done, 0, $0.count - done) }
            bytes.removeLast(bytes.count - done)
        }
        return (bytes, file)
    }

    /// The identity line of the last attempt's record, if any.
    private static func readAttempt(_ account: AsUser.Account) -> String? {
        let fd = open(attempt(account), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init)
    }

    /// Replaces the attempt's record whole (a new file renamed over it), so a worker killed while
    /// writing leaves the previous one or this one.
    private static func writeAttempt(_ account: AsUser.Account, _ file: String, _ how: String) {
        let path = attempt(account), temporary = attempt(account) + ".new"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let text = file + "\n" + how + "\n"
        let written = text.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
        let synced = fsync(fd) == 0
        close(fd)
        if written == text.utf8.count, synced { rename(temporary, path) } else { unlink(temporary) }
    }

    /// What the log says of an import that did not end with every item in.
    static let notAgain =
        "once begun, it is not tried again at login while the file is unchanged (~/.local/share/keychains/.login-keyring-tried); `security import-secrets --keyring ~/.local/share/keyrings/login.keyring` brings it in by hand"

    private static func writeRecord(_ account: AsUser.Account, _ text: String) {
        let fd = open(record(account), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        _ = text.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
        close(fd)
    }
}

extension Hooks {
    /// After open_session unlocked (or made) the login keychain with the login password.
    func importLoginKeyring(_ account: AsUser.Account, password: [UInt8]) {
        var password = password
        defer { password.wipe() }
        let (outcome, reply) = AsUser.runReplying(account, timeout: FirstLoginImport.timeout) { reply in
            defer { password.wipe() }
            reply(FirstLoginImport.encode(FirstLoginImport.run(account, password: password)))
            return .done
        }
        guard outcome == .done, let result = FirstLoginImport.decode(reply) else {
            pam.log(
                LOG_WARNING,
                "open_session: gnome-keyring's login keyring was not imported (\(outcome == .timedOut ? "gave up after \(Int(FirstLoginImport.timeout)) s" : "the worker failed")); \(FirstLoginImport.notAgain)"
            )
            return
        }
        switch result {
        case .nothingToDo:
            break
        case .wrongPassword:
            pam.debug(
                "open_session: ~/.local/share/keyrings/login.keyring does not open with the login password; `security import-secrets --keyrings` brings it in with its own"
            )
        case .failed(let why):
            pam.log(LOG_WARNING, "open_session: gnome-keyring's login keyring was not imported: \(why); \(FirstLoginImport.notAgain)")
        case .unreadable(let why):
            pam.log(LOG_WARNING, "open_session: gnome-keyring's login keyring was not imported: \(why); the next login tries again")
        case .imported(let added, let alreadyThere, let failed):
            let rest = failed == 0 ? "; done once, not again" : "; \(failed) could not come; \(FirstLoginImport.notAgain)"
            pam.log(
                LOG_NOTICE, "open_session: gnome-keyring's login keyring imported into the login keychain: \(added) added, \(alreadyThere) already there\(rest)"
            )
        }
    }
}
