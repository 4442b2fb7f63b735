internal import COpenSSL
internal import Glibc
internal import KeychainCore

/// Why a key, a signature or a message was refused; the agent logs it and answers failure.
package struct SSHKeyError: Error, CustomStringConvertible {
    package let description: String
    package init(_ reason: String) { description = reason }
}

/// An EVP_PKEY owned by Swift: OpenSSL 3's EVP calls only (the RSA_* and EC_KEY_* calls are
/// deprecated and would fail the build on their warnings).
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    // OSSL_PARAM_BLD keeps the name pointers it is given until it builds the array, and Swift
    // passes a literal as a temporary copy; these live as long as the program.
    private static let rsaN = strdup("n")!
    private static let rsaE = strdup("e")!
    private static let rsaD = strdup("d")!
    private static let rsaP = strdup("rsa-factor1")!
    private static let rsaQ = strdup("rsa-factor2")!
    private static let rsaDP = strdup("rsa-exponent1")!
    private static let rsaDQ = strdup("rsa-exponent2")!
    private static let rsaQInv = strdup("rsa-coefficient1")!

    static func ed25519(privateSeed seed: Bytes) throws -> EVPKey {
        guard seed.count == 32, let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, 32) else {
            throw failure("bad Ed25519 private key")
        }
        return EVPKey(key)
    }

    static func ed25519(publicKey: Bytes) throws -> EVPKey {
        guard publicKey.count == 32, let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, 32) else {
            throw failure("bad Ed25519 public key")
        }
        return EVPKey(key)
    }

    var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }

    /// The raw public key of an Ed25519 key (to check a private key against its stated public half).
    var rawPublicKey: Bytes {
        var length = 32
        var out = Bytes(repeating: 0, count: 32)
        guard EVP_PKEY_get_raw_public_key(pointer, &out, &length) == 1, length == 32 else { return [] }
        return out
    }

    /// A NIST curve key from its X9.63 point and, for a private key, its scalar. The point must be
    /// on the curve (a full public check), and the scalar must be the point's.
    static func ec(curve: SSHCurve, point: Bytes, scalar: Bytes?) throws -> EVPKey {
        guard point.count == 1 + 2 * curve.fieldBytes, point.first == 4 else { throw failure("bad EC point length") }
        if let scalar, scalar.isEmpty || scalar.count > curve.fieldBytes { throw failure("bad EC private scalar") }
        // The builder reads strings and octets only when it builds the array, so they are copied
        // into memory that outlives the closures Swift would lend them from.
        let name = strdup(curve.opensslName)!
        let octets = UnsafeMutableRawBufferPointer.allocate(byteCount: point.count, alignment: 1)
        octets.copyBytes(from: point)
        defer {
            free(name)
            octets.deallocate()
        }
        let key: EVPKey = try withBNs(scalar.map { [$0] } ?? []) { numbers in
            try build("EC", isPrivate: scalar != nil) { builder in
                OSSL_PARAM_BLD_push_utf8_string(builder, KEYCHAIN_PARAM_GROUP_NAME, name, 0) == 1
                    && OSSL_PARAM_BLD_push_octet_string(builder, KEYCHAIN_PARAM_PUB_KEY, octets.baseAddress, octets.count) == 1
                    && (numbers.isEmpty || OSSL_PARAM_BLD_push_BN(builder, KEYCHAIN_PARAM_PRIV_KEY, numbers[0]) == 1)
            }
        }
        guard let context = EVP_PKEY_CTX_new(key.pointer, nil) else { throw failure("no context") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_public_check(context) == 1 else { throw failure("EC point not on the curve") }
        if scalar != nil, EVP_PKEY_pairwise_check(context) != 1 { throw failure("EC private key does not match its point") }
        return key
    }

    /// An RSA key from its numbers (big-endian magnitudes); CRT exponents are derived as OpenSSH does.
    static func rsa(n: Bytes, e: Bytes, private parts: (d: Bytes, iqmp: Bytes, p: Bytes, q: Bytes)? = nil) throws -> EVPKey {
        let bits = n.count * 8 - (n.first.map { $0.leadingZeroBitCount } ?? 8)
        guard bits >= SSHLimits.minimumRSABits else { throw SSHKeyError("RSA key of \(bits) bits, under \(SSHLimits.minimumRSABits)") }
        guard bits <= SSHLimits.maximumRSABits, !e.isEmpty, e.count <= 8 else { throw SSHKeyError("RSA key out of bounds") }
        var inputs = [n, e]
        if let parts { inputs += [parts.d, parts.p, parts.q, parts.iqmp] }
        guard inputs.allSatisfy({ !$0.isEmpty }) else { throw SSHKeyError("RSA key with a zero number") }
        return try withBNs(inputs) { numbers in
            var extra: [OpaquePointer] = []
            defer { extra.forEach { BN_clear_free($0) } }
            if parts != nil {
                // dmp1 = d mod (p-1), dmq1 = d mod (q-1): what the file does not carry.
                guard let context = BN_CTX_new() else { throw failure("no BN context") }
                defer { BN_CTX_free(context) }
                for prime in [numbers[3], numbers[4]] {
                    guard let minusOne = BN_dup(prime), let exponent = BN_new() else { throw failure("no BN") }
                    defer { BN_clear_free(minusOne) }
                    extra.append(exponent)
                    guard BN_sub_word(minusOne, 1) == 1, BN_div(nil, exponent, numbers[2], minusOne, context) == 1 else {
                        throw failure("bad RSA primes")
                    }
                }
            }
            let key = try build("RSA", isPrivate: parts != nil) { builder in
                var ok = OSSL_PARAM_BLD_push_BN(builder, rsaN, numbers[0]) == 1 && OSSL_PARAM_BLD_push_BN(builder, rsaE, numbers[1]) == 1
                if parts != nil {
                    ok =
                        ok && OSSL_PARAM_BLD_push_BN(builder, rsaD, numbers[2]) == 1 && OSSL_PARAM_BLD_push_BN(builder, rsaP, numbers[3]) == 1
                        && OSSL_PARAM_BLD_push_BN(builder, rsaQ, numbers[4]) == 1 && OSSL_PARAM_BLD_push_BN(builder, rsaDP, extra[0]) == 1
                        && OSSL_PARAM_BLD_push_BN(builder, rsaDQ, extra[1]) == 1 && OSSL_PARAM_BLD_push_BN(builder, rsaQInv, numbers[5]) == 1
                }
                return ok
            }
            if parts != nil {
                guard let context = EVP_PKEY_CTX_new(key.pointer, nil) else { throw failure("no context") }
                defer { EVP_PKEY_CTX_free(context) }
                guard EVP_PKEY_pairwise_check(context) == 1 else { throw failure("RSA private key is inconsistent") }
            }
            return key
        }
    }

    private static func withBNs<T>(_ magnitudes: [Bytes], _ body: ([OpaquePointer]) throws -> T) throws -> T {
        var numbers: [OpaquePointer] = []
        defer { numbers.forEach { BN_clear_free($0) } }
        for magnitude in magnitudes {
            guard let number = BN_bin2bn(magnitude, Int32(magnitude.count), nil) else { throw failure("bad number") }
            numbers.append(number)
        }
        return try body(numbers)
    }

    private static func build(_ type: String, isPrivate: Bool, _ push: (OpaquePointer) -> Bool) throws -> EVPKey {
        guard let builder = OSSL_PARAM_BLD_new() else { throw failure("no parameter builder") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard push(builder), let params = OSSL_PARAM_BLD_to_param(builder) else { throw failure("bad \(type) parameters") }
        defer {
            // OpenSSL 3.0 has no OSSL_PARAM_clear_free; the private numbers are wiped here.
            var cursor = params
            while cursor.pointee.key != nil {
                if let data = cursor.pointee.data { OPENSSL_cleanse(data, cursor.pointee.data_size) }
                cursor += 1
            }
            OSSL_PARAM_free(params)
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { throw failure("no \(type) context") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
            EVP_PKEY_fromdata(context, &key, isPrivate ? KEYCHAIN_EVP_PKEY_KEYPAIR : KEYCHAIN_EVP_PKEY_PUBLIC_KEY, params) == 1, let key
        else { throw failure("bad \(type) key") }
        return EVPKey(key)
    }

    /// A signature over `data`; `digest` nil for Ed25519, which hashes inside.
    func sign(_ data: Bytes, digest: String?) throws -> Bytes {
        guard let context = EVP_MD_CTX_new() else { throw Self.failure("no digest context") }
        defer { EVP_MD_CTX_free(context) }
        let initialized = withOptionalCString(digest) { EVP_DigestSignInit_ex(context, nil, $0, nil, nil, pointer, nil) }
        guard initialized == 1 else { throw Self.failure("cannot start signing") }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, data, data.count) == 1 else { throw Self.failure("cannot size the signature") }
        var out = Bytes(repeating: 0, count: length)
        guard EVP_DigestSign(context, &out, &length, data, data.count) == 1 else { throw Self.failure("signing failed") }
        return Array(out[0..<length])
    }

    func verify(_ signature: Bytes, of data: Bytes, digest: String?) -> Bool {
        defer { ERR_clear_error() }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        let initialized = withOptionalCString(digest) { EVP_DigestVerifyInit_ex(context, nil, $0, nil, nil, pointer, nil) }
        guard initialized == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, data, data.count) == 1
    }

    private func withOptionalCString<T>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
        guard let string else { return body(nil) }
        return string.withCString(body)
    }

    static func failure(_ reason: String) -> SSHKeyError {
        ERR_clear_error()
        return SSHKeyError(reason)
    }
}

/// ECDSA signatures: DER from OpenSSL, (mpint r, mpint s) on SSH's wire.
enum ECDSASignature {
    static func wire(fromDER der: Bytes) throws -> Bytes {
        var cursor: UnsafePointer<UInt8>?
        let signature: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else { throw EVPKey.failure("bad ECDSA signature from OpenSSL") }
        defer { ECDSA_SIG_free(signature) }
        var writer = ByteWriter()
        writer.mpint(magnitude(ECDSA_SIG_get0_r(signature)))
        writer.mpint(magnitude(ECDSA_SIG_get0_s(signature)))
        return writer.bytes
    }

    static func der(r: Bytes, s: Bytes) -> Bytes? {
        guard !r.isEmpty, !s.isEmpty, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        guard let bnR = BN_bin2bn(r, Int32(r.count), nil) else { return nil }
        guard let bnS = BN_bin2bn(s, Int32(s.count), nil) else {
            BN_free(bnR)
            return nil
        }
        guard ECDSA_SIG_set0(signature, bnR, bnS) == 1 else {
            BN_free(bnR)
            BN_free(bnS)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    private static func magnitude(_ number: OpaquePointer?) -> Bytes {
        guard let number else { return [] }
        var out = Bytes(repeating: 0, count: Int((BN_num_bits(number) + 7) / 8))
        _ = BN_bn2bin(number, &out)
        return out
    }
}
