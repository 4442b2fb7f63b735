import Security
import XCTest

/// kSecClassCertificate: attributes derived from the DER, uniqueness, the certificate search keys.
final class CertificateTests: OpenSSLTestCase {
    static let all = ["ca", "alice", "expired", "intermediate", "server", "bob"]

    @discardableResult
    func addCertificate(_ name: String, extra: [String: Any] = [:]) throws -> OSStatus {
        var item: [String: Any] = [kSecClass: kSecClassCertificate, kSecValueData: try fixtures.data("\(name).der")]
        item.merge(extra) { _, b in b }
        return SecItemAdd(item, nil)
    }

    func addAll() throws {
        for name in Self.all { XCTAssertEqual(try addCertificate(name), errSecSuccess, name) }
    }

    /// The labels (common names by default) of the certificates a query finds, sorted.
    func labels(_ query: [String: Any]) -> [String] {
        var full: [String: Any] = [kSecClass: kSecClassCertificate, kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true]
        full.merge(query) { _, b in b }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(full, &result)
        if status == errSecItemNotFound { return [] }
        XCTAssertEqual(status, errSecSuccess)
        return ((result as? [Any]) ?? []).compactMap { ($0 as? [String: Any])?[kSecAttrLabel] as? String }.sorted()
    }

    func attributes(_ name: String) throws -> [String: Any] {
        var result: CFTypeRef?
        let der = try fixtures.data("\(name).der")
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecReturnAttributes: true, kSecReturnData: true,
                                            kSecValueRef: SecCertificateCreateWithData(nil, der as CFData)!], &result), errSecSuccess)
        return result as? [String: Any] ?? [:]
    }

    // MARK: Derived attributes

    func testAttributesAreDerivedFromTheDER() throws {
        try addAll()
        let alice = try attributes("alice")
        XCTAssertEqual(alice[kSecValueData] as? Data, try fixtures.data("alice.der"))
        XCTAssertEqual(alice[kSecAttrLabel] as? String, "Alice Example", "the default label is the common name")
        XCTAssertEqual((alice[kSecAttrCertificateType] as? NSNumber)?.intValue, 3, "CSSM_CERT_X_509v3")
        XCTAssertEqual((alice[kSecAttrCertificateEncoding] as? NSNumber)?.intValue, 3, "CSSM_CERT_ENCODING_DER")
        XCTAssertEqual((alice[kSecAttrSerialNumber] as? Data)?.hexString, try fixtures.field("-serial", of: "alice").lowercased())
        XCTAssertEqual(alice[kSecAttrSubjectKeyID] as? Data, try fixtures.subjectKeyID(of: "alice"))
        // The issuer Name of a certificate is its issuer's subject Name, byte for byte.
        let root = try attributes("ca")
        XCTAssertEqual(alice[kSecAttrIssuer] as? Data, root[kSecAttrSubject] as? Data)
        XCTAssertEqual(root[kSecAttrIssuer] as? Data, root[kSecAttrSubject] as? Data, "self-signed")
        XCTAssertNotEqual(alice[kSecAttrSubject] as? Data, root[kSecAttrSubject] as? Data)
        XCTAssertEqual((alice[kSecAttrSubject] as? Data)?.first, 0x30, "a DER SEQUENCE")
        XCTAssertNotNil((alice[kSecAttrSubject] as? Data).flatMap { String(decoding: $0, as: UTF8.self).range(of: "Alice Example") })
        // The public key hash: SHA-1 of the EC point, computed by openssl from the key file.
        let point = try fixtures.data("alice.pub.der").suffix(65)
        XCTAssertEqual(alice[kSecAttrPublicKeyHash] as? Data, try fixtures.sha1(Data(point)))
        XCTAssertEqual(root[kSecAttrSubjectKeyID] as? Data, try fixtures.subjectKeyID(of: "ca"))
    }

    func testReadOnlyAttributesComeFromTheDataNotTheCaller() throws {
        XCTAssertEqual(try addCertificate("alice", extra: [kSecAttrSerialNumber: Data([1, 2, 3]), kSecAttrLabel: "mine"]), errSecSuccess)
        let alice = try attributes("alice")
        XCTAssertEqual((alice[kSecAttrSerialNumber] as? Data)?.hexString, "1001")
        XCTAssertEqual(alice[kSecAttrLabel] as? String, "mine", "the label is the caller's")
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassCertificate], [kSecAttrSerialNumber: Data([9])]), errSecParam)
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassCertificate], [kSecAttrLabel: "renamed"]), errSecSuccess)
        XCTAssertEqual(labels([:]), ["renamed"])
    }

    func testDataThatIsNotACertificateIsNeverStored() throws {
        let der = try fixtures.data("alice.der")
        let pem = try fixtures.data("alice.pem")
        for bad in [Data(), Data("hello".utf8), pem, der + Data([0]), der.prefix(der.count - 1), try fixtures.data("alice.key.der")] {
            XCTAssertEqual(SecItemAdd([kSecClass: kSecClassCertificate, kSecValueData: bad], nil), errSecDecode)
        }
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassCertificate], nil), errSecDecode, "no data at all")
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassCertificate], nil), errSecItemNotFound)
        XCTAssertEqual(try keychain.keychain.store.count(), 0)
        XCTAssertNil(SecCertificateCreateWithData(nil, pem as CFData), "PEM is not DER")
    }

    func testUniquenessIsIssuerAndSerialNumber() throws {
        XCTAssertEqual(try addCertificate("alice"), errSecSuccess)
        XCTAssertEqual(try addCertificate("alice", extra: [kSecAttrLabel: "another label"]), errSecDuplicateItem)
        XCTAssertEqual(try addCertificate("alice", extra: [kSecAttrAccessGroup: "group.other"]), errSecSuccess)
        XCTAssertEqual(try addCertificate("expired"), errSecSuccess, "same issuer, other serial number")
    }

    // MARK: Search keys

    func testSubjectContainsNarrows() throws {
        try addAll()
        XCTAssertEqual(labels([kSecMatchSubjectContains: "Alice"]), ["Alice Example"])
        XCTAssertEqual(labels([kSecMatchSubjectContains: "Test Root"]), ["Keychain Test Root CA"])
        XCTAssertEqual(labels([kSecMatchSubjectContains: "Keychain Tests"]),
                       ["Alice Example", "Keychain Test Intermediate CA", "Keychain Test Root CA"], "organization too")
        XCTAssertEqual(labels([kSecMatchSubjectContains: "expired service"]), [], "case-sensitive by default")
        XCTAssertEqual(labels([kSecMatchSubjectContains: "expired service", kSecMatchCaseInsensitive: true]), ["Expired Service"])
        XCTAssertEqual(labels([kSecMatchSubjectContains: "nobody"]), [])
    }

    func testEmailAddressIfPresentKeepsCertificatesWithoutAddresses() throws {
        try addAll()
        let withoutEmail = ["Bob Other", "Expired Service", "Keychain Test Intermediate CA", "Keychain Test Root CA", "server.example.test"]
        XCTAssertEqual(labels([kSecMatchEmailAddressIfPresent: "alice@example.com"]), (withoutEmail + ["Alice Example"]).sorted(),
                       "the subject's emailAddress")
        XCTAssertEqual(labels([kSecMatchEmailAddressIfPresent: "ALICE@example.org"]), (withoutEmail + ["Alice Example"]).sorted(),
                       "the subjectAltName's rfc822Name, case-insensitive")
        XCTAssertEqual(labels([kSecMatchEmailAddressIfPresent: "mallory@example.com"]), withoutEmail)
    }

    func testIssuersFollowTheChainThroughTheKeychain() throws {
        try addAll()
        let root = try attributes("ca")[kSecAttrSubject] as! Data
        let intermediate = try attributes("intermediate")[kSecAttrSubject] as! Data
        let bob = try attributes("bob")[kSecAttrSubject] as! Data
        XCTAssertEqual(labels([kSecMatchIssuers: [root]]),
                       ["Alice Example", "Expired Service", "Keychain Test Intermediate CA", "Keychain Test Root CA", "server.example.test"],
                       "server.example.test through the intermediate")
        XCTAssertEqual(labels([kSecMatchIssuers: [intermediate]]), ["server.example.test"])
        XCTAssertEqual(labels([kSecMatchIssuers: [bob, intermediate]]), ["Bob Other", "server.example.test"])
        XCTAssertEqual(labels([kSecMatchIssuers: [Data("not a name".utf8)]]), [])
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecMatchIssuers: "root"], nil), errSecParam)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecMatchIssuers: [Data]()], nil), errSecParam)
    }

    func testIssuersWithoutTheIntermediateStopAtTheChain() throws {
        for name in ["ca", "server"] { try addCertificate(name) }
        let root = try attributes("ca")[kSecAttrSubject] as! Data
        XCTAssertEqual(labels([kSecMatchIssuers: [root]]), ["Keychain Test Root CA"], "the chain breaks where the keychain has no certificate")
    }

    func testValidOnDateNarrows() throws {
        try addAll()
        let mid2020 = Date(timeIntervalSince1970: 1_590_969_600)
        XCTAssertEqual(labels([kSecMatchValidOnDate: mid2020]), ["Expired Service"])
        let current = labels([kSecMatchValidOnDate: NSNull()])
        XCTAssertEqual(current.count, Self.all.count - 1)
        XCTAssertFalse(current.contains("Expired Service"))
        XCTAssertEqual(labels([kSecMatchValidOnDate: Date(timeIntervalSince1970: 0)]), [])
        XCTAssertEqual(labels([kSecMatchValidOnDate: Date(), kSecMatchSubjectContains: "Alice"]), ["Alice Example"], "search keys combine")
    }

    func testCertificateSearchKeysDoNotApplyToPasswords() {
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecMatchSubjectContains: "x"], nil), errSecParam)
    }

    // MARK: References

    func testReferencesRoundTrip() throws {
        try addAll()
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecMatchSubjectContains: "server",
                                            kSecReturnRef: true], &result), errSecSuccess)
        let certificate = try XCTUnwrap(result as? SecCertificate)
        XCTAssertEqual(SecCertificateCopySubjectSummary(certificate), "server.example.test")
        XCTAssertEqual(SecCertificateCopyData(certificate), try fixtures.data("server.der"))
        var emails: CFArray?
        let aliceCertificate = SecCertificateCreateWithData(nil, try fixtures.data("alice.der") as CFData)!
        XCTAssertEqual(SecCertificateCopyEmailAddresses(aliceCertificate, &emails), errSecSuccess)
        XCTAssertEqual(emails as? [String], ["alice@example.com", "alice@example.org"])
        XCTAssertEqual(SecItemDelete([kSecValueRef: certificate]), errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassCertificate, kSecValueRef: aliceCertificate]), errSecSuccess,
                       "a certificate made in memory names the stored one by issuer and serial number")
        XCTAssertEqual(labels([:]).count, Self.all.count - 2)
        XCTAssertEqual(SecItemAdd([kSecValueRef: aliceCertificate], nil), errSecSuccess, "kSecValueRef stands for kSecClass")
    }

    func testCertificatesLockWithTheirClass() throws {
        try addCertificate("alice")
        keychain.keychain.store.lockAll()
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassCertificate, kSecMatchSubjectContains: "Alice"], nil),
                       errSecInteractionNotAllowed)
    }
}
