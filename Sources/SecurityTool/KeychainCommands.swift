import ArgumentParser
import Glibc
import KeychainCore
import KeychainTPMPolicy

/// The keychain a command acts on: a trailing name or path, or the default keychain.
struct KeychainArgument: ParsableArguments {
    @Argument(help: "Keychain name or path (default: the default keychain).")
    var keychain: String?

    var path: String { keychain.map(KeychainFile.resolve) ?? KeychainFile.defaultPath() }

    func open() throws -> KeychainStore { try KeychainStore.open(at: path, storage: .kernel) }
}

/// The keychains a search looks in: those named, in order, else the user's search list.
struct KeychainListArgument: ParsableArguments {
    @Argument(help: "Keychains to search, in order (default: the search list, `security list-keychains`).")
    var keychains: [String] = []

    var paths: [String] { keychains.isEmpty ? SearchList.searched() : keychains.map(KeychainFile.resolve) }

    /// The first keychain, in order, where `body` finds something (keychain_find.c's
    /// find_first_*: the first match of the list), by the engine's rule for the search list.
    func first<T>(_ body: (KeychainStore) throws -> T?) throws -> (T, KeychainStore) {
        try SearchList.search(paths, limit: 1) { path, _ in
            let store = try KeychainStore.open(at: path, storage: .kernel)
            return try body(store).map { [($0, store)] } ?? []
        }[0]
    }

    /// Everything `body` finds in each keychain, in order; nothing found is an empty list, unless a
    /// keychain could not be searched.
    func all<T>(_ body: (KeychainStore) throws -> [T]) throws -> [(T, KeychainStore)] {
        do {
            return try SearchList.search(paths) { path, _ in
                let store = try KeychainStore.open(at: path, storage: .kernel)
                return try body(store).map { ($0, store) }
            }
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }
}

/// keychain_list.c's parse_domain: a prefix of user, system, common or dynamic.
enum PreferenceDomain: String, CaseIterable {
    case user, system, common, dynamic

    static func parse(_ name: String?) throws -> PreferenceDomain {
        guard let name else { return .user }
        if let domain = allCases.first(where: { $0.rawValue.hasPrefix(name) }) { return domain }
        throw ValidationError("Invalid domain: \(name)")
    }
}

struct CreateKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create-keychain", abstract: "Create keychains and leave them unlocked.",
        discussion: """
            With --tpm each new keychain is sealed to this machine's TPM at once, as `security \
            tpm-enroll` would seal it, and its recovery key is printed, once; without a TPM nothing is \
            created. Without --tpm or --no-tpm the default set with `security tpm-enroll --default \
            on|off` (else /etc/keychain/tpm-enroll) decides; when it says on and there is no TPM, the \
            keychain is created with its password alone and that is said once.
            """)

    @Flag(name: .customShort("P"), help: "Prompt for the password.") var prompt = false
    @Option(name: .customShort("p"), parsing: .unconditional, help: "The password (visible to other processes; prefer the prompt or standard input).")
    var password: String?
    @Flag(name: .customLong("tpm"), help: "Seal the new keychains to this machine's TPM; prints each one's recovery key, once.")
    var tpm = false
    @Flag(name: .customLong("no-tpm"), help: "Do not seal them, whatever the default (`security tpm-enroll --default`).")
    var noTPM = false
    @Argument(help: "Keychain names or paths.") var keychains: [String] = []

    func run() throws {
        guard !(tpm && noTPM) else { throw ValidationError("--tpm and --no-tpm contradict each other") }
        let seal = tpm || (!noTPM && TPMEnrolDefault.effective)
        let names = keychains.isEmpty ? [KeychainFile.defaultPath()] : keychains
        var saidNoTPM = false
        for name in names {
            let path = KeychainFile.resolve(name)
            try perform(path) {
                var secret =
                    try password.map { Array($0.utf8) }
                    ?? Terminal.readSecret(prompt: "password for new keychain: ", confirm: "retype password for new keychain: ")
                defer { secret.wipe() }
                let store = try KeychainStore.create(at: path, password: secret)
                if seal {
                    do {
                        var recovery = try store.sealToTPM(password: secret)
                        discardPreviousKeybags(of: store)
                        defer { recovery.wipe() }
                        showRecoveryKey(&recovery)
                        escrowNewRecoveryKey(recovery, of: store)
                        Terminal.error(
                            "security: \(store.path) is sealed to this machine's TPM (\(TPMConfiguration.current.tcti ?? "?")); the recovery key above is shown only this once: keep it away from this machine (it opens the keychain without the TPM, all but its ThisDeviceOnly items)"
                        )
                    } catch let error where tpm {
                        // Asked for explicitly: a keychain that is not sealed is not what was asked
                        // for, so none is left behind.
                        store.releaseRollbackCounter()
                        store.lockAll()
                        try? KeychainFile.remove(path)
                        Terminal.error("security: \(path) was not created: it cannot be sealed to a TPM here")
                        throw error
                    } catch {
                        if !saidNoTPM {
                            Terminal.error(
                                "security: new keychains are sealed to the TPM by default, but sealing failed (\(describe(error))): \(path) is protected by its password alone (`security tpm-enroll` seals it later)"
                            )
                            saidNoTPM = true
                        }
                    }
                }
                try SearchList.add(path)
            }
        }
    }

    private func describe(_ error: Error) -> String {
        (error as? KeychainError).map { $0.detail } ?? "\(error)"
    }
}

struct DeleteKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete-keychain", abstract: "Lock and delete keychains and remove them from the search list.")

    @Argument(help: "Keychain names or paths (required: there is no default to delete).") var keychains: [String] = []

    func run() throws {
        // keychain_delete.c hands SecKeychainDelete no keychain, which refuses with
        // errSecInvalidKeychain: a bare `delete-keychain` deletes nothing, here too.
        guard !keychains.isEmpty else {
            throw Failure.report(KeychainError(.invalidKeychain, "name the keychain to delete"), context: "SecKeychainDelete")
        }
        for name in keychains {
            let path = KeychainFile.resolve(name)
            try perform(path) {
                let store = try KeychainStore.open(at: path, storage: .kernel)
                store.releaseRollbackCounter()
                store.lockAll()
                try KeychainFile.remove(path)
                try SearchList.remove(path)
                if KeychainFile.defaultPath() == path, KeychainFile.environment("KEYCHAIN_PATH") == nil {
                    try KeychainFile.setDefaultPath(nil)
                }
            }
        }
    }
}

struct ListKeychains: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list-keychains", abstract: "Display or set the keychain search list.")

    @Option(name: .customShort("d"), parsing: .unconditional, help: "Preference domain (user, system, common, dynamic); only the user's list exists on Linux.")
    var domain: String?
    @Flag(name: .customShort("s"), help: "Set the search list to the keychains named (none: an empty list).") var set = false
    @Argument(help: "Keychains for the search list, in order (with -s).") var keychains: [String] = []

    func run() throws {
        let domain = try PreferenceDomain.parse(domain)
        guard set else {
            guard keychains.isEmpty else { throw ValidationError("keychains are given with -s") }
            // System, common and dynamic (smart card) domains hold no keychains on Linux.
            guard domain == .user else { return }
            for path in SearchList.current() { Terminal.out("    \"\(path)\"") }
            return
        }
        // keychain_list.c: a failure to set the list is reported, status 1.
        guard domain == .user else {
            Terminal.error("security: SecKeychainSetDomainSearchList \(domain.rawValue): only the user domain keeps a search list on Linux")
            throw ExitCode(1)
        }
        try perform("SecKeychainSetSearchList") { try SearchList.set(keychains.map(KeychainFile.resolve)) }
    }
}

struct DefaultKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "default-keychain", abstract: "Show or set the default keychain.")

    @Option(name: .customShort("d"), parsing: .unconditional, help: "Preference domain; only user is kept.") var domain: String?
    @Flag(name: .customShort("s"), help: "Set the default keychain to the one named.") var set = false
    @Argument(help: "Keychain to make the default (with -s).") var keychain: String?

    func run() throws {
        let domain = try PreferenceDomain.parse(domain)
        guard domain == .user else {
            Terminal.error("security: SecKeychain\(set ? "Set" : "Copy")DomainDefault \(domain.rawValue): only the user domain has a default keychain on Linux")
            throw ExitCode(1)
        }
        try perform {
            if set {
                let path = keychain.map(KeychainFile.resolve)
                if let path { _ = try KeychainStore.open(at: path, storage: .kernel) }
                try KeychainFile.setDefaultPath(path)
                if KeychainFile.environment("KEYCHAIN_PATH") != nil {
                    Terminal.error("security: note: $KEYCHAIN_PATH is set and takes precedence in this shell")
                }
            } else {
                Terminal.out("    \"\(KeychainFile.defaultPath())\"")
            }
        }
    }
}

struct UnlockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock-keychain",
        abstract:
            "Unlock a keychain: its class keys go to keychain-broker where one runs, else to the kernel keyring, until it is locked (WhenUnlocked) or the machine restarts (AfterFirstUnlock)."
    )

    @Flag(name: .customShort("u"), help: "Accepted for macOS compatibility; a password is always needed.") var noPassword = false
    @Flag(
        name: .customLong("accept-older-copy"),
        help: "A keychain sealed to a TPM whose file is older than its TPM counter (a backup put back): open it anyway and make it the current one.")
    var acceptOlderCopy = false
    @Option(name: .customShort("p"), parsing: .unconditional, help: "The password (visible to other processes; prefer the prompt or standard input).")
    var password: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            var secret = try password.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "password to unlock \(store.path): ")
            defer { secret.wipe() }
            try store.unlock(password: secret, acceptingOlderCopy: acceptOlderCopy)
            // Issue 54: said once, at the keychain's first unlock in keychain-broker's keeping.
            if store.firstUnlockInCustody {
                Terminal.error(
                    "security: \(store.path) is in keychain-broker's keeping from now on; its class keys were in this user's kernel keyring before, where any of the user's programs could read them: run `security set-keychain-password --rotate-keys` to replace them"
                )
            }
            // Changed settings lose their idle timeout and lock-at-logout choice: say so at once.
            if store.status.settingsIntegrity == .damaged, let note = settingsNote(.damaged) { Terminal.error("security: \(note)") }
            // After a password reset by root, the PAM module (as root) left the new login password
            // in the kernel; the password just typed proved the user's claim, so the keybag moves
            // to it, said on stderr before it happens.
            try store.adoptLoginPasswordReset(current: secret) { Terminal.error("security: \($0)") }
        }
    }
}

struct LockKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock-keychain",
        abstract: "Lock WhenUnlocked items; AfterFirstUnlock items stay readable until restart.")

    @Flag(name: .customShort("a"), help: "Lock all keychains.") var all = false
    @OptionGroup var target: KeychainArgument

    func run() throws {
        let paths = all ? KeychainFile.list() : [target.path]
        for path in paths {
            try perform(path) { try KeychainStore.open(at: path, storage: .kernel).lockReportingFailure() }
        }
    }
}

struct ShowKeychainInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show-keychain-info",
        abstract: "Show a keychain's settings (on standard error, as macOS does); exit 36 while it is locked.")

    @Flag(name: .customShort("s"), help: "Accepted for macOS compatibility (the salt is not shown).") var salt = false
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform("SecKeychainCopySettings \(target.keychain ?? target.path)") {
            let store = try target.open()
            // Scripts use this as the "is it locked?" test: SecKeychainCopySettings fails on a
            // locked keychain with errSecInteractionNotAllowed.
            let status = store.status
            guard status.whenUnlocked else { throw KeychainError(.interactionNotAllowed, "the keychain is locked") }
            let s = store.settings
            // keychain_show_info.c's words: -l is "lock-on-sleep" there (here: at the end of the session).
            let timeout = s.idleTimeout == 0 ? " no-timeout" : " timeout=\(s.idleTimeout)s"
            Terminal.error(
                "Keychain \"\(target.keychain ?? store.path)\"\(s.lockOnSessionEnd ? " lock-on-sleep" : "")\(s.idleTimeout == 0 ? "" : " use-lock-interval")\(timeout)"
            )
            if let note = settingsNote(status.settingsIntegrity) { Terminal.error("security: \(note)") }
        }
    }
}

/// One line about settings that are not what they seem; nil when their MAC verified.
func settingsNote(_ integrity: SettingsIntegrity) -> String? {
    switch integrity {
    case .verified: return nil
    case .unverified: return "the settings shown are unverified while the keychain is locked"
    case .damaged: return "the stored settings were changed without the keychain's key; the defaults are in force (set them again with set-keychain-settings)"
    }
}

struct SetKeychainSettings: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-keychain-settings",
        abstract: "Set when a keychain locks itself. With no option: never by itself.",
        discussion:
            "The settings are authenticated under the keychain's WhenUnlocked key: a locked keychain asks for its password (terminal or standard input), as macOS does."
    )

    @Flag(name: .customShort("l"), help: "Lock when the user's last session ends (macOS: on sleep).") var lockOnSessionEnd = false
    @Flag(name: .customShort("u"), help: "Lock after the idle timeout.") var lockAfterTimeout = false
    @Option(name: .customShort("t"), parsing: .unconditional, help: "Idle timeout in seconds (implies -u; without -t there is no timeout).") var timeout:
        UInt32?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            // keychain_set_settings.c: -t implies -u; without -t, -u alone means no timeout.
            let settings = KeychainSettings(idleTimeout: timeout ?? 0, lockOnSessionEnd: lockOnSessionEnd)
            let store = try target.open()
            var prompt = "password to unlock \(store.path): "
            var missing = KeychainError.locked("the keychain is locked and no password was given")
            if store.status.whenUnlocked {
                do {
                    try store.setSettings(settings)
                    return
                } catch let error as KeychainError where error.code == .interactionNotAllowed && store.storage == .broker {
                    // The broker wants the password for settings that lock less than those in force.
                    prompt = "password of \(store.path) (the keychain would lock less): "
                    missing = error
                }
            }
            var secret: Bytes
            do {
                secret = try Terminal.readSecret(prompt: prompt)
            } catch let error as KeychainError where error.code == .param {
                throw missing
            }
            defer { secret.wipe() }
            try store.setSettings(settings, password: secret)
        }
    }
}

struct SetKeychainPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-keychain-password",
        abstract: "Change a keychain's password (items are not re-encrypted unless --rotate-keys).",
        discussion: """
            A password change re-wraps the class keys only: a copy of the file taken before still opens \
            with the old password, including items added later to the new file if that file leaks too. \
            --rotate-keys also makes new class keys and re-encrypts every item under them in one \
            transaction, so nothing from before opens anything after (use it after a compromise; give \
            the same password twice to rotate without changing it).
            """)

    @Option(name: .customShort("o"), parsing: .unconditional, help: "Old password.") var old: String?
    @Option(name: .customShort("p"), parsing: .unconditional, help: "New password.") var new: String?
    @Flag(name: .customLong("rotate-keys"), help: "Also make new class keys and re-encrypt every item under them.") var rotateKeys = false
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            var oldSecret = try old.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "Old Password: ")
            var newSecret = try new.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "New Password: ", confirm: "Retype New Password: ")
            defer { oldSecret.wipe(); newSecret.wipe() }
            // A keychain sealed to a TPM gets a new recovery key with new class keys.
            let recovery = try store.changePassword(from: oldSecret, to: newSecret, rotatingKeys: rotateKeys)
            discardPreviousKeybags(of: store)
            if var recovery {
                defer { recovery.wipe() }
                try? store.setRecoveryKeyUnshown(false)
                showRecoveryKey(&recovery)
                escrowNewRecoveryKey(recovery, of: store)
                Terminal.error("security: the keys were rotated: the old recovery key opens nothing any more; the new one above is shown only this once")
            }
        }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show each protection class: locked or unlocked, and where its key lives.")

    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            let status = store.status
            var kernel: String
            do {
                _ = try KernelKeyring.persistent()
                kernel = "kernel persistent keyring of uid \(geteuid())"
            } catch {
                kernel = "unavailable: \(error)"
            }
            switch status.storage {
            case .kernel: break
            case .process: kernel = "memory of this process"
            case .broker: kernel = "custody of keychain-broker"
            }
            Terminal.out("keychain: \"\(store.path)\"")
            Terminal.out("WhenUnlocked:      \(status.whenUnlocked ? "unlocked" : "locked")  (key in the \(kernel) while unlocked)")
            Terminal.out("AfterFirstUnlock:  \(status.afterFirstUnlock ? "unlocked" : "locked")  (key in the \(kernel) until restart)")
            Terminal.out("Always:            unlocked  (key in the file; protected by file permissions only)")
            let idle = status.settings.idleTimeout
            Terminal.out("idle timeout:      \(idle == 0 ? "none" : "\(idle)s")")
            Terminal.out("lock at logout:    \(status.settings.lockOnSessionEnd ? "yes (with the PAM module)" : "no")")
            if let note = settingsNote(status.settingsIntegrity) { Terminal.out("settings:          \(note)") }
            Terminal.out("items:             \(try store.count())")
            Terminal.out("TPM:               " + tpmSummary(store.tpmStatus()))
            Terminal.out("passwordless:      " + passwordlessSummary(store.passwordless))
        }
    }
}

struct LoginKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login-keychain",
        abstract: "Display the login keychain (the one the PAM module unlocks at login).")

    @Option(name: .customShort("d"), parsing: .unconditional, help: "Preference domain: not supported, as on macOS.") var domain: String?
    @Flag(name: .customShort("s"), help: "Set the login keychain: not supported, as on macOS.") var set = false
    @Argument(help: "Keychain (with -s).") var keychain: String?

    func run() throws {
        if let domain { _ = try PreferenceDomain.parse(domain) }
        if set || keychain != nil {
            // keychain_list.c's keychain_login: setting is compiled out (#if 0) and returns 1.
            if !set { throw ValidationError("a keychain is given with -s") }
            Terminal.error("security: login-keychain -s: the login keychain is always login.keychain-db in the keychains folder")
            throw ExitCode(1)
        }
        if domain != nil {
            Terminal.error("security: login-keychain -d: not supported (as on macOS)")
            throw ExitCode(1)
        }
        Terminal.out("    \"\(KeychainFile.directory())/login.keychain-db\"")
    }
}
