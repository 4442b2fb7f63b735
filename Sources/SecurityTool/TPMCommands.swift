import ArgumentParser
import Glibc
import KeychainCore

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
            """)

    @Option(
        name: .customShort("p"), parsing: .unconditional, help: "The keychain's password (visible to other processes; prefer the prompt or standard input).")
    var password: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            var secret = try password.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "password of \(store.path): ")
            defer { secret.wipe() }
            var recovery = try store.sealToTPM(password: secret)
            defer { recovery.wipe() }
            showRecoveryKey(&recovery)
            Terminal.error(
                "security: \(store.path) is sealed to this machine's TPM (\(TPMConfiguration.current.tcti ?? "?")); the recovery key above is shown only this once: keep it away from this machine (it opens the keychain without the TPM, all but its ThisDeviceOnly items)"
            )
        }
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
            sealed, its ThisDeviceOnly items kept; its recovery key opens nothing any more.
            """)

    @Option(
        name: .customShort("p"), parsing: .unconditional, help: "The keychain's password (visible to other processes; prefer the prompt or standard input).")
    var password: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            var secret = try password.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "password of \(store.path): ")
            defer { secret.wipe() }
            try store.unsealFromTPM(password: secret)
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
            there is one (else its password alone protects it); the recovery key stays valid.
            """)

    @Option(name: .customShort("R"), parsing: .unconditional, help: "The recovery key (visible to other processes; prefer the prompt or standard input).")
    var recoveryKey: String?
    @Option(
        name: .customShort("p"), parsing: .unconditional, help: "The keychain's new password (visible to other processes; prefer the prompt or standard input)."
    ) var password: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
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
            let outcome = try store.recoverFromTPM(recoveryKey: key, newPassword: secret)
            let lost = outcome.deviceOnlyItemsLost
            Terminal.error(
                "security: \(store.path) opened with its recovery key; \(lost) ThisDeviceOnly item\(lost == 1 ? " was" : "s were") bound to the old TPM and \(lost == 1 ? "is" : "are") gone"
            )
            Terminal.error(
                outcome.sealedAgain
                    ? "security: it is sealed to this machine's TPM now, with the new password; the recovery key stays valid"
                    : "security: there is no TPM here: its new password alone protects it (`security tpm-enroll` seals it to a TPM later)")
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
        }
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
    } else {
        lines.append("TPM:             none usable here: \(status.problem ?? "no TPM")")
    }
    if status.sealed {
        switch status.sealedHere {
        case true?: lines.append("sealed:          yes, to this TPM (the password and this TPM open it)")
        case false?: lines.append("sealed:          yes, to another TPM: open it with its recovery key (`security tpm-recover`)")
        case nil: lines.append("sealed:          yes, to a TPM that cannot be reached now")
        }
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
    case (true, nil): return "sealed to a TPM that cannot be reached now: \(status.problem ?? "?")"
    case (false, _) where status.tpm == nil: return "none usable here (\(status.problem ?? "no TPM")): the password alone protects this keychain"
    case (false, _): return "present, not used: the password alone protects this keychain (`security tpm-enroll` seals it to the TPM)"
    }
}
