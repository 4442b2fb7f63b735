import CPAM
import Glibc
import KeychainCore

/// What each PAM call does. None of them ever fails a login or a password change: problems are
/// logged in one line and the call answers PAM_IGNORE or PAM_SUCCESS.
struct Hooks {
    let pam: PAMHandle

    private func account() -> AsUser.Account? {
        guard let name = pam.user, let account = AsUser.Account(name: name) else {
            pam.log(LOG_NOTICE, "no such user; nothing to do")
            return nil
        }
        return account
    }

    private func report(_ outcome: AsUser.Outcome, _ what: String) {
        switch outcome {
        case .done: pam.debug("\(what): done")
        case .noKeychain: pam.debug("\(what): no login keychain")
        case .wrongPassword: pam.log(LOG_NOTICE, "\(what): the login password does not open the login keychain; run `security unlock-keychain`")
        case .locked: pam.log(LOG_NOTICE, "\(what): the keychain is locked")
        case .failed: pam.log(LOG_WARNING, "\(what): failed (see the keychain file and the kernel keyring)")
        case .cannotBecomeUser: pam.log(LOG_WARNING, "\(what): cannot switch to the user's identity")
        case .timedOut: pam.log(LOG_WARNING, "\(what): gave up after the time limit")
        case .cannotFork: pam.log(LOG_WARNING, "\(what): cannot fork")
        }
    }

    /// Keeps the password for setcred and open_session, and nothing else: PAM runs later modules
    /// even after a `required` one has rejected the password, so it is not to be used here.
    func authenticate() -> Int32 {
        guard let token = pam.authToken else {
            pam.debug("authenticate: no password from an earlier module")
            return PAM_IGNORE
        }
        pam.stash(token)
        return PAM_IGNORE
    }

    /// Applications call setcred only after the whole auth stack succeeded, so the stashed password
    /// is now trusted: if the user already has a session and WhenUnlocked is locked (a screen locker
    /// asking), the keychain unlocks at once.
    func setCredentials(flags: Int32) -> Int32 {
        let refresh = Int32(PAM_ESTABLISH_CRED | PAM_REINITIALIZE_CRED | PAM_REFRESH_CRED)
        guard flags & refresh != 0, let token = pam.stashed, let account = account() else { return PAM_IGNORE }
        let outcome = AsUser.run(account) {
            guard Sessions.count > 0 else { return .done }
            return Self.unlock(account, password: token, create: false, rememberOnMismatch: false)
        }
        report(outcome, "setcred")
        return PAM_IGNORE
    }

    /// Unlocks (or, with auto_create, creates) the login keychain with the stashed password,
    /// and counts the session.
    func openSession() -> Int32 {
        defer { pam.unstash() }
        guard let account = account() else { return PAM_SUCCESS }
        let token = pam.stashed ?? pam.authToken
        let create = pam.options.autoCreate
        let outcome = AsUser.run(account) {
            Sessions.set(Sessions.count + 1)
            guard let token else { return .done }
            return Self.unlock(account, password: token, create: create, rememberOnMismatch: true)
        }
        report(outcome, "open_session")
        return PAM_SUCCESS
    }

    /// The last session's end locks WhenUnlocked (with lock_on_close, and if the keychain's own
    /// setting agrees); AfterFirstUnlock stays until reboot.
    func closeSession() -> Int32 {
        guard let account = account() else { return PAM_SUCCESS }
        let lockOnClose = pam.options.lockOnClose
        let outcome = AsUser.run(account) {
            let remaining = max(Sessions.count - 1, 0)
            Sessions.set(remaining)
            guard remaining == 0, lockOnClose, KeychainFile.exists(account.loginKeychain) else { return .done }
            do {
                let store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
                if store.settings.lockOnSessionEnd { store.lock() }
                return .done
            } catch {
                return .failed
            }
        }
        report(outcome, "close_session")
        return PAM_SUCCESS
    }

    /// Re-wraps the keybag from the old password to the new one, atomically. Without the old
    /// password (a reset by root) the keybag is left as it is.
    func changePassword(flags: Int32) -> Int32 {
        if flags & PAM_PRELIM_CHECK != 0 { return PAM_SUCCESS }
        guard flags & PAM_UPDATE_AUTHTOK != 0, let account = account() else { return PAM_IGNORE }
        guard let new = pam.authToken else {
            pam.debug("chauthtok: no new password")
            return PAM_IGNORE
        }
        guard let old = pam.oldAuthToken else {
            pam.log(LOG_NOTICE, "chauthtok: no old password (a reset by root?); the login keychain keeps its password until `security unlock-keychain`")
            return PAM_IGNORE
        }
        let outcome = AsUser.run(account) {
            guard KeychainFile.exists(account.loginKeychain) else { return .noKeychain }
            do {
                try KeychainStore.open(at: account.loginKeychain, storage: .kernel).changePassword(from: old, to: new)
                return .done
            } catch let error as KeychainError where error.code == .authFailed {
                return .wrongPassword
            } catch {
                return .failed
            }
        }
        report(outcome, "chauthtok")
        return outcome == .done ? PAM_SUCCESS : PAM_IGNORE
    }

    /// Runs as the user, in the child.
    static func unlock(_ account: AsUser.Account, password: [UInt8], create: Bool, rememberOnMismatch: Bool) -> AsUser.Outcome {
        do {
            guard KeychainFile.exists(account.loginKeychain) else {
                guard create else { return .noKeychain }
                _ = try KeychainStore.create(at: account.loginKeychain, password: password, storage: .kernel)
                return .done
            }
            let store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
            do {
                try store.unlock(password: password)
                return .done
            } catch let error as KeychainError where error.code == .authFailed {
                if rememberOnMismatch { try? store.rememberLoginPassword(password) }
                return .wrongPassword
            }
        } catch {
            return .failed
        }
    }
}
