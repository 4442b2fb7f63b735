import CLinux
import CSDBus
import Glibc
import KWalletBus
import KeychainBroker
import KeychainCore
import KeychainPresence
import KeychainTPMPolicy
import SecretServiceBus
import SessionBus

/// keychain-secret-service [--replace] [--kwallet] [--pinentry PROGRAM]
/// keychain-secret-service enable | disable | status | import | export ... (Subcommands.swift)
///
/// The desktop's org.freedesktop.secrets over the keychain. Started by D-Bus activation or the
/// systemd user unit; the pinentry program is --pinentry, else $KEYCHAIN_PINENTRY, else `pinentry`
/// (Debian's alternative pointing at the desktop's or the terminal's dialog).
let usage = """
    usage: keychain-secret-service [--replace] [--kwallet] [--pinentry PROGRAM]

    Provides the Secret Service API (org.freedesktop.secrets) on the session bus, storing in the
    keychains that `security` manages. --replace takes the name over from another provider.
    --kwallet also answers KWallet's API (org.kde.kwalletd5, org.kde.kwalletd6) for KDE's programs.
    """

var replace = false
var kwallet = false
var pinentry = getenv("KEYCHAIN_PINENTRY").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "pinentry"
// Before anything opens a keychain, the service's and the subcommands' (import, export, enable)
// alike: an item that asks for the user asks through polkit, and a keychain sealed to the TPM
// opens through keychain-tpm-helper.
PresenceSetup.installPolkit()
BrokerSetup.install(answerer: AccessAnswerers.standard())
TPMPolicySetup.install()
var arguments = CommandLine.arguments.dropFirst()
if let command = arguments.first, Subcommand.names.contains(command) {
    exit(Subcommand.run(command, Array(arguments.dropFirst()), pinentry: pinentry))
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--replace", "-r":
        replace = true
    case "--kwallet":
        kwallet = true
    case "--pinentry":
        guard let program = arguments.popFirst(), !program.isEmpty else {
            fputs("keychain-secret-service: --pinentry needs a program\n", stderr)
            exit(64)
        }
        pinentry = program
    case "--help", "-h":
        print(Subcommand.usage)
        exit(0)
    default:
        fputs("keychain-secret-service: unknown argument \(argument)\n\(usage)\n", stderr)
        exit(64)
    }
}

// The daemon has no terminal: the broker's questions about its clients go to the desktop's dialog
// or pinentry (the tests' answerer first). Each client is named to the broker for what it reads
// and stores (BrokerDeputy).
BrokerSetup.install(answerer: AccessAnswerers.daemon())
if let custodian = BrokerSetup.installed { SecretService.relay = BrokerDeputy(custodian: custodian) }
ProcessHardening.becomeUndumpable()
// Each client's connecting process is held by a pidfd while it is connected (BusPeer): the soft
// limit of descriptors (1024 under systemd) raised to the hard one, as systemd advises a program
// that uses poll(2), not select(2).
var descriptors = rlimit()
if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &descriptors) == 0, descriptors.rlim_cur < descriptors.rlim_max {
    descriptors.rlim_cur = descriptors.rlim_max
    _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &descriptors)
}
// A client writing to a prompt's closed pinentry must not kill the service.
signal(SIGPIPE, SIG_IGN)
// Stopped as systemd stops it (SIGTERM), or from a terminal: the loop ends and the session
// collection is removed.
_ = clinux_catch_termination()

var bus: OpaquePointer?
let opened = sd_bus_open_user(&bus)
guard opened >= 0, let bus else {
    fputs("keychain-secret-service: cannot connect to the session bus: \(String(cString: strerror(-opened)))\n", stderr)
    exit(1)
}
let service = SecretService(bus: bus, pinentryProgram: pinentry)
// xdg-desktop-portal's Secret backend, on the same connection (SecretServiceBus, Portal.swift).
let portal = SecretPortal(service: service)
do {
    try portal.register()
    if kwallet {
        // KWallet's API for KDE's programs, on the same connection and keychains (KWalletBus).
        let kwalletService = KWalletService(service: service)
        service.kwallet = kwalletService
        try kwalletService.register()
    }
    let status = try service.run(replace: replace)
    sd_bus_flush_close_unref(bus)
    SessionCollection.remove()
    exit(status)
} catch {
    SessionCollection.remove()
    fputs("keychain-secret-service: \(ServiceError(error).message)\n", stderr)
    exit(1)
}
