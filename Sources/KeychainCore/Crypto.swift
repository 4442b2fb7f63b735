import COpenSSL

/// The primitives of the key hierarchy, on OpenSSL's libcrypto.
enum Crypto {
    static let keyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    static func random(_ count: Int) throws -> Bytes {
        var out = Bytes(repeating: 0, count: count)
        guard RAND_bytes(&out, Int32(count)) == 1 else { throw KeychainError(.allocate, "no randomness available") }
        return out
    }

    /// AES-256-GCM; the result is nonce || ciphertext || tag.
    static func seal(_ plaintext: Bytes, key: Bytes, aad: Bytes) throws -> Bytes {
        precondition(key.count == keyLength)
        let nonce = try random(nonceLength)
        guard let ctx = EVP_CIPHER_CTX_new() else { throw KeychainError(.allocate) }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = nonce
        var body = Bytes(repeating: 0, count: plaintext.count + 16)
        var tag = Bytes(repeating: 0, count: tagLength)
        var len: Int32 = 0, total: Int32 = 0
        guard EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1,
              aad.isEmpty || EVP_EncryptUpdate(ctx, nil, &len, aad, Int32(aad.count)) == 1,
              EVP_EncryptUpdate(ctx, &body, &len, plaintext, Int32(plaintext.count)) == 1
        else { throw KeychainError(.allocate, "encryption failed") }
        total = len
        let ok = body.withUnsafeMutableBufferPointer { p in
            EVP_EncryptFinal_ex(ctx, p.baseAddress! + Int(total), &len)
        }
        guard ok == 1, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1 else {
            throw KeychainError(.allocate, "encryption failed")
        }
        total += len
        out.append(contentsOf: body[0..<Int(total)])
        out.append(contentsOf: tag)
        body.wipe()
        return out
    }

    /// Opens what `seal` made; any change to key, nonce, ciphertext, tag or aad gives errSecDecode.
    static func open(_ sealed: Bytes, key: Bytes, aad: Bytes) throws -> Bytes {
        guard key.count == keyLength, sealed.count >= nonceLength + tagLength else {
            throw KeychainError.decode("ciphertext too short")
        }
        let nonce = Array(sealed[0..<nonceLength])
        let body = Array(sealed[nonceLength..<(sealed.count - tagLength)])
        var tag = Array(sealed[(sealed.count - tagLength)...])
        guard let ctx = EVP_CIPHER_CTX_new() else { throw KeychainError(.allocate) }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = Bytes(repeating: 0, count: body.count + 16)
        var len: Int32 = 0
        guard EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1,
              aad.isEmpty || EVP_DecryptUpdate(ctx, nil, &len, aad, Int32(aad.count)) == 1,
              EVP_DecryptUpdate(ctx, &out, &len, body, Int32(body.count)) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1
        else { throw KeychainError.decode("decryption failed") }
        let total = Int(len)
        let ok = out.withUnsafeMutableBufferPointer { p in
            EVP_DecryptFinal_ex(ctx, p.baseAddress! + total, &len)
        }
        guard ok == 1 else {
            out.wipe()
            throw KeychainError.decode("authentication tag mismatch: the data was changed")
        }
        let plain = Array(out[0..<(total + Int(len))])
        out.wipe()
        return plain
    }

    static func hmacSHA256(key: Bytes, _ message: Bytes) -> Bytes {
        var out = Bytes(repeating: 0, count: 32)
        var len: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &len)
        return out
    }

    /// A subkey for one purpose: HKDF-Expand (RFC 5869) of one block, with the class key as PRK.
    static func deriveKey(_ key: Bytes, purpose: String) -> Bytes {
        hmacSHA256(key: key, Array(purpose.utf8) + [1])
    }

    static func sha256(_ data: Bytes) -> Bytes {
        var out = Bytes(repeating: 0, count: 32)
        var len: UInt32 = 0
        _ = EVP_Digest(data, data.count, &out, &len, EVP_sha256(), nil)
        return out
    }

    static func sha1(_ data: Bytes) -> Bytes {
        var out = Bytes(repeating: 0, count: 20)
        var len: UInt32 = 0
        _ = EVP_Digest(data, data.count, &out, &len, EVP_sha1(), nil)
        return out
    }

    static func scrypt(password: Bytes, salt: Bytes, parameters p: ScryptParameters) throws -> Bytes {
        var key = Bytes(repeating: 0, count: keyLength)
        let maxMemory = UInt64(128) * UInt64(p.r) * (p.n + UInt64(p.p) + 2) + (1 << 20)
        guard EVP_PBE_scrypt(password, password.count, salt, salt.count, p.n, p.r, p.p, maxMemory, &key, key.count) == 1 else {
            throw KeychainError(.allocate, "scrypt failed (parameters N=\(p.n) r=\(p.r) p=\(p.p))")
        }
        return key
    }
}

/// Cost parameters of the password KDF; stored in the keybag so they can be re-tuned on password change.
public struct ScryptParameters: Equatable, Sendable {
    public var n: UInt64
    public var r: UInt64
    public var p: UInt64

    public init(n: UInt64, r: UInt64 = 8, p: UInt64 = 1) {
        self.n = n
        self.r = r
        self.p = p
    }

    /// Refuses parameters a tampered file could use to exhaust memory or time, or to weaken the KDF.
    var isSane: Bool {
        n >= 2 && n & (n - 1) == 0 && n <= 1 << 22 && r >= 1 && r <= 32 && p >= 1 && p <= 16
    }

    /// Fast parameters for tests and throwaway keychains only.
    public static let fastForTesting = ScryptParameters(n: 1 << 10)
}
