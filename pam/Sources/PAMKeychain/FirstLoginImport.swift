import Glibc
import KWalletItems
import KeychainCore
import SecretServiceItems

/// gnome-keyring's login keyring and KWallet's kdewallet into the login keychain, once, at a
/// login: when the login password has just opened the login keychain and the same password opens
/// ~/.local/share/keyrings/login.keyring (as pam_gnome_keyring unlocks it) or
/// ~/.local/share/kwalletd/kdewallet.kwl (as pam_kwallet5 opens it, with kdewallet.salt beside
/// it), its items come over with no prompt, each as `security import-secrets --keyring` or
/// `--kwallet` brings it (label, attributes, secret, dates; KWallet's folders, entries and types;
/// what is already there is not added again). A file beside the login keychain records, for each,
/// that it was done, so later logins only look for that file.
///
/// Run in the worker, as the user (AsUser): the files are read and written with the user's
/// credentials, never as root following paths the user controls. Bounded: a keyring file larger
/// than `maximumFileSize` is not read, the KDF cost is capped by the reader, and the worker is
/// killed after `timeout` seconds (each source in a worker of its own). An import that did not
/// end with every item in is recorded
/// too (`attempt`: which file, by its identity, and how it ended; written before the items are
/// read, so a worker killed at its time limit leaves it): a keyring that cannot come in at a
/// login (a hostile one, too large to import in the time) would otherwise cost every login the
/// whole time limit. Only a changed file is tried again, once; `security import-secrets
/// --keyring` brings one in by hand. Errors are only logged: a login never waits for it beyond
/// the timeout and never fails because of it.
enum FirstLoginImport {
    static let timeout = 10.0
    /// Keyring and wallet files hold passwords and keys: far less than this.
    static let maximumFileSize = 8 << 20

    /// Where a login's secrets may wait: gnome-keyring's login keyring, KWallet's kdewallet.
    enum Source: UInt8, CaseIterable {
        case gnomeKeyring = 1
        case kwallet = 2

        /// The file imported.
        func file(_ account: AsUser.Account) -> String {
            switch self {
            case .gnomeKeyring: return account.home + "/.local/share/keyrings/login.keyring"
            case .kwallet: return account.home + "/.local/share/kwalletd/kdewallet.kwl"
            }
        }

        /// Written once the file's items came (or were already there): the import is not tried again.
        func record(_ account: AsUser.Account) -> String {
            account.home + "/.local/share/keychains/" + (self == .gnomeKeyring ? ".login-keyring-imported" : ".kdewallet-imported")
        }

        /// Written when an import began and did not end with every item in: the file's identity
        /// on its first line, how it ended on the next. Its import is not run again while the
        /// file is that same file.
        func attempt(_ account: AsUser.Account) -> String { account.home + "/.local/share/keychains/" + attemptName }

        var attemptName: String { self == .gnomeKeyring ? ".login-keyring-tried" : ".kdewallet-tried" }

        /// The file as the log shows it.
        var shownFile: String { self == .gnomeKeyring ? "~/.local/share/keyrings/login.keyring" : "~/.local/share/kwalletd/kdewallet.kwl" }

        /// What the log calls it.
        var name: String { self == .gnomeKeyring ? "gnome-keyring's login keyring" : "KWallet's kdewallet" }

        /// How a user brings it in by hand.
        var byHand: String { "`security import-secrets --\(self == .gnomeKeyring ? "keyring" : "kwallet") \(shownFile)`" }
    }

    /// The sources still to import, as the bits of their raw values (the worker's one-byte reply).
    static func pending(_ account: AsUser.Account) -> UInt8 {
        Source.allCases.reduce(0) { isPending($1, account) ? $0 | $1.rawValue : $0 }
    }

    /// What the worker hands back: items added, already there, failed; or why nothing was done.
    enum Result {
        case nothingToDo
        case wrongPassword
        case failed(String)
        /// The file could not be read: nothing was tried, nothing recorded.
        case unreadable(String)
        case imported(added: Int, alreadyThere: Int, failed: Int)
    }

    /// Whether there is the source's file, no record of its import and no record of an attempt
    /// on this same file. Runs as the user, in the worker of the unlock, so that a login with
    /// nothing to import forks no second worker.
    static func isPending(_ source: Source, _ account: AsUser.Account) -> Bool {
        var st = stat()
        guard lstat(source.record(account), &st) != 0, errno == ENOENT, lstat(source.file(account), &st) == 0 else { return false }
        guard stat(source.file(account), &st) == 0, let tried = readAttempt(source, account) else { return true }
        return tried != identity(st, source)
    }

    /// What tells one file from a later one: its device and inode, size, and times of change
    /// (ctime too, which the user cannot set back).
    static func identity(_ st: stat, _ source: Source) -> String {
        "\(source == .gnomeKeyring ? "keyring" : "kwallet") \(st.st_dev) \(st.st_ino) \(st.st_size) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) \(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
    }

    /// What a source's file holds, read with the login password, ready to import.
    private struct Loaded {
        var items: [(label: String, attributes: [String: String], secret: Bytes, contentType: String, created: UInt64, modified: UInt64)] = []
        var emptyFolders: [String] = []
        var entries: [KWalletEntry] = []
        /// Items of the file that could not be read (the others still come).
        var unreadable = 0

        mutating func wipe() {
            for index in items.indices { items[index].secret.wipe() }
            for index in entries.indices { entries[index].value.wipe() }
        }
    }

    /// Reads the source's file (already in `bytes`) with the password; nil for a wrong password.
    private static func load(_ source: Source, _ bytes: Bytes, _ account: AsUser.Account, password: [UInt8]) throws -> Loaded? {
        var loaded = Loaded()
        switch source {
        case .gnomeKeyring:
            let keyring: GnomeKeyring
            do {
                keyring = try GnomeKeyring.read(bytes, password: password)
            } catch let error as KeychainError where error.code == .authFailed {
                return nil
            }
            loaded.items = keyring.items.map { ($0.label, $0.attributes, $0.secret, KeychainStore.defaultContentType, $0.created, $0.modified) }
            loaded.unreadable = keyring.unreadable.count
        case .kwallet:
            let stem = String(source.file(account).dropLast(".kwl".count))
            var salt = try? read(stem + ".salt", limit: KWalletFile.maximumSaltSize).bytes
            defer { salt?.wipe() }
            var contents: KWalletContents
            do {
                contents = try KWalletFile.read(bytes, password: password, salt: salt)
            } catch KWalletFileError.wrongPassword {
                return nil
            }
            defer { for index in contents.entries.indices { contents.entries[index].value.wipe() } }
            let attributes = try? read(stem + "_attributes.json", limit: maximumFileSize).bytes
            let split = try contents.splitSecretServiceItems(attributesFile: attributes)
            loaded.items = split.items.map { ($0.label, $0.attributes, $0.secret, $0.contentType, $0.created, $0.modified) }
            loaded.emptyFolders = contents.emptyFolders
            loaded.entries = split.entries
        }
        return loaded
    }

    /// Runs in the worker, as the user.
    static func run(_ source: Source, _ account: AsUser.Account, password: [UInt8]) -> Result {
        guard isPending(source, account) else { return .nothingToDo }
        // The login program did not make these items: they keep no list, as another provider's.
        AccessList.addsUnlisted()
        var bytes: [UInt8]
        let file: String
        do {
            let status: stat
            (bytes, status) = try read(source.file(account), limit: maximumFileSize)
            file = identity(status, source)
        } catch {
            return .unreadable("\(error)")
        }
        defer { bytes.wipe() }
        var loaded: Loaded
        do {
            // Not recorded when nil (a wrong password): the KDF's cost is capped, and a later
            // login password may open it.
            guard let opened = try load(source, bytes, account, password: password) else { return .wrongPassword }
            loaded = opened
        } catch {
            return ended(source, account, file, .failed("\(error)"))
        }
        defer { loaded.wipe() }
        // Before the items: a worker killed at its time limit leaves this line as the record.
        writeAttempt(source, account, file, "begun at \(time(nil)); did not end within \(Int(timeout)) s")
        // What fails on this side (the keychain busy with another writer, no randomness) is not
        // the file's doing: not recorded, so that the next login tries again.
        let store: KeychainStore
        var index: SecretImportIndex
        do {
            store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
            index = try SecretImportIndex()
        } catch {
            unlink(source.attempt(account))
            return .failed("\(error)")
        }
        var added = 0, alreadyThere = 0, failed = loaded.unreadable
        func count(_ outcome: () throws -> KeychainStore.ImportOutcome) {
            do {
                switch try outcome() {
                case .added: added += 1
                case .alreadyThere: alreadyThere += 1
                }
            } catch {
                failed += 1
            }
        }
        for folder in loaded.emptyFolders { count { try store.importKWalletFolder(folder) } }
        for entry in loaded.entries { count { try store.importKWalletEntry(entry) } }
        for item in loaded.items {
            count {
                try store.importSecretItem(
                    label: item.label, attributes: item.attributes, secret: item.secret, contentType: item.contentType,
                    created: item.created, modified: item.modified, index: &index)
            }
        }
        let outcome = Result.imported(added: added, alreadyThere: alreadyThere, failed: failed)
        if failed > loaded.unreadable {
            // Items the keychain refused now: the next login tries again (what came is then
            // already there, a look-up each).
            unlink(source.attempt(account))
            return outcome
        }
        // Items of the file that cannot be read: the same file will not do better.
        guard failed == 0 else { return ended(source, account, file, outcome) }
        writeRecord(source, account, "imported \(added + alreadyThere) items of \(source.file(account)) at \(time(nil))\n")
        unlink(source.attempt(account))
        return .imported(added: added, alreadyThere: alreadyThere, failed: failed)
    }

    /// An import that did not bring every item: recorded with how it ended, for this file.
    private static func ended(_ source: Source, _ account: AsUser.Account, _ file: String, _ result: Result) -> Result {
        writeAttempt(source, account, file, "ended at \(time(nil)): " + String(decoding: encode(result), as: UTF8.self))
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

    /// The file's bytes and its status (ForeignFile: no FIFO or device holds the worker), the
    /// error naming the file.
    private static func read(_ path: String, limit: Int) throws -> (bytes: [UInt8], status: stat) {
        do {
            return try ForeignFile.read(path, limit: limit)
        } catch let error as KeychainError {
            throw KeychainError(error.code, "\(path): \(error.detail)")
        }
    }

    /// The identity line of the last attempt's record, if any.
    private static func readAttempt(_ source: Source, _ account: AsUser.Account) -> String? {
        let fd = open(source.attempt(account), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init)
    }

    /// Replaces the attempt's record whole (a new file renamed over it), so a worker killed while
    /// writing leaves the previous one or this one.
    private static func writeAttempt(_ source: Source, _ account: AsUser.Account, _ file: String, _ how: String) {
        let path = source.attempt(account), temporary = source.attempt(account) + ".new"
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
    static func notAgain(_ source: Source) -> String {
        "once begun, it is not tried again at login while the file is unchanged (~/.local/share/keychains/\(source.attemptName)); \(source.byHand) brings it in by hand"
    }

    private static func writeRecord(_ source: Source, _ account: AsUser.Account, _ text: String) {
        let fd = open(source.record(account), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        _ = text.utf8CString.withUnsafeBytes { write(fd, $0.baseAddress, $0.count - 1) }
        close(fd)
    }
}

extension Hooks {
    /// After open_session unlocked (or made) the login keychain with the login password.
    func importAtFirstLogin(_ source: FirstLoginImport.Source, _ account: AsUser.Account, password: [UInt8]) {
        var password = password
        defer { password.wipe() }
        let (outcome, reply) = AsUser.runReplying(account, timeout: FirstLoginImport.timeout) { reply in
            defer { password.wipe() }
            reply(FirstLoginImport.encode(FirstLoginImport.run(source, account, password: password)))
            return .done
        }
        let notAgain = FirstLoginImport.notAgain(source)
        guard outcome == .done, let result = FirstLoginImport.decode(reply) else {
            pam.log(
                LOG_WARNING,
                "open_session: \(source.name) was not imported (\(outcome == .timedOut ? "gave up after \(Int(FirstLoginImport.timeout)) s" : "the worker failed")); \(notAgain)"
            )
            return
        }
        switch result {
        case .nothingToDo:
            break
        case .wrongPassword:
            pam.debug("open_session: \(source.shownFile) does not open with the login password; \(source.byHand) brings it in with its own")
        case .failed(let why):
            pam.log(LOG_WARNING, "open_session: \(source.name) was not imported: \(why); \(notAgain)")
        case .unreadable(let why):
            pam.log(LOG_WARNING, "open_session: \(source.name) was not imported: \(why); the next login tries again")
        case .imported(let added, let alreadyThere, let failed):
            let rest = failed == 0 ? "; done once, not again" : "; \(failed) could not come; \(notAgain)"
            pam.log(LOG_NOTICE, "open_session: \(source.name) imported into the login keychain: \(added) added, \(alreadyThere) already there\(rest)")
        }
    }
}
