import Glibc

/// The three things a keychain asks of a TPM, done by `keychain-tpm-helper` in a process of its
/// own (`HelperTPM`), through tpm2-tss (Sources/KeychainTPM, the helper's only user). The engine
/// itself never links tpm2-tss: the tools are fully static and Debian ships no static tpm2-tss,
/// and dlopen in a static program gives the library a second C library whose thread-specific
/// data collides with the program's (libcrypto crashed in Esys_CreatePrimary). A process of its
/// own is worth having anyway: tpm2-tss's synchronous calls wait for the TPM without end, so only
/// a process that can be killed bounds what a TPM (or a TCTI) that stops answering costs, and
/// whatever tpm2-tss does with a malformed answer happens outside the caller.
package protocol TPMOperations {
    /// Seals `secret` under the owner hierarchy's storage key for `auth`, checks that it unseals.
    func seal(_ secret: Bytes, auth: Bytes) throws -> TPMSealedSecret
    /// The sealed secret for `auth`, if the TPM is the one recorded and accepts `auth`.
    func unseal(_ record: TPMSealedSecret, auth: Bytes, length: Int) throws -> Bytes
    /// The TPM, and whether its storage key is the one named `primaryName` (nil: not asked).
    func describe(primaryName: Bytes?) throws -> (TPMDescription, sealedHere: Bool?)
    /// Seals `secret` under the storage key with a policy of the current values of the SHA-256
    /// PCRs `pcrs` (no authorization value, no dictionary-attack count), checks that it unseals.
    func seal(_ secret: Bytes, toPCRs pcrs: [UInt8]) throws -> TPMSealedSecret
    /// The secret sealed by `seal(_:toPCRs:)`, if those PCRs still hold the values sealed to
    /// (`TPMFailure.bootState` when not).
    func unseal(_ record: TPMSealedSecret, pcrs: [UInt8], length: Int) throws -> Bytes
    /// Seals `secret` with a policy of both the current values of the SHA-256 PCRs `pcrs` and the
    /// authorization value `auth` (each wrong one counted by the TPM), checks that it unseals.
    func seal(_ secret: Bytes, auth: Bytes, pcrs: [UInt8]) throws -> TPMSealedSecret
    /// The secret sealed by `seal(_:auth:pcrs:)`: `TPMFailure.bootState` when the PCRs changed
    /// (not counted), `.authorization` for a wrong `auth` (counted).
    func unseal(_ record: TPMSealedSecret, auth: Bytes, pcrs: [UInt8], length: Int) throws -> Bytes
    /// The keychain's rollback counter: an NV counter index opened by `request.auth`.
    func counter(_ request: TPMCounterRequest) throws -> TPMCounterAnswer
    /// The current values of the SHA-256 PCRs `pcrs`, in their order (32 bytes each): compared
    /// with the boot event log when a PCR policy fails (`BootStateDiagnosis`).
    func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes]
}

extension TPMOperations {
    package func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes] { throw TPMFailure.unavailable("this TPM does not say its PCRs' values") }
}

/// What is asked of a keychain's NV counter (RollbackCounter.swift).
package struct TPMCounterRequest: Equatable {
    package enum Action: Equatable {
        /// The first candidate index holding a counter that `auth` opens, and its value.
        case find
        /// A new counter at the first free candidate, incremented once.
        case create
        /// +1 if the counter at `index` holds `expected`; its value after either way.
        case increment(index: UInt32, expected: UInt64)
        /// Undefined, if it is the keychain's.
        case remove(index: UInt32)
        /// As `find`, preferring the counter that agrees with the file's count `expected` (at it,
        /// or one behind), then a protected one; where a protected one is chosen, a counter of
        /// the earlier kind also opened by `auth` (a migration cut short) is undefined.
        case findMatching(expected: UInt64)
        /// The counter at `index`, of the earlier kind (the owner's) and at `expected`, given a
        /// protected successor: a protected counter of the keychain already there (a migration cut
        /// short), else a new one, if the platform hierarchy allows; `.none` where it does not.
        /// The old counter stays: the caller records the new count in the file first.
        case migrate(index: UInt32, expected: UInt64)
    }

    package var action: Action
    package var auth: Bytes
    package var candidates: [UInt32]

    package init(_ action: Action, auth: Bytes, candidates: [UInt32]) {
        self.action = action
        self.auth = auth
        self.candidates = candidates
    }
}

package struct TPMCounterAnswer: Equatable {
    /// index 0: no counter (find found none; remove).
    package var index: UInt32
    package var value: UInt64
    /// The platform's, with TPMA_NV_POLICY_DELETE: no one else with the TPM can undefine it.
    package var protected: Bool
    package static let none = TPMCounterAnswer(index: 0, value: 0)

    package init(index: UInt32, value: UInt64, protected: Bool = false) {
        self.index = index
        self.value = value
        self.protected = protected
    }
}

package enum TPMAccess {
    /// Unit tests put an in-memory TPM here (one that answers wrongly, too); nil everywhere else.
    nonisolated(unsafe) static var simulated: ((TPMConfiguration) -> TPMOperations)?
    /// How this program reaches a TPM: `keychain-tpm-helper`, a process of its own, installed by
    /// each front end at its start (KeychainTPMClient's `TPMClientSetup`). The engine starts no
    /// process; without it a TPM-sealed keychain cannot be opened here, and says why.
    nonisolated(unsafe) package static var reach: ((TPMConfiguration) throws -> TPMOperations)?
    /// What a sealed keychain needs beyond its keybag (`TPMPolicy`), installed with `reach`.
    nonisolated(unsafe) package static var policy: TPMPolicy?

    /// Where this process reaches the TPM of `configuration`. Throws `TPMFailure.unavailable`.
    package static func operations(_ configuration: TPMConfiguration) throws -> TPMOperations {
        guard configuration.tcti != nil else { throw TPMFailure.unavailable(configuration.absence) }
        if let simulated { return simulated(configuration) }
        guard let reach else { throw TPMFailure.unavailable("this program was built without a way to reach the TPM (keychain-tpm-helper)") }
        return try reach(configuration)
    }
}

/// Which PCRs (SHA-256 bank) an object is sealed to: 1 to 8 distinct indices below 24, in
/// ascending order, as the keybag stores them and the helper accepts them.
package enum PCRSelection {
    /// Secure Boot's state and the keys that signed what booted: what systemd-cryptenroll seals
    /// to by default, stable across kernel updates.
    package static let standard: [UInt8] = [7]

    package static func isValid(_ pcrs: [UInt8]) -> Bool {
        (1...8).contains(pcrs.count) && pcrs.allSatisfy { $0 < 24 } && zip(pcrs, pcrs.dropFirst()).allSatisfy { $0 < $1 }
    }

    /// "7", "0,2,7": a list as the user writes it (sorted, duplicates dropped); nil if malformed.
    package static func parse(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        var values: [UInt8] = []
        for part in parts {
            guard let value = UInt8(part), value < 24 else { return nil }
            values.append(value)
        }
        let sorted = Array(Set(values)).sorted()
        return isValid(sorted) ? sorted : nil
    }

    package static func describe(_ pcrs: [UInt8]) -> String { pcrs.map { String($0) }.joined(separator: ",") }
}
