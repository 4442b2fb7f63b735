import Glibc

/// The keybag: class keys A and C wrapped under the key derived from the password, a check value
/// of each, class key D in the clear (Always items are protected by file permissions only), the
/// scrypt parameters, and the keychain's settings with their MAC.
///
/// Version 2 added the key check values (so a key planted in the kernel is recognised) and the
/// settings MAC (so settings cannot be changed without class key A). A version 1 keybag is still
/// read; the next unlock with the password upgrades it in place (`upgrade(kek:a:c:)`).
///
/// Version 3 is a keybag sealed to a TPM (`binding`, TPMBinding.swift): its key-encryption key
/// needs the TPM as well as the password, and it holds the ThisDeviceOnly class keys and the
/// recovery key's wrapping. Only enrolment writes it; a keychain never enrolled stays version 2,
/// readable by earlier versions of this program, and removing the binding brings it back to 2.
package struct Keybag {
    static let formatVersion: UInt32 = 2
    static let boundFormatVersion: UInt32 = 3

    package internal(set) var version: UInt32
    package var uuid: Bytes
    package var scrypt: ScryptParameters
    package var salt: Bytes
    var wrappedA: Bytes
    var wrappedC: Bytes
    /// Key check values of A and C (`keyCheck`); empty in a version 1 keybag.
    package var checkA: Bytes
    package var checkC: Bytes
    package var keyD: Bytes
    /// As stored: trusted only once `settingsMAC` verifies under class key A (`verifiedSettings`).
    var settings: KeychainSettings
    /// Empty in a version 1 keybag.
    var settingsMAC: Bytes
    /// Version 3 only: the TPM binding, the ThisDeviceOnly class keys and the recovery record.
    package var binding: TPMBinding? = nil

    /// A new keybag with fresh random class keys; returns the unwrapped A and C keys too.
    package static func make(password: Bytes, scrypt: ScryptParameters) throws -> (Keybag, a: Bytes, c: Bytes) {
        var bag = Keybag(
            version: formatVersion, uuid: try Crypto.random(16), scrypt: scrypt, salt: [], wrappedA: [],
            wrappedC: [], checkA: [], checkC: [], keyD: try Crypto.random(Crypto.keyLength),
            settings: KeychainSettings(), settingsMAC: [])
        let a = try Crypto.random(Crypto.keyLength)
        let c = try Crypto.random(Crypto.keyLength)
        try bag.rewrap(a: a, c: c, password: password, scrypt: scrypt)
        bag.authenticateSettings(a: a)
        return (bag, a, c)
    }

    /// The key-encryption key. Parameters out of bounds are refused before scrypt runs: a
    /// tampered keybag must not cost gigabytes or minutes per attempt.
    /// Sealed to a TPM (version 3), the key also needs the secret the TPM releases for the
    /// password: the TPM checks each guess and counts the wrong ones.
    func deriveKEK(password: Bytes, tpm: TPMConfiguration = .current) throws -> Bytes {
        guard scrypt.isSane, salt.count >= 16 else {
            throw KeychainError(.decode, "the keybag is damaged (KDF parameters out of bounds)")
        }
        var stretched = try Crypto.scrypt(password: password, salt: salt, parameters: scrypt)
        guard let binding else { return stretched }
        defer { stretched.wipe() }
        return try binding.sealed.kek(stretched: stretched, uuid: uuid, tpm: tpm)
    }

    /// The class keys `password` opens (ThisDeviceOnly's too when sealed to a TPM), a version 1
    /// keybag first brought to the current format (`upgrade`), so that the settings a password
    /// change or a key rotation carries over are authenticated ones. The caller wipes the keys; a
    /// failure leaves none behind.
    package mutating func unwrapUpgrading(password: Bytes) throws -> OpenedKeys {
        var keys = try open(password: password)
        do {
            try upgrade(kek: keys.kek, a: keys.a, c: keys.c)
        } catch {
            keys.wipe()
            throw error
        }
        return keys
    }

    /// What `password` opens: the key-encryption key (the TPM's half included when sealed to
    /// one) and the class keys under it, ThisDeviceOnly's too when bound. The one path from a
    /// password to the keys: unlock, a password check, a password change, a settings change, a
    /// key rotation, the TPM's enrolment and unsealing and the passwordless copy all go through
    /// it. A wrong password and a changed keybag look the same to AES-GCM (errSecAuthFailed). A
    /// failure leaves nothing behind.
    package func open(password: Bytes, tpm: TPMConfiguration = .current) throws -> OpenedKeys {
        var kek = try deriveKEK(password: password, tpm: tpm)
        do {
            var (a, c) = try unwrap(kek: kek)
            do {
                return OpenedKeys(kek: kek, a: a, c: c, device: try unwrapDevice(kek: kek))
            } catch {
                a.wipe()
                c.wipe()
                throw error
            }
        } catch {
            kek.wipe()
            throw error
        }
    }

    package func unwrap(kek: Bytes) throws -> (a: Bytes, c: Bytes) {
        let a = try? Crypto.open(wrappedA, key: kek, aad: aad(.whenUnlocked))
        let c = try? Crypto.open(wrappedC, key: kek, aad: aad(.afterFirstUnlock))
        switch (a, c) {
        case (var a?, var c?):
            // The check values are authenticated with the wrapped keys; one that does not fit its
            // key was written so by someone holding the password-derived key.
            guard version < 2 || (matches(a, .whenUnlocked) && matches(c, .afterFirstUnlock)) else {
                a.wipe()
                c.wipe()
                throw KeychainError(.decode, "the keybag is damaged (key check values)")
            }
            return (a, c)
        // Sealed to a TPM, the TPM has already accepted the password: a key that opens nothing
        // means a changed keybag, or a TPM that answered wrongly.
        case (nil, nil) where binding != nil:
            throw KeychainError(.decode, "the TPM's secret does not open the keybag: the file was changed, or the TPM answered wrongly")
        case (nil, nil): throw KeychainError(.authFailed, "wrong password for this keychain")
        // The password opened one class key and not the other: the keybag was changed.
        default: throw KeychainError(.decode, "the keybag is damaged")
        }
    }

    /// Wraps class keys A and C under a new password, with a new salt. A password change alone
    /// needs no item re-encryption; a key rotation gives new keys here.
    /// Sealed to a TPM, a new secret is sealed for the new password and `device` (the
    /// ThisDeviceOnly class keys) is wrapped again too; `counted` and `pcrs` as in `seal`.
    package mutating func rewrap(
        a: Bytes, c: Bytes, device: DeviceKeys? = nil, password: Bytes, scrypt: ScryptParameters,
        tpm: TPMConfiguration = .current, counted: Bool? = nil, pcrs: [UInt8]? = nil
    ) throws {
        // Never write a keybag that could not be opened again.
        try scrypt.checkWritable()
        let newSalt = try Crypto.random(16)
        var kek = try Crypto.scrypt(password: password, salt: newSalt, parameters: scrypt)
        defer { kek.wipe() }
        self.scrypt = scrypt
        salt = newSalt
        if binding != nil { return try seal(a: a, c: c, device: device, stretched: kek, tpm: tpm, counted: counted, pcrs: pcrs) }
        try wrap(a: a, c: c, kek: kek)
    }

    /// Seals A and C under `kek` (of this keybag's salt and parameters) in the current format
    /// (version 3 with a binding, whose record must be in place first: the wraps are bound to it).
    mutating func wrap(a: Bytes, c: Bytes, kek: Bytes) throws {
        version = binding == nil ? Self.formatVersion : Self.boundFormatVersion
        checkA = Self.keyCheck(a, uuid: uuid, .whenUnlocked)
        checkC = Self.keyCheck(c, uuid: uuid, .afterFirstUnlock)
        wrappedA = try Crypto.seal(a, key: kek, aad: aad(.whenUnlocked))
        wrappedC = try Crypto.seal(c, key: kek, aad: aad(.afterFirstUnlock))
    }

    /// Brings a version 1 keybag to the current format with the key its password gave: the same
    /// class keys, salt and KDF cost, now with check values and authenticated settings. The
    /// settings a version 1 file held were never authenticated; they are kept as the owner's.
    mutating func upgrade(kek: Bytes, a: Bytes, c: Bytes) throws {
        guard version < Self.formatVersion else { return }
        try wrap(a: a, c: c, kek: kek)
        authenticateSettings(a: a)
    }

    /// The additional data binds each wrapped key to this keychain, its class, the KDF settings
    /// and (version 2) the key's check value, so lowering the parameters in the file or swapping
    /// a check value breaks the tag instead of weakening the KDF or vouching for another key.
    /// Version 3 adds a digest of the sealed object's record, for the ThisDeviceOnly keys as well.
    func aad(_ lockClass: LockClass) -> Bytes {
        var w = ByteWriter()
        w.string(version < 2 ? "keychain-keybag-v1" : version < 3 ? "keychain-keybag-v2" : "keychain-keybag-v3")
        w.blob(uuid)
        w.string(lockClass.letter)
        w.u64(scrypt.n)
        w.u64(scrypt.r)
        w.u64(scrypt.p)
        w.blob(salt)
        if version >= 2 { w.blob(check(lockClass)) }
        if version >= 3 { w.blob(Crypto.sha256(binding?.sealed.bytes ?? [])) }
        return w.bytes
    }

    // MARK: Key check values

    /// A truncated HMAC of a fixed label, this keychain's uuid and the class, under the class key:
    /// tells whether a key found in the kernel is this keychain's key without revealing it.
    package static func keyCheck(_ key: Bytes, uuid: Bytes, _ lockClass: LockClass) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-key-check-v2")
        w.blob(uuid)
        w.string(lockClass.letter)
        return Array(Crypto.hmacSHA256(key: key, w.bytes).prefix(16))
    }

    /// Whether `key` is this keychain's class key. A version 1 keybag has no check values and
    /// vouches for no key: its keys are trusted only as they come from the password.
    package func matches(_ key: Bytes, _ lockClass: LockClass) -> Bool {
        let stored = check(lockClass)
        guard version >= 2, !stored.isEmpty else { return false }
        return Crypto.equal(stored, Self.keyCheck(key, uuid: uuid, lockClass))
    }

    /// The stored check value of a class key; empty for D, and for the ThisDeviceOnly classes of
    /// a keybag without them.
    package func check(_ lockClass: LockClass) -> Bytes {
        switch lockClass {
        case .whenUnlocked: return checkA
        case .afterFirstUnlock: return checkC
        case .whenUnlockedThisDeviceOnly: return binding?.checkAu ?? []
        case .afterFirstUnlockThisDeviceOnly: return binding?.checkCu ?? []
        case .always: return []
        }
    }

    // MARK: Settings

    /// The key of the settings MAC, derived from class key A: only someone who could read
    /// WhenUnlocked items can change when they lock.
    package static func settingsKey(a: Bytes) -> Bytes { Crypto.deriveKey(a, purpose: "settings") }

    package static func settingsMAC(_ settings: KeychainSettings, uuid: Bytes, key: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-settings-v2")
        w.blob(uuid)
        w.blob(settings.bytes)
        return Crypto.hmacSHA256(key: key, w.bytes)
    }

    /// The stored settings if their MAC verifies under `a`; nil when they were changed without it.
    package func verifiedSettings(a: Bytes) -> KeychainSettings? {
        guard version >= 2 else { return nil }
        var key = Self.settingsKey(a: a)
        defer { key.wipe() }
        return Crypto.equal(settingsMAC, Self.settingsMAC(settings, uuid: uuid, key: key)) ? settings : nil
    }

    mutating func authenticateSettings(key: Bytes) {
        settingsMAC = Self.settingsMAC(settings, uuid: uuid, key: key)
    }

    mutating func authenticateSettings(a: Bytes) {
        var key = Self.settingsKey(a: a)
        defer { key.wipe() }
        authenticateSettings(key: key)
    }

    // MARK: Storage

    package static func load(from db: SQLiteDatabase) throws -> Keybag {
        try Keybag(fields: fields(in: db))
    }

    /// The keybag's stored fields, as they are in the file: what a custodian is shown
    /// (`CustodyKeybag`), to parse and check itself.
    package static func fields(in db: SQLiteDatabase) throws -> [String: Bytes] {
        var fields: [String: Bytes] = [:]
        do {
            let stmt = try db.statement("SELECT name, value FROM keychain")
            while try stmt.step() { fields[stmt.text(0)] = stmt.blob(1) }
        } catch let error as KeychainError where error.code == .io {
            throw KeychainError(.decode, "not a keychain file (\(error.detail))")
        }
        return fields
    }

    /// An unkeyed checksum over the stored key material cannot stop a forger, and does not try to
    /// (the wrapped keys' tags and the check values inside them do that); it tells a damaged
    /// keybag from a wrong password, for the user.
    static func checksum(_ fields: [Bytes]) -> Bytes {
        var w = ByteWriter()
        for field in fields { w.blob(field) }
        return Crypto.sha256(w.bytes)
    }

    var kdfRecord: Bytes {
        var kdf = ByteWriter()
        kdf.u64(scrypt.n)
        kdf.u64(scrypt.r)
        kdf.u64(scrypt.p)
        kdf.blob(salt)
        return kdf.bytes
    }

    /// Writes the whole keybag, in the current format only (a version 1 keybag is upgraded
    /// before anything else is written): version 3 with a binding, else version 2, whose file
    /// then keeps no field of a binding removed.
    package func save(to db: SQLiteDatabase) throws {
        precondition(
            version == (binding == nil ? Self.formatVersion : Self.boundFormatVersion),
            "a keybag is upgraded before it is saved")
        let insert = try db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES (?, ?)")
        for (name, value) in ownFields { try insert.run([.text(name), .blob(value)]) }
        try TPMBinding.save(binding, to: db)
    }

    /// The fields `save` writes, in the current format: what a custodian returns for a keybag
    /// it changed (`KeyCustodian.changePassword`).
    package var fields: [String: Bytes] {
        precondition(
            version == (binding == nil ? Self.formatVersion : Self.boundFormatVersion),
            "a keybag is upgraded before it is saved")
        var out: [String: Bytes] = [:]
        for (name, value) in ownFields { out[name] = value }
        for (name, value) in binding?.fields ?? [] { out[name] = value }
        return out
    }

    /// The keybag's own fields, the binding's apart.
    private var ownFields: [(String, Bytes)] {
        let kdf = kdfRecord
        let sum = Keybag.checksum([uuid, kdf, wrappedA, wrappedC, checkA, checkC, keyD] + (binding?.fields.map(\.value) ?? []))
        return [
            ("version", Bytes(bigEndian: UInt64(version))), ("uuid", uuid), ("kdf", kdf),
            ("wrap.A", wrappedA), ("wrap.C", wrappedC), ("check.A", checkA), ("check.C", checkC),
            ("key.D", keyD), ("settings", settings.bytes), ("settings.mac", settingsMAC),
            ("checksum", sum)
        ]
    }
}

extension Keybag {
    /// Parses and checks a keybag's stored fields (`fields(in:)`): the file's, or the ones a
    /// client sent a custodian.
    package init(fields: [String: Bytes]) throws {
        guard let rawVersion = fields["version"], rawVersion.count == 8,
            let version = [1, 2, 3].first(where: { rawVersion == Bytes(bigEndian: UInt64($0)) })
        else { throw KeychainError(.decode, "not a keychain file, or one of an unknown version") }
        guard let uuid = fields["uuid"], uuid.count == 16,
            let kdf = fields["kdf"], let a = fields["wrap.A"], let c = fields["wrap.C"],
            let d = fields["key.D"], d.count == Crypto.keyLength
        else { throw KeychainError(.decode, "the keybag is incomplete") }
        let rawSettings = fields["settings"] ?? []
        let checkA = fields["check.A"] ?? [], checkC = fields["check.C"] ?? [], mac = fields["settings.mac"] ?? []
        if version >= 2 {
            guard checkA.count == 16, checkC.count == 16 else { throw KeychainError(.decode, "the keybag is incomplete") }
        }
        let summed =
            version >= 2
            ? [uuid, kdf, a, c, checkA, checkC, d] + TPMBinding.checksummed(fields, version: version)
            : [uuid, kdf, a, c, d, rawSettings]
        guard let sum = fields["checksum"], constantTimeEqual(sum, Self.checksum(summed)) else {
            throw KeychainError(.decode, "the keybag is damaged")
        }
        var r = ByteReader(kdf)
        let params = ScryptParameters(n: try r.u64(), r: try r.u64(), p: try r.u64())
        let salt = try r.blob()
        guard r.isAtEnd else { throw KeychainError(.decode, "the keybag is damaged") }
        // Checked here as well as before each derivation, so a keychain asking for an absurd KDF
        // is reported as damaged when it is opened, not when someone types a password.
        guard params.isSane, salt.count >= 16 else {
            throw KeychainError(.decode, "the keybag is damaged (KDF parameters out of bounds)")
        }
        // Settings are authenticated by their own MAC, not by the checksum: changed ones cost the
        // owner their settings (the safe defaults apply, and are reported), not the keychain.
        var settings = KeychainSettings.safeDefaults, settingsMAC = mac
        if let stored = try? KeychainSettings(bytes: rawSettings) {
            settings = stored
        } else if version >= 2 {
            settingsMAC = []
        } else {
            throw KeychainError.decode("the keybag settings are damaged")
        }
        self.init(
            version: UInt32(version), uuid: uuid, scrypt: params, salt: salt, wrappedA: a, wrappedC: c,
            checkA: checkA, checkC: checkC, keyD: d, settings: settings, settingsMAC: settingsMAC,
            binding: version >= 3 ? try TPMBinding(fields) : nil)
    }
}

extension ScryptParameters {
    /// The least cost a keychain or backup gets by default: N = 2^17, r = 8, p = 1 (128 MiB),
    /// current guidance for scrypt (OWASP's password storage cheat sheet). Explicit parameters
    /// (tests, `make bench`) may be lower; tuning never is.
    package static let floor = ScryptParameters(n: 1 << 17)

    /// The floor, or more where this machine derives it in under `target` / 1.5 seconds (up to
    /// N = 2^20, 1 GiB): the cost of every guess at the password.
    package static func tuned(target: Double = 0.15) -> ScryptParameters {
        // Measured at 2^14 (16 MiB, tens of milliseconds) and scaled: scrypt's time is linear in
        // N, and measuring at the floor would cost as much as the derivation it calibrates.
        let probe = ScryptParameters(n: 1 << 14, r: floor.r, p: floor.p)
        var elapsed = probe.secondsPerGuess() * Double(floor.n / probe.n)
        var params = floor
        while elapsed < target / 1.5, params.n < 1 << 20 {
            params.n <<= 1
            elapsed *= 2
        }
        return params
    }

    /// Seconds one derivation takes here: what every guess at the password costs.
    package func secondsPerGuess() -> Double {
        let password = Array("calibration".utf8), salt = Bytes(repeating: 7, count: 16)
        return SystemClock.measure { _ = try? Crypto.scrypt(password: password, salt: salt, parameters: self) }
    }
}

/// A keybag's keys, opened (`Keybag.open`). Used in place, never copied out (a copy of an array
/// would keep the bytes that `wipe` overwrites here), and wiped by its holder.
package struct OpenedKeys {
    package var kek: Bytes
    package var a: Bytes
    package var c: Bytes
    package var device: DeviceKeys?

    package mutating func wipe() {
        kek.wipe()
        a.wipe()
        c.wipe()
        device?.wipe()
    }
}
