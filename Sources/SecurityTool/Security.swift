import ArgumentParser
import Glibc
import KeychainBroker
import KeychainCore
import KeychainPresence
import KeychainTPMPolicy

@main
struct Security: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "security",
        abstract: "Manage keychains and the passwords in them, as macOS's security command does.",
        discussion: """
            Keychain arguments are paths or names in $XDG_DATA_HOME/keychains; without one, the \
            keychains of the search list are searched (`list-keychains`) and new items go to the \
            default keychain ($KEYCHAIN_PATH, `default-keychain -s`, or login.keychain-db). \
            Command names may be shortened to any prefix (the first match in macOS's order wins). \
            Global options: -v (echo each command on stderr), -q (quieter), -i (read commands from \
            standard input), -p prompt (implies -i). Exit status is 0 on success, 2 for a usage error, \
            1 for an unknown command, else the low byte of the OSStatus as on macOS (44: item not found).
            """,
        subcommands: [
            CreateKeychain.self, DeleteKeychain.self, ListKeychains.self, DefaultKeychain.self, LoginKeychain.self,
            UnlockKeychain.self, LockKeychain.self, ShowKeychainInfo.self, SetKeychainSettings.self,
            SetKeychainPassword.self, Status.self, TPMStatusCommand.self, TPMEnroll.self, TPMUnenroll.self, TPMRecover.self, TPMEscrowCommand.self,
            AddGenericPassword.self, AddInternetPassword.self,
            FindGenericPassword.self, FindInternetPassword.self,
            DeleteGenericPassword.self, DeleteInternetPassword.self,
            SetGenericPasswordPartitionList.self, SetInternetPasswordPartitionList.self, SetKeyPartitionList.self, Access.self, AccessLogCommand.self,
            ForgetKeychainCommand.self,
            DumpKeychain.self, Export.self, Import.self,
            FindCertificate.self, FindIdentity.self, DeleteCertificate.self,
            ImportSecrets.self, ImportSSHKeys.self, ExportSSHKey.self, DeleteSSHKey.self, CreateSSHKey.self, FindKey.self, SyncCommand.self
        ])

    static func main() {
        ProcessHardening.becomeUndumpable()
        // On a terminal with no desktop agent (SSH), items needing the user's presence ask here.
        PresenceSetup.installPolkitWithTerminalAgent()
        // Where keychain-broker keeps the keys, a program an item does not trust is asked here.
        BrokerSetup.install(answerer: AccessAnswerers.standard())
        TPMPolicySetup.install()
        // A password piped in would otherwise stay in stdio's stdin buffer, which is freed (at
        // exit) but never cleared; unbuffered, each byte goes straight into a buffer we wipe.
        setvbuf(stdin, nil, _IONBF, 0)
        // argv as the kernel handed it: bytes, copied before the secrets in it are wiped.
        let arguments = CommandLine.rawArguments()
        var dispatcher = Dispatcher(argv: arguments)
        // One time limit for the TPM across the whole command, however many keychains it touches.
        let status = TPMDeadline.command { dispatcher.run() }
        fflush(stdout)
        Glibc.exit(status)
    }
}

extension CommandLine {
    /// The arguments as bytes. CommandLine.arguments would turn bytes that are not UTF-8 into
    /// U+FFFD, and two different account names into one.
    static func rawArguments() -> [Bytes] {
        (1..<Int(argc)).map { i in
            guard let p = unsafeArgv[i] else { return [] }
            return Array(UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p)))
        }
    }

    /// Overwrites bytes of argv in place, so that /proc/PID/cmdline (which reads this memory) no
    /// longer shows them. `index` counts from the first argument after the program name.
    static func wipe(argument index: Int, from offset: Int) {
        guard index + 1 < Int(argc), let p = unsafeArgv[index + 1] else { return }
        let length = strlen(p)
        guard offset < length else { return }
        memset(p + offset, Int32(UInt8(ascii: "x")), length - offset)
    }
}
