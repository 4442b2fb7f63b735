internal import COpenSSL
internal import CSodium

/// The primitives of the key hierarchy: libsodium for what every call needs, OpenSSL's libcrypto
/// where libsodium has nothing (AES-GCM on CPUs without AES-NI, SHA-1 for Apple's sha1 attribute).
///
/// Why not OpenSSL alone: OpenSSL 3.0 (Debian 12) spends most of a short process's time setting
/// itself up — reading openssl.cnf, loading error strings, building a name map and a method store
/// for each kind of algorithm on its first fetch. Measured with callgrind on `git-credential-keychain
/// get`: 60% of all instructions, and still 73% with the configuration skipped and each algorithm
/// fetched once. libsodium starts with a CPU-feature probe. The file format does not change: both
/// give the same AES-256-GCM, SHA-256, HMAC and scrypt bytes (the tests check known answers).
package enum Crypto {
    package static let keyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    private static let ready: Bool = {
        OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_LOAD_CONFIG) | UInt64(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS), nil) == 1
    }()

    /// libsodium picks its implementations in sodium_init, which must come before any other call.
    package static let sodiumReady: Bool = sodium_init() >= 0

    /// AES-GCM in libsodium needs AES-NI and PCLMUL. Tests turn it off to check that the OpenSSL
    /// fallback reads and writes the same bytes.
    nonisolated(unsafe) static var sodiumAESGCM: Bool = sodiumReady && crypto_aead_aes256gcm_is_available() == 1

    private static func fetchDigest(_ name: String) -> OpaquePointer? {
        _ = ready
        return EVP_MD_fetch(nil, name, nil)
    }

    private static let sha1Digest = fetchDigest("SHA1")
    private static let aesGCM: OpaquePointer? = {
        _ = ready
        return EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)
    }()

    package static func random(_ count: Int) throws -> Bytes {
        guard sodiumReady else { throw KeychainError(.allocate, "no randomness available") }
        var out = Bytes(repeating: 0, count: count)
        randombytes_buf(&out, count)
        return out
    }

    /// AES-256-GCM; the result is nonce || ciphertext || tag.
    package static func seal(_ plaintext: Bytes, key: Bytes, aad: Bytes) throws -> Bytes {
        try seal(plaintext, key: key, aad: aad, nonce: try random(nonceLength))
    }

    /// The same with a nonce drawn by the caller (fresh randomness for every seal: `seal` of
    /// RowCrypto draws one item key and three nonces in one call to the kernel).
    static func seal(_ plaintext: Bytes, key: Bytes, aad: Bytes, nonce: Bytes) throws -> Bytes {
        precondition(key.count == keyLength && nonce.count == nonceLength)
        if sodiumAESGCM {
            var out = nonce + Bytes(repeating: 0, count: plaintext.count + tagLength)
            var length: UInt64 = 0
            let rc = out.withUnsafeMutableBufferPointer { buffer in
                crypto_aead_aes256gcm_encrypt(
                    buffer.baseAddress! + nonceLength, &length, plaintext, UInt64(plaintext.count),
                    aad, UInt64(aad.count), nil, nonce, key)
            }
            guard rc == 0 else { throw KeychainError(.allocate, "encryption failed") }
            return out
        }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw KeychainError(.allocate) }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = nonce
        var body = Bytes(repeating: 0, count: plaintext.count + 16)
        var tag = Bytes(repeating: 0, count: tagLength)
        var len: Int32 = 0, total: Int32 = 0
        guard EVP_EncryptInit_ex(ctx, aesGCM, nil, key, nonce) == 1,
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
    package static func open(_ sealed: Bytes, key: Bytes, aad: Bytes) throws -> Bytes {
        guard key.count == keyLength, sealed.count >= nonceLength + tagLength else {
            throw KeychainError.decode("ciphertext too short")
        }
        let nonce = Array(sealed[0..<nonceLength])
        if sodiumAESGCM {
            var plain = Bytes(repeating: 0, count: sealed.count - nonceLength - tagLength)
            var length: UInt64 = 0
            let rc = sealed.withUnsafeBufferPointer { buffer in
                crypto_aead_aes256gcm_decrypt(
                    &plain, &length, nil, buffer.baseAddress! + nonceLength,
                    UInt64(sealed.count - nonceLength), aad, UInt64(aad.count), nonce, key)
            }
            guard rc == 0 else {
                plain.wipe()
                throw KeychainError.decode("authentication tag mismatch: the data was changed")
            }
            return plain
        }
        let body = Array(sealed[nonceLength..<(sealed.count - tagLength)])
        var tag = Array(sealed[(sealed.count - tagLength)...])
        guard let ctx = EVP_CIPHER_CTX_new() else { throw KeychainError(.allocate) }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = Bytes(repeating: 0, count: body.count + 16)
        var len: Int32 = 0
        guard EVP_DecryptInit_ex(ctx, aesGCM, nil, key, nonce) == 1,
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

    /// HMAC-SHA-256 with keys of any length (checked against RFC 4231's vectors in the tests).
    package static func hmacSHA256(key: Bytes, _ message: Bytes) -> Bytes {
        HMACKey(key).mac(message)
    }

    /// HMAC-SHA-256 under a key fixed in advance: the key's inner and outer pads are hashed once,
    /// so each MAC costs the message's blocks and one more (the index hashes of every lookup).
    /// libcrypto's SHA-256 (COpenSSL/shim.h), which uses the CPU's SHA extensions.
    package final class HMACKey {
        private var state = keychain_hmac_sha256_key()

        package init(_ key: Bytes) {
            key.withUnsafeBufferPointer { keychain_hmac_sha256_init(&state, $0.baseAddress, $0.count) }
        }

        package func mac(_ message: Bytes) -> Bytes {
            var out = Bytes(repeating: 0, count: 32)
            message.withUnsafeBufferPointer { input in
                out.withUnsafeMutableBufferPointer { keychain_hmac_sha256(&state, input.baseAddress, input.count, $0.baseAddress) }
            }
            return out
        }

        deinit { keychain_hmac_sha256_wipe(&state) }
    }

    /// A subkey for one purpose: HKDF-Expand (RFC 5869) of one block, with the class key as PRK.
    package static func deriveKey(_ key: Bytes, purpose: String) -> Bytes {
        hmacSHA256(key: key, Array(purpose.utf8) + [1])
    }

    /// Compares in time that does not depend on where the inputs differ.
    package static func equal(_ a: Bytes, _ b: Bytes) -> Bool {
        _ = sodiumReady
        return a.count == b.count && sodium_memcmp(a, b, a.count) == 0
    }

    package static func sha256(_ data: Bytes) -> Bytes {
        var out = Bytes(repeating: 0, count: 32)
        data.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { keychain_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        return out
    }

    static func sha1(_ data: Bytes) -> Bytes { digest(data, sha1Digest, length: 20) }

    private static func digest(_ data: Bytes, _ md: OpaquePointer?, length: Int) -> Bytes {
        var out = Bytes(repeating: 0, count: length)
        var len: UInt32 = 0
        _ = EVP_Digest(data, data.count, &out, &len, md, nil)
        return out
    }

    package static func md5(_ data: Bytes) -> Bytes { digest(data, md5Digest, length: 16) }

    private static let md5Digest = fetchDigest("MD5")

    /// SHA-256 of `password || salt`, then of each digest again, `iterations` times in all: how
    /// gnome-keyring's binary keyring files derive their AES-128 key (the first 16 bytes) and IV
    /// (the next 16). The caller bounds `iterations`; each one is a single compression.
    package static func iteratedSHA256(_ password: Bytes, salt: Bytes, iterations: Int) -> Bytes {
        _ = sodiumReady
        var digest = Bytes(repeating: 0, count: 32)
        var input = password + salt
        defer { input.wipe() }
        crypto_hash_sha256(&digest, input, UInt64(input.count))
        if iterations > 1 {
            var next = Bytes(repeating: 0, count: 32)
            defer { next.wipe() }
            for _ in 1..<iterations {
                crypto_hash_sha256(&next, digest, 32)
                swap(&digest, &next)
            }
        }
        return digest
    }

    private static let aes128CBCCipher: OpaquePointer? = {
        _ = ready
        return EVP_CIPHER_fetch(nil, "AES-128-CBC", nil)
    }()

    /// AES-128-CBC over whole blocks, no padding (gnome-keyring pads with zeros itself and checks
    /// an MD5 instead). errSecDecode when the length is not a multiple of 16.
    package static func aes128CBC(_ input: Bytes, key: Bytes, iv: Bytes, encrypt: Bool) throws -> Bytes {
        guard key.count == 16, iv.count == 16, input.count % 16 == 0 else {
            throw KeychainError.decode("AES-128-CBC needs a 16-byte key and IV and whole blocks")
        }
        guard !input.isEmpty else { return [] }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw KeychainError(.allocate) }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = Bytes(repeating: 0, count: input.count + 16)
        var len: Int32 = 0
        guard EVP_CipherInit_ex(ctx, aes128CBCCipher, nil, key, iv, encrypt ? 1 : 0) == 1,
            EVP_CIPHER_CTX_set_padding(ctx, 0) == 1,
            EVP_CipherUpdate(ctx, &out, &len, input, Int32(input.count)) == 1
        else {
            out.wipe()
            throw KeychainError(.allocate, "AES-128-CBC failed")
        }
        let total = Int(len)
        let ok = out.withUnsafeMutableBufferPointer { p in EVP_CipherFinal_ex(ctx, p.baseAddress! + total, &len) }
        guard ok == 1 else {
            out.wipe()
            throw KeychainError(.allocate, "AES-128-CBC failed")
        }
        let result = Array(out[0..<(total + Int(len))])
        out.wipe()
        return result
    }

    /// How many derivations this process has run: tests prove with it that every password guess
    /// pays for one (no shortcut, no cache of failures).
    nonisolated(unsafe) static var derivations = 0

    package static func scrypt(password: Bytes, salt: Bytes, parameters p: ScryptParameters) throws -> Bytes {
        // scrypt keys HMAC with the password, and HMAC pads short keys with zeros: "pw" and
        // "pw\0" would derive the same key. Terminals and PAM cannot carry a NUL anyway.
        guard !password.contains(0) else { throw KeychainError.param("a password cannot contain a NUL byte") }
        _ = sodiumReady
        derivations += 1
        var key = Bytes(repeating: 0, count: keyLength)
        guard crypto_pwhash_scryptsalsa208sha256_ll(password, password.count, salt, salt.count, p.n, UInt32(p.r), UInt32(p.p), &key, key.count) == 0 else {
            throw KeychainError(.allocate, "scrypt failed (parameters N=\(p.n) r=\(p.r) p=\(p.p))")
        }
        return key
    }
}

/// Cost parameters of the password KDF; stored in the keybag so they can be re-tuned on password change.
package struct ScryptParameters: Equatable, Sendable {
    package var n: UInt64
    package var r: UInt64
    package var p: UInt64

    package init(n: UInt64, r: UInt64 = 8, p: UInt64 = 1) {
        self.n = n
        self.r = r
        self.p = p
    }

    /// The most memory one derivation may take, 128·N·r bytes: what the largest tuning asks
    /// for (N = 2^20, r = 8). A keybag or backup asking for more is damaged or hostile.
    package static let maximumMemory: UInt64 = 1 << 30

    /// The most work one derivation may take, N·r·p: the largest tuning's, about 4 s on the
    /// 2-core machine of the README. Parallelism does not buy memory here: libsodium runs the
    /// p lanes one after the other, so without this bound p would multiply the time of a guess
    /// that the memory cap already allows.
    static let maximumWork: UInt64 = 1 << 23

    /// Refuses parameters a tampered file or a hostile backup could use to exhaust memory or
    /// time, before any derivation runs. N must be a power of two (scrypt's definition); r up
    /// to 32 covers every published tuning (8 is the norm), p up to 16 (1 is ours).
    package var isSane: Bool {
        guard n >= 2, n & (n - 1) == 0, (1...32).contains(r), (1...16).contains(p), n <= Self.maximumMemory else { return false }
        return 128 * n * r <= Self.maximumMemory && n * r * p <= Self.maximumWork
    }

    /// errSecParam for parameters nothing may be written with: a keybag or backup that could not
    /// be opened again.
    func checkWritable() throws {
        guard isSane else { throw KeychainError.param("KDF parameters out of bounds (N a power of two, 128·N·r at most 1 GiB)") }
    }

    /// The bytes one derivation holds: what an unlock costs in memory.
    package var memory: UInt64 { 128 * n * r }

    /// Fast parameters for tests and throwaway keychains only.
    package static let fastForTesting = ScryptParameters(n: 1 << 10)
}
