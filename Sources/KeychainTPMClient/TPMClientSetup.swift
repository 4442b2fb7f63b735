import KeychainCore

/// What a front end calls at its start: the engine reaches the TPM through `keychain-tpm-helper`.
package enum TPMClientSetup {
    package static func install() {
        guard TPMAccess.reach == nil else { return }
        TPMAccess.reach = { try HelperTPM.reaching($0) }
    }
}
