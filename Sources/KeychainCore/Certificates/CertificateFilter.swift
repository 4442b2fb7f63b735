/// The search keys that look inside a certificate rather than at its stored attributes.
package struct CertificateFilter: Sendable {
    /// kSecMatchSubjectContains: some attribute value of the subject contains this text.
    package var subjectContains: String?
    /// kSecMatchEmailAddressIfPresent: the certificate has this address, or has no address at all.
    package var emailAddressIfPresent: String?
    /// kSecMatchIssuers: DER Names, one of which must issue a certificate of the chain.
    package var issuers: [Bytes]?
    /// kSecMatchValidOnDate: seconds since 1970 that must fall within the validity period.
    package var validOn: Double?
    /// kSecMatchCaseInsensitive applies to kSecMatchSubjectContains too.
    package var caseInsensitive = false

    package init() {}

    func accepts(_ certificate: Certificate, chain: inout CertificateChainSource) throws -> Bool {
        if let validOn, !certificate.isValid(at: validOn) { return false }
        if let wanted = subjectContains {
            let needle = caseInsensitive ? wanted.lowercased() : wanted
            let found = certificate.subjectValues.contains { value in
                (caseInsensitive ? value.lowercased() : value).contains(needle)
            }
            if !found { return false }
        }
        if let wanted = emailAddressIfPresent, !certificate.emailAddresses.isEmpty {
            // RFC 5321: the domain is case-insensitive; in practice so is the whole address.
            let address = wanted.lowercased()
            if !certificate.emailAddresses.contains(where: { $0.lowercased() == address }) { return false }
        }
        if let issuers {
            let chainIssuers = try chain.issuerNames(of: certificate)
            if !issuers.contains(where: { wanted in chainIssuers.contains { Certificate.sameName($0, wanted) } }) { return false }
        }
        return true
    }
}

/// The certificates of the keychain that can be read now, loaded once per search and only when
/// kSecMatchIssuers needs to walk up a chain.
struct CertificateChainSource {
    let store: KeychainStore
    let keys: ClassKeys
    private var loaded: [Certificate]?

    init(store: KeychainStore, keys: ClassKeys) {
        self.store = store
        self.keys = keys
    }

    /// The issuer of `certificate`, then the issuers of the issuers the keychain holds.
    mutating func issuerNames(of certificate: Certificate) throws -> [Bytes] {
        if certificate.isSelfIssued { return [certificate.issuer] }
        if loaded == nil { loaded = try store.readableCertificates(keys: keys) }
        return [certificate.issuer] + certificate.issuers(among: loaded!).map(\.issuer)
    }
}
