import KeychainCore
import KeychainTPMClient

/// What a front end that opens keychains calls at its start: the engine reaches the TPM through
/// `keychain-tpm-helper`, and a sealed keychain's unlock and re-keying go through this policy.
package enum TPMPolicySetup {
    package static func install() {
        TPMClientSetup.install()
        if TPMAccess.policy == nil { TPMAccess.policy = RollbackAndPasswordlessPolicy() }
    }
}

/// The engine's `TPMPolicy`: the rollback counter (RollbackCounter.swift), the passwordless copy
/// (Passwordless.swift) and the boot event log (BootEventLog.swift).
struct RollbackAndPasswordlessPolicy: TPMPolicy {
    func unlocking(_ store: KeychainStore, keybag: Keybag, c: Bytes, tpm: TPMConfiguration, acceptingOlderCopy: Bool) throws -> Bool {
        try store.advanceRollbackCounter(keybag, c: c, tpm: tpm, accepting: acceptingOlderCopy)
    }

    func preparingNewKeys(_ store: KeychainStore, uuid: Bytes, c: Bytes, oldC: Bytes?, tpm: TPMConfiguration) -> UInt64? {
        store.prepareRollbackCounter(uuid: uuid, c: c, oldC: oldC, tpm: tpm)
    }

    func replacedKeys(_ store: KeychainStore, keybag: Keybag, count: UInt64?, c: Bytes, oldC: Bytes, tpm: TPMConfiguration) throws {
        try PasswordlessRecord.remove(from: store.db)
        try store.finishRollbackCounter(keybag, count: count, c: c, oldC: oldC, tpm: tpm)
    }

    func recovery(a: Bytes, c: Bytes, keybag: Keybag) throws -> (record: Bytes, key: RecoveryKey) {
        let key = try RecoveryKey.generate()
        return (try RecoveryRecord.make(a: a, c: c, for: keybag, key: key).bytes, key)
    }

    func abandonedKeys(_ store: KeychainStore, uuid: Bytes, c: Bytes, tpm: TPMConfiguration) {
        store.removeTPMCounter(uuid: uuid, c: c, tpm: tpm)
    }

    func bootStateRefusal(pcrs: [UInt8], tpm: TPMConfiguration) -> String { BootStateDiagnosis.refusal(pcrs, tpm: tpm) }
}
