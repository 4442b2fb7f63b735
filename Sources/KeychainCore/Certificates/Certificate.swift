internal import COpenSSL
import Glibc

/// An X.509 certificate, parsed once by OpenSSL: what Keychain Services derives from the DER.
package struct Certificate: Sendable {
    /// The whole certificate, exactly as given (kSecValueData).
    package let der: Bytes
    /// DER of the subject and issuer Names (macOS's kSecSubjectItemAttr, kSecIssuerItemAttr).
    package let subject: Bytes
    package let issuer: Bytes
    /// The serial number's DER contents, without tag and length.
    package let serialNumber: Bytes
    /// The subject key identifier extension, when there is one.
    package let subjectKeyID: Bytes?
    /// SHA-1 of the subjectPublicKey bits: equal to the kSecAttrApplicationLabel of its keys.
    package let publicKeyHash: Bytes
    /// The SubjectPublicKeyInfo DER (what SecCertificateCopyKey reads).
    package let publicKeyInfo: Bytes
    /// 1, 2 or 3 (CSSM_CERT_X_509v1..v3).
    package let version: Int64
    /// Seconds since 1970.
    package let notBefore: Double
    package let notAfter: Double
    /// The subject's emailAddress attributes and the rfc822Name entries of subjectAltName.
    package let emailAddresses: [String]
    package let commonName: String?
    /// Every attribute value of the subject, as text (what kSecMatchSubjectContains looks in).
    package let subjectValues: [String]

    /// errSecDecode unless `der` is one whole certificate.
    package init(der: Bytes) throws {
        guard !der.isEmpty, der.count <= 1 << 20 else { throw KeychainError(.decode, "the data is not a DER certificate") }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let x509 = d2i_X509(nil, &cursor, buffer.count)
            // Trailing bytes mean the data is something else that starts like a certificate.
            if let x509, cursor != buffer.baseAddress! + buffer.count {
                X509_free(x509)
                return nil
            }
            return x509
        }
        OpenSSLErrors.clear()
        guard let x509 = parsed else { throw KeychainError(.decode, "the data is not a DER certificate") }
        defer { X509_free(x509) }
        self.der = der
        let subjectName = X509_get_subject_name(x509)
        subject = try OpenSSLEncoding.der(of: subjectName, i2d_X509_NAME)
        issuer = try OpenSSLEncoding.der(of: X509_get_issuer_name(x509), i2d_X509_NAME)
        serialNumber = try OpenSSLEncoding.contents(ofDER: OpenSSLEncoding.der(of: X509_get0_serialNumber(x509), i2d_ASN1_INTEGER))
        subjectKeyID = X509_get0_subject_key_id(x509).map(OpenSSLEncoding.bytes(of:))
        guard let keyBits = X509_get0_pubkey_bitstr(x509) else { throw KeychainError(.decode, "the certificate has no public key") }
        publicKeyHash = Crypto.sha1(OpenSSLEncoding.bytes(of: keyBits))
        publicKeyInfo = try OpenSSLEncoding.der(of: X509_get_X509_PUBKEY(x509), i2d_X509_PUBKEY)
        version = Int64(X509_get_version(x509)) + 1
        guard let start = OpenSSLEncoding.seconds(X509_get0_notBefore(x509)),
            let end = OpenSSLEncoding.seconds(X509_get0_notAfter(x509))
        else {
            throw KeychainError(.decode, "the certificate's validity dates cannot be read")
        }
        notBefore = start
        notAfter = end
        emailAddresses = Self.emails(x509)
        var values: [String] = []
        var cn: String?
        for index in 0..<max(0, X509_NAME_entry_count(subjectName)) {
            guard let entry = X509_NAME_get_entry(subjectName, index),
                let text = OpenSSLEncoding.utf8(X509_NAME_ENTRY_get_data(entry))
            else { continue }
            values.append(text)
            if OBJ_obj2nid(X509_NAME_ENTRY_get_object(entry)) == NID_commonName { cn = text }
        }
        subjectValues = values
        commonName = cn
    }

    /// Apple's SecCertificateCopySubjectSummary: the common name, else the first email, else
    /// the last subject value.
    package var subjectSummary: String {
        commonName ?? emailAddresses.first ?? subjectValues.last ?? ""
    }

    package var sha1: Bytes { Crypto.sha1(der) }
    package var sha256: Bytes { Crypto.sha256(der) }

    /// Issued by itself: the issuer Name is the subject Name.
    package var isSelfIssued: Bool { Self.sameName(subject, issuer) }

    /// The issuers of this certificate among `candidates`, nearest first, up to a self-issued
    /// root; at most 16, so that a loop or a hostile set ends.
    package func issuers(among candidates: [Certificate]) -> [Certificate] {
        var chain: [Certificate] = []
        var current = self
        while !current.isSelfIssued, chain.count < 16,
            let issuer = candidates.first(where: { Self.sameName($0.subject, current.issuer) && $0.der != current.der })
        {
            chain.append(issuer)
            current = issuer
        }
        return chain
    }

    package func isValid(at time: Double) -> Bool { notBefore <= time && time <= notAfter }

    /// The attributes SecItemAdd derives; they replace whatever the caller passed for them.
    var derivedAttributes: [String: AttributeValue] {
        var out: [String: AttributeValue] = [
            AttributeKey.certificateType: .int(version), AttributeKey.certificateEncoding: .int(3),  // CSSM_CERT_ENCODING_DER
            AttributeKey.subject: .data(subject), AttributeKey.issuer: .data(issuer), AttributeKey.serialNumber: .data(serialNumber),
            AttributeKey.publicKeyHash: .data(publicKeyHash)
        ]
        if let subjectKeyID { out[AttributeKey.subjectKeyID] = .data(subjectKeyID) }
        return out
    }

    /// X.500 names compared as X509_NAME_cmp does (canonical form: case and spacing folded), so
    /// an issuer Name taken from another tool's encoding still matches.
    package static func sameName(_ a: Bytes, _ b: Bytes) -> Bool {
        if a == b { return true }
        guard let x = OpenSSLEncoding.name(a) else { return false }
        defer { X509_NAME_free(x) }
        guard let y = OpenSSLEncoding.name(b) else { return false }
        defer { X509_NAME_free(y) }
        return X509_NAME_cmp(x, y) == 0
    }

    private static func emails(_ x509: OpaquePointer) -> [String] {
        guard let stack = X509_get1_email(x509) else { return [] }
        defer { X509_email_free(stack) }
        var out: [String] = []
        for index in 0..<OPENSSL_sk_num(stack) {
            guard let raw = OPENSSL_sk_value(stack, index) else { continue }
            let email = String(cString: raw.assumingMemoryBound(to: CChar.self))
            if !out.contains(email) { out.append(email) }
        }
        return out
    }
}
