/// What a keybag sealed to a TPM (version 3) holds beyond version 2, in the `keychain` table:
///
/// - `tpm`: the sealed secret's record (`TPMSealedSecret`); the key-encryption key needs it;
/// - `wrap.Au`, `wrap.Cu`, `check.Au`, `check.Cu`: the class keys of ThisDeviceOnly items (When-
///   Unlocked and AfterFirstUnlock), wrapped under that TPM-tangled key only, with their check
///   values. The recovery key does not open them: they are this TPM's alone;
/// - `recovery`: class keys A and C wrapped under the recovery key: the TPM policy's record
///   (KeychainTPMPolicy's `RecoveryRecord`), kept here as bytes.
///
/// All of them are in the keybag's checksum; the wrapped keys' additional data carries a digest
/// of `tpm`, so no record can be swapped in from another keybag.
package struct TPMBinding: Equatable {
    package var sealed: TPMSealedSecret
    var wrappedAu: Bytes
    var wrappedCu: Bytes
    var checkAu: Bytes
    var checkCu: Bytes
    package var recovery: Bytes

    static let fieldNames = ["tpm", "wrap.Au", "wrap.Cu", "check.Au", "check.Cu", "recovery"]

    var fields: [(name: String, value: Bytes)] {
        Array(zip(Self.fieldNames, [sealed.bytes, wrappedAu, wrappedCu, checkAu, checkCu, recovery]))
    }

    /// The stored bytes the checksum covers, as stored: a version 2 keybag has none.
    static func checksummed(_ stored: [String: Bytes], version: Int) -> [Bytes] {
        version >= 3 ? fieldNames.map { stored[$0] ?? [] } : []
    }

    init(sealed: TPMSealedSecret, wrappedAu: Bytes, wrappedCu: Bytes, checkAu: Bytes, checkCu: Bytes, recovery: Bytes) {
        self.sealed = sealed
        self.wrappedAu = wrappedAu
        self.wrappedCu = wrappedCu
        self.checkAu = checkAu
        self.checkCu = checkCu
        self.recovery = recovery
    }

    init(_ stored: [String: Bytes]) throws {
        guard let tpm = stored["tpm"], let au = stored["wrap.Au"], let cu = stored["wrap.Cu"],
            let checkAu = stored["check.Au"], checkAu.count == 16, let checkCu = stored["check.Cu"], checkCu.count == 16,
            let recovery = stored["recovery"], !recovery.isEmpty
        else { throw KeychainError(.decode, "the keybag is incomplete (TPM binding)") }
        self.init(
            sealed: try TPMSealedSecret(bytes: tpm), wrappedAu: au, wrappedCu: cu, checkAu: checkAu, checkCu: checkCu,
            recovery: recovery)
    }

    /// Writes the binding's fields, or removes them all (a keybag brought back to version 2).
    static func save(_ binding: TPMBinding?, to db: SQLiteDatabase) throws {
        if let binding {
            let insert = try db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES (?, ?)")
            for (name, value) in binding.fields { try insert.run([.text(name), .blob(value)]) }
        } else {
            let delete = try db.statement("DELETE FROM keychain WHERE name = ?")
            for name in fieldNames { try delete.run([.text(name)]) }
        }
    }
}

/// The class keys of ThisDeviceOnly items in a keychain sealed to a TPM: Au (WhenUnlocked) and Cu
/// (AfterFirstUnlock). AlwaysThisDeviceOnly items stay under D, which is in the file in the clear
/// whatever protects the rest: no TPM could keep them on this machine.
package struct DeviceKeys {
    package var a: Bytes
    package var c: Bytes

    package init(a: Bytes, c: Bytes) {
        self.a = a
        self.c = c
    }

    package static func generate() throws -> DeviceKeys {
        DeviceKeys(a: try Crypto.random(Crypto.keyLength), c: try Crypto.random(Crypto.keyLength))
    }

    package mutating func wipe() {
        a.wipe()
        c.wipe()
    }
}

extension Protection {
    /// The class key an item of this protection is sealed under. A keychain sealed to a TPM keeps
    /// ThisDeviceOnly items (but AlwaysThisDeviceOnly, see `DeviceKeys`) under their own keys;
    /// one without keeps them with their siblings, as Apple's systems without a passcode do.
    func keyClass(separatingDeviceOnly: Bool) -> LockClass {
        guard separatingDeviceOnly, isThisDeviceOnly else { return lockClass }
        switch lockClass {
        case .whenUnlocked: return .whenUnlockedThisDeviceOnly
        case .afterFirstUnlock: return .afterFirstUnlockThisDeviceOnly
        default: return lockClass
        }
    }
}

extension LockClass {
    /// The lock state a class key follows: Au locks with A, Cu with C.
    var lockState: LockClass {
        switch self {
        case .whenUnlockedThisDeviceOnly: return .whenUnlocked
        case .afterFirstUnlockThisDeviceOnly: return .afterFirstUnlock
        default: return self
        }
    }

    /// The ThisDeviceOnly key that locks with this one, if any.
    var deviceOnly: LockClass? {
        switch self {
        case .whenUnlocked: return .whenUnlockedThisDeviceOnly
        case .afterFirstUnlock: return .afterFirstUnlockThisDeviceOnly
        default: return nil
        }
    }
}

extension Keybag {
    package var isBound: Bool { binding != nil }

    /// Binds this keybag to the TPM of `tpm`: a new secret sealed there for the password whose
    /// scrypt output (under this keybag's salt and parameters) is `stretched`, A, C and the
    /// ThisDeviceOnly keys `device` wrapped under the tangled key, and `recovery`, the policy's
    /// record of A and C under the recovery key, kept. `counted`: the keychain has a rollback
    /// counter (`TPMSealedSecret.counted`).
    package mutating func bind(
        a: Bytes, c: Bytes, device: DeviceKeys, stretched: Bytes, recovery: Bytes,
        tpm: TPMConfiguration, counted: Bool, pcrs: [UInt8] = []
    ) throws {
        let placeholder = TPMSealedSecret(primaryName: [], sealedPublic: [], sealedPrivate: [])
        binding = TPMBinding(sealed: placeholder, wrappedAu: [], wrappedCu: [], checkAu: [], checkCu: [], recovery: recovery)
        try seal(a: a, c: c, device: device, stretched: stretched, tpm: tpm, counted: counted, pcrs: pcrs)
    }

    /// Seals a new secret in the TPM for `stretched` and wraps A, C and the ThisDeviceOnly keys
    /// under the key it gives. The recovery record is kept: it wraps A and C, which are the same.
    /// `counted` (whether the keychain has a rollback counter) and `pcrs` (the PCRs the secret is
    /// also sealed to; empty: none) are kept too unless given.
    package mutating func seal(
        a: Bytes, c: Bytes, device: DeviceKeys?, stretched: Bytes, tpm: TPMConfiguration, counted: Bool? = nil, pcrs: [UInt8]? = nil
    ) throws {
        guard var binding, let device else { throw KeychainError.param("the ThisDeviceOnly class keys are needed to seal this keybag") }
        var (sealed, kek) = try TPMSealedSecret.make(stretched: stretched, uuid: uuid, tpm: tpm, pcrs: pcrs ?? binding.sealed.pcrs)
        defer { kek.wipe() }
        sealed.counted = counted ?? binding.sealed.counted
        binding.sealed = sealed
        binding.checkAu = Self.keyCheck(device.a, uuid: uuid, .whenUnlockedThisDeviceOnly)
        binding.checkCu = Self.keyCheck(device.c, uuid: uuid, .afterFirstUnlockThisDeviceOnly)
        self.binding = binding
        // The version and the record are in the additional data: set both before wrapping.
        version = Self.boundFormatVersion
        self.binding!.wrappedAu = try Crypto.seal(device.a, key: kek, aad: aad(.whenUnlockedThisDeviceOnly))
        self.binding!.wrappedCu = try Crypto.seal(device.c, key: kek, aad: aad(.afterFirstUnlockThisDeviceOnly))
        try wrap(a: a, c: c, kek: kek)
    }

    /// Records whether the keychain has a rollback counter: the same sealed secret, its record
    /// changed, so A, C and the ThisDeviceOnly keys wrapped again under `kek` (which has just
    /// opened them): the record is in their additional data.
    mutating func recordCounted(_ counted: Bool, a: Bytes, c: Bytes, device: DeviceKeys, kek: Bytes) throws {
        guard binding != nil else { return }
        binding!.sealed.counted = counted
        binding!.wrappedAu = try Crypto.seal(device.a, key: kek, aad: aad(.whenUnlockedThisDeviceOnly))
        binding!.wrappedCu = try Crypto.seal(device.c, key: kek, aad: aad(.afterFirstUnlockThisDeviceOnly))
        try wrap(a: a, c: c, kek: kek)
    }

    /// The ThisDeviceOnly class keys under `kek` (which has just opened A and C); nil without a
    /// binding. A key that does not open or fit its check value is a damaged keybag.
    package func unwrapDevice(kek: Bytes) throws -> DeviceKeys? {
        guard let binding else { return nil }
        guard var a = try? Crypto.open(binding.wrappedAu, key: kek, aad: aad(.whenUnlockedThisDeviceOnly)) else {
            throw KeychainError.decode("the keybag is damaged (ThisDeviceOnly keys)")
        }
        guard var c = try? Crypto.open(binding.wrappedCu, key: kek, aad: aad(.afterFirstUnlockThisDeviceOnly)) else {
            a.wipe()
            throw KeychainError.decode("the keybag is damaged (ThisDeviceOnly keys)")
        }
        guard matches(a, .whenUnlockedThisDeviceOnly), matches(c, .afterFirstUnlockThisDeviceOnly) else {
            a.wipe()
            c.wipe()
            throw KeychainError.decode("the keybag is damaged (key check values)")
        }
        return DeviceKeys(a: a, c: c)
    }

    /// Removes the binding: A and C wrapped under the password alone again (version 2), with a
    /// new salt. The ThisDeviceOnly items must have moved back under A and C before.
    package mutating func unbind(a: Bytes, c: Bytes, password: Bytes, scrypt: ScryptParameters) throws {
        binding = nil
        version = Self.formatVersion
        try rewrap(a: a, c: c, password: password, scrypt: scrypt)
    }
}
