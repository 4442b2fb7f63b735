import KeychainCore

/// Class keys A and C wrapped under a recovery key, as the keybag keeps them (field `recovery`).
/// The ThisDeviceOnly class keys are never here: they are bound to the TPM alone.
struct RecoveryRecord: Equatable {
    static let format: UInt32 = 1

    var salt: Bytes
    var wrappedA: Bytes
    var wrappedC: Bytes
    /// The key check values of the A and C it wraps, so a record left over from before a key
    /// rotation is seen to be stale without the recovery key.
    var checkA: Bytes
    var checkC: Bytes

    static func make(a: Bytes, c: Bytes, checkA: Bytes, checkC: Bytes, uuid: Bytes, key: RecoveryKey) throws -> RecoveryRecord {
        var record = RecoveryRecord(salt: try Crypto.random(16), wrappedA: [], wrappedC: [], checkA: checkA, checkC: checkC)
        var wrapping = key.wrappingKey(uuid: uuid, salt: record.salt)
        defer { wrapping.wipe() }
        record.wrappedA = try Crypto.seal(a, key: wrapping, aad: record.aad(.whenUnlocked, uuid: uuid))
        record.wrappedC = try Crypto.seal(c, key: wrapping, aad: record.aad(.afterFirstUnlock, uuid: uuid))
        return record
    }

    /// A and C, or errSecAuthFailed for a recovery key that is not this keychain's.
    func open(with key: RecoveryKey, uuid: Bytes) throws -> (a: Bytes, c: Bytes) {
        var wrapping = key.wrappingKey(uuid: uuid, salt: salt)
        defer { wrapping.wipe() }
        let a = try? Crypto.open(wrappedA, key: wrapping, aad: aad(.whenUnlocked, uuid: uuid))
        let c = try? Crypto.open(wrappedC, key: wrapping, aad: aad(.afterFirstUnlock, uuid: uuid))
        switch (a, c) {
        case (var a?, var c?):
            guard Crypto.equal(Keybag.keyCheck(a, uuid: uuid, .whenUnlocked), checkA),
                Crypto.equal(Keybag.keyCheck(c, uuid: uuid, .afterFirstUnlock), checkC)
            else {
                a.wipe()
                c.wipe()
                throw KeychainError.decode("the keychain's recovery record is damaged")
            }
            return (a, c)
        case (nil, nil): throw KeychainError(.authFailed, "this recovery key does not open this keychain")
        default: throw KeychainError.decode("the keychain's recovery record is damaged")
        }
    }

    private func aad(_ lockClass: LockClass, uuid: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-recovery-v1")
        w.blob(uuid)
        w.string(lockClass.letter)
        w.blob(salt)
        w.blob(lockClass == .whenUnlocked ? checkA : checkC)
        return w.bytes
    }

    var bytes: Bytes {
        var w = ByteWriter()
        w.u32(Self.format)
        for field in [salt, wrappedA, wrappedC, checkA, checkC] { w.blob(field) }
        return w.bytes
    }

    init(salt: Bytes, wrappedA: Bytes, wrappedC: Bytes, checkA: Bytes, checkC: Bytes) {
        self.salt = salt
        self.wrappedA = wrappedA
        self.wrappedC = wrappedC
        self.checkA = checkA
        self.checkC = checkC
    }

    init(bytes: Bytes) throws {
        var r = ByteReader(bytes)
        guard try r.u32() == Self.format else { throw KeychainError.decode("the keychain's recovery record is of an unknown format") }
        self.init(salt: try r.blob(), wrappedA: try r.blob(), wrappedC: try r.blob(), checkA: try r.blob(), checkC: try r.blob())
        guard r.isAtEnd, salt.count == 16, checkA.count == 16, checkC.count == 16 else {
            throw KeychainError.decode("the keychain's recovery record is damaged")
        }
    }
}

extension RecoveryRecord {
    /// The record of the binding of `bag`, which the engine keeps as bytes.
    init(of bag: Keybag) throws {
        guard let binding = bag.binding else { throw KeychainError.param("this keychain is not sealed to a TPM and has no recovery key") }
        try self.init(bytes: binding.recovery)
    }

    /// The record of `a` and `c`, class keys of `bag`, under `key`.
    static func make(a: Bytes, c: Bytes, for bag: Keybag, key: RecoveryKey) throws -> RecoveryRecord {
        try make(
            a: a, c: c, checkA: Keybag.keyCheck(a, uuid: bag.uuid, .whenUnlocked), checkC: Keybag.keyCheck(c, uuid: bag.uuid, .afterFirstUnlock),
            uuid: bag.uuid, key: key)
    }
}

extension Keybag {
    /// A and C from the recovery key.
    func unwrap(recovery key: RecoveryKey) throws -> (a: Bytes, c: Bytes) {
        let record = try RecoveryRecord(of: self)
        guard Crypto.equal(record.checkA, checkA), Crypto.equal(record.checkC, checkC) else {
            throw KeychainError.decode("the keychain's recovery record is stale (made for other class keys)")
        }
        return try record.open(with: key, uuid: uuid)
    }
}

extension RecoveryKey {
    /// The key that wraps A and C for recovery, bound to this keychain and this record's salt.
    func wrappingKey(uuid: Bytes, salt: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-recovery-key-v1")
        w.blob(uuid)
        w.blob(salt)
        return Crypto.hmacSHA256(key: bytes, w.bytes)
    }
}
