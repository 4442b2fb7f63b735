package import KeychainCore

/// What Apple's SecCertificateRef is: a parsed certificate, which may remember the keychain row
/// it came from (so that kSecValueRef and kSecMatchItemList can name that row).
public final class SecCertificate: CustomStringConvertible {
    package let certificate: Certificate
    let stored: StoredReference?

    init(_ certificate: Certificate, stored: StoredReference? = nil) {
        self.certificate = certificate
        self.stored = stored
    }

    public var description: String { "<SecCertificate \"\(certificate.subjectSummary)\">" }
}

/// A row of a keychain, as a reference object remembers it.
struct StoredReference {
    var rowID: Int64
    var keychainPath: String
}

/// nil unless `data` is one DER certificate (PEM is not accepted, as on Apple's systems).
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    (try? Certificate(der: Array(data as Data))).map { SecCertificate($0) }
}

public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData { Data(certificate.certificate.der) as NSData }

public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    certificate.certificate.subjectSummary as NSString
}

public func SecCertificateCopyCommonName(_ certificate: SecCertificate, _ commonName: UnsafeMutablePointer<CFString?>) -> OSStatus {
    commonName.pointee = certificate.certificate.commonName.map { $0 as NSString }
    return errSecSuccess
}

public func SecCertificateCopyEmailAddresses(_ certificate: SecCertificate, _ emailAddresses: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    emailAddresses.pointee = certificate.certificate.emailAddresses as NSArray
    return errSecSuccess
}

public func SecCertificateCopySerialNumberData(_ certificate: SecCertificate, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    Data(certificate.certificate.serialNumber) as NSData
}

/// The DER subject and issuer Names (what kSecAttrSubject and kSecAttrIssuer hold).
public func SecCertificateCopyNormalizedSubjectSequence(_ certificate: SecCertificate) -> CFData? { Data(certificate.certificate.subject) as NSData }
public func SecCertificateCopyNormalizedIssuerSequence(_ certificate: SecCertificate) -> CFData? { Data(certificate.certificate.issuer) as NSData }

/// The certificate's public key.
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    guard let material = try? KeyMaterial(data: certificate.certificate.publicKeyInfo, keyClass: .public) else { return nil }
    return SecKey(material)
}
