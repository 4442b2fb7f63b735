// swift-tools-version:6.0
import PackageDescription

// A helper runs once per git fetch or docker pull, so start-up is most of its cost: linked fully
// static (Swift runtime, SQLite and libcrypto included), it starts like a C program.
let helperLinking: [LinkerSetting] = [
    .unsafeFlags(["-static-executable"]),
    .linkedLibrary("dl"), .linkedLibrary("pthread")
]

let package = Package(
    name: "Keychain",
    products: [
        .library(name: "Security", targets: ["Security"]),
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .executable(name: "security", targets: ["SecurityTool"]),
        .executable(name: "git-credential-keychain", targets: ["git-credential-keychain"]),
        .executable(name: "docker-credential-keychain", targets: ["docker-credential-keychain"]),
        .executable(name: "keychain-secret-service", targets: ["keychain-secret-service"]),
        .executable(name: "keychain-ssh-agent", targets: ["keychain-ssh-agent"]),
        // The TPM's operations in a process of their own (the engine links no tpm2-tss):
        // installed as $(PREFIX)/libexec/keychain-tpm-helper, or beside the tools.
        .executable(name: "keychain-tpm-helper", targets: ["keychain-tpm-helper"]),
        // The keeper of the class keys, out of the user's reach: a system service of its own user.
        .executable(name: "keychain-broker", targets: ["keychain-broker"]),
        // pam_keychain.so: self-contained (Swift runtime linked in), exporting only pam_sm_*.
        .library(name: "pam_keychain", type: .dynamic, targets: ["PAMKeychain"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0")
    ],
    targets: [
        // System libraries, reached through module maps only.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CPAM", providers: [.apt(["libpam0g-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // The Linux calls Swift cannot make: variadic syscall(2) and prctl(2).
        .target(name: "CLinux"),
        // sd-bus's object tables (C macros) for the Secret Service provider.
        .target(name: "CSDBus", linkerSettings: [.linkedLibrary("systemd")]),
        .systemLibrary(name: "CTSS2", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),

        // The engine: no Foundation, so the helpers and the PAM module stay small and start fast.
        .target(name: "KeychainCore", dependencies: ["CSQLite", "CSodium", "COpenSSL", "CLinux"]),
        // User presence behind the engine's PresenceAuthorizer seam: polkit (pkcheck, pkttyagent)
        // and pinentry over Assuan, each a process of its own. Front ends install it at start.
        .target(name: "KeychainPresence", dependencies: ["KeychainCore", "KeychainProcess", "KeychainPeers", "CLinux"]),
        // Programs the targets over the engine start (git, pkcheck, pinentry, keychain-tpm-helper):
        // by absolute path, with a fixed environment, for a bounded time. The engine starts none.
        .target(name: "KeychainProcess", dependencies: ["KeychainCore", "CLinux"]),
        // How a front end reaches the TPM: keychain-tpm-helper's client, its wire format and its
        // own main loop; installed into the engine's TPMAccess by each front end at start.
        .target(name: "KeychainTPMClient", dependencies: ["KeychainCore", "KeychainProcess", "CLinux"]),
        // The TPM policy over the engine's keybag: enrolment, the recovery, the passwordless copy,
        // the rollback counter, the boot event log. Installed into the engine's TPMAccess by each
        // front end at start (`TPMPolicySetup`), with the helper's client.
        .target(name: "KeychainTPMPolicy", dependencies: ["KeychainCore", "KeychainTPMClient", "CSodium", "CLinux"]),
        // `security sync`: the record format, the signed group manifest, device keys, the git
        // transport and the exchange, over the engine's items (git runs as a process of its own).
        .target(name: "KeychainSync", dependencies: ["KeychainCore", "KeychainProcess", "CLinux", "CSodium"]),
        // SSH keys in the keychain: the agent protocol (draft-miller-ssh-agent), OpenSSH's key and
        // certificate formats, signing, and the agent's socket; keys are the engine's key items.
        .target(name: "KeychainSSH", dependencies: ["KeychainCore", "KeychainPeers", "COpenSSL", "CLinux"]),
        // Who a peer process is (a bus client, a socket's peer): pinned by a pidfd, its start,
        // executable and sandbox read through it; what a decision about a caller rests on.
        .target(name: "KeychainPeers", dependencies: ["CLinux"]),
        // The broker: the wire between the front ends and keychain-broker, the client that the
        // engine's KeyCustodian seam is installed with, and the service's custody of class keys,
        // access lists and the access log. Over the engine and KeychainPeers (who is asking).
        .target(name: "KeychainBroker", dependencies: ["KeychainCore", "KeychainPeers", "CLinux"]),
        // The Secret Service's items over the engine: libsecret's attribute vocabulary mapped to
        // Apple's attributes, searches, replace, sandboxed apps' own items. The service and the
        // importer of `security import-secrets` share it.
        .target(name: "SecretServiceItems", dependencies: ["KeychainCore"]),
        // KWallet's items over the engine: folders, entry names and the three entry types kept
        // exactly (as Secret Service items the service also shows), Qt's QDataStream forms, and
        // KWallet's .kwl files. keychain-secret-service's org.kde.KWallet, its importer and
        // `security import-secrets` share it.
        .target(name: "KWalletItems", dependencies: ["KeychainCore", "SecretServiceItems", "CredentialHelperSupport", "COpenSSL"]),
        // Apple's face: SecItem*, kSec* constants, OSStatus, NSDictionary results.
        .target(name: "Security", dependencies: ["KeychainBroker", "KeychainCore", "KeychainPresence", "KeychainTPMPolicy", "CFoundationBridge"]),
        // Foundation's own CFDictionary functions, for reading a SecItem dictionary without
        // converting every key and value first (declarations only; libFoundation has them).
        .target(name: "CFoundationBridge"),
        // Apple's LAContext over polkit, for kSecUseAuthenticationContext.
        .target(name: "LocalAuthentication", dependencies: ["KeychainCore", "KeychainPresence", "Security"]),

        // The command-line tool, a front end over the engine.
        .executableTarget(
            name: "SecurityTool",
            dependencies: [
                "KeychainBroker",
                "KeychainCore", "KeychainPresence", "KeychainSync", "KeychainTPMClient", "KeychainTPMPolicy", "KeychainSSH", "KeychainPeers",
                "CredentialHelperSupport", "SecretServiceItems", "KWalletItems", .product(name: "ArgumentParser", package: "swift-argument-parser")
            ],
            linkerSettings: helperLinking + [
                .linkedLibrary("_FoundationCollections"), .linkedLibrary("_FoundationCShims"), .linkedLibrary("swiftSynchronization")
            ]),

        // Credential helpers: small processes started once per fetch or pull, so they link the
        // engine only (no Foundation) and the Swift runtime statically.
        .target(name: "CredentialHelperSupport", dependencies: ["KeychainCore"], path: "helpers/CredentialHelperSupport"),
        .executableTarget(
            name: "git-credential-keychain", dependencies: ["KeychainBroker", "CredentialHelperSupport", "KeychainCore", "KeychainPresence"],
            path: "helpers/git-credential-keychain",
            linkerSettings: helperLinking),
        .executableTarget(
            name: "docker-credential-keychain", dependencies: ["KeychainBroker", "CredentialHelperSupport", "KeychainCore", "KeychainPresence"],
            path: "helpers/docker-credential-keychain",
            linkerSettings: helperLinking),

        // keychain-secret-service's D-Bus plumbing over sd-bus: reading and writing messages, a
        // client's calls, who a connection is (BusPeer, Caller), the errors the Secret Service names.
        .target(name: "SessionBus", dependencies: ["KeychainCore", "KeychainPeers", "CSDBus"]),

        // The Secret Service (org.freedesktop.secrets) over the engine's keychains: its collections,
        // items, sessions and prompts, and xdg-desktop-portal's Secret backend on the same connection.
        .target(
            name: "SecretServiceBus",
            dependencies: ["SessionBus", "KeychainCore", "SecretServiceItems", "KeychainPeers", "KeychainPresence", "CSDBus", "COpenSSL", "CLinux"]),

        // KWallet's own API (org.kde.KWallet on org.kde.kwalletd5 and 6) on the Secret Service's
        // connection and loop: wallets are keychains, their folders and entries KWalletItems' items.
        .target(name: "KWalletBus", dependencies: ["SecretServiceBus", "SessionBus", "KWalletItems", "KeychainCore", "CSDBus"]),

        // Becoming the user's Secret Service and KWallet and giving them back (enable, disable,
        // status: gnome-keyring's, gcr's and kwalletd's files, units and names), and import and
        // export with another running provider, as a client on the session bus.
        .target(
            name: "ProviderSwitch",
            dependencies: [
                "SessionBus", "SecretServiceBus", "KWalletBus", "KWalletItems", "SecretServiceItems", "KeychainCore", "KeychainPresence",
                "KeychainPeers", "CSDBus", "COpenSSL"
            ]),

        // The desktop's Secret Service (org.freedesktop.secrets), a front end over the engine: its
        // arguments only, the services in the four targets above. The Swift runtime linked in (libsystemd has no static library, so not -static-executable):
        // it runs without the toolchain, and maps none of the runtime's unused shared pages.
        .executableTarget(
            name: "keychain-secret-service",
            dependencies: [
                "SessionBus", "SecretServiceBus", "KWalletBus", "ProviderSwitch", "KeychainBroker", "KeychainCore", "KeychainPresence",
                "KeychainTPMPolicy", "CSDBus", "CLinux"
            ],
            exclude: ["dbus"], linkerSettings: [.unsafeFlags(["-static-stdlib", "-Xlinker", "-z", "-Xlinker", "now"])]),

        // The SSH agent: a daemon for the whole session, like keychain-secret-service, so linked the
        // same way (the Swift runtime inside, not -static-executable): it starts once and lives on,
        // start-up costs nothing that matters, and it can run polkit's helpers and the TPM's.
        .executableTarget(
            name: "keychain-ssh-agent", dependencies: ["KeychainBroker", "KeychainSSH", "KeychainCore", "KeychainPresence", "KeychainTPMClient", "CLinux"],
            linkerSettings: [.unsafeFlags(["-static-stdlib", "-Xlinker", "-z", "-Xlinker", "now"])]),

        // Sealing a keychain to the TPM: tpm2-tss's ESAPI, in a program of its own that the engine
        // runs for each TPM operation. The tools are fully static and Debian has no static
        // tpm2-tss (and dlopen in a static program gives libcrypto a second C library, which
        // crashes); a process of its own also bounds what a TPM that stops answering costs.
        .target(name: "KeychainTPM", dependencies: ["KeychainCore", "CTSS2", "COpenSSL"]),
        .executableTarget(
            name: "keychain-tpm-helper", dependencies: ["KeychainCore", "KeychainTPM", "KeychainTPMClient"],
            linkerSettings: [.unsafeFlags(["-static-stdlib", "-Xlinker", "-z", "-Xlinker", "now"])]),

        // The broker's daemon: socket-activated by systemd (or started by keychain-broker-start),
        // running as its own system user; linked like the other daemons.
        .executableTarget(
            name: "keychain-broker", dependencies: ["KeychainBroker", "KeychainCore", "KeychainPeers", "CLinux"],
            linkerSettings: [.unsafeFlags(["-static-stdlib", "-Xlinker", "-z", "-Xlinker", "now"])]),

        // The PAM module: Swift logic behind a C shim that owns the exported entry points.
        .target(name: "PAMKeychainShim", dependencies: ["CPAM"], path: "pam/shim"),
        .target(
            name: "PAMKeychain",
            dependencies: ["KeychainBroker", "PAMKeychainShim", "KeychainCore", "KeychainTPMPolicy", "SecretServiceItems", "KWalletItems", "CPAM"],
            path: "pam/Sources/PAMKeychain",
            linkerSettings: [
                .unsafeFlags([
                    "-static-stdlib",
                    "-Xlinker", "--version-script=\(Context.packageDirectory)/pam/pam_keychain.map",
                    "-Xlinker", "-z", "-Xlinker", "nodelete",
                    // Resolved at load (full RELRO): loaded into every login process.
                    "-Xlinker", "-z", "-Xlinker", "now"
                ])
            ]),

        // `make bench`'s in-process figures (not a product: nothing to install).
        .executableTarget(
            name: "keychain-bench", dependencies: ["Security", "KeychainCore", "SecretServiceItems", "CSQLite"],
            path: "bench/Sources/keychain-bench"),

        // Tests/stress: the writer that crash.py kills at random moments.
        .executableTarget(name: "keychain-stress-writer", dependencies: ["KeychainCore"], path: "Tests/stress/writer"),

        // Tests/presence: SecItem and LAContext calls answered by a real polkit.
        .executableTarget(name: "keychain-presence-probe", dependencies: ["Security", "LocalAuthentication"], path: "Tests/presence/probe"),

        // Tests/broker: a client of keychain-broker as the engine will be (unlock, read, whoAmI, log).
        .executableTarget(name: "keychain-broker-probe", dependencies: ["KeychainBroker", "KeychainCore", "KeychainPresence"], path: "Tests/broker/probe"),

        // Tests/access: a SecItem program, trusted in its folder and an attacker's copy elsewhere.
        .executableTarget(name: "keychain-access-probe", dependencies: ["Security"], path: "Tests/access/probe"),

        // Tests/tpm: the SSH agent's TPM keys through keychain-tpm-helper, as a caller makes and uses them.
        .executableTarget(name: "keychain-tpm-probe", dependencies: ["KeychainCore", "KeychainTPMClient"], path: "Tests/tpm/probe"),

        // What the engine's test targets share (a scratch folder, a test case with a keychain).
        .target(name: "KeychainTestSupport", dependencies: ["KeychainCore"], path: "Tests/KeychainTestSupport"),
        .testTarget(name: "KeychainCoreTests", dependencies: ["KeychainCore", "KeychainTestSupport", "SecretServiceItems", "KeychainProcess"]),
        .testTarget(
            name: "KeychainTPMPolicyTests", dependencies: ["KeychainTPMPolicy", "KeychainCore", "KeychainTestSupport", "KeychainTPM", "KeychainTPMClient"]),
        .testTarget(name: "KWalletItemsTests", dependencies: ["KWalletItems", "KeychainCore", "KeychainTestSupport", "SecretServiceItems"]),
        .testTarget(name: "KeychainSyncTests", dependencies: ["KeychainSync", "KeychainCore", "KeychainTestSupport", "SecretServiceItems"]),
        .testTarget(name: "KeychainSSHTests", dependencies: ["KeychainSSH", "KeychainCore", "KeychainPeers", "KeychainTestSupport", "CLinux"]),
        .testTarget(name: "KeychainBrokerTests", dependencies: ["KeychainBroker", "KeychainCore", "KeychainPeers", "KeychainTestSupport", "CLinux"]),
        .testTarget(name: "KeychainPresenceTests", dependencies: ["KeychainPresence", "KeychainCore"]),
        .testTarget(name: "KeychainPeersTests", dependencies: ["KeychainPeers", "CLinux"]),
        .testTarget(name: "SecurityTests", dependencies: ["Security", "LocalAuthentication", "KeychainCore"]),
        .testTarget(name: "CredentialHelperTests", dependencies: ["CredentialHelperSupport", "KeychainCore"]),
        .testTarget(name: "SessionBusTests", dependencies: ["SessionBus", "KeychainCore", "KeychainPeers", "CSDBus"]),
        .testTarget(
            name: "SecretServiceBusTests",
            dependencies: ["SecretServiceBus", "SessionBus", "KeychainCore", "KeychainTestSupport", "SecretServiceItems", "CSDBus", "COpenSSL"]),
        .testTarget(name: "KWalletBusTests", dependencies: ["KWalletBus", "KWalletItems"]),
        .testTarget(name: "ProviderSwitchTests", dependencies: ["ProviderSwitch", "SessionBus"])
    ],
    swiftLanguageModes: [.v5]
)
