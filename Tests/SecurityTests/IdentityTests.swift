import KeychainCore
import Security
import XCTest

/// kSecClassIdentity and PKCS#12: a certificate is an identity only where its private key is stored.
final class IdentityTests: OpenSSLTestCase {
    func add(certificate name: String) throws {
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassCertificate, kSecValueData as String: try fixtures.data("\(name).der")], nil), errSecSuccess)
    }

    func add(key file: String) throws {
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassKey, kSecValueData as String: try fixtures.data(file)], nil), errSecSuccess)
    }

    func identities(_ query: [String: Any] = [:]) -> [SecIdentity] {
        var full: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnRef as String: true]
        full.merge(query) { _, b in b }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(full as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        XCTAssertEqual(status, errSecSuccess)
        return (result as? [Any] ?? []).compactMap { $0 as? SecIdentity }
    }

    func names(_ found: [SecIdentity]) -> [String] {
        found.map { (SecCertificateCopySubjectSummary($0.certificate) as String?) ?? "" }.sorted()
    }

    func testIdentitiesOnlyWhereTheKeyMatches() throws {
        for name in ["ca", "alice", "expired", "bob"] { try add(certificate: name) }
        XCTAssertEqual(identities().count, 0, "certificates alone are not identities")
        try add(key: "server.key")  // a key whose certificate is not stored
        XCTAssertEqual(identities().count, 0)
        try add(key: "alice.key.der")
        XCTAssertEqual(names(identities()), ["Alice Example"])
        try add(key: "expired.key.der")
        XCTAssertEqual(names(identities()), ["Alice Example", "Expired Service"])

        let alice = try XCTUnwrap(identities([kSecMatchSubjectContains as String: "Alice"]).first)
        var certificate: SecCertificate?
        var privateKey: SecKey?
        XCTAssertEqual(SecIdentityCopyCertificate(alice, &certificate), errSecSuccess)
        XCTAssertEqual(SecIdentityCopyPrivateKey(alice, &privateKey), errSecSuccess)
        XCTAssertEqual(SecCertificateCopyData(certificate!) as Data, try fixtures.data("alice.der"))
        XCTAssertEqual(privateKey?.material?.keyClass, .private)
        XCTAssertEqual(privateKey?.material?.applicationLabel, certificate?.certificate.publicKeyHash)
        XCTAssertEqual(names(identities([kSecMatchValidOnDate as String: NSNull()])), ["Alice Example"])
        XCTAssertEqual(names(identities([kSecAttrKeyType as String: kSecAttrKeyTypeRSA as String])), ["Expired Service"], "key attributes select the key")
        XCTAssertEqual(names(identities([kSecMatchEmailAddressIfPresent as String: "nobody@example.com"])), ["Expired Service"])
    }

    func testIdentityResultsAndDeletion() throws {
        for name in ["ca", "alice"] { try add(certificate: name) }
        try add(key: "alice.key.der")
        try add(key: "expired.key.der")
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass as String: kSecClassIdentity, kSecReturnAttributes as String: true, kSecReturnData as String: true,
                    kSecReturnPersistentRef as String: true
                ], &result), errSecSuccess)
        let found = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(found[kSecValueData as String] as? Data, try fixtures.data("alice.der"), "an identity's data is its certificate")
        XCTAssertEqual(found[kSecClass as String] as? String, kSecClassIdentity as String)
        XCTAssertEqual((found[kSecAttrKeyClass as String] as? NSNumber)?.intValue, 1, "with its key's attributes")
        XCTAssertEqual(found[kSecAttrApplicationLabel as String] as? Data, found[kSecAttrPublicKeyHash as String] as? Data)
        let persistent = try XCTUnwrap(found[kSecValuePersistentRef as String] as? Data)
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassIdentity, kSecValuePersistentRef as String: persistent], nil), errSecSuccess)

        XCTAssertEqual(SecItemUpdate([kSecClass as String: kSecClassIdentity as String], [kSecAttrLabel as String: "x"]), errSecParam)
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassIdentity as String]), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassIdentity as String], nil), errSecItemNotFound)
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass as String: kSecClassCertificate, kSecMatchSubjectContains as String: "Alice"], nil), errSecItemNotFound,
            "deleting an identity deletes its certificate")
        XCTAssertEqual(try keychain.keychain.store.count(), 2, "and its key; the root and the other key stay")
    }

    func testPKCS12ImportAndAdd() throws {
        let p12 = try fixtures.data("alice.p12")
        var items: CFArray?
        XCTAssertEqual(SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: "wrong"] as CFDictionary, &items), errSecAuthFailed)
        XCTAssertNil(items)
        XCTAssertEqual(SecPKCS12Import(p12 as CFData, [:] as CFDictionary, &items), errSecAuthFailed, "no passphrase is a wrong one")
        XCTAssertEqual(SecPKCS12Import(Data("junk".utf8) as CFData, [kSecImportExportPassphrase as String: "x"] as CFDictionary, &items), errSecDecode)
        XCTAssertEqual(
            SecPKCS12Import(p12 as CFData, [kSecImportExportPassphrase as String: OpenSSLFixtures.p12Passphrase] as CFDictionary, &items),
            errSecSuccess)
        let first = try XCTUnwrap((items as? [[String: Any]])?.first)
        XCTAssertEqual(first[kSecImportItemLabel as String] as? String, "Alice Identity")
        let chain = try XCTUnwrap(first[kSecImportItemCertChain as String] as? [SecCertificate])
        XCTAssertEqual(chain.map { SecCertificateCopySubjectSummary($0) ?? "" }, ["Alice Example", "Keychain Test Root CA"])
        let identity = try XCTUnwrap(first[kSecImportItemIdentity as String] as? SecIdentity)
        XCTAssertEqual(try keychain.keychain.store.count(), 0, "as on iOS, importing does not store")

        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity, kSecAttrLabel as String: "Alice Identity"], nil), errSecSuccess)
        XCTAssertEqual(try keychain.keychain.store.count(), 2, "a certificate and a private key")
        XCTAssertEqual(names(identities()), ["Alice Example"])
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: identity], nil), errSecDuplicateItem)
        XCTAssertEqual(try keychain.keychain.store.count(), 2, "nothing half-added")
    }

    func testPKCS12IntoAKeychain() throws {
        var items: CFArray?
        let options: [String: Any] = [
            kSecImportExportPassphrase as String: OpenSSLFixtures.p12Passphrase, kSecImportExportKeychain as String: keychain.keychain
        ]
        XCTAssertEqual(SecPKCS12Import(try fixtures.data("alice.p12") as CFData, options as CFDictionary, &items), errSecSuccess)
        XCTAssertEqual(names(identities()), ["Alice Example"])
        XCTAssertEqual(try keychain.keychain.store.count(), 3, "the identity and the root")
    }

    func testLegacyPKCS12() throws {
        let path = fixtures.directory + "/legacy.p12"
        do {
            try fixtures.run([
                "pkcs12", "-export", "-legacy", "-in", "expired.pem", "-inkey", "expired.key",
                "-passout", "pass:old", "-out", path
            ])
        } catch {
            throw XCTSkip("this openssl cannot write legacy PKCS#12 files: \(error)")
        }
        var items: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(
                try Data(contentsOf: URL(fileURLWithPath: path)) as CFData,
                [kSecImportExportPassphrase as String: "old"] as CFDictionary, &items), errSecSuccess,
            "RC2/3DES files from older tools")
        XCTAssertNotNil((items as? [[String: Any]])?.first?[kSecImportItemIdentity as String] as? SecIdentity)
    }
}
