/// The module's arguments in /etc/pam.d: `debug`, `auto_create`, `lock_on_close`, `only_if=svc,...`,
/// `passwordless` (a session opened without a password unlocks a keychain enrolled for it; for the
/// stacks of fingerprint, smart-card and autologin logins only), `tpm_tcti=` and `tpm_helper=`
/// (where the TPM and keychain-tpm-helper are, when not /dev/tpmrm0 and the usual libexec),
/// `tpm_event_log=` (the boot event log, when not the kernel's),
/// `tpm_enroll` and `no_tpm_enroll` (a login keychain made by auto_create is, or is not, sealed to
/// the TPM; without either, the user's `security tpm-enroll --default`, else /etc/keychain/tpm-enroll),
/// `tpm_escrow=` (the administrator's key that such a keychain's recovery key is escrowed to, when
/// not /etc/keychain/recovery-escrow.pub; without one, auto_create seals nothing).
struct Options {
    var debug = false
    var autoCreate = false
    var lockOnClose = false
    var passwordless = false
    var tpmTCTI: String?
    var tpmHelper: String?
    /// The boot event log root reads for the workers (tests; default: the kernel's).
    var tpmEventLog: String?
    /// Whether auto_create seals the new keychain; nil: the default setting decides.
    var tpmEnrol: Bool?
    /// The escrow key's file, when not RecoveryEscrow.machineFile.
    var tpmEscrow: String?
    var onlyServices: [String]?
    var unknown: [String] = []

    init(argc: Int32, argv: UnsafePointer<UnsafePointer<CChar>?>?) {
        for i in 0..<Int(max(argc, 0)) {
            guard let raw = argv?[i] else { continue }
            let arg = String(cString: raw)
            switch arg {
            case "debug": debug = true
            case "auto_create": autoCreate = true
            case "lock_on_close": lockOnClose = true
            case "passwordless": passwordless = true
            case "tpm_enroll": tpmEnrol = true
            case "no_tpm_enroll": tpmEnrol = false
            default:
                if arg.hasPrefix("tpm_tcti=") {
                    tpmTCTI = String(arg.dropFirst("tpm_tcti=".count))
                } else if arg.hasPrefix("tpm_helper=") {
                    tpmHelper = String(arg.dropFirst("tpm_helper=".count))
                } else if arg.hasPrefix("tpm_escrow=") {
                    tpmEscrow = String(arg.dropFirst("tpm_escrow=".count))
                } else if arg.hasPrefix("tpm_event_log=") {
                    tpmEventLog = String(arg.dropFirst("tpm_event_log=".count))
                } else if arg.hasPrefix("only_if=") {
                    onlyServices = arg.dropFirst("only_if=".count).split(separator: ",").map(String.init)
                } else {
                    unknown.append(arg)
                }
            }
        }
    }

    func applies(to service: String?) -> Bool {
        guard let onlyServices else { return true }
        return service.map(onlyServices.contains) ?? false
    }
}
