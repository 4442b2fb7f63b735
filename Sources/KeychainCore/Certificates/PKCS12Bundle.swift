internal import COpenSSL

/// The contents of a PKCS#12 (.p12, .pfx) file: what SecPKCS12Import and `security import` read.
package struct PKCS12Bundle: Sendable {
    package var privateKey: KeyMaterial?
    /// The certificate that goes with the private key (or the first one, without a key).
    package var certificate: Certificate?
    /// The other certificates of the file: the issuers, in file order.
    package var chain: [Certificate]
    /// The friendlyName bag attribute, when the file has one (kSecImportItemLabel).
    package var label: String?

    /// What a PEM file or a set of DER files hold, grouped the same way.
    package init(privateKey: KeyMaterial?, certificate: Certificate?, chain: [Certificate], label: String? = nil) {
        self.privateKey = privateKey
        self.certificate = certificate
        self.chain = chain
        self.label = label
    }

    /// errSecDecode when `data` is not PKCS#12; errSecAuthFailed when the passphrase does not
    /// open it (a wrong passphrase is never read as "no items").
    package init(data: Bytes, passphrase: String?) throws {
        defer { OpenSSLErrors.clear() }
        guard
            let p12 = data.withUnsafeBufferPointer({ buffer -> OpaquePointer? in
                var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_PKCS12(nil, &cursor, buffer.count)
            })
        else { throw KeychainError(.decode, "the data is not a PKCS#12 file") }
        defer { PKCS12_free(p12) }
        if let passphrase, passphrase.utf8.contains(0) { throw KeychainError.param("the passphrase contains a NUL byte") }
        let password = try Self.password(opening: p12, passphrase ?? "")

        var parsed = Self.parse(p12, password)
        if parsed == nil {
            // Files from older tools encrypt with RC2 or 3DES, which OpenSSL 3 keeps in its
            // legacy provider; load it only when a file needs it.
            _ = OSSL_PROVIDER_try_load(nil, "legacy", 1)
            parsed = Self.parse(p12, password)
        }
        guard let (pkey, x509, stack) = parsed else {
            throw KeychainError(.decode, "the PKCS#12 file cannot be read (unsupported encryption or damaged)")
        }
        defer {
            EVP_PKEY_free(pkey)
            X509_free(x509)
            if let stack { OPENSSL_sk_pop_free(stack) { X509_free(OpaquePointer($0)) } }
        }
        if let pkey {
            var der = try OpenSSLEncoding.der(of: pkey) { key, out in i2d_PrivateKey(key, out) }
            defer { der.wipe() }
            privateKey = try KeyMaterial(data: der, keyClass: .private)
        }
        var others: [Certificate] = []
        if let stack {
            for index in 0..<OPENSSL_sk_num(stack) {
                guard let raw = OPENSSL_sk_value(stack, index) else { continue }
                others.append(try Certificate(der: OpenSSLEncoding.der(of: OpaquePointer(raw), i2d_X509)))
            }
        }
        if let x509 {
            certificate = try Certificate(der: OpenSSLEncoding.der(of: x509, i2d_X509))
            var length: Int32 = 0
            if let alias = X509_alias_get0(x509, &length), length > 0 {
                label = String(decoding: UnsafeBufferPointer(start: alias, count: Int(length)), as: UTF8.self)
            }
        } else if !others.isEmpty {
            certificate = others.removeFirst()
        }
        chain = others
    }

    /// The password that verifies the file's MAC. An empty passphrase may mean "no password" or
    /// "the empty string" (tools differ), so both are tried.
    private static func password(opening p12: OpaquePointer, _ passphrase: String) throws -> String? {
        guard PKCS12_mac_present(p12) == 1 else { return passphrase }
        if PKCS12_verify_mac(p12, passphrase, Int32(passphrase.utf8.count)) == 1 { return passphrase }
        if passphrase.isEmpty, PKCS12_verify_mac(p12, nil, 0) == 1 { return nil }
        throw KeychainError(.authFailed, "the PKCS#12 passphrase is not correct")
    }

    private static func parse(_ p12: OpaquePointer, _ password: String?) -> (OpaquePointer?, OpaquePointer?, OpaquePointer?)? {
        var pkey: OpaquePointer?
        var x509: OpaquePointer?
        var stack: OpaquePointer?
        guard PKCS12_parse(p12, password, &pkey, &x509, &stack) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        return (pkey, x509, stack)
    }
}

extension PKCS12Bundle {
    /// A PKCS#12 file of one private key, its certificate and the chain, protected by
    /// `passphrase` with OpenSSL 3's defaults (AES-256-CBC, PBKDF2, HMAC-SHA-256), which every
    /// current tool reads.
    package static func encode(
        privateKey: KeyMaterial, certificate: Certificate?, chain: [Certificate], label: String?,
        passphrase: String
    ) throws -> Bytes {
        defer { OpenSSLErrors.clear() }
        guard !passphrase.isEmpty, !passphrase.utf8.contains(0) else { throw KeychainError.param("a PKCS#12 file needs a passphrase") }
        let pkey = try privateKey.makePKey()
        defer { EVP_PKEY_free(pkey) }
        let x509 = try certificate.map { try X509Object(der: $0.der) }
        let others = try chain.map { try X509Object(der: $0.der) }
        guard let stack = OPENSSL_sk_new_null() else { throw KeychainError(.allocate) }
        defer { OPENSSL_sk_free(stack) }
        for other in others { OPENSSL_sk_push(stack, UnsafeRawPointer(other.pointer)) }
        let iterations: Int32 = 2048
        guard let p12 = PKCS12_create(passphrase, label, pkey, x509?.pointer, stack, 0, 0, iterations, iterations, 0) else {
            throw KeychainError(.allocate, "cannot make the PKCS#12 file")
        }
        defer { PKCS12_free(p12) }
        return try withExtendedLifetime((x509, others)) { try OpenSSLEncoding.der(of: p12, i2d_PKCS12) }
    }
}

/// An X509 object owned by Swift, for calls that take OpenSSL's own types.
final class X509Object {
    let pointer: OpaquePointer

    init(der: Bytes) throws {
        guard
            let x509 = der.withUnsafeBufferPointer({ buffer -> OpaquePointer? in
                var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_X509(nil, &cursor, buffer.count)
            })
        else { throw KeychainError(.decode, "the data is not a DER certificate") }
        pointer = x509
    }

    deinit { X509_free(pointer) }
}
