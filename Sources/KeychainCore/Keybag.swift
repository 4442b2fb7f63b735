import Glibc

/// The keybag: class keys A and C wrapped under the key derived from the password, class key D in
/// the clear (Always items are protected by file permissions only), and the scrypt parameters.
struct Keybag {
    static let formatVersion: UInt32 = 1

    var uuid: Bytes
    var scrypt: ScryptParameters
    var salt: Bytes
    var wrappedA: Bytes
    var wrappedC: Bytes
    var keyD: Bytes
    var settings: KeychainSettings

    /// A new keybag with fresh random class keys; returns the unwrapped A and C keys too.
    static func make(password: Bytes, scrypt: ScryptParameters) throws -> (Keybag, a: Bytes, c: Bytes) {
        var bag = Keybag(uuid: try Crypto.random(16), scrypt: scrypt, salt: [], wrappedA: [], wrappedC: [],
                         keyD: try Crypto.random(Crypto.keyLength), settings: KeychainSettings())
        let a = try Crypto.random(Crypto.keyLength)
        let c = try Crypto.random(Crypto.keyLength)
        try bag.rewrap(a: a, c: c, password: password, scrypt: scrypt)
        return (bag, a, c)
    }

    /// Opens A and C with the password. A wrong password and a changed keybag look the same to
    /// AES-GCM, and both are errSecAuthFailed.
    func unwrap(password: Bytes) throws -> (a: Bytes, c: Bytes) {
        guard scrypt.isSane, salt.count >= 16 else { throw KeychainError(.authFailed, "the keybag is damaged") }
        var kek = try Crypto.scrypt(password: password, salt: salt, parameters: scrypt)
        defer { kek.wipe() }
        let a = try? Crypto.open(wrappedA, key: kek, aad: aad(.whenUnlocked))
        let c = try? Crypto.open(wrappedC, key: kek, aad: aad(.afterFirstUnlock))
        switch (a, c) {
        case let (a?, c?): return (a, c)
        case (nil, nil): throw KeychainError(.authFailed, "wrong password for this keychain")
        // The password opened one class key and not the other: the keybag was changed.
        default: throw KeychainError(.decode, "the keybag is damaged")
        }
    }

    /// Wraps the same class keys under a new password, with a new salt: items need no re-encryption.
    mutating func rewrap(a: Bytes, c: Bytes, password: Bytes, scrypt: ScryptParameters) throws {
        let newSalt = try Crypto.random(16)
        var kek = try Crypto.scrypt(password: password, salt: newSalt, parameters: scrypt)
        defer { kek.wipe() }
        self.scrypt = scrypt
        salt = newSalt
        wrappedA = try Crypto.seal(a, key: kek, aad: aad(.whenUnlocked))
        wrappedC = try Crypto.seal(c, key: kek, aad: aad(.afterFirstUnlock))
    }

    /// The additional data binds each wrapped key to this keychain, its class and the KDF settings,
    /// so lowering the parameters in the file breaks the tag instead of weakening the KDF.
    private func aad(_ lockClass: LockClass) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-keybag-v1")
        w.blob(uuid)
        w.string(lockClass.letter)
        w.u64(scrypt.n)
        w.u64(scrypt.r)
        w.u64(scrypt.p)
        w.blob(salt)
        return w.bytes
    }

    static func load(from db: SQLiteDatabase) throws -> Keybag {
        var fields: [String: Bytes] = [:]
        do {
            let stmt = try db.statement("SELECT name, value FROM keychain")
            while try stmt.step() { fields[stmt.text(0)] = stmt.blob(1) }
        } catch let error as KeychainError where error.code == .io {
            throw KeychainError(.decode, "not a keychain file (\(error.detail))")
        }
        guard let version = fields["version"], version == Bytes(bigEndian: UInt64(formatVersion)) else {
            throw KeychainError(.decode, "not a keychain file, or one of an unknown version")
        }
        guard let uuid = fields["uuid"], uuid.count == 16,
              let kdf = fields["kdf"], let a = fields["wrap.A"], let c = fields["wrap.C"],
              let d = fields["key.D"], d.count == Crypto.keyLength
        else { throw KeychainError(.decode, "the keybag is incomplete") }
        var r = ByteReader(kdf)
        let params = ScryptParameters(n: try r.u64(), r: try r.u64(), p: try r.u64())
        let salt = try r.blob()
        guard r.isAtEnd, let rawSettings = fields["settings"], let sum = fields["checksum"],
              constantTimeEqual(sum, checksum([uuid, kdf, a, c, d, rawSettings]))
        else { throw KeychainError(.decode, "the keybag is damaged") }
        let settings = try KeychainSettings(bytes: rawSettings)
        return Keybag(uuid: uuid, scrypt: params, salt: salt, wrappedA: a, wrappedC: c, keyD: d, settings: settings)
    }

    /// An unkeyed checksum over the stored bytes cannot stop a forger, and does not try to (the
    /// wrapped keys' tags do that); it tells a damaged keybag from a wrong password, for the user.
    private static func checksum(_ fields: [Bytes]) -> Bytes {
        var w = ByteWriter()
        for field in fields { w.blob(field) }
        return Crypto.sha256(w.bytes)
    }

    private var kdfRecord: Bytes {
        var kdf = ByteWriter()
        kdf.u64(scrypt.n)
        kdf.u64(scrypt.r)
        kdf.u64(scrypt.p)
        kdf.blob(salt)
        return kdf.bytes
    }

    func save(to db: SQLiteDatabase) throws {
        let kdf = kdfRecord
        let insert = try db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES (?, ?)")
        for (name, value) in [("version", Bytes(bigEndian: UInt64(Keybag.formatVersion))), ("uuid", uuid),
                              ("kdf", kdf), ("wrap.A", wrappedA), ("wrap.C", wrappedC),
                              ("key.D", keyD), ("settings", settings.bytes),
                              ("checksum", Keybag.checksum([uuid, kdf, wrappedA, wrappedC, keyD, settings.bytes]))] {
            try insert.run([.text(name), .blob(value)])
        }
    }
}

/// `security set-keychain-settings`: how long WhenUnlocked stays open, and whether it closes with
/// the user's last session.
public struct KeychainSettings: Equatable, Sendable {
    /// Seconds without use after which the WhenUnlocked key expires; 0 means never.
    public var idleTimeout: UInt32 = 0
    public var lockOnSessionEnd = true

    public init(idleTimeout: UInt32 = 0, lockOnSessionEnd: Bool = true) {
        self.idleTimeout = idleTimeout
        self.lockOnSessionEnd = lockOnSessionEnd
    }

    init(bytes: Bytes) throws {
        var r = ByteReader(bytes)
        idleTimeout = try r.u32()
        let flag = try r.u8()
        guard flag <= 1, r.isAtEnd else { throw KeychainError.decode("the keybag settings are damaged") }
        lockOnSessionEnd = flag == 1
    }

    var bytes: Bytes {
        var w = ByteWriter()
        w.u32(idleTimeout)
        w.u8(lockOnSessionEnd ? 1 : 0)
        return w.bytes
    }
}

extension ScryptParameters {
    /// Parameters that take about 0.1-0.25 s on this machine: the cost of every guess at the password.
    public static func tuned(target: Double = 0.15) -> ScryptParameters {
        var params = ScryptParameters(n: 1 << 14)
        var elapsed = params.secondsPerGuess()
        while elapsed < target / 1.5, params.n < 1 << 20 {
            params.n <<= 1
            elapsed *= 2
        }
        return params
    }

    /// Seconds one derivation takes here: what every guess at the password costs.
    public func secondsPerGuess() -> Double {
        let password = Array("calibration".utf8), salt = Bytes(repeating: 7, count: 16)
        return Self.measure { _ = try? Crypto.scrypt(password: password, salt: salt, parameters: self) }
    }

    static func measure(_ body: () -> Void) -> Double {
        var start = timespec(), end = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        body()
        clock_gettime(CLOCK_MONOTONIC, &end)
        return Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
    }
}
