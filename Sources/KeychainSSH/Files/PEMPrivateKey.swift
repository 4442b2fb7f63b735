internal import COpenSSL
internal import KeychainCore

/// PEM private keys (PKCS#1 "RSA PRIVATE KEY", SEC1 "EC PRIVATE KEY", with or without
/// Proc-Type/DEK-Info encryption) and PKCS#8 ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY"), decoded by
/// OpenSSL and turned into OpenSSH's serialization through the provider's key parameters.
enum PEMPrivateKey {
    static func isEncrypted(_ contents: Bytes) -> Bool {
        contents.containsASCII("-----BEGIN ENCRYPTED PRIVATE KEY-----") || contents.containsASCII("Proc-Type: 4,ENCRYPTED")
    }

    static func read(_ contents: Bytes, passphrase: Bytes?) throws -> SSHKeyFileEntry {
        guard contents.containsASCII("-----BEGIN ") else {
            throw SSHKeyFileError.malformed("neither an OpenSSH, a PEM nor a PKCS#8 private key")
        }
        let encrypted = isEncrypted(contents)
        if encrypted, passphrase == nil { throw SSHKeyFileError.needsPassphrase }
        let key = try decode(contents, passphrase: passphrase ?? [])
        guard let key else {
            if encrypted { throw SSHKeyFileError.wrongPassphrase }
            throw SSHKeyFileError.malformed("OpenSSL cannot read a private key in it")
        }
        defer {
            EVP_PKEY_free(key)
            ERR_clear_error()
        }
        return SSHKeyFileEntry(serialized: try serialize(key), comment: "")
    }

    /// The passphrase reaches OpenSSL only through this callback, never OpenSSL's default one,
    /// which would prompt on the terminal.
    private final class Passphrase {
        var bytes: Bytes
        init(_ bytes: Bytes) { self.bytes = bytes }
        deinit { bytes.wipe() }
    }

    private static func decode(_ contents: Bytes, passphrase: Bytes) throws -> OpaquePointer? {
        let box = Passphrase(passphrase)
        defer { ERR_clear_error() }
        return try contents.withUnsafeBytes { raw -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { throw KeychainError(.allocate) }
            defer { BIO_free(bio) }
            let callback: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { buffer, size, _, context in
                guard let buffer, let context else { return -1 }
                let bytes = Unmanaged<Passphrase>.fromOpaque(context).takeUnretainedValue().bytes
                guard !bytes.isEmpty, bytes.count <= Int(size) else { return -1 }
                bytes.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
                return Int32(bytes.count)
            }
            return withExtendedLifetime(box) { PEM_read_bio_PrivateKey(bio, nil, callback, Unmanaged.passUnretained(box).toOpaque()) }
        }
    }

    private static func serialize(_ key: OpaquePointer) throws -> Bytes {
        var writer = ByteWriter()
        defer { writer.wipe() }
        if EVP_PKEY_is_a(key, "RSA") == 1 {
            writer.string("ssh-rsa")
            for name in ["n", "e", "d", "rsa-coefficient1", "rsa-factor1", "rsa-factor2"] {
                var value = try number(key, name)
                writer.mpint(value)
                value.wipe()
            }
        } else if EVP_PKEY_is_a(key, "EC") == 1 {
            let curve: String
            switch try text(key, "group") {
            case "prime256v1", "P-256": curve = "nistp256"
            case "secp384r1", "P-384": curve = "nistp384"
            case "secp521r1", "P-521": curve = "nistp521"
            case let other: throw SSHKeyFileError.unsupported("elliptic curve \(other)")
            }
            guard EVP_PKEY_set_utf8_string_param(key, "point-format", "uncompressed") == 1 else {
                throw SSHKeyFileError.malformed("the EC key's point cannot be uncompressed")
            }
            let point = try octets(key, "pub")
            guard point.first == 4 else { throw SSHKeyFileError.malformed("the EC key's point is not uncompressed") }
            var d = try number(key, "priv")
            writer.string("ecdsa-sha2-\(curve)")
            writer.string(curve)
            writer.blob(point)
            writer.mpint(d)
            d.wipe()
        } else if EVP_PKEY_is_a(key, "ED25519") == 1 {
            let publicKey = try octets(key, "pub")
            var seed = try octets(key, "priv")
            guard publicKey.count == 32, seed.count == 32 else { throw SSHKeyFileError.malformed("an Ed25519 key of the wrong size") }
            writer.string("ssh-ed25519")
            writer.blob(publicKey)
            writer.blob(seed + publicKey)
            seed.wipe()
        } else {
            let name = EVP_PKEY_get0_type_name(key).map { String(cString: $0) } ?? "unknown"
            throw SSHKeyFileError.unsupported("key type \(name)")
        }
        return writer.bytes
    }

    private static func number(_ key: OpaquePointer, _ name: String) throws -> Bytes {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, name, &bn) == 1, let bn else { throw SSHKeyFileError.malformed("the key has no \(name)") }
        defer { BN_clear_free(bn) }
        var out = Bytes(repeating: 0, count: (Int(BN_num_bits(bn)) + 7) / 8)
        _ = BN_bn2bin(bn, &out)
        return out
    }

    private static func octets(_ key: OpaquePointer, _ name: String) throws -> Bytes {
        var length = 0
        guard EVP_PKEY_get_octet_string_param(key, name, nil, 0, &length) == 1, length > 0, length <= 1024 else {
            throw SSHKeyFileError.malformed("the key has no \(name)")
        }
        var out = Bytes(repeating: 0, count: length)
        guard EVP_PKEY_get_octet_string_param(key, name, &out, out.count, &length) == 1 else { throw SSHKeyFileError.malformed("the key has no \(name)") }
        return Array(out.prefix(length))
    }

    private static func text(_ key: OpaquePointer, _ name: String) throws -> String {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(key, name, &buffer, buffer.count, &length) == 1 else {
            throw SSHKeyFileError.malformed("the key has no \(name)")
        }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension Array where Element == UInt8 {
    /// Whether the ASCII `text` occurs anywhere in these bytes (a PEM marker or header).
    func containsASCII(_ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard count >= needle.count else { return false }
        return (0...(count - needle.count)).contains { self[$0..<$0 + needle.count].elementsEqual(needle) }
    }
}
