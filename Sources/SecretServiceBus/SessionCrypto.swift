import COpenSSL
import KeychainCore
import SecretServiceItems
import SessionBus

/// The spec's `dh-ietf1024-sha256-aes128-cbc-pkcs7` algorithm: Diffie-Hellman in RFC 2409's second
/// Oakley group (1024-bit MODP, generator 2), the shared secret padded to 128 bytes and expanded
/// with HKDF-SHA256 (no salt, no info) to a 128-bit AES key; secrets then travel AES-128-CBC with
/// PKCS#7 padding and a fresh 16-byte IV as the Secret's parameters.
enum SessionCrypto {
    static let algorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    private static let primeHex =
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF"
    private static let groupBytes = 128
    static let keyLength = 16
    static let blockLength = 16

    /// The server's public key and the session key, from the client's public key (big-endian).
    static func negotiate(clientPublic: Bytes) throws -> (publicKey: Bytes, key: Bytes) {
        guard !clientPublic.isEmpty, clientPublic.count <= groupBytes + 1 else {
            throw ServiceError.invalidArgs("the client's public key is not a 1024-bit group element")
        }
        guard let ctx = BN_CTX_secure_new() else { throw ServiceError.failed("out of memory") }
        defer { BN_CTX_free(ctx) }
        var prime: OpaquePointer? = nil
        guard BN_hex2bn(&prime, primeHex) > 0, let prime else { throw ServiceError.failed("out of memory") }
        defer { BN_free(prime) }
        let peer = BN_bin2bn(clientPublic, Int32(clientPublic.count), nil)
        let limit = BN_new(), generator = BN_new(), secretExponent = BN_secure_new(), ours = BN_new(), shared = BN_secure_new()
        defer {
            BN_free(peer); BN_free(limit); BN_free(generator); BN_clear_free(secretExponent); BN_free(ours); BN_clear_free(shared)
        }
        guard let peer, let limit, let generator, let secretExponent, let ours, let shared,
            BN_copy(limit, prime) != nil, BN_sub_word(limit, 1) == 1, BN_set_word(generator, 2) == 1
        else { throw ServiceError.failed("out of memory") }
        // 1 < y < p - 1: the other values would force a known shared secret.
        guard BN_cmp(peer, BN_value_one()) > 0, BN_cmp(peer, limit) < 0 else {
            throw ServiceError.invalidArgs("the client's public key is out of range")
        }
        repeat {
            guard BN_priv_rand_range(secretExponent, limit) == 1 else { throw ServiceError.failed("no randomness") }
        } while BN_cmp(secretExponent, BN_value_one()) <= 0
        guard BN_mod_exp_mont_consttime(ours, generator, secretExponent, prime, ctx, nil) == 1,
            BN_mod_exp_mont_consttime(shared, peer, secretExponent, prime, ctx, nil) == 1
        else { throw ServiceError.failed("key agreement failed") }
        var publicKey = Bytes(repeating: 0, count: groupBytes)
        var sharedBytes = Bytes(repeating: 0, count: groupBytes)
        defer { sharedBytes.wipe() }
        guard BN_bn2binpad(ours, &publicKey, Int32(groupBytes)) == Int32(groupBytes),
            BN_bn2binpad(shared, &sharedBytes, Int32(groupBytes)) == Int32(groupBytes)
        else { throw ServiceError.failed("key agreement failed") }
        return (publicKey, try hkdf(sharedBytes))
    }

    /// HKDF-SHA256 with an empty salt and info, one block, cut to 16 bytes.
    private static func hkdf(_ input: Bytes) throws -> Bytes {
        var prk = try hmac(key: Bytes(repeating: 0, count: 32), input)
        defer { prk.wipe() }
        var block = try hmac(key: prk, [1])
        defer { block.wipe() }
        return Array(block.prefix(keyLength))
    }

    private static func hmac(key: Bytes, _ data: Bytes) throws -> Bytes {
        var out = Bytes(repeating: 0, count: 32)
        var length: UInt32 = 0
        guard HMAC(EVP_sha256(), key, Int32(key.count), data, data.count, &out, &length) != nil, length == 32 else {
            throw ServiceError.failed("HMAC failed")
        }
        return out
    }

    static func encrypt(_ plaintext: Bytes, key: Bytes) throws -> (iv: Bytes, ciphertext: Bytes) {
        var iv = Bytes(repeating: 0, count: blockLength)
        guard RAND_bytes(&iv, Int32(blockLength)) == 1 else { throw ServiceError.failed("no randomness") }
        return (iv, try crypt(plaintext, key: key, iv: iv, encrypt: true))
    }

    static func decrypt(_ ciphertext: Bytes, key: Bytes, iv: Bytes) throws -> Bytes {
        guard iv.count == blockLength, !ciphertext.isEmpty, ciphertext.count % blockLength == 0 else {
            throw ServiceError.invalidArgs("the secret is not AES-128-CBC with a 16-byte IV")
        }
        return try crypt(ciphertext, key: key, iv: iv, encrypt: false)
    }

    private static func crypt(_ input: Bytes, key: Bytes, iv: Bytes, encrypt: Bool) throws -> Bytes {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw ServiceError.failed("out of memory") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = Bytes(repeating: 0, count: input.count + blockLength)
        var length: Int32 = 0, total: Int32 = 0
        guard EVP_CipherInit_ex(ctx, EVP_aes_128_cbc(), nil, key, iv, encrypt ? 1 : 0) == 1,
            EVP_CipherUpdate(ctx, &out, &length, input, Int32(input.count)) == 1
        else {
            out.wipe()
            throw ServiceError.failed("cipher failed")
        }
        total = length
        let finished = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + Int(total), &length) }
        guard finished == 1 else {
            out.wipe()
            throw ServiceError.invalidArgs("the secret does not decrypt with this session's key")
        }
        total += length
        let result = Array(out[0..<Int(total)])
        out.wipe()
        return result
    }
}

/// One OpenSession: its owner (the unique bus name that opened it) and, for the DH algorithm, the
/// AES key, wiped when the session closes or its owner leaves the bus.
final class Session {
    let id: String
    let owner: String
    private var key: Bytes?

    init(id: String, owner: String, key: Bytes?) {
        self.id = id
        self.owner = owner
        self.key = key
    }

    deinit { close() }

    func close() {
        key?.wipe()
        key = nil
    }

    func encode(_ secret: Bytes, path: String, contentType: String) throws -> WireSecret {
        guard let key else { return WireSecret(session: path, parameters: [], value: secret, contentType: contentType) }
        let (iv, ciphertext) = try SessionCrypto.encrypt(secret, key: key)
        return WireSecret(session: path, parameters: iv, value: ciphertext, contentType: contentType)
    }

    func decode(_ wire: WireSecret) throws -> Bytes {
        guard let key else {
            guard wire.parameters.isEmpty else { throw ServiceError.invalidArgs("a plain session's secret has no parameters") }
            return wire.value
        }
        return try SessionCrypto.decrypt(wire.value, key: key, iv: wire.parameters)
    }
}
