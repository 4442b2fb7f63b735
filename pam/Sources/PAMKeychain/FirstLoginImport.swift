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
/// killed after `timeout` seconds (an import cut short is simply done again, idempotently, at the
/// next login, since nothing was recorded). Errors are only logged: a login never waits for it
/// beyond the timeout and never fails because of it.
enum FirstLoginImport {
    static let timeout = 10.0
    /// Keyring files hold passwords and keys: far less than this.
    static let maximumFileSize = 8 << 20

    static func keyring(_ account: AsUser.Account) -> String { account.home + "/.local/share/keyrings/login.keyring" }
    /// Written once the keyring's items came (or were already there): the import is not tried again.
    static func record(_ account: AsUser.Account) -> String { account.home + "/.local/share/keychains/.login-keyring-imported" }

    /// What the worker hands back: items added, already there, failed; or why nothing was done.
    enum Result {
        case nothingToDo
        case wrongPassword
        case failed(String)
        case imported(added: Int, alreadyThere: Int, failed: Int)
    }

    /// Whether there is a keyring file and no record of its import. Runs as the user, in the
    /// worker of the unlock, so that a login with nothing to import forks no second worker.
    static func isPending(_ account: AsUser.Account) -> Bool {
        var st = stat()
        guard lstat(record(account), &st) != 0, errno == ENOENT else { return false }
        return lstat(keyring(account), &st) == 0
    }

    /// Runs in the worker, as the user.
    static func run(_ account: AsUser.Account, password: [UInt8]) -> Result {
        guard isPending(account) else { return .nothingToDo }
        var bytes: [UInt8]
        do {
            bytes = try read(keyring(account))
        } catch {
            return .failed("\(error)")
        }
        defer { bytes.wipe() }
        var loaded: GnomeKeyring
        do {
            loaded = try GnomeKeyring.read(bytes, password: password)
        } catch let error as KeychainError where error.code == .authFailed {
            return .wrongPassword
        } catch {
            return .failed("\(error)")
        }
        defer { for index in loaded.items.indices { loaded.items[index].secret.wipe() } }
        let store: KeychainStore
        do {
            store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
        } catch {
            return .failed("\(error)")
        }
        var added = 0, alreadyThere = 0, failed = loaded.unreadable.count
        for item in loaded.items {
            do {
                switch try store.importSecretItem(
                    label: item.label, attributes: item.attributes, secret: item.secret,
                    created: item.created, modified: item.modified)
                {
                case .added: added += 1
                case .alreadyThere: alreadyThere += 1
                }
            } catch {
                failed += 1
            }
        }
        // Recorded only when everything came: otherwise the next login tries again.
        if failed == 0 { writeRecord(account, "imported \(added + alreadyThere) items of \(keyring(account)) at \(time(nil))\n") }
        return .imported(added: added, alreadyThere: alreadyThere, failed: failed)
    }

    /// The result as the worker's reply: a few ASCII bytes.
    static func encode(_ result: Result) -> [UInt8] {
        switch result {
        case .nothingToDo: return Array("none".utf8)
        case .wrongPassword: return Array("wrong".utf8)
        case .failed(let why): return Array(("failed " + why).utf8.prefix(1024))
        case .imported(let added, let already, let failed): return Array("imported \(added) \(already) \(failed)".utf8)
        }
    }

    static func decode(_ reply: [UInt8]) -> Result? {
        let text = String(decoding: reply, as: UTF8.self)
        if text == "none" { return .nothingToDo }
        if text == "wrong" { return .wrongPassword }
        if text.hasPrefix("failed ") { return .failed(String(text.dropFirst("failed ".count))) }
        let parts = text.split(separator: " ")
        guard parts.count == 4, parts[0] == "imported", let a = Int(parts[1]), let b = Int(parts[2]), let c = Int(parts[3]) else { return nil }
        return .imported(added: a, alreadyThere: b, failed: c)
    }

    private static func read(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { throw KeychainError(.io, "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw KeychainError(.io, "\(path) is not a regular file") }
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
        return bytes
    }

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
                "open_session: gnome-keyring's login keyring was not imported (\(outcome == .timedOut ? "gave up after \(Int(FirstLoginImport.timeout)) s" : "the worker failed")); the next login tries again"
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
            pam.log(LOG_WARNING, "open_session: gnome-keyring's login keyring was not imported: \(why)")
        case .imported(let added, let alreadyThere, let failed):
            let rest = failed == 0 ? "; done once, not again" : "; \(failed) could not come, the next login tries again"
            pam.log(
                LOG_NOTICE, "open_session: gnome-keyring's login keyring imported into the login keychain: \(added) added, \(alreadyThere) already there\(rest)"
            )
        }
    }
}
