import KeychainCore

/// What a front end calls at its start: the engine reaches the TPM through `keychain-tpm-helper`.
package enum TPMClientSetup {
    package static func install() {
        guard TPMAccess.reach == nil else { return }
        TPMAccess.reach = { configuration in
            guard let helper = configuration.helper.map({ HelperTPM.acceptable($0) ? $0 : "" }) ?? HelperTPM.locate(), !helper.isEmpty else {
                throw TPMFailure.unavailable("\(HelperTPM.name) is not installed (this program reaches the TPM through it)")
            }
            return HelperTPM(configuration: configuration, path: helper)
        }
    }
}
