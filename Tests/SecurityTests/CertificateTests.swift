import KeychainCore
import Security
import XCTest

/// kSecClassCertificate as String: attributes derived from the DER, uniqueness, the certificate search keys.
final class CertificateTests: OpenSSLTestCase {
    static let all = ["ca", "alice", "expired", "intermediate", "server", "bob"]

    @discardableResult
    func addCertificate(_ name: String, extra: [String: Any] = [:]) throws -> OSStatus {
        var item: [String: Any] = [kSecClass as String: kSecClassCertificate, kSecValueData as String: try fixtures.data("\(name).der")]
        item.merge(extra) { _, b in b }
        return SecItemAdd(item as CFDictionary, nil)
    }

    func addAll() throws {
        for name in Self.all { XCTAssertEqual(try addCertificate(name), errSecSuccess, name) }
    }

    /// The labels (common names by default) of the certificates a query finds, sorted.
    func labels(_ query: [String: Any]) -> [String] {
        var full: [String: Any] = [kSecClass as String: kSecClassCertificate, kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true]
        full.merge(query) { _, b in b }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(full as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        XCTAssertEqual(status, errSecSuccess)
        return ((result as? [Any]) ?? []).compactMap { ($0 as? [String: Any])?[kSecAttrLabel as String] as? String }.sorted()
    }

    func attributes(_ name: String) throws -> [String: Any] {
        var result: CFTypeRef?
        let der = try fixtures.data("\(name).der")
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassCertificate, kSecReturnAttributes as String: true, kSecReturnData as String: true,
                    kSecValueRef as String: SecCertificateCreateWithData(nil, der as CFData)!
                ], &result), errSecSuccess)
        return result as? [String: Any] ?? [:]
    }

    // MARK: Derived attributes

    func testAttributesAreDerivedFromTheDER() throws {
        try addAll()
        let alice = try attributes("alice")
        XCTAssertEqual(alice[kSecValueData as String] as? Data, try fixtures.data("alice.der"))
        XCTAssertEqual(alice[kSecAttrLabel as String] as? String, "Alice Example", "the default label is the common name")
        XCTAssertEqual((alice[kSecAttrCertificateType as String] as? NSNumber)?.intValue, 3, "CSSM_CERT_X_509v3")
        XCTAssertEqual((alice[kSecAttrCertificateEncoding as String] as? NSNumber)?.intValue, 3, "CSSM_CERT_ENCODING_DER")
        XCTAssertEqual((alice[kSecAttrSerialNumber as String] as? Data)?.hexString, try fixtures.field("-serial", of: "alice").lowercased())
        XCTAssertEqual(alice[kSecAttrSubjectKeyID as String] as? Data, try fixtures.subjectKeyID(of: "alice"))
        // The issuer Name of a certificate is its issuer's subject Name, byte for byte.
        let root = try attributes("ca")
        XCTAssertEqual(alice[kSecAttrIssuer as String] as? Data, root[kSecAttrSubject as String] as? Data)
        XCTAssertEqual(root[kSecAttrIssuer as String] as? Data, root[kSecAttrSubject as String] as? Data, "self-signed")
        XCTAssertNotEqual(alice[kSecAttrSubject as String] as? Data, root[kSecAttrSubject as String] as? Data)
        XCTAssertEqual((alice[kSecAttrSubject as String] as? Data)?.first, 0x30, "a DER SEQUENCE")
        XCTAssertNotNil((alice[kSecAttrSubject as String] as? Data).flatMap { String(decoding: $0, as: UTF8.self).range(of: "Alice Example") })
        // The public key hash: SHA-1 of the EC point, computed by openssl from the key file.
        let point = try fixtures.data("alice.pub.der").suffix(65)
        XCTAssertEqual(alice[kSecAttrPublicKeyHash as String] as? Data, try fixtures.sha1(Data(point)))
        XCTAssertEqual(root[kSecAttrSubjectKeyID as String] as? Data, try fixtures.subjectKeyID(of: "ca"))
    }

    func testReadOnlyAttributesComeFromTheDataNotTheCaller() throws {
        XCTAssertEqual(try addCertificate("alice", extra: [kSecAttrSerialNumber as String: Data([1, 2, 3]), kSecAttrLabel as String: "mine"]), errSecSuccess)
        let alice = try attributes("alice")
        XCTAssertEqual((alice[kSecAttrSerialNumber as String] as? Data)?.hexString, "1001")
        XCTAssertEqual(alice[kSecAttrLabel as String] as? String, "mine", "the label is the caller's")
        XCTAssertEqual(SecItemUpdate([kSecClass as String: kSecClassCertificate as String], [kSecAttrSerialNumber as String: Data([9])]), errSecParam)
        XCTAssertEqual(SecItemUpdate([kSecClass as String: kSecClassCertificate as String], [kSecAttrLabel as String: "renamed"]), errSecSuccess)
        XCTAssertEqual(labels([:]), ["renamed"])
    }

    func testDataThatIsNotACertificateIsNeverStored() throws {
        let der = try fixtures.data("alice.der")
        let pem = try fixtures.data("alice.pem")
        for bad in [Data(), Data("hello".utf8), pem, der + Data([0]), der.prefix(der.count - 1), try fixtures.data("alice.key.der")] {
            XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassCertificate, kSecValueData as String: bad], nil), errSecDecode)
        }
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassCertificate as String], nil), errSecDecode, "no data at all")
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassCertificate as String], nil), errSecItemNotFound)
        XCTAssertEqual(try keychain.keychain.store.count(), 0)
        XCTAssertNil(SecCertificateCreateWithData(nil, pem as CFData), "PEM is not DER")
    }

    func testUniquenessIsIssuerAndSerialNumber() throws {
        XCTAssertEqual(try addCertificate("alice"), errSecSuccess)
        XCTAssertEqual(try addCertificate("alice", extra: [kSecAttrLabel as String: "another label"]), errSecDuplicateItem)
        XCTAssertEqual(try addCertificate("alice", extra: [kSecAttrAccessGroup as String: "group.other"]), errSecSuccess)
        XCTAssertEqual(try addCertificate("expired"), errSecSuccess, "same issuer, other serial number")
    }

    // MARK: Search keys

    func testSubjectContainsNarrows() throws {
        try addAll()
        XCTAssertEqual(labels([kSecMatchSubjectContains as String: "Alice"]), ["Alice Example"])
        XCTAssertEqual(labels([kSecMatchSubjectContains as String: "Test Root"]), ["Keychain Test Root CA"])
        XCTAssertEqual(
            labels([kSecMatchSubjectContains as String: "Keychain Tests"]),
            ["Alice Example", "Keychain Test Intermediate CA", "Keychain Test Root CA"], "organization too")
        XCTAssertEqual(labels([kSecMatchSubjectContains as String: "expired service"]), [], "case-sensitive by default")
        XCTAssertEqual(labels([kSecMatchSubjectContains as String: "expired service", kSecMatchCaseInsensitive as String: true]), ["Expired Service"])
        XCTAssertEqual(labels([kSecMatchSubjectContains as String: "nobody"]), [])
    }

    func testEmailAddressIfPresentKeepsCertificatesWithoutAddresses() throws {
        try addAll()
        let withoutEmail = ["Bob Other", "Expired Service", "Keychain Test Intermediate CA", "Keychain Test Root CA", "server.example.test"]
        XCTAssertEqual(
            labels([kSecMatchEmailAddressIfPresent as String: "alice@example.com"]), (withoutEmail + ["Alice Example"]).sorted(),
            "the subject's emailAddress")
        XCTAssertEqual(
            labels([kSecMatchEmailAddressIfPresent as String: "ALICE@example.org"]), (withoutEmail + ["Alice Example"]).sorted(),
            "the subjectAltName's rfc822Name, case-insensitive")
        XCTAssertEqual(labels([kSecMatchEmailAddressIfPresent as String: "mallory@example.com"]), withoutEmail)
    }

    func testIssuersFollowTheChainThroughTheKeychain() throws {
        try addAll()
        let root = try attributes("ca")[kSecAttrSubject as String] as! Data
        let intermediate = try attributes("intermediate")[kSecAttrSubject as String] as! Data
        let bob = try attributes("bob")[kSecAttrSubject as String] as! Data
        XCTAssertEqual(
            labels([kSecMatchIssuers as String: [root]]),
            ["Alice Example", "Expired Service", "Keychain Test Intermediate CA", "Keychain Test Root CA", "server.example.test"],
            "server.example.test through the intermediate")
        XCTAssertEqual(labels([kSecMatchIssuers as String: [intermediate]]), ["server.example.test"])
        XCTAssertEqual(labels([kSecMatchIssuers as String: [bob, intermediate]]), ["Bob Other", "server.example.test"])
        XCTAssertEqual(labels([kSecMatchIssuers as String: [Data("not a name".utf8)]]), [])
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassCertificate, kSecMatchIssuers as String: "root"], nil), errSecParam)
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassCertificate, kSecMatchIssuers as String: [Data]()], nil), errSecParam)
    }

    func testIssuersWithoutTheIntermediateStopAtTheChain() throws {
        for name in ["ca", "server"] { try addCertificate(name) }
        let root = try attributes("ca")[kSecAttrSubject as String] as! Data
        XCTAssertEqual(labels([kSecMatchIssuers as String: [root]]), ["Keychain Test Root CA"], "the chain breaks where the keychain has no certificate")
    }

    func testValidOnDateNarrows() throws {
        try addAll()
        let mid2020 = Date(timeIntervalSince1970: 1_590_969_600)
        XCTAssertEqual(labels([kSecMatchValidOnDate as String: mid2020]), ["Expired Service"])
        let current = labels([kSecMatchValidOnDate as String: NSNull()])
        XCTAssertEqual(current.count, Self.all.count - 1)
        XCTAssertFalse(current.contains("Expired Service"))
        XCTAssertEqual(labels([kSecMatchValidOnDate as String: Date(timeIntervalSince1970: 0)]), [])
        XCTAssertEqual(labels([kSecMatchValidOnDate as String: Date(), kSecMatchSubjectContains as String: "Alice"]), ["Alice Example"], "search keys combine")
    }

    func testCertificateSearchKeysDoNotApplyToPasswords() {
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecMatchSubjectContains as String: "x"], nil), errSecParam)
    }

    // MARK: References

    func testReferencesRoundTrip() throws {
        try addAll()
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassCertificate, kSecMatchSubjectContains as String: "server",
                    kSecReturnRef as String: true
                ], &result), errSecSuccess)
        let certificate = try XCTUnwrap(result as? SecCertificate)
        XCTAssertEqual(SecCertificateCopySubjectSummary(certificate), "server.example.test")
        XCTAssertEqual(SecCertificateCopyData(certificate) as Data, try fixtures.data("server.der"))
        var emails: CFArray?
        let aliceCertificate = SecCertificateCreateWithData(nil, try fixtures.data("alice.der") as CFData)!
        XCTAssertEqual(SecCertificateCopyEmailAddresses(aliceCertificate, &emails), errSecSuccess)
        XCTAssertEqual(emails as? [String], ["alice@example.com", "alice@example.org"])
        XCTAssertEqual(SecItemDelete([kSecValueRef as String: certificate]), errSecSuccess)
        XCTAssertEqual(
            SecItemDelete([kSecClass as String: kSecClassCertificate, kSecValueRef as String: aliceCertificate]), errSecSuccess,
            "a certificate made in memory names the stored one by issuer and serial number")
        XCTAssertEqual(labels([:]).count, Self.all.count - 2)
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: aliceCertificate], nil), errSecSuccess, "kSecValueRef stands for kSecClass")
    }

    func testCertificatesLockWithTheirClass() throws {
        try addCertificate("alice")
        keychain.keychain.store.lockAll()
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass as String: kSecClassCertificate, kSecMatchSubjectContains as String: "Alice"], nil),
            errSecInteractionNotAllowed)
    }
}
