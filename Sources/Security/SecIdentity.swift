internal import KeychainCore

/// What Apple's SecIdentityRef is: a certificate and the private key that goes with it.
public final class SecIdentity: CustomStringConvertible {
    public let certificate: SecCertificate
    public let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    public var description: String { "<SecIdentity \"\(certificate.certificate.subjectSummary)\">" }
}

public func SecIdentityCopyCertificate(_ identity: SecIdentity, _ certificateRef: UnsafeMutablePointer<SecCertificate?>) -> OSStatus {
    certificateRef.pointee = identity.certificate
    return errSecSuccess
}

public func SecIdentityCopyPrivateKey(_ identity: SecIdentity, _ privateKeyRef: UnsafeMutablePointer<SecKey?>) -> OSStatus {
    privateKeyRef.pointee = identity.privateKey
    return errSecSuccess
}
