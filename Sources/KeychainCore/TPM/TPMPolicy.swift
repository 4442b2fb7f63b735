/// What the engine asks of the TPM policy (`KeychainTPMPolicy`) for a keychain sealed to a TPM.
/// The keybag's format and the key-encryption key it needs are the engine's (TPMBinding.swift,
/// TPMSealedSecret.swift); the rollback counter, the passwordless copy and what the boot event
/// log says are the policy's, reached only through this seam. Each front end installs it at its
/// start (`TPMPolicySetup`), with the way to reach the TPM.
package protocol TPMPolicy {
    /// Called by every unlock of a sealed keychain with class key C just unwrapped, before the
    /// keys are installed: the file checked against the TPM's rollback counter and both moved on.
    /// Returns whether the keychain has a counter now (the caller records it in the binding).
    func unlocking(_ store: KeychainStore, keybag: Keybag, c: Bytes, tpm: TPMConfiguration, acceptingOlderCopy: Bool) throws -> Bool
    /// Before the class keys of a sealed keychain are replaced by `c` (a rotation): the counter
    /// for the new keys, made while the old keys `oldC` still authorize; its count, or nil where
    /// none can be made.
    func preparingNewKeys(_ store: KeychainStore, uuid: Bytes, c: Bytes, oldC: Bytes?, tpm: TPMConfiguration) -> UInt64?
    /// Inside the transaction that wrote the keybag under new keys `c`: the counter's record for
    /// them (`count` from `preparingNewKeys`), the old keys' counter removed, and whatever else
    /// the policy wrapped under the old keys (the passwordless copy) dropped.
    func replacedKeys(_ store: KeychainStore, keybag: Keybag, count: UInt64?, c: Bytes, oldC: Bytes, tpm: TPMConfiguration) throws
    /// A new recovery key for new class keys `a` and `c` of `keybag` (a rotation), and its record
    /// for the binding (the old one opened the old A and C only).
    func recovery(a: Bytes, c: Bytes, keybag: Keybag) throws -> (record: Bytes, key: RecoveryKey)
    /// New keys `c` that were never committed: their counter leaves the TPM.
    func abandonedKeys(_ store: KeychainStore, uuid: Bytes, c: Bytes, tpm: TPMConfiguration)
    /// Why the TPM refused the keychain's secret sealed to the PCRs `pcrs` as well as to its
    /// password (`TPMFailure.bootState`; no wrong password counted), and what opens it now, in
    /// words a person can act on: what the boot event log tells.
    func bootStateRefusal(pcrs: [UInt8], tpm: TPMConfiguration) -> String
}

extension TPMAccess {
    /// The policy a sealed keychain needs; without one (a program that cannot reach the TPM),
    /// such a keychain cannot be unlocked or re-keyed here, and says why.
    static func installedPolicy() throws -> TPMPolicy {
        guard let policy else {
            throw KeychainError(.serviceNotAvailable, "this keychain is sealed to a TPM, and this program was built without the TPM's policy")
        }
        return policy
    }
}
