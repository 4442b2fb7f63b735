import Glibc
import KeychainPresence
import ProviderSwitch
import SecretServiceBus
import SessionBus

/// The commands beside serving: `enable`, `disable`, `status` (becoming the user's provider and
/// giving it back), `import` and `export` (secrets from and to another running provider). They
/// are here, not in `security`, because they speak D-Bus through sd-bus, which the statically
/// linked `security` cannot link.
enum Subcommand {
    static let names: Set<String> = ["enable", "disable", "status", "import", "export"]

    static let usage = """
        usage: keychain-secret-service [--replace] [--kwallet] [--pinentry PROGRAM]
               keychain-secret-service enable [--no-import] [--pinentry PROGRAM]
               keychain-secret-service disable
               keychain-secret-service status
               keychain-secret-service import [--from NAME] [--dry-run] [--pinentry PROGRAM]
               keychain-secret-service export --to NAME [--dry-run] [--pinentry PROGRAM]

        Without a command: provides the Secret Service API (org.freedesktop.secrets) on the session
        bus, storing in the keychains that `security` manages; --replace takes the name over from
        another provider that allows it; --kwallet also answers KWallet's API (org.kde.kwalletd5,
        org.kde.kwalletd6) for KDE's programs, alone when another provider keeps the Secret Service.
          enable   become your Secret Service: the running provider's secrets imported, gnome-keyring's
                   secrets component kept from starting, your gnome-keyring-daemon stopped, this one started;
                   on KDE also KWallet's entries imported, kwalletd kept out, org.kde.kwalletd5/6 answered
          disable  undo exactly what enable did, and give the names back to gnome-keyring or kwalletd
          status   who provides org.freedesktop.secrets and KWallet's names, and what is configured
          import   every collection and item of a running provider (default org.freedesktop.secrets)
          export   every keychain's Secret Service items into a running provider (the way back)
        """

    static func fail(_ message: String) -> Int32 {
        fputs("keychain-secret-service: \(message)\n\(usage)\n", stderr)
        return 64
    }

    static func run(_ command: String, _ arguments: [String], pinentry defaultPinentry: String) -> Int32 {
        var arguments = arguments[...]
        var pinentry = defaultPinentry
        var dryRun = false, noImport = false
        var from: String?, to: String?
        while let argument = arguments.popFirst() {
            switch (command, argument) {
            case (_, "--help"), (_, "-h"):
                print(usage)
                return 0
            case ("enable", "--pinentry"), ("import", "--pinentry"), ("export", "--pinentry"):
                guard let program = arguments.popFirst(), !program.isEmpty else { return fail("--pinentry needs a program") }
                pinentry = program
            case ("enable", "--no-import"):
                noImport = true
            case ("import", "--dry-run"), ("import", "-n"), ("export", "--dry-run"), ("export", "-n"):
                dryRun = true
            case ("import", "--from"):
                guard let name = arguments.popFirst(), !name.isEmpty else { return fail("--from needs a bus name") }
                from = name
            case ("export", "--to"):
                guard let name = arguments.popFirst(), !name.isEmpty else { return fail("--to needs a bus name") }
                to = name
            default:
                return fail("\(command): unknown argument \(argument)")
            }
        }
        // Lines in the order they happen, on a pipe too (stderr is unbuffered).
        setvbuf(stdout, nil, _IOLBF, 0)
        let timeout = PinentryPrompt().timeout
        let asker = PasswordAsker(program: pinentry, timeout: timeout)
        let takeover = Takeover(pinentry: pinentry, promptTimeout: timeout)
        switch command {
        case "enable":
            return takeover.enable(importFirst: !noImport)
        case "disable":
            return takeover.disable()
        case "status":
            return takeover.status()
        case "import", "export":
            let client: BusClient
            do {
                client = try BusClient()
            } catch {
                fputs("keychain-secret-service: \(command): \(ServiceError(error).message)\n", stderr)
                return 1
            }
            if command == "import" {
                return BusImport(from: from ?? SecretService.busName, named: from != nil, dryRun: dryRun, asker: asker, promptTimeout: timeout)
                    .run(client: client)
            }
            guard let to else { return fail("export needs --to NAME (the provider's bus name: org.freedesktop.secrets, org.gnome.keyring)") }
            return BusExport(to: to, dryRun: dryRun, asker: asker, promptTimeout: timeout).run(client: client)
        default:
            return fail("unknown command \(command)")
        }
    }
}
