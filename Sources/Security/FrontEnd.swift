internal import KeychainBroker
internal import KeychainCore
internal import KeychainPresence
internal import KeychainTPMPolicy

/// What Apple's API sets up in the engine before its first keychain operation, as every front end
/// does at its start: polkit asks for the person, keychain-broker keeps the class keys where one
/// runs (asking the person on this program's terminal), and keychain-tpm-helper reaches the TPM.
enum FrontEnd {
    static func prepare() {
        PresenceSetup.installPolkit()
        BrokerSetup.install(answerer: AccessAnswerers.standard())
        TPMPolicySetup.install()
    }
}
