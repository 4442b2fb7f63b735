import ArgumentParser
import Glibc
import KeychainBroker
import KeychainCore

/// `security forget-keychain`: lets keychain-broker take another keychain at a path where it
/// pinned one. The broker refuses a keychain swapped in at a pinned path (a process of the user
/// could otherwise put one whose password it knows there, and read what trusted programs store
/// next); someone who replaced the file on purpose proves it with the old keychain's password.
struct ForgetKeychainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget-keychain",
        abstract: "Let the keychain broker accept another keychain at this path (with the password of the one it knew there).")

    @Option(name: .customShort("p"), parsing: .unconditional, help: "The old keychain's password (visible to other processes; prefer the prompt).")
    var password: String?
    @OptionGroup var target: KeychainArgument

    func run() throws {
        guard let broker = BrokerSetup.installed else {
            Terminal.error("security: forget-keychain: no keychain broker runs here (no /run/keychain-broker/socket); nothing is pinned (errSecNotAvailable)")
            throw ExitCode(Int32(UInt8(truncatingIfNeeded: KeychainError.Code.notAvailable.rawValue)))
        }
        let path = target.path
        try perform(path) {
            var secret = try password.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "password of the keychain the broker knew at \(path): ")
            defer { secret.wipe() }
            try broker.forget(path: path, password: secret)
        }
    }
}
