import CPAM
import Glibc
import KeychainCore
import KeychainTPMPolicy

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

    /// One line for each outcome, `done` naming what was done when it succeeded: without `debug`,
    /// an administrator still reads in the journal that a keychain was unlocked, locked, created
    /// or re-keyed, as gnome-keyring's module says it unlocked the login keyring.
    private func report(_ outcome: AsUser.Outcome, _ what: String, detail: [UInt8] = [], done: String? = nil) {
        if outcome == .createdUnsealed {
            let text = String(decoding: detail.map { $0 < 0x20 || $0 == 0x7f ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
            pam.log(
                LOG_WARNING,
                "\(what): the new login keychain could not be sealed to the TPM (\(text)); the login password alone protects it (`security tpm-enroll` seals it later)"
            )
            return
        }
        // A worker stopped at the time limit may have written part of its detail: the limit is the news.
        if !detail.isEmpty, outcome != .done, outcome != .timedOut {
            // The engine's own words (a TPM that failed, an older copy of the file), one line.
            let text = String(decoding: detail.map { $0 < 0x20 || $0 == 0x7f ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
            let after =
                outcome == .bootStateChanged
                ? "; the keychain stays locked (`security tpm-enroll --passwordless` seals it to this boot state again)" : ""
            pam.log(outcome == .failed ? LOG_WARNING : LOG_NOTICE, "\(what): \(outcome == .failed ? "failed: " : "")\(text)\(after)")
            return
        }
        switch outcome {
        case .done:
            if let done { pam.log(LOG_NOTICE, "\(what): \(done)") } else { pam.debug("\(what): done") }
        case .unchanged: pam.debug("\(what): nothing to do")
        case .created: pam.log(LOG_NOTICE, "\(what): created and unlocked the login keychain of \(pam.user ?? "?")")
        case .noKeychain: pam.debug("\(what): no login keychain")
        case .wrongPassword: pam.log(LOG_NOTICE, "\(what): the login password does not open the login keychain; \(Remedy.unlock)")
        case .resetPending:
            pam.log(
                LOG_NOTICE,
                "\(what): the login password does not open the login keychain since root reset it; `security unlock-keychain` with the keychain's old password re-keys it to the login password"
            )
        case .locked: pam.log(LOG_NOTICE, "\(what): the keychain is locked")
        case .failed: pam.log(LOG_WARNING, "\(what): failed (see the keychain file and the kernel keyring)")
        case .cannotBecomeUser: pam.log(LOG_WARNING, "\(what): cannot switch to the user's identity")
        case .timedOut: pam.log(LOG_WARNING, "\(what): gave up after the time limit")
        case .cannotFork: pam.log(LOG_WARNING, "\(what): cannot fork")
        case .notEnrolled: pam.debug("\(what): the login keychain has no passwordless unlock")
        case .createdSealed:
            pam.log(
                LOG_NOTICE,
                "\(what): the new login keychain is sealed to the TPM; its recovery key, which a login cannot show, is escrowed to the administrator's key beside it (login.keychain-db.recovery-escrow; `security tpm-escrow` opens it)"
            )
        case .createdUnsealed: break
        case .bootStateChanged:
            pam.log(
                LOG_NOTICE,
                "\(what): this machine's boot state (its PCRs) is not the one the passwordless unlock was sealed to; the keychain stays locked (`security tpm-enroll --passwordless` seals it again)"
            )
        }
    }

    /// Keeps the password, with the user it was typed for, for setcred and open_session, and
    /// nothing else: PAM runs later modules even after a `required` one has rejected the
    /// password, so it is not to be used here.
    func authenticate() -> Int32 {
        pam.stash()
        return PAM_IGNORE
    }

    /// Applications call setcred only after the whole auth stack succeeded, so the stashed password
    /// is now trusted: if the user already has a session and WhenUnlocked is locked (a screen locker
    /// asking), the keychain unlocks at once.
    func setCredentials(flags: Int32) -> Int32 {
        let refresh = Int32(PAM_ESTABLISH_CRED | PAM_REINITIALIZE_CRED | PAM_REFRESH_CRED)
        guard flags & refresh != 0, var token = pam.stashed else { return PAM_IGNORE }
        defer { token.wipe() }
        guard let account = account() else { return PAM_IGNORE }
        let tpm = tpmConfiguration
        let counted = BrokerSessions.count(account)
        let (outcome, detail) = AsUser.runReplying(account) { reply in
            defer { token.wipe() }
            guard counted.map({ Int($0) }) ?? Sessions.count > 0 else { return .unchanged }
            return Self.unlock(account, password: token, create: false, seal: nil, tpm: tpm, reply: reply)
        }
        report(outcome, "setcred", detail: detail, done: "unlocked the login keychain of \(account.name)")
        return PAM_IGNORE
    }

    /// Unlocks (or, with auto_create, creates) the login keychain with the stashed password,
    /// and counts the session. Only the stash is used, never PAM_AUTHTOK itself: after sudo's
    /// pam_set_item(PAM_USER), PAM_AUTHTOK is still the invoking user's password, and nothing
    /// here could tell whose it is.
    func openSession() -> Int32 {
        defer { pam.unstash() }
        guard let account = account() else { return PAM_SUCCESS }
        var token = pam.stashed
        defer { token?.wipe() }
        let create = pam.options.autoCreate
        let seal = pam.options.tpmEnrol
        let tpm = tpmConfiguration
        let escrow = token == nil ? .none : escrowKey
        let countedByBroker = BrokerSessions.opened(account) != nil
        // Two writes: the unlock's outcome and detail as soon as it is done, then whether
        // gnome-keyring's login keyring or KWallet's kdewallet is still to be imported, so that every login after the
        // first forks no second worker, and a check that hangs (a FUSE mount of the user's that
        // never answers) costs this login's import, not the unlock's report.
        let (outcome, reply) = AsUser.runReplying(account) { reply in
            defer { token?.wipe() }
            if !countedByBroker { Sessions.set(Sessions.count + 1) }
            // First, and whatever the password: read as the user, in this worker (no fork more).
            reply([SSHAgentEnvironment.unitEnabled(home: account.home) ? 1 : 0])
            // Not `guard let`: a second reference would make the wipe above copy, not overwrite.
            guard token != nil else { return .unchanged }
            var detail: [UInt8] = []
            let outcome = Self.unlock(account, password: token!, create: create, seal: seal, escrow: escrow, tpm: tpm) {
                detail += $0
            }
            // Now, not when the worker ends: the check below may wait on a mount that never answers.
            token?.wipe()
            reply(UnlockReply.encode(outcome, detail: detail))
            reply([Self.openedWithPassword(outcome) ? FirstLoginImport.pending(account) : 0])
            return outcome
        }
        let agentEnabled = reply.first == 1
        let unlocked = UnlockReply(Array(reply.dropFirst()))
        if outcome == .timedOut, let unlocked {
            // Stopped after the unlock: the login has waited enough, and the import is looked
            // for again at the next login.
            report(unlocked.outcome, "open_session", detail: unlocked.detail, done: "unlocked the login keychain of \(account.name)")
            pam.log(
                LOG_WARNING,
                "open_session: the worker was stopped at the time limit after the unlock; gnome-keyring's login keyring and KWallet's kdewallet are looked for at the next login"
            )
        } else {
            report(outcome, "open_session", detail: unlocked?.detail ?? [], done: "unlocked the login keychain of \(account.name)")
            // The login password opened the login keychain: gnome-keyring's login keyring and
            // KWallet's kdewallet come too, once.
            if Self.openedWithPassword(outcome), token != nil {
                for source in unlocked?.importPending ?? [] { importAtFirstLogin(source, account, password: token!) }
            }
        }
        if token == nil, pam.options.passwordless { unlockWithoutPassword(account) }
        SSHAgentEnvironment.set(pam, for: account, unitEnabled: agentEnabled)
        return PAM_SUCCESS
    }

    /// Whether, after this outcome of open_session, the login password is known to open the login keychain.
    private static func openedWithPassword(_ outcome: AsUser.Outcome) -> Bool {
        switch outcome {
        case .done, .created, .createdSealed, .createdUnsealed: return true
        default: return false
        }
    }

    /// The TPM the workers use: the module's `tpm_tcti=` and `tpm_helper=`, else where every
    /// program looks (the worker's environment is cleared, so it is read here, in the application).
    private var tpmConfiguration: TPMConfiguration {
        var tpm = pam.options.tpmTCTI.map { TPMConfiguration(tcti: $0.isEmpty || $0 == "none" ? nil : $0) } ?? TPMConfiguration.current
        tpm.helper = pam.options.tpmHelper
        // Read as root: a worker, as the user, could not read the kernel's copy, and without it a PCR
        // extended after boot cannot be told from a changed boot chain in the journal.
        tpm.bootLog = BootEventLog.read(pam.options.tpmEventLog ?? BootEventLog.kernelPath)
        return tpm
    }

    /// The administrator's key that a login keychain sealed at its first login escrows its recovery
    /// key to (`tpm_escrow=`, else RecoveryEscrow.machineFile): read here, as root, so that the
    /// checks of its owner hold whatever the worker could read.
    private var escrowKey: EscrowKey {
        let file = pam.options.tpmEscrow ?? RecoveryEscrow.machineFile
        do {
            return try RecoveryEscrow.recipient(file: file).map { .key($0, file: file) } ?? .none
        } catch let error as KeychainError {
            return .unusable(error.detail)
        } catch {
            return .unusable("\(error)")
        }
    }

    /// Services through which one user becomes another: a stack of theirs given `passwordless`
    /// by mistake must not turn `sudo -u alice` or `su alice` into alice's keychain unlocked.
    static let switchingServices: Set<String> = [
        "su", "su-l", "sudo", "sudo-i", "runuser", "runuser-l", "pkexec", "polkit-1", "doas", "systemd-run0", "run0", "ksu"
    ]

    /// Why a passwordless unlock is refused here, or nil. Only a login run by root for its own
    /// purposes qualifies (gdm, login, sshd have real uid 0): a set-user-ID program a user started
    /// (su, sudo, pkexec) has that user's real uid, and PAM_RUSER names someone else.
    private func passwordlessRefusal(_ account: AsUser.Account) -> String? {
        if getuid() != 0 || geteuid() != 0 { return "not run by root (a set-user-ID program such as su or sudo, real uid \(getuid()))" }
        if let service = pam.service, Self.switchingServices.contains(service) { return "\(service) switches users" }
        if let requester = pam.string(PAM_RUSER), !requester.isEmpty, requester != account.name {
            return "requested by \(requester) for \(account.name)"
        }
        return nil
    }

    /// A session opened with no password (the auth stack, a fingerprint or smart-card module or
    /// gdm's autologin, has accepted the user): the login keychain unlocks with its passwordless
    /// copy, if the user enrolled one. In two steps so that root never reads the user's file and
    /// the user never sees the machine's key: a worker (as the user) hands over the sealed box from
    /// the keychain, root opens it with the machine's key and checks it names this user, and a
    /// second worker (as the user) unseals the TPM's half and unlocks. Every failure is logged and
    /// the login goes on.
    private func unlockWithoutPassword(_ account: AsUser.Account) {
        if let refusal = passwordlessRefusal(account) {
            pam.log(LOG_NOTICE, "open_session: passwordless unlock refused: \(refusal)")
            return
        }
        var machine: (public: [UInt8], secret: [UInt8])
        do {
            machine = try MachineKey.loadOrCreate()
        } catch {
            pam.log(LOG_WARNING, "open_session: passwordless unlock: this machine's key: \(error)")
            return
        }
        defer { machine.secret.wipe() }
        let tpm = tpmConfiguration
        let (found, box) = AsUser.runReplying(account) { reply in
            guard KeychainFile.exists(account.loginKeychain) else { return .noKeychain }
            do {
                let store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
                let status = store.status
                if status.whenUnlocked && status.afterFirstUnlock { return .unchanged }
                guard let box = try store.passwordlessBox() else { return .notEnrolled }
                reply(box)
                return .done
            } catch {
                return .failed
            }
        }
        guard found == .done, !box.isEmpty else {
            report(found, "open_session (passwordless)")
            return
        }
        guard var opened = MachineKey.open(box, public: machine.public, secret: machine.secret) else {
            pam.log(LOG_NOTICE, "open_session: the login keychain's passwordless unlock was not made for this machine's key; it stays locked")
            return
        }
        defer { opened.wipe() }
        // Checked here, as root, before anything of it reaches a process of the user's.
        let uid = UInt32(account.uid)
        guard PasswordlessRecord.owner(ofOpened: opened) == uid else {
            pam.log(LOG_WARNING, "open_session: the login keychain holds another user's passwordless unlock; it stays locked")
            return
        }
        let (outcome, detail) = AsUser.runReplying(account) { reply in
            defer { opened.wipe() }
            do {
                let store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
                try store.unlockPasswordless(opened: opened, uid: uid, tpm: tpm)
                return .done
            } catch let error as KeychainError {
                reply(Array(error.detail.utf8.prefix(512)))
                return error.code == .authFailed ? .bootStateChanged : .failed
            } catch {
                return .failed
            }
        }
        report(outcome, "open_session (passwordless)", detail: detail, done: "unlocked the login keychain of \(account.name) with its passwordless copy")
    }

    /// The last session's end locks WhenUnlocked (with lock_on_close, and if the keychain's own
    /// setting agrees); AfterFirstUnlock stays until reboot.
    func closeSession() -> Int32 {
        guard let account = account() else { return PAM_SUCCESS }
        let lockOnClose = pam.options.lockOnClose
        let counted = BrokerSessions.closed(account)
        let outcome = AsUser.run(account) {
            let remaining: Int
            if let counted {
                remaining = Int(counted)
            } else {
                remaining = max(Sessions.count - 1, 0)
                Sessions.set(remaining)
            }
            guard remaining == 0, lockOnClose, KeychainFile.exists(account.loginKeychain) else { return .unchanged }
            do {
                let store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
                guard store.settings.lockOnSessionEnd else { return .unchanged }
                store.lock()
                return .done
            } catch {
                return .failed
            }
        }
        report(
            outcome, "close_session",
            done: "the last session of \(account.name) ended; the login keychain's WhenUnlocked items are locked (AfterFirstUnlock stays until reboot)")
        return PAM_SUCCESS
    }

    /// Re-wraps the keybag from the old password to the new one, atomically. Without the old
    /// password (root's `passwd USER`) the keybag is left as it is, and root leaves the new login
    /// password for the user's next `security unlock-keychain` (see `LoginPasswordReset`).
    /// Never uses the stash: the tokens here are the password stack's own.
    func changePassword(flags: Int32) -> Int32 {
        if flags & PAM_PRELIM_CHECK != 0 { return PAM_SUCCESS }
        guard flags & PAM_UPDATE_AUTHTOK != 0, let account = account() else { return PAM_IGNORE }
        guard var new = pam.authToken else {
            pam.debug("chauthtok: no new password")
            return PAM_IGNORE
        }
        defer { new.wipe() }
        guard var old = pam.oldAuthToken else { return rememberReset(account, password: new) }
        defer { old.wipe() }
        let (outcome, reply) = AsUser.runReplying(account) { reply in
            defer { old.wipe(); new.wipe() }
            guard KeychainFile.exists(account.loginKeychain) else { return .noKeychain }
            do {
                let store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
                do {
                    try store.changePassword(from: old, to: new)
                    return .done
                } catch let error as KeychainError where error.code == .authFailed {
                    reply(Array(store.identifier.utf8))
                    return .wrongPassword
                }
            } catch {
                return .failed
            }
        }
        if outcome == .wrongPassword, !reply.isEmpty,
            followReset(account, keychain: String(decoding: reply, as: UTF8.self), old: old, new: new)
        {
            return PAM_IGNORE
        }
        report(outcome, "chauthtok", done: "the login keychain of \(account.name) is re-keyed to the new password")
        return outcome == .done ? PAM_SUCCESS : PAM_IGNORE
    }

    /// After a reset by root, the user often changes the password root set before the keychain
    /// has followed it (`chage -d 0` forces that at the next login): the password root left then
    /// moves on to the new one, which pam_unix accepted from the user in exchange for it.
    private func followReset(_ account: AsUser.Account, keychain: String, old: [UInt8], new: [UInt8]) -> Bool {
        guard geteuid() == 0, var reset = LoginPasswordReset.left(forUser: account.uid, keychain: keychain) else { return false }
        defer { reset.wipe() }
        guard reset.isPassword(old) else { return false }
        do {
            try LoginPasswordReset(password: new, keychain: keychain, time: reset.time).remember(forUser: account.uid)
            pam.log(
                LOG_NOTICE,
                "chauthtok: the password root set is changed before the login keychain followed it; `security unlock-keychain` now re-keys it to the new one")
        } catch {
            pam.log(LOG_WARNING, "chauthtok: cannot pass the reset on to the new password: \(error)")
        }
        return true
    }

    /// A new password without the old one. Only a root caller sets one that way (pam_unix asks
    /// everyone else for the old password), and only root can leave the key the user's
    /// `security unlock-keychain` trusts; the worker, as the user, only names the keychain.
    private func rememberReset(_ account: AsUser.Account, password: [UInt8]) -> Int32 {
        guard getuid() == 0, geteuid() == 0 else {
            pam.log(LOG_NOTICE, "chauthtok: no old password and not run by root; the login keychain keeps its password")
            return PAM_IGNORE
        }
        let (outcome, reply) = AsUser.runReplying(account) { reply in
            guard KeychainFile.exists(account.loginKeychain) else { return .noKeychain }
            guard let store = try? KeychainStore.open(at: account.loginKeychain, storage: .kernel) else { return .failed }
            reply(Array(store.identifier.utf8))
            return .done
        }
        guard outcome == .done, !reply.isEmpty else {
            report(outcome, "chauthtok")
            return PAM_IGNORE
        }
        let keychain = String(decoding: reply, as: UTF8.self)
        do {
            try LoginPasswordReset(password: password, keychain: keychain).remember(forUser: account.uid)
            pam.log(
                LOG_NOTICE,
                "chauthtok: a reset by root (no old password); the login keychain keeps its password until `security unlock-keychain` re-keys it to the new login password (within \(LoginPasswordReset.lifetime / 3600) hours)"
            )
        } catch {
            pam.log(LOG_WARNING, "chauthtok: a reset by root (no old password); cannot leave the new password for `security unlock-keychain`: \(error)")
        }
        return PAM_IGNORE
    }

    /// Runs as the user, in the child. A password that does not open the keychain changes
    /// nothing: it may be a separate keychain password the user chose. A keychain made here is
    /// sealed to the TPM when `seal` (the module's tpm_enroll or no_tpm_enroll), else the user's
    /// or the machine's default, says so, and `escrow` is a key to escrow its recovery key to (it
    /// cannot be shown at a login): then wiped, the keychain marked for `security tpm-status`.
    /// Sealing that fails, or no escrow key, leaves the keychain made with the password alone:
    /// the login never waits on the TPM's account.
    static func unlock(
        _ account: AsUser.Account, password: [UInt8], create: Bool, seal: Bool?, escrow: EscrowKey = .none, tpm: TPMConfiguration,
        reply: ([UInt8]) -> Void
    ) -> AsUser.Outcome {
        do {
            guard KeychainFile.exists(account.loginKeychain) else {
                guard create else { return .noKeychain }
                let store = try KeychainStore.create(at: account.loginKeychain, password: password, storage: .kernel)
                guard seal ?? TPMEnrolDefault.effective else { return .created }
                // A recovery key cannot be shown at a login: without an escrow, a keychain sealed
                // here would be lost to anyone who clears the TPM or sets its owner authorization.
                let recipient: [UInt8]
                switch escrow {
                case .key(let key, _): recipient = key
                case .none:
                    reply(
                        Array(
                            "no recovery escrow key is configured (\(RecoveryEscrow.machineFile) or tpm_escrow=), and its recovery key cannot be shown at a login"
                                .utf8))
                    return .createdUnsealed
                case .unusable(let why):
                    reply(Array("the recovery escrow key cannot be used: \(why)".utf8.prefix(512)))
                    return .createdUnsealed
                }
                do {
                    var recovery = try store.sealToTPM(password: password, tpm: tpm)
                    defer { recovery.wipe() }
                    do {
                        try store.escrowRecoveryKey(recovery, to: recipient)
                    } catch {
                        // Not sealed without its way back: the password alone again, as if the TPM had failed.
                        try store.unsealFromTPM(password: password, tpm: tpm)
                        throw error
                    }
                    try? store.setRecoveryKeyUnshown(true)
                    return .createdSealed
                } catch let error as KeychainError {
                    reply(Array(error.detail.utf8.prefix(512)))
                    return .createdUnsealed
                } catch {
                    reply(Array("\(error)".utf8.prefix(512)))
                    return .createdUnsealed
                }
            }
            let store = try KeychainStore.open(at: account.loginKeychain, storage: .kernel)
            do {
                try store.unlock(password: password, tpm: tpm)
                // The login password opens it: a reset left for this keychain has nothing left to do.
                store.discardLoginPasswordReset()
                // Sealed at a first login before the machine had an escrow key: its way back now.
                if case .key(let recipient, _) = escrow { _ = try? store.escrowUnshownRecoveryKey(to: recipient) }
                return .done
            } catch let error as KeychainError where error.code == .authFailed {
                return store.hasPendingLoginPasswordReset ? .resetPending : .wrongPassword
            }
        } catch let error as KeychainError {
            // Said as the engine says it: a TPM that failed or is locked out, an older copy of the file.
            reply(Array(error.detail.utf8.prefix(512)))
            return .failed
        } catch {
            return .failed
        }
    }
}

/// The escrow key a first login's sealed keychain needs, as root read it.
enum EscrowKey {
    case key([UInt8], file: String)
    /// None configured.
    case none
    /// Configured, but not a key only root can change: nothing is escrowed to it.
    case unusable(String)
}
