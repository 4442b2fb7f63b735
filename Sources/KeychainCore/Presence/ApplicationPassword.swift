/// kSecAccessControlApplicationPassword: the item's secret sealed a second time, under a key
/// derived by scrypt from a password the application supplies. Unlike polkit's check, this binds
/// the secret itself: a process holding the class keys still needs the application password.
///
/// Layout: "KCAP", version 1, log2 N, r, p, 16 bytes of salt, then AES-256-GCM (nonce, ciphertext,
/// tag) with the header as additional data, so the parameters cannot be changed to weaken it.
enum ApplicationPassword {
    static let magic: Bytes = Array("KCAP".utf8)
    static let version: UInt8 = 1
    /// The keychain password's floor (ScryptParameters.floor): one guess costs the same either way.
    static let parameters = ScryptParameters.floor

    static func seal(_ secret: Bytes, password: Bytes) throws -> Bytes {
        try checkPassword(password)
        let salt = try Crypto.random(16)
        let header = magic + [version, UInt8(parameters.n.trailingZeroBitCount), UInt8(parameters.r), UInt8(parameters.p)] + salt
        var key = try Crypto.scrypt(password: password, salt: salt, parameters: parameters)
        defer { key.wipe() }
        return header + (try Crypto.seal(secret, key: key, aad: header))
    }

    static func open(_ sealed: Bytes, password: Bytes) throws -> Bytes {
        try checkPassword(password)
        let headerLength = magic.count + 4 + 16
        guard sealed.count > headerLength, Array(sealed[0..<4]) == magic, sealed[4] == version,
            sealed[5] < 64
        else {
            throw KeychainError(.decode, "the item's application-password seal is damaged")
        }
        let parameters = ScryptParameters(n: 1 << UInt64(sealed[5]), r: UInt64(sealed[6]), p: UInt64(sealed[7]))
        guard parameters.isSane else { throw KeychainError(.decode, "the item's application-password seal is damaged") }
        let header = Array(sealed[0..<headerLength])
        var key = try Crypto.scrypt(password: password, salt: Array(sealed[8..<headerLength]), parameters: parameters)
        defer { key.wipe() }
        do {
            return try Crypto.open(Array(sealed[headerLength...]), key: key, aad: header)
        } catch {
            throw KeychainError.presence(.authFailed, "wrong application password")
        }
    }

    private static func checkPassword(_ password: Bytes) throws {
        if password.isEmpty { throw KeychainError.param("an empty application password") }
        if password.contains(0) { throw KeychainError.param("an application password containing a NUL byte") }
    }
}
