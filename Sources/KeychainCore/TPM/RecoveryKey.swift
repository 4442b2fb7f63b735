/// The recovery key of a keychain sealed to a TPM: 128 random bits that open its class keys A and C
/// without the TPM (a dead TPM, a new machine, a forgotten password). Shown once, at enrolment,
/// as BitLocker shows its own: eight groups of six digits, each group a multiple of 11 holding 16
/// bits (so a mistyped or swapped digit is caught, and the group named, before anything is
/// tried). High entropy needs no stretching: the key is expanded with HMAC-SHA-256 only.
package struct RecoveryKey: Equatable, Sendable {
    package static let byteCount = 16
    static let groups = 8
    static let digitsPerGroup = 6

    private(set) var bytes: Bytes

    init(bytes: Bytes) {
        precondition(bytes.count == Self.byteCount)
        self.bytes = bytes
    }

    static func generate() throws -> RecoveryKey { RecoveryKey(bytes: try Crypto.random(byteCount)) }

    /// "123456-234567-...": what the person writes down, as bytes the caller can wipe.
    package var formattedBytes: Bytes {
        var out = Bytes()
        for i in 0..<Self.groups {
            if i > 0 { out.append(UInt8(ascii: "-")) }
            var value = (UInt32(bytes[2 * i]) << 8 | UInt32(bytes[2 * i + 1])) * 11
            var digits = Bytes(repeating: UInt8(ascii: "0"), count: Self.digitsPerGroup)
            for position in stride(from: Self.digitsPerGroup - 1, through: 0, by: -1) {
                digits[position] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
            out.append(contentsOf: digits)
            digits.wipe()
        }
        return out
    }

    /// The same as a String (which cannot be wiped): for tests.
    package var formatted: String { String(decoding: formattedBytes, as: UTF8.self) }

    /// Reads what the person typed: 48 digits, in groups of six separated by hyphens, spaces or
    /// nothing. Wipes nothing of `text` (a Swift String cannot be wiped); callers pass bytes.
    package init(parsing text: Bytes) throws {
        var digits = Bytes()
        defer { digits.wipe() }
        for byte in text {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits.append(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "-"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
            default: throw KeychainError.param("a recovery key holds digits and hyphens only")
            }
        }
        guard digits.count == Self.groups * Self.digitsPerGroup else {
            throw KeychainError.param(
                "a recovery key has \(Self.groups * Self.digitsPerGroup) digits (\(Self.groups) groups of \(Self.digitsPerGroup)); this one has \(digits.count)"
            )
        }
        var out = Bytes()
        for group in 0..<Self.groups {
            let value = digits[(group * Self.digitsPerGroup)..<((group + 1) * Self.digitsPerGroup)].reduce(UInt32(0)) { $0 * 10 + UInt32($1) }
            guard value % 11 == 0, value / 11 <= 0xFFFF else {
                out.wipe()
                throw KeychainError.param("group \(group + 1) of the recovery key is mistyped")
            }
            let word = value / 11
            out.append(UInt8(word >> 8))
            out.append(UInt8(word & 0xFF))
        }
        self.init(bytes: out)
    }

    package mutating func wipe() { bytes.wipe() }

    /// The key that wraps A and C for recovery, bound to this keychain and this record's salt.
    func wrappingKey(uuid: Bytes, salt: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-recovery-key-v1")
        w.blob(uuid)
        w.blob(salt)
        return Crypto.hmacSHA256(key: bytes, w.bytes)
    }
}

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
