import ArgumentParser
import KeychainCore

@main
struct Security: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "security",
        abstract: "Manage keychains and the passwords in them, as macOS's security command does.",
        discussion: """
            Keychain arguments are paths or names in $XDG_DATA_HOME/keychains; without one, the \
            default keychain is used ($KEYCHAIN_PATH, `default-keychain -s`, or login.keychain-db). \
            Exit status is 0 on success, else the low byte of the OSStatus as on macOS (44: item not found).
            """,
        subcommands: [
            CreateKeychain.self, DeleteKeychain.self, ListKeychains.self, DefaultKeychain.self,
            UnlockKeychain.self, LockKeychain.self, ShowKeychainInfo.self, SetKeychainSettings.self,
            SetKeychainPassword.self, Status.self,
            AddGenericPassword.self, AddInternetPassword.self,
            FindGenericPassword.self, FindInternetPassword.self,
            DeleteGenericPassword.self, DeleteInternetPassword.self,
            DumpKeychain.self, Export.self, Import.self,
            FindCertificate.self, FindIdentity.self, DeleteCertificate.self,
        ])

    /// macOS lets `-w` end an add command to mean "prompt for the password"; an option that
    /// takes a value cannot say that, so the trailing `-w` becomes a flag before parsing.
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let first = arguments.first, first.hasPrefix("add-"), arguments.last == "-w" {
            arguments[arguments.count - 1] = "--prompt-password"
        }
        ProcessHardening.becomeUndumpable()
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            exit(withError: error)
        }
    }
}
