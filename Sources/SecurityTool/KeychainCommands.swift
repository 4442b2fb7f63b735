import ArgumentParser
import Glibc
import KeychainCore

/// The keychain a command acts on: a trailing name or path, or the default keychain.
struct KeychainArgument: ParsableArguments {
    @Argument(help: "Keychain name or path (default: the default keychain).")
    var keychain: String?

    var path: String { keychain.map(KeychainFile.resolve) ?? KeychainFile.defaultPath() }

    func open() throws -> KeychainStore { try KeychainStore.open(at: path, storage: .kernel) }
}

struct CreateKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create-keychain", abstract: "Create keychains and leave them unlocked.")

    @Flag(name: .customShort("P"), help: "Prompt for the password.") var prompt = false
    @Option(name: .customShort("p"), help: "The password (visible to other processes; prefer the prompt or standard input).") var password: String?
    @Argument(help: "Keychain names or paths.") var keychains: [String] = []

    func run() throws {
        let names = keychains.isEmpty ? [KeychainFile.defaultPath()] : keychains
        for name in names {
            let path = KeychainFile.resolve(name)
            try perform(path) {
                var secret = try password.map { Array($0.utf8) }
                    ?? Terminal.readSecret(prompt: "password for new keychain: ", confirm: "retype password for new keychain: ")
                defer { secret.wipe() }
                _ = try KeychainStore.create(at: path, password: secret)
            }
        }
    }
}

struct DeleteKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete-keychain", abstract: "Lock and delete keychains.")

    @Argument(help: "Keychain names or paths.") var keychains: [String] = []

    func run() throws {
        let names = keychains.isEmpty ? [KeychainFile.defaultPath()] : keychains
        for name in names {
            let path = KeychainFile.resolve(name)
            try perform(path) {
                let store = try KeychainStore.open(at: path, storage: .kernel)
                store.lockAll()
                try KeychainFile.remove(path)
                if KeychainFile.defaultPath() == path, KeychainFile.environment("KEYCHAIN_PATH") == nil {
                    try KeychainFile.setDefaultPath(nil)
                }
            }
        }
    }
}

struct ListKeychains: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list-keychains", abstract: "List the user's keychains.")

    @Option(name: .customShort("d"), help: "Preference domain (user, system, common, dynamic); only user has keychains here.")
    var domain: String = "user"

    func run() throws {
        guard domain == "user" || domain == "dynamic" else { return }
        for path in KeychainFile.list() { Terminal.out("    \"\(path)\"") }
    }
}

struct DefaultKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "default-keychain", abstract: "Show or set the default keychain.")

    @Option(name: .customShort("d"), help: "Preference domain; only user is kept.") var domain: String = "user"
    @Flag(name: .customShort("s"), help: "Set the default keychain to the one named.") var set = false
    @Argument(help: "Keychain to make the default (with -s).") var keychain: String?

    func run() throws {
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
        abstract: "Unlock a keychain: its class keys go to the kernel keyring until it is locked (WhenUnlocked) or the machine restarts (AfterFirstUnlock).")

    @Flag(name: .customShort("u"), help: "Accepted for macOS compatibility; a password is always needed.") var noPassword = false
    @Option(name: .customShort("p"), help: "The password (visible to other processes; prefer the prompt or standard input).") var password: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            var secret = try password.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "password to unlock \(store.path): ")
            defer { secret.wipe() }
            try store.unlock(password: secret)
            // After a password reset by root, the PAM module left the new login password in the
            // kernel; the old password just proved the user's claim, so the keybag moves to it.
            if try store.adoptRememberedLoginPassword(current: secret) {
                Terminal.error("security: the keychain's password is now your current login password")
            }
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
            try perform(path) { try KeychainStore.open(at: path, storage: .kernel).lock() }
        }
    }
}

struct ShowKeychainInfo: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show-keychain-info", abstract: "Show a keychain's settings.")

    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            let s = store.settings
            let timeout = s.idleTimeout == 0 ? "no-timeout" : "timeout=\(s.idleTimeout)s"
            Terminal.out("Keychain \"\(store.path)\"\(s.lockOnSessionEnd ? " lock-on-session-end" : "") \(timeout)")
        }
    }
}

struct SetKeychainSettings: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-keychain-settings",
        abstract: "Set when a keychain locks itself. With no option: never by itself.")

    @Flag(name: .customShort("l"), help: "Lock when the user's last session ends (macOS: on sleep).") var lockOnSessionEnd = false
    @Flag(name: .customShort("u"), help: "Lock after the idle timeout.") var lockAfterTimeout = false
    @Option(name: .customShort("t"), help: "Idle timeout in seconds (implies -u; default 300).") var timeout: UInt32?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let idle = timeout ?? (lockAfterTimeout ? 300 : 0)
            try target.open().setSettings(KeychainSettings(idleTimeout: idle, lockOnSessionEnd: lockOnSessionEnd))
        }
    }
}

struct SetKeychainPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set-keychain-password", abstract: "Change a keychain's password (items are not re-encrypted).")

    @Option(name: .customShort("o"), help: "Old password.") var old: String?
    @Option(name: .customShort("p"), help: "New password.") var new: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        try perform(target.path) {
            let store = try target.open()
            var oldSecret = try old.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "Old Password: ")
            var newSecret = try new.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "New Password: ", confirm: "Retype New Password: ")
            defer { oldSecret.wipe(); newSecret.wipe() }
            try store.changePassword(from: oldSecret, to: newSecret)
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
            let kernel: String
            do {
                _ = try KernelKeyring.persistent()
                kernel = "kernel persistent keyring of uid \(geteuid())"
            } catch {
                kernel = "unavailable: \(error)"
            }
            Terminal.out("keychain: \"\(store.path)\"")
            Terminal.out("WhenUnlocked:      \(status.whenUnlocked ? "unlocked" : "locked")  (key in the \(kernel) while unlocked)")
            Terminal.out("AfterFirstUnlock:  \(status.afterFirstUnlock ? "unlocked" : "locked")  (key in the \(kernel) until restart)")
            Terminal.out("Always:            unlocked  (key in the file; protected by file permissions only)")
            let idle = status.settings.idleTimeout
            Terminal.out("idle timeout:      \(idle == 0 ? "none" : "\(idle)s")")
            Terminal.out("lock at logout:    \(status.settings.lockOnSessionEnd ? "yes (with the PAM module)" : "no")")
            Terminal.out("items:             \(try store.count())")
        }
    }
}
