internal import COpenSSL

/// kSecAttrKeyClass values (SecItem.h stores them as the numbers 0, 1, 2).
package enum KeyClass: Int64, Sendable {
    case `public` = 0
    case `private` = 1
    case symmetric = 2
}

extension KeyClass {
    /// The class a kSecAttrKeyClass attribute names, nil when absent; errSecParam when unknown.
    package static func named(by value: AttributeValue?) throws -> KeyClass? {
        guard let value else { return nil }
        guard let keyClass = value.intValue.flatMap(KeyClass.init(rawValue:)) else { throw KeychainError.param("unknown kSecAttrKeyClass") }
        return keyClass
    }
}

/// kSecAttrKeyType values this engine understands for asymmetric keys (CSSM_ALGID numbers).
package enum KeyAlgorithm: Int64, Sendable {
    case rsa = 42
    case ec = 73
}

extension KeyAlgorithm {
    /// The algorithm a kSecAttrKeyType attribute names, nil when absent; errSecParam when unsupported.
    package static func named(by value: AttributeValue?) throws -> KeyAlgorithm? {
        guard let value else { return nil }
        guard let algorithm = value.intValue.flatMap(KeyAlgorithm.init(rawValue:)) else {
            throw KeychainError.param("kSecAttrKeyType must be kSecAttrKeyTypeRSA or kSecAttrKeyTypeECSECPrimeRandom")
        }
        return algorithm
    }
}

/// kSecAttrKeyType of an SSH agent's key item, whose data is OpenSSH's private serialization
/// (Ed25519, certificates and TPM-resident keys too, which no CSSM algorithm names). The engine
/// keeps those bytes as they are; no Apple API takes them for a key it could use.
package enum OpenSSHKeyItem {
    /// "SSH\0" as a number, far from the CSSM algorithm numbers.
    package static let keyType: Int64 = 0x5353_4800
}

/// An RSA or EC key, read from any of the forms people have and kept in Apple's external
/// representation (SecKeyCopyExternalRepresentation): PKCS#1 for RSA, ANSI X9.63 for EC
/// (04 || X || Y, then || D for a private key).
package struct KeyMaterial: Sendable {
    package let keyClass: KeyClass
    package let algorithm: KeyAlgorithm
    package let bits: Int64
    /// Apple's external representation: what kSecValueData holds for the key item.
    package let external: Bytes
    /// The public key's external representation (for a public key, `external` itself).
    package let publicExternal: Bytes
    /// SHA-1 of `publicExternal`: kSecAttrApplicationLabel, and a certificate's kSecAttrPublicKeyHash.
    package var applicationLabel: Bytes { Crypto.sha1(publicExternal) }

    /// Reads DER (PKCS#1, SEC1, PKCS#8, SubjectPublicKeyInfo), PEM of those, or X9.63 EC bytes.
    /// `keyClass` and `algorithm`, when the caller gave them, must agree with the data.
    package init(data: Bytes, keyClass wantedClass: KeyClass? = nil, algorithm wantedAlgorithm: KeyAlgorithm? = nil) throws {
        guard wantedClass != .symmetric else { throw KeychainError.param("a symmetric key is not an RSA or EC key") }
        guard let (pkey, isPrivate) = Self.decode(data, wantedClass: wantedClass) else {
            throw KeychainError(.decode, "the data is not an RSA or EC key in a known encoding")
        }
        defer { EVP_PKEY_free(pkey) }
        let algorithm: KeyAlgorithm
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_RSA: algorithm = .rsa
        case EVP_PKEY_EC: algorithm = .ec
        default: throw KeychainError.param("only RSA and EC keys are supported")
        }
        let keyClass: KeyClass = isPrivate ? .private : .public
        if let wantedClass, wantedClass != keyClass {
            throw KeychainError.param("kSecAttrKeyClass says \(wantedClass), the data holds a \(keyClass) key")
        }
        if let wantedAlgorithm, wantedAlgorithm != algorithm {
            throw KeychainError.param("kSecAttrKeyType says \(wantedAlgorithm), the data holds an \(algorithm) key")
        }
        self.keyClass = keyClass
        self.algorithm = algorithm
        bits = Int64(EVP_PKEY_get_bits(pkey))
        publicExternal = try OpenSSLEncoding.der(of: pkey) { key, out in i2d_PublicKey(key, out) }
        if !isPrivate {
            external = publicExternal
        } else if algorithm == .rsa {
            external = try OpenSSLEncoding.der(of: pkey) { key, out in i2d_PrivateKey(key, out) }
        } else {
            var scalar: OpaquePointer?
            guard EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_PRIV_KEY, &scalar) == 1, let scalar else {
                OpenSSLErrors.clear()
                throw KeychainError(.decode, "the EC private key has no scalar")
            }
            defer { BN_clear_free(scalar) }
            var d = Bytes(repeating: 0, count: (Int(bits) + 7) / 8)
            guard BN_bn2binpad(scalar, &d, Int32(d.count)) == Int32(d.count) else { throw KeychainError(.decode, "bad EC scalar") }
            external = publicExternal + d
            d.wipe()
        }
    }

    /// The attributes SecItemAdd derives for a key item; a caller's value for them is replaced.
    package var derivedAttributes: [String: AttributeValue] {
        [
            AttributeKey.keyClass: .int(keyClass.rawValue), AttributeKey.keyType: .int(algorithm.rawValue), AttributeKey.keySizeInBits: .int(bits),
            AttributeKey.effectiveKeySize: .int(bits),
            AttributeKey.applicationLabel: .data(applicationLabel)
        ]
    }

    /// Capabilities Apple gives a key when the caller names none (SecKeyCreate's defaults).
    var defaultCapabilities: [String: AttributeValue] {
        let isPrivate = keyClass == .private
        return [
            AttributeKey.canEncrypt: .bool(!isPrivate), AttributeKey.canDecrypt: .bool(isPrivate), AttributeKey.canDerive: .bool(true),
            AttributeKey.canSign: .bool(isPrivate),
            AttributeKey.canVerify: .bool(!isPrivate), AttributeKey.canWrap: .bool(!isPrivate), AttributeKey.canUnwrap: .bool(isPrivate),
            AttributeKey.isPermanent: .bool(true)
        ]
    }

    /// PKCS#8 (private) or SubjectPublicKeyInfo (public) DER: what `openssl` and PEM files use.
    package func standardDER() throws -> Bytes {
        guard let (pkey, isPrivate) = Self.decode(external, wantedClass: keyClass) else { throw KeychainError(.decode) }
        defer { EVP_PKEY_free(pkey) }
        if isPrivate {
            guard let info = EVP_PKEY2PKCS8(pkey) else { throw KeychainError(.decode, "cannot encode the key") }
            defer { PKCS8_PRIV_KEY_INFO_free(info) }
            return try OpenSSLEncoding.der(of: info) { info, out in i2d_PKCS8_PRIV_KEY_INFO(info, out) }
        }
        return try OpenSSLEncoding.der(of: pkey) { key, out in i2d_PUBKEY(key, out) }
    }

    /// An EVP_PKEY for OpenSSL calls (PKCS#12 export, matching); the caller frees it.
    func makePKey() throws -> OpaquePointer {
        guard let (pkey, _) = Self.decode(external, wantedClass: keyClass) else { throw KeychainError(.decode) }
        return pkey
    }

    // MARK: Decoding

    private static func decode(_ data: Bytes, wantedClass: KeyClass?) -> (OpaquePointer, Bool)? {
        defer { OpenSSLErrors.clear() }
        if let der = PEM.firstBlock(in: data)?.der { return decode(der, wantedClass: wantedClass) }
        // DER says what it holds; the caller's class is checked against it afterwards.
        if let key = decodeDER(data, d2i_AutoPrivateKey) { return (key, true) }
        if let key = decodeDER(data, d2i_PUBKEY) { return (key, false) }
        if let key = decodeDER(data, { d2i_PublicKey(EVP_PKEY_RSA, $0, $1, $2) }) { return (key, false) }
        return decodeX963(data, wantedClass: wantedClass)
    }

    private static func decodeDER(
        _ data: Bytes,
        _ d2i: (UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, Int) -> OpaquePointer?
    )
        -> OpaquePointer?
    {
        data.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let key = d2i(nil, &cursor, buffer.count) else { return nil }
            guard cursor == buffer.baseAddress! + buffer.count else {
                EVP_PKEY_free(key)
                return nil
            }
            return key
        }
    }

    /// The NIST curves by field size in bytes.
    private static let curves: [(bytes: Int, name: String)] = [(32, "prime256v1"), (48, "secp384r1"), (66, "secp521r1")]

    /// 04 || X || Y (public) or 04 || X || Y || D (private). 97 bytes are either a P-384 public
    /// key or a P-256 private key; the key class decides, public when none was given.
    private static func decodeX963(_ data: Bytes, wantedClass: KeyClass?) -> (OpaquePointer, Bool)? {
        guard data.first == 4 else { return nil }
        let candidates = curves.flatMap { curve in [(curve, false), (curve, true)] }
            .filter { (curve, isPrivate) in data.count == 1 + curve.bytes * (isPrivate ? 3 : 2) }
            .filter { (_, isPrivate) in wantedClass.map { ($0 == .private) == isPrivate } ?? true }
            .sorted { !$0.1 && $1.1 }
        guard let (curve, isPrivate) = candidates.first else { return nil }
        let pointLength = 1 + 2 * curve.bytes
        let point = Array(data[0..<pointLength])
        var scalar: OpaquePointer?
        if isPrivate {
            let d = Array(data[pointLength...])
            scalar = BN_bin2bn(d, Int32(d.count), nil)
            if scalar == nil { return nil }
        }
        defer { if let scalar { BN_clear_free(scalar) } }
        // The builder keeps pointers to what it is given (keys included) until
        // OSSL_PARAM_BLD_to_param copies them, so none of them may be a temporary.
        let params: UnsafeMutablePointer<OSSL_PARAM>? = curve.name.withCString { name in
            point.withUnsafeBytes { pointBytes in
                guard let builder = OSSL_PARAM_BLD_new() else { return nil }
                defer { OSSL_PARAM_BLD_free(builder) }
                guard OSSL_PARAM_BLD_push_utf8_string(builder, KEYCHAIN_PARAM_GROUP_NAME, name, 0) == 1,
                    OSSL_PARAM_BLD_push_octet_string(builder, KEYCHAIN_PARAM_PUB_KEY, pointBytes.baseAddress, pointBytes.count) == 1,
                    scalar == nil || OSSL_PARAM_BLD_push_BN(builder, KEYCHAIN_PARAM_PRIV_KEY, scalar) == 1
                else { return nil }
                return OSSL_PARAM_BLD_to_param(builder)
            }
        }
        guard let params else { return nil }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
            EVP_PKEY_fromdata(context, &key, isPrivate ? KEYCHAIN_EVP_PKEY_KEYPAIR : KEYCHAIN_EVP_PKEY_PUBLIC_KEY, params) == 1,
            let key
        else { return nil }
        // fromdata takes the point on trust; a private key must be the one its point says.
        if isPrivate, !pairwiseConsistent(key) {
            EVP_PKEY_free(key)
            return nil
        }
        return (key, isPrivate)
    }

    private static func pairwiseConsistent(_ key: OpaquePointer) -> Bool {
        guard let context = EVP_PKEY_CTX_new(key, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context) }
        return EVP_PKEY_pairwise_check(context) == 1
    }
}
