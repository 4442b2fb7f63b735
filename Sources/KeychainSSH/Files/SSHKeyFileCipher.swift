internal import COpenSSL
internal import KeychainCore

/// The ciphers `ssh-keygen -Z` can protect a private key file with, as OpenSSH's cipher.c runs
/// them for a file: one message, sequence number 0, no additional data, and for the AEAD ones the
/// tag right after the ciphertext (outside the encrypted section's length).
struct SSHKeyFileCipher {
    enum Mode { case none, ctr, cbc, gcm, chachaPoly }

    let name: String
    let keyLength: Int
    let ivLength: Int
    let blockSize: Int
    let tagLength: Int
    let mode: Mode
    private let evpName: String

    static let none = SSHKeyFileCipher(name: "none", keyLength: 0, ivLength: 0, blockSize: 8, tagLength: 0, mode: .none, evpName: "")
    static let aes256CTR = named("aes256-ctr")!
    /// The bare stream under chacha20-poly1305@openssh.com.
    private static let chacha20 = SSHKeyFileCipher(name: "chacha20", keyLength: 32, ivLength: 16, blockSize: 1, tagLength: 0, mode: .ctr, evpName: "ChaCha20")

    static func named(_ name: String) -> SSHKeyFileCipher? {
        switch name {
        case "none": return none
        case "aes128-ctr", "aes192-ctr", "aes256-ctr", "aes128-cbc", "aes192-cbc", "aes256-cbc":
            let bits = Int(name.dropFirst(3).prefix(3))!
            let ctr = name.hasSuffix("ctr")
            return SSHKeyFileCipher(
                name: name, keyLength: bits / 8, ivLength: 16, blockSize: 16, tagLength: 0, mode: ctr ? .ctr : .cbc,
                evpName: "AES-\(bits)-\(ctr ? "CTR" : "CBC")")
        case "aes128-gcm@openssh.com", "aes256-gcm@openssh.com":
            let bits = name.hasPrefix("aes128") ? 128 : 256
            return SSHKeyFileCipher(name: name, keyLength: bits / 8, ivLength: 12, blockSize: 16, tagLength: 16, mode: .gcm, evpName: "AES-\(bits)-GCM")
        case "chacha20-poly1305@openssh.com":
            return SSHKeyFileCipher(name: name, keyLength: 64, ivLength: 0, blockSize: 8, tagLength: 16, mode: .chachaPoly, evpName: "")
        default: return nil
        }
    }

    /// `input` is the ciphertext followed by the tag when decrypting; the result of encrypting
    /// carries the tag the same way. A tag that does not verify throws `wrongPassphrase`, as in
    /// OpenSSH: with a key from a passphrase, that is what it almost always means.
    func crypt(_ input: Bytes, keyAndIV: Bytes, encrypt: Bool) throws -> Bytes {
        let key = Array(keyAndIV.prefix(keyLength))
        let iv = Array(keyAndIV.dropFirst(keyLength))
        switch mode {
        case .none: return input
        case .ctr, .cbc: return try evp(input, key: key, iv: iv, encrypt: encrypt)
        case .gcm: return try gcm(input, key: key, iv: iv, encrypt: encrypt)
        case .chachaPoly: return try chachaPoly(input, key: key, encrypt: encrypt)
        }
    }

    private func evp(_ input: Bytes, key: Bytes, iv: Bytes, encrypt: Bool) throws -> Bytes {
        try withContext(key: key, iv: iv, encrypt: encrypt) { ctx in try update(ctx, input) }
    }

    private func gcm(_ input: Bytes, key: Bytes, iv: Bytes, encrypt: Bool) throws -> Bytes {
        let body = encrypt ? input : Array(input.dropLast(tagLength))
        return try withContext(key: key, iv: iv, encrypt: encrypt) { ctx in
            var tag = encrypt ? Bytes(repeating: 0, count: tagLength) : Array(input.suffix(tagLength))
            if !encrypt, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) != 1 {
                throw SSHKeyFileError.malformed("the cipher refused the tag")
            }
            var out = try update(ctx, body)
            var extra = Bytes(repeating: 0, count: 16)
            var length: Int32 = 0
            guard EVP_CipherFinal_ex(ctx, &extra, &length) == 1 else {
                out.wipe()
                throw SSHKeyFileError.wrongPassphrase
            }
            if encrypt {
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1 else {
                    throw SSHKeyFileError.malformed("the cipher gave no tag")
                }
                out += tag
            }
            return out
        }
    }

    /// OpenSSH's own construction (PROTOCOL.chacha20poly1305): the first 32 bytes of the key
    /// drive the payload; ChaCha20 with the sequence number (0) as nonce gives the Poly1305 key
    /// at block 0 and the keystream from block 1. The other 32 bytes encrypt packet lengths,
    /// which a file does not have.
    private func chachaPoly(_ input: Bytes, key: Bytes, encrypt: Bool) throws -> Bytes {
        let mainKey = Array(key.prefix(32))
        // OpenSSL's ChaCha20 IV: a 32-bit little-endian block counter, then 96 bits of nonce; the
        // original construction's 64-bit counter and 64-bit nonce map onto it with both zero here.
        let blockZero = Bytes(repeating: 0, count: 16)
        let blockOne: Bytes = [1] + Bytes(repeating: 0, count: 15)
        let stream = Self.chacha20
        var polyKey = try stream.evp(Bytes(repeating: 0, count: 32), key: mainKey, iv: blockZero, encrypt: true)
        defer { polyKey.wipe() }
        if encrypt {
            let cipherText = try stream.evp(input, key: mainKey, iv: blockOne, encrypt: true)
            return cipherText + (try poly1305(cipherText, key: polyKey))
        }
        let cipherText = Array(input.dropLast(tagLength))
        guard Crypto.equal(try poly1305(cipherText, key: polyKey), Array(input.suffix(tagLength))) else {
            throw SSHKeyFileError.wrongPassphrase
        }
        return try stream.evp(cipherText, key: mainKey, iv: blockOne, encrypt: false)
    }

    private func poly1305(_ message: Bytes, key: Bytes) throws -> Bytes {
        guard let mac = EVP_MAC_fetch(nil, "POLY1305", nil) else { throw SSHKeyFileError.unsupported("Poly1305 is not available in libcrypto") }
        defer { EVP_MAC_free(mac) }
        guard let ctx = EVP_MAC_CTX_new(mac) else { throw KeychainError(.allocate) }
        defer { EVP_MAC_CTX_free(ctx) }
        var tag = Bytes(repeating: 0, count: 16)
        var length = 0
        guard EVP_MAC_init(ctx, key, key.count, nil) == 1, EVP_MAC_update(ctx, message, message.count) == 1,
            EVP_MAC_final(ctx, &tag, &length, tag.count) == 1, length == 16
        else { throw SSHKeyFileError.malformed("Poly1305 failed") }
        return tag
    }

    private func withContext<R>(key: Bytes, iv: Bytes, encrypt: Bool, _ body: (OpaquePointer) throws -> R) throws -> R {
        guard let cipher = EVP_CIPHER_fetch(nil, evpName, nil) else { throw SSHKeyFileError.unsupported("cipher \(name) is not available in libcrypto") }
        defer { EVP_CIPHER_free(cipher) }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw KeychainError(.allocate) }
        defer { EVP_CIPHER_CTX_free(ctx) }
        guard EVP_CipherInit_ex(ctx, cipher, nil, nil, nil, encrypt ? 1 : 0) == 1,
            mode != .gcm || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(iv.count), nil) == 1,
            EVP_CipherInit_ex(ctx, nil, nil, key, iv, encrypt ? 1 : 0) == 1, EVP_CIPHER_CTX_set_padding(ctx, 0) == 1
        else { throw SSHKeyFileError.malformed("the cipher \(name) refused its key") }
        return try body(ctx)
    }

    private func update(_ ctx: OpaquePointer, _ input: Bytes) throws -> Bytes {
        guard !input.isEmpty else { return [] }
        var out = Bytes(repeating: 0, count: input.count + 32)
        var length: Int32 = 0
        guard EVP_CipherUpdate(ctx, &out, &length, input, Int32(input.count)) == 1, Int(length) == input.count else {
            out.wipe()
            throw SSHKeyFileError.malformed("the cipher \(name) failed")
        }
        let result = Array(out.prefix(Int(length)))
        out.wipe()
        return result
    }
}
