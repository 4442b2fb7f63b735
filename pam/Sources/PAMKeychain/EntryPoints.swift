import CPAM
import Glibc
import KeychainBroker
import KeychainTPMPolicy

// Called by the C shim's pam_sm_* functions. The module acts only for the services `only_if`
// names, and answers PAM_IGNORE (never an error) everywhere else.

private func hooks(_ pamh: OpaquePointer?, _ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Hooks? {
    guard let pamh else { return nil }
    let pam = PAMHandle(raw: pamh, options: Options(argc: argc, argv: argv))
    for arg in pam.options.unknown { pam.log(LOG_WARNING, "unknown option \(arg) ignored") }
    guard pam.options.applies(to: pam.service) else { return nil }
    // A login keychain sealed to the TPM opens through keychain-tpm-helper; any other is unlocked
    // into keychain-broker's custody where one runs (the module asks nobody: it only unlocks and
    // locks), and never waits on it longer than 10 s: a broker that hangs must not hold a login.
    TPMPolicySetup.install()
    BrokerSetup.install(answerer: nil, timeout: 10)
    return Hooks(pam: pam)
}

@_cdecl("keychain_pam_authenticate")
func keychainPAMAuthenticate(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    hooks(pamh, argc, argv)?.authenticate() ?? PAM_IGNORE
}

@_cdecl("keychain_pam_setcred")
func keychainPAMSetcred(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    hooks(pamh, argc, argv)?.setCredentials(flags: flags) ?? PAM_IGNORE
}

@_cdecl("keychain_pam_open_session")
func keychainPAMOpenSession(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    hooks(pamh, argc, argv)?.openSession() ?? PAM_SUCCESS
}

@_cdecl("keychain_pam_close_session")
func keychainPAMCloseSession(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    hooks(pamh, argc, argv)?.closeSession() ?? PAM_SUCCESS
}

@_cdecl("keychain_pam_chauthtok")
func keychainPAMChauthtok(_ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32, _ argv: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    hooks(pamh, argc, argv)?.changePassword(flags: flags) ?? PAM_IGNORE
}
