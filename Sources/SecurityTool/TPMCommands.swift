import ArgumentParser
import Glibc
import KeychainCore
import KeychainTPMPolicy

// Sealing a keychain to this machine's TPM 2.0 (Sources/KeychainCore/TPM): the password then
// opens it only together with a secret that this TPM releases for that password, counting each
// wrong guess; a copy of the file elsewhere cannot be attacked at all. The TPM is
// $KEYCHAIN_TPM_TCTI (a tpm2-tss TCTI string; "none" for none) or /dev/tpmrm0.

struct TPMEnroll: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm-enroll",
        abstract: "Seal a keychain to this machine's TPM; prints its recovery key, once.",
        discussion: """
            The key that unwraps the keychain's class keys then needs the password and a secret sealed \
            in this TPM, released only for that password: the TPM checks each guess and counts the \
            wrong ones towards its dictionary-attack lockout, and a copy of the file on another machine \
            cannot be attacked at all. The recovery key printed (8 groups of 6 digits, 128 bits) opens \
            the keychain without the TPM (`security tpm-recover`), all but its ThisDeviceOnly items, \
            which stay bound to this TPM alone. It is shown only this once: write it down, away from \
            this machine.

            With --passwordless (on a keychain sealed already, or sealed now), a second copy of its \
            keys is sealed in this TPM to this machine's boot state (PCR 7, or --pcrs) and to this \
            machine's key, which only root can read: pam_keychain's passwordless option then unlocks \
            it at a login that carried no password (fingerprint, smart card, autologin). The trade: root \
            on this machine, booted this way, could unlock it without the password; another user, a \
            stolen disk or the disk booted elsewhere cannot. `tpm-unenroll --passwordless` removes it.

            With --pcrs and without --passwordless, the keychain's own sealed secret is also sealed to \
            the current values of those PCRs (SHA-256 bank; 7 is the Secure Boot state, 0, 2 and 4 the \
            firmware, option ROMs and boot loader): the password still counts towards the TPM's \
            lockout, and a boot chain that changed them (a firmware, boot loader or Secure Boot update \
            too) is refused with exit 255, counting no wrong password, until the recovery key opens it. \
            On a keychain sealed already it seals it again to those PCRs' values now (--pcrs none: to \
            none), with its password; the recovery key stays the same. Off by default.

            --default on|off sets whether keychains made from now on (`security create-keychain` \
            without --tpm or --no-tpm, pam_keychain's auto_create at a first login) are sealed at \
            creation, for this user ($XDG_CONFIG_HOME/keychain/tpm-enroll); --default system drops \
            that choice for the machine's (/etc/keychain/tpm-enroll, "on" or "off", else off); \
            --default show says which applies. It seals nothing now.
            """)

    @Option(
        name: .customShort("p"), parsing: .unconditional, help: "The keychain's password (visible to other processes; prefer the prompt or standard input).")
    var password: String?
    @Flag(help: "Also let logins without a password (pam_keychain's passwordless option) unlock it on this machine.")
    var passwordless = false
    @Option(
        help:
            "The PCRs (SHA-256 bank) to seal to, such as 7 or 0,2,7: with --passwordless its copy (default 7); without, the keychain itself (default none; `none` on a sealed keychain drops them)."
    )
    var pcrs: String?
    @Option(name: .customLong("default"), help: "on, off, system or show: whether new keychains are sealed at creation (seals nothing now).")
    var newKeychains: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        if let newKeychains {
            guard password == nil, !passwordless, pcrs == nil, target.keychain == nil else {
                throw ValidationError("--default takes no keychain, password or other option")
            }
            try perform("tpm-enroll --default") {
                switch newKeychains {
                case "on": try TPMEnrolDefault.set(true)
                case "off": try TPMEnrolDefault.set(false)
                case "system": try TPMEnrolDefault.set(nil)
                case "show": break
                default: throw KeychainError.param("--default: on, off, system or show")
                }
                Terminal.out(tpmDefaultSummary())
            }
            return
        }
        let selection = pcrs == "none" && !passwordless ? [] : try parsedPCRs(pcrs)
        try perform(target.path) {
            let store = try target.open()
            // Before the password is asked: without the machine's key there is nothing to do.
            let machineKey = try passwordless ? MachineKey.publicKey() : nil
            var secret = try keychainPassword(password, of: store)
            defer { secret.wipe() }
            // Without --passwordless, --pcrs is the keychain's own: sealed now, or sealed again.
            let ownPCRs = passwordless ? [] : selection ?? []
            if !passwordless, let selection, store.isSealedToTPM {
                try store.resealToTPM(password: secret, pcrs: selection)
                discardPreviousKeybags(of: store)
                Terminal.error(
                    selection.isEmpty
                        ? "security: \(store.path) is sealed to this machine's TPM again, to no PCRs: a changed boot chain no longer refuses it; its recovery key is unchanged"
                        : "security: \(store.path) is sealed to this machine's TPM again, and to PCR \(PCRSelection.describe(selection)) as they are now: a boot chain that changes them is refused until its recovery key opens it (unchanged)"
                )
            } else if !(passwordless && store.isSealedToTPM) {
                var recovery = try store.sealToTPM(password: secret, pcrs: ownPCRs)
                discardPreviousKeybags(of: store)
                defer { recovery.wipe() }
                try? store.setRecoveryKeyUnshown(false)
                showRecoveryKey(&recovery)
                escrowNewRecoveryKey(recovery, of: store)
                if let warning = store.tpmStatus().tpm.flatMap(tpmHierarchyWarning) { Terminal.error("security: warning: TPM " + warning) }
                Terminal.error(
                    "security: \(store.path) is sealed to this machine's TPM (\(TPMConfiguration.current.tcti ?? "?"))\(ownPCRs.isEmpty ? "" : " and to PCR \(PCRSelection.describe(ownPCRs)) as they are now (a boot chain that changes them is refused until the recovery key opens it)"); the recovery key above is shown only this once: keep it away from this machine (it opens the keychain without the TPM, all but its ThisDeviceOnly items)"
                )
            }
            if let machineKey {
                let chosen = selection ?? PCRSelection.standard
                try store.enrolPasswordless(password: secret, machineKey: machineKey, uid: getuid(), pcrs: chosen)
                Terminal.error(
                    "security: logins without a password (pam_keychain's passwordless option) now unlock \(store.path) on this machine while PCR \(PCRSelection.describe(chosen)) keep their values; root here could unlock it too"
                )
            }
        }
    }
}

/// What `tpm-enroll --default` and `tpm-status` say of new keychains.
func tpmDefaultSummary() -> String {
    let effective = TPMEnrolDefault.effective
    let source =
        TPMEnrolDefault.user() != nil
        ? "your choice, `security tpm-enroll --default`"
        : TPMEnrolDefault.machine() != nil ? "this machine's default, \(TPMEnrolDefault.machineFile)" : "not set"
    return "new keychains:   "
        + (effective ? "sealed to the TPM at creation" : "protected by their password alone at creation") + " (\(source))"
}

/// The one line `security status` gives the passwordless unlock.
func passwordlessSummary(_ status: PasswordlessStatus?) -> String {
    guard let status else { return "off (a login without a password leaves this keychain locked)" }
    guard status.current else { return "stale: made for other keys (`security tpm-enroll --passwordless` again)" }
    if let machine = try? MachineKey.publicKey(), machine != status.machineKey {
        return "stale: sealed to a machine key that is no longer this machine's (`security tpm-enroll --passwordless` again)"
    }
    return "on: a login without a password through pam_keychain's passwordless option unlocks it (sealed to PCR \(PCRSelection.describe(status.pcrs)))"
}

/// After a command that wrapped the class keys anew (or removed the passwordless unlock): no
/// keybag from before should stay in the write-ahead log. The engine waited a second for other
/// programs' reads to move on; a command can wait longer, and says so when even that was not enough.
func discardPreviousKeybags(of store: KeychainStore) {
    guard store.previousKeybagsLinger, !store.withLock({ store.discardPreviousKeybags(waitingAtMost: 10_000) }) else { return }
    Terminal.error(
        "security: warning: another program still reads an older state of \(store.path), so its write-ahead log (\(store.path)-wal) still holds the keys as they were wrapped before this change; the log is emptied when the last program using the keychain closes it"
    )
}

/// After a new recovery key was shown: escrowed too, where the machine has an escrow key (or
/// the keychain's escrow named one). The key was shown, so a failure here is a warning.
func escrowNewRecoveryKey(_ key: RecoveryKey, of store: KeychainStore) {
    do {
        guard let recipient = try store.escrowRecoveryKeyIfConfigured(key) else { return }
        Terminal.error(
            "security: the recovery key is also escrowed to the administrator's key \(RecoveryEscrow.fingerprint(recipient)) in \(RecoveryEscrow.file(for: store.path))"
        )
    } catch let error as KeychainError {
        Terminal.error("security: warning: the recovery key could not be escrowed: \(error.detail)")
    } catch {
        Terminal.error("security: warning: the recovery key could not be escrowed: \(error)")
    }
}

/// The recovery key on standard output, its own line, for the person (or a script) to keep.
func showRecoveryKey(_ key: inout RecoveryKey) {
    var text = key.formattedBytes
    defer { text.wipe() }
    Terminal.out("recovery key: ", terminator: "")
    Terminal.write(text)
    Terminal.out("")
    fflush(stdout)
}

struct TPMUnenroll: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm-unenroll",
        abstract: "Remove a keychain's TPM binding: its password alone opens it again.",
        discussion: """
            Needs the password (checked by the TPM). The keychain goes back to the format of one never \
            sealed, its ThisDeviceOnly items kept; its recovery key and its passwordless unlock open \
            nothing in this file any more. With --passwordless, only the passwordless unlock is removed \
            (no password needed): logins without a password leave the keychain locked again. Neither \
            changes the class keys: a copy of the file made before (a backup, a snapshot) still carries \
            the recovery key's and the passwordless unlock's wrapping of them, which open this file's \
            items too, until `security set-keychain-password --rotate-keys` gives it new keys.
            """)

    @Option(
        name: .customShort("p"), parsing: .unconditional, help: "The keychain's password (visible to other processes; prefer the prompt or standard input).")
    var password: String?
    @Flag(help: "Remove only the passwordless unlock; the keychain stays sealed to the TPM.")
    var passwordless = false
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            if passwordless {
                let removed = try store.removePasswordless()
                discardPreviousKeybags(of: store)
                Terminal.error(
                    removed
                        ? "security: \(store.path) has no passwordless unlock any more: logins without a password leave it locked; copies of the file made while it was on (backups, snapshots) still let root here unlock its keys until `security set-keychain-password --rotate-keys`"
                        : "security: \(store.path) had no passwordless unlock")
                return
            }
            var secret = try keychainPassword(password, of: store)
            defer { secret.wipe() }
            try store.unsealFromTPM(password: secret)
            try? store.setRecoveryKeyUnshown(false)
            store.removeRecoveryEscrow()
            Terminal.error("security: \(store.path) is no longer sealed to a TPM; its password alone opens it")
        }
    }
}

struct TPMRecover: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm-recover",
        abstract: "Open a TPM-sealed keychain with its recovery key, set its password, seal it to the TPM here.",
        discussion: """
            For a keychain whose TPM is gone (another machine, a new mainboard, a cleared TPM) or whose \
            password is forgotten. The recovery key is read first (terminal or the first line of standard \
            input), then the new password (the next line). Its ThisDeviceOnly items were bound to the old \
            TPM alone: they are deleted, and counted. The keychain is then sealed to the TPM here, if \
            there is one (else its password alone protects it), to no PCRs unless --pcrs names some; the \
            recovery key stays valid. With --no-tpm it is not sealed again: for a TPM that refuses (its \
            owner authorization set by someone else); `security tpm-enroll` seals it later.

            A recovery key never shown (a keychain sealed at a first login) is in the escrow beside the \
            keychain, sealed to the administrator's key: `security tpm-escrow --key` opens it.
            """)

    @Option(name: .customShort("R"), parsing: .unconditional, help: "The recovery key (visible to other processes; prefer the prompt or standard input).")
    var recoveryKey: String?
    @Option(
        name: .customShort("p"), parsing: .unconditional, help: "The keychain's new password (visible to other processes; prefer the prompt or standard input)."
    ) var password: String?
    @Option(help: "Seal it again to these PCRs (SHA-256 bank) as they are now, such as 7 or 0,2,7 (default none).")
    var pcrs: String?
    @Flag(name: .customLong("no-tpm"), help: "Do not seal it again: its new password alone protects it.")
    var noTPM = false
    @OptionGroup var target: KeychainArgument

    func run() throws {
        let selection = try parsedPCRs(pcrs)
        guard !(noTPM && selection != nil) else { throw ValidationError("--pcrs seals it again; --no-tpm does not") }
        let tpm = noTPM ? TPMConfiguration(tcti: nil, absence: "--no-tpm") : .current
        try perform(target.path) {
            let store = try target.open()
            var typed = try recoveryKey.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "recovery key of \(store.path): ")
            defer { typed.wipe() }
            var key = try RecoveryKey(parsing: typed)
            defer { key.wipe() }
            var secret =
                try password.map { Array($0.utf8) }
                ?? Terminal.readSecret(prompt: "new password of \(store.path): ", confirm: "retype new password: ")
            defer { secret.wipe() }
            let outcome = try store.recoverFromTPM(recoveryKey: key, newPassword: secret, pcrs: selection ?? [], tpm: tpm)
            discardPreviousKeybags(of: store)
            let lost = outcome.deviceOnlyItemsLost
            Terminal.error(
                "security: \(store.path) opened with its recovery key; \(lost) ThisDeviceOnly item\(lost == 1 ? " was" : "s were") bound to the old TPM and \(lost == 1 ? "is" : "are") gone"
            )
            Terminal.error(
                outcome.sealedAgain
                    ? "security: it is sealed to this machine's TPM now, with the new password\(selection.map { " and to PCR \(PCRSelection.describe($0)) as they are now" } ?? ", to no PCRs (`security tpm-enroll --pcrs 7` binds it to the boot chain again)"); the recovery key stays valid"
                    : "security: \(noTPM ? "not sealed again" : "there is no TPM here"): its new password alone protects it (`security tpm-enroll` seals it to a TPM later)"
            )
        }
    }
}

struct TPMStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm-status",
        abstract: "Show this machine's TPM and whether a keychain is sealed to it.")

    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            let status = store.tpmStatus()
            Terminal.out("keychain:        \"\(store.path)\"")
            for line in tpmLines(status) { Terminal.out(line) }
            Terminal.out("passwordless:    " + passwordlessSummary(store.passwordless))
            let escrow = status.sealed ? store.recoveryEscrowState : .none
            if status.sealed, store.recoveryKeyUnshown {
                Terminal.out(
                    "recovery key:    never shown: sealed at a first login (pam_keychain), where none can be shown; "
                        + (escrow.isCurrent
                            ? "it is in the escrow below"
                            : "and not escrowed: a cleared TPM would lose this keychain; `security tpm-unenroll` then `security tpm-enroll` gives one")
                )
            }
            if let line = escrowLine(escrow, path: store.path) { Terminal.out(line) }
            Terminal.out(tpmDefaultSummary())
            if status.sealed {
                Terminal.out(
                    "rollback:        "
                        + (store.rollbackStatus.map {
                            "count \($0.fileCount) in the file, checked against this TPM's counter and moved on at each unlock"
                                + (status.counted
                                    ? "; recorded in the keybag, so a record or counter removed is refused too"
                                    : "; not recorded in the keybag yet (the next unlock with the password does)")
                        } ?? "no counter (an older copy of the file put back would not be noticed)"))
            }
        }
    }
}

/// What an empty lockout authorization, or an owner authorization someone set, means for a
/// sealed keychain; nil when neither.
func tpmHierarchyWarning(_ tpm: TPMDescription) -> String? {
    guard let state = tpm.lockout else { return nil }
    if state.ownerAuthorizationSet {
        return
            "owner authorization set: no keychain can be sealed to this TPM, nor a sealed one opened with its password, until whoever set it removes it (`tpm2_changeauth -c o -p THAT`)"
    }
    if !state.lockoutAuthorizationSet, !state.clearDisabled {
        return
            "lockout authorization empty: anyone who can reach the TPM can clear it (`tpm2_clear`), and a sealed keychain then opens only with its recovery key; an administrator sets one with `tpm2_changeauth -c l`"
    }
    return nil
}

/// What `tpm-status` says of the keychain's recovery escrow.
func escrowLine(_ state: RecoveryEscrowState, path: String) -> String? {
    let file = RecoveryEscrow.file(for: path)
    switch state {
    case .none: return nil
    case .current(let recipient):
        return "escrow:          the recovery key, sealed to the administrator's key \(RecoveryEscrow.fingerprint(recipient)), in \(file)"
    case .stale(let recipient):
        return
            "escrow:          stale: \(file) (for \(RecoveryEscrow.fingerprint(recipient))) holds a recovery key of other keys; `security tpm-unenroll` then `security tpm-enroll` escrows the current one"
    case .damaged(let why): return "escrow:          \(file) is damaged: \(why)"
    }
}

/// What `tpm-status` says, and (its first line) `status`.
func tpmLines(_ status: TPMStatus) -> [String] {
    var lines: [String] = []
    if let tpm = status.tpm {
        var line = "TPM:             \(tpm.manufacturer.trimmingTrailingSpaces) through \(tpm.tcti)"
        if let lockout = tpm.lockout {
            line +=
                lockout.inLockout
                ? "; in dictionary-attack lockout: refuses every password for now"
                : "; \(lockout.failures) of \(lockout.maximum) wrong passwords counted before lockout, one forgotten every \(lockout.interval) s"
        }
        lines.append(line)
        if let warning = tpmHierarchyWarning(tpm) { lines.append("hierarchy:       " + warning) }
    } else {
        lines.append("TPM:             none usable here: \(status.problem ?? "no TPM")")
    }
    if status.sealed {
        switch status.sealedHere {
        case true?: lines.append("sealed:          yes, to this TPM (the password and this TPM open it)")
        case false?: lines.append("sealed:          yes, to another TPM: open it with its recovery key (`security tpm-recover`)")
        case nil where status.tpm?.lockout?.ownerAuthorizationSet == true:
            lines.append("sealed:          yes, but this TPM refuses to make its storage key (its owner authorization is set)")
        case nil: lines.append("sealed:          yes, to a TPM that cannot be reached now")
        }
        lines.append(
            status.pcrs.isEmpty
                ? "PCRs:            none (any boot chain; `security tpm-enroll --pcrs 7` binds it)"
                : "PCRs:            \(PCRSelection.describe(status.pcrs)) (SHA-256): a boot chain that changes them is refused; the recovery key opens it then"
        )
        lines.append("recovery key:    \(status.recoveryKeyCurrent ? "set (opens all but the ThisDeviceOnly items)" : "does not fit the current keys")")
        lines.append("ThisDeviceOnly:  \(status.deviceOnlyItems) item(s) bound to the TPM alone")
    } else {
        lines.append(
            "sealed:          no: the password alone protects this keychain\(status.tpm == nil ? "" : " (`security tpm-enroll` seals it to this TPM)")")
    }
    return lines
}

private extension String {
    var trimmingTrailingSpaces: String {
        var s = Substring(self)
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}

/// The one line `security status` gives the TPM.
func tpmSummary(_ status: TPMStatus) -> String {
    switch (status.sealed, status.sealedHere) {
    case (true, true?): return "sealed to this machine's TPM (`security tpm-status` for more)"
    case (true, false?): return "sealed to another TPM: open it with its recovery key (`security tpm-recover`)"
    case (true, nil) where status.tpm?.lockout?.ownerAuthorizationSet == true:
        return "sealed to this TPM, which refuses to make its storage key now: its owner authorization is set (`security tpm-status`)"
    case (true, nil): return "sealed to a TPM that cannot be reached now: \(status.problem ?? "?")"
    case (false, _) where status.tpm == nil: return "none usable here (\(status.problem ?? "no TPM")): the password alone protects this keychain"
    case (false, _): return "present, not used: the password alone protects this keychain (`security tpm-enroll` seals it to the TPM)"
    }
}

/// `--pcrs` as the TPM commands take it, or a usage error saying what it takes.
private func parsedPCRs(_ text: String?) throws -> [UInt8]? {
    try text.map { text in
        guard let parsed = PCRSelection.parse(text) else { throw ValidationError("--pcrs: 1 to 8 PCR numbers from 0 to 23, such as 7 or 0,2,7") }
        return parsed
    }
}

/// The keychain's password: `-p` as given, else asked on the terminal.
private func keychainPassword(_ option: String?, of store: KeychainStore) throws -> Bytes {
    try option.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "password of \(store.path): ")
}
