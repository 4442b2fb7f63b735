import ArgumentParser

/// One of macOS's subcommands, with how its command line parses: the optstring is the one its
/// function in Apple's SecurityTool hands to getopt, and the table is in security.c's order,
/// because a name matches by prefix and the first match wins (security.c's match_command).
struct CommandSpec {
    let name: String
    /// The command here, or nil for one of Apple's that has no meaning on Linux.
    let type: ParsableCommand.Type?
    var optstring = ""
    /// This tool's own long options, and whether each takes a value.
    var longOptions: [String: Bool] = [:]
    /// Options whose values are secrets: warned about, hidden by -v, wiped from argv.
    var secretOptions: Set<String> = []
    /// Options that, given last without a value, mean "prompt for it" (keychain_add.c's ':' case).
    var promptWhenLast: Set<String> = []
    /// Options spelled differently here ("-p" of add-generic-password is macOS's legacy "-w").
    var renamed: [String: String] = [:]
    /// Long options whose value is optional ("--git-credentials" or "--git-credentials FILE"),
    /// and the parser's name for the option when a value is given.
    var optionalValues: [String: String] = [:]
    /// import takes its file before its options (keychain_import.c starts getopt at optind = 2).
    var operandFirst = false
    var synopsis = ""

    static func unavailable(_ name: String) -> CommandSpec { CommandSpec(name: name, type: nil) }
}

enum CommandTable {
    static let passwordAttributes = "a:c:C:D:j:l:s:"

    static let commands: [CommandSpec] = [
        CommandSpec(name: "help", type: nil, synopsis: "[command ...]"),
        CommandSpec(
            name: "list-keychains", type: ListKeychains.self, optstring: "d:hs",
            synopsis: "[-h] [-d user|system|common|dynamic] [-s [keychain...]]"),
        .unavailable("list-smartcards"),
        CommandSpec(
            name: "default-keychain", type: DefaultKeychain.self, optstring: "d:hs",
            synopsis: "[-h] [-d user|system|common|dynamic] [-s [keychain]]"),
        CommandSpec(
            name: "login-keychain", type: LoginKeychain.self, optstring: "d:hs",
            synopsis: "[-h] [-d user|system|common|dynamic] [-s [keychain]]"),
        CommandSpec(
            name: "create-keychain", type: CreateKeychain.self, optstring: "hp:P", longOptions: ["tpm": false, "no-tpm": false],
            secretOptions: ["p"], synopsis: "[-hP] [-p password] [--tpm|--no-tpm] [keychain...]"),
        CommandSpec(name: "delete-keychain", type: DeleteKeychain.self, optstring: "h", synopsis: "[-h] [keychain...]"),
        CommandSpec(name: "lock-keychain", type: LockKeychain.self, optstring: "ah", synopsis: "[-h] [-a|keychain]"),
        CommandSpec(
            name: "unlock-keychain", type: UnlockKeychain.self, optstring: "hp:u", longOptions: ["accept-older-copy": false],
            secretOptions: ["p"], synopsis: "[-hu] [-p password] [--accept-older-copy] [keychain]"),
        CommandSpec(
            name: "set-keychain-settings", type: SetKeychainSettings.self, optstring: "hlt:u",
            synopsis: "[-hlu] [-t timeout] [keychain]"),
        CommandSpec(
            name: "set-keychain-password", type: SetKeychainPassword.self, optstring: "ho:p:",
            longOptions: ["rotate-keys": false], secretOptions: ["o", "p"],
            synopsis: "[-h] [-o oldPassword] [-p newPassword] [keychain]"),
        CommandSpec(name: "show-keychain-info", type: ShowKeychainInfo.self, optstring: "hs", synopsis: "[keychain]"),
        CommandSpec(name: "dump-keychain", type: DumpKeychain.self, optstring: "adhir", synopsis: "[-adhir] [keychain...]"),
        .unavailable("create-keypair"),
        CommandSpec(
            name: "add-generic-password", type: AddGenericPassword.self,
            optstring: ":" + passwordAttributes + "G:p:w:X:UAT:hS",
            longOptions: ["accessibility": true, "prompt-password": false, "require": true, "synchronizable": false],
            secretOptions: ["p", "w"], promptWhenLast: ["p", "w"], renamed: ["p": "w"],
            synopsis: "[-h] [-a account] [-s service] [-w password] [-S] [options...] [-A|-T appPath] [--require condition,...] [keychain]"),
        CommandSpec(
            name: "add-internet-password", type: AddInternetPassword.self,
            optstring: ":" + passwordAttributes + "d:p:P:r:t:w:X:UAT:hS",
            longOptions: ["accessibility": true, "prompt-password": false, "require": true, "synchronizable": false],
            secretOptions: ["w"], promptWhenLast: ["p", "w"],
            synopsis: "[-h] [-a account] [-s server] [-w password] [-S] [options...] [-A|-T appPath] [--require condition,...] [keychain]"),
        .unavailable("add-certificates"),
        CommandSpec(
            name: "find-generic-password", type: FindGenericPassword.self, optstring: "h" + passwordAttributes + "G:wg",
            longOptions: ["access": false], synopsis: "[-h] [-a account] [-s service] [options...] [-g] [--access] [keychain...]"),
        CommandSpec(
            name: "delete-generic-password", type: DeleteGenericPassword.self, optstring: "h" + passwordAttributes + "G:",
            synopsis: "[-h] [-a account] [-s service] [options...] [keychain...]"),
        CommandSpec(
            name: "set-generic-password-partition-list", type: SetGenericPasswordPartitionList.self,
            optstring: ":" + passwordAttributes + "G:S:k:", secretOptions: ["k"], promptWhenLast: ["k"],
            synopsis: "[-a account] [-s service] [-S partition-list] [-k password] [options...] [keychain]"),
        CommandSpec(
            name: "find-internet-password", type: FindInternetPassword.self,
            optstring: "h" + passwordAttributes + "d:gp:P:r:wt:", longOptions: ["access": false],
            synopsis: "[-h] [-a account] [-s server] [options...] [-g] [--access] [keychain...]"),
        CommandSpec(
            name: "delete-internet-password", type: DeleteInternetPassword.self,
            optstring: "h" + passwordAttributes + "d:p:P:r:t:",
            synopsis: "[-h] [-a account] [-s server] [options...] [keychain...]"),
        CommandSpec(
            name: "set-internet-password-partition-list", type: SetInternetPasswordPartitionList.self,
            optstring: passwordAttributes + "d:p:P:r:S:t:k:", secretOptions: ["k"],
            synopsis: "[-a account] [-s server] [-S partition-list] [-k password] [options...] [keychain]"),
        CommandSpec(
            name: "find-key", type: FindKey.self, optstring: "a:c:dD:ehj:l:rst:uvw",
            synopsis: "[-h] [-a appLabel] [-c creator] [-D description] [-j comment] [-l label] [-t type] [-deprsuvw] [keychain...]"),
        CommandSpec(
            name: "set-key-partition-list", type: SetKeyPartitionList.self,
            optstring: ":a:c:dD:ej:k:l:rsS:t:uvw", secretOptions: ["k"], promptWhenLast: ["k"],
            synopsis: "[-S partition-list] [-k password] [options...] [keychain]"),
        CommandSpec(
            name: "find-certificate", type: FindCertificate.self, optstring: "hac:e:mpZ",
            synopsis: "[-h] [-a] [-c name] [-e emailAddress] [-m] [-p] [-Z] [keychain...]"),
        CommandSpec(
            name: "find-identity", type: FindIdentity.self, optstring: "hp:s:v",
            synopsis: "[-h] [-p policy] [-s string] [-v] [keychain...]"),
        CommandSpec(
            name: "delete-certificate", type: DeleteCertificate.self, optstring: "hc:Z:t",
            synopsis: "[-h] [-c name] [-Z hash] [-t] [keychain...]"),
        .unavailable("delete-identity"),
        .unavailable("set-identity-preference"),
        .unavailable("get-identity-preference"),
        .unavailable("create-db"),
        CommandSpec(
            name: "export", type: Export.self, optstring: "k:o:t:f:P:ph", secretOptions: ["P"],
            synopsis: "[-k keychain] [-t type] [-f format] [-p] [-P passphrase] [-o outfile]"),
        CommandSpec(
            name: "import", type: Import.self, optstring: "k:t:f:P:xhAT:", secretOptions: ["P"], operandFirst: true,
            synopsis: "inputfile [-k keychain] [-t type] [-f format] [-x] [-P passphrase] [-A|-T appPath]"),
        .unavailable("export-smartcard"), .unavailable("cms"), .unavailable("install-mds"),
        .unavailable("add-trusted-cert"), .unavailable("remove-trusted-cert"), .unavailable("dump-trust-settings"),
        .unavailable("user-trust-settings-enable"), .unavailable("trust-settings-export"),
        .unavailable("trust-settings-import"), .unavailable("verify-cert"), .unavailable("authorize"),
        .unavailable("authorizationdb"), .unavailable("execute-with-privileges"), .unavailable("leaks"),
        .unavailable("error"), .unavailable("create-filevaultmaster-keychain"), .unavailable("smartcards"),
        .unavailable("translocate-policy-check"), .unavailable("translocate-status-check"),
        .unavailable("translocate-original-path"), .unavailable("requirement-evaluate"), .unavailable("filevault"),
        .unavailable("platformsso"),
        // This tool's own commands come last, so that no prefix of Apple's names reaches them first.
        CommandSpec(name: "status", type: Status.self, optstring: "h", synopsis: "[keychain]"),
        CommandSpec(
            name: "import-ssh-keys", type: ImportSSHKeys.self, optstring: "chk:n", longOptions: ["dry-run": false],
            synopsis: "[-c] [-n] [-k keychain] [keyfile...]"),
        CommandSpec(name: "export-ssh-key", type: ExportSSHKey.self, optstring: "hk:o:", synopsis: "[-k keychain] -o file fingerprint|comment"),
        CommandSpec(name: "delete-ssh-key", type: DeleteSSHKey.self, optstring: "hk:", synopsis: "[-k keychain] fingerprint|comment"),
        CommandSpec(
            name: "create-ssh-key", type: CreateSSHKey.self, optstring: "hC:k:", longOptions: ["tpm": false, "require": true],
            synopsis: "--tpm [-C comment] [--require user-presence] [-k keychain]"),
        CommandSpec(
            name: "import-secrets", type: ImportSecrets.self, optstring: "hnp:",
            longOptions: [
                "git-credentials": false, "docker-config": false, "keyring": true, "keyrings": false, "kwallet": true, "kwallets": false,
                "all": false, "dry-run": false
            ],
            secretOptions: ["p"],
            optionalValues: ["git-credentials": "git-credentials-file", "docker-config": "docker-config-file"],
            synopsis:
                "[-n|--dry-run] [-p password] [--git-credentials [file]] [--docker-config [file]] [--keyring file]... [--keyrings] [--kwallet file]... [--kwallets] [--all]"
        ),
        CommandSpec(
            name: "access", type: Access.self, optstring: "h" + passwordAttributes + "G:d:p:P:r:t:",
            longOptions: ["grant": true, "revoke": false, "list": false, "interpreter": false, "program": true, "internet": false],
            optionalValues: ["revoke": "revoke-entry"],
            synopsis:
                "[-a account] [-s service|server] [options...] [--internet] [--list | --grant entry [--interpreter] | --revoke entry] [keychain...] | --program path [--list | --revoke] [keychain...]"
        ),
        CommandSpec(name: "forget-keychain", type: ForgetKeychainCommand.self, optstring: "hp:", synopsis: "[-p password] [keychain]"),
        CommandSpec(
            name: "access-log", type: AccessLogCommand.self, optstring: "h", longOptions: ["since": true, "json": false],
            synopsis: "[--since time] [--json]"),
        CommandSpec(name: "tpm-status", type: TPMStatusCommand.self, optstring: "h", synopsis: "[keychain]"),
        CommandSpec(
            name: "tpm-enroll", type: TPMEnroll.self, optstring: "hp:", longOptions: ["passwordless": false, "pcrs": true, "default": true],
            secretOptions: ["p"], synopsis: "[-h] [-p password] [--passwordless] [--pcrs list|none] [keychain] | --default on|off|system|show"),
        CommandSpec(
            name: "tpm-unenroll", type: TPMUnenroll.self, optstring: "hp:", longOptions: ["passwordless": false],
            secretOptions: ["p"], synopsis: "[-h] [-p password] [--passwordless] [keychain]"),
        CommandSpec(
            name: "tpm-recover", type: TPMRecover.self, optstring: "hR:p:", longOptions: ["pcrs": true, "no-tpm": false], secretOptions: ["R", "p"],
            synopsis: "[-h] [-R recoveryKey] [-p newPassword] [--pcrs list | --no-tpm] [keychain]"),
        CommandSpec(
            name: "tpm-escrow", type: TPMEscrowCommand.self, optstring: "h", longOptions: ["new-key": true, "key": true],
            synopsis: "[-h] --new-key secretFile | --key secretFile escrowFile"),
        CommandSpec(
            name: "sync", type: SyncCommand.self, optstring: "hk:",
            synopsis: "[-k keychain] init REMOTE | join REMOTE | approve [CODE] | confirm CODE | now | status | remove-device ID | leave | default [on|off]")
    ]

    /// security.c's match_command: the first command whose name starts with `name`.
    static func match(_ name: String) -> CommandSpec? {
        commands.first { $0.name.hasPrefix(name) }
    }
}
