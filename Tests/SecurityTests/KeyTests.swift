import Security
import XCTest

/// kSecClassKey: RSA and EC keys made by openssl, stored in Apple's external representation.
final class KeyTests: OpenSSLTestCase {
    func addKey(_ data: Data, _ extra: [String: Any] = [:]) -> OSStatus {
        var item: [String: Any] = [kSecClass: kSecClassKey, kSecValueData: data]
        item.merge(extra) { _, b in b }
        return SecItemAdd(item, nil)
    }

    func keyAttributes(_ query: [String: Any]) -> [String: Any]? {
        var full: [String: Any] = [kSecClass: kSecClassKey, kSecReturnAttributes: true, kSecReturnData: true]
        full.merge(query) { _, b in b }
        var result: CFTypeRef?
        guard SecItemCopyMatching(full, &result) == errSecSuccess else { return nil }
        return result as? [String: Any]
    }

    func number(_ attributes: [String: Any]?, _ key: String) -> Int? { (attributes?[key] as? NSNumber)?.intValue }
    func flag(_ attributes: [String: Any]?, _ key: String) -> Bool? { (attributes?[key] as? NSNumber)?.boolValue }

    func testRSAPrivateKeyAttributes() throws {
        let pkcs1 = try fixtures.data("expired.key.der")
        XCTAssertEqual(addKey(pkcs1, [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPrivate,
                                      kSecAttrApplicationTag: Data("com.example.rsa".utf8), kSecAttrLabel: "rsa key"]), errSecSuccess)
        let found = keyAttributes([kSecAttrApplicationTag: Data("com.example.rsa".utf8)])
        XCTAssertEqual(number(found, kSecAttrKeyType), 42)
        XCTAssertEqual(number(found, kSecAttrKeyClass), 1)
        XCTAssertEqual(number(found, kSecAttrKeySizeInBits), 2048)
        XCTAssertEqual(number(found, kSecAttrEffectiveKeySize), 2048)
        XCTAssertEqual(found?[kSecValueData] as? Data, pkcs1, "PKCS#1, as SecKeyCopyExternalRepresentation")
        // kSecAttrApplicationLabel: SHA-1 of the PKCS#1 public key, computed by openssl.
        XCTAssertEqual(found?[kSecAttrApplicationLabel] as? Data, try fixtures.sha1(fixtures.data("expired.pub.der")))
        XCTAssertEqual(flag(found, kSecAttrCanSign), true)
        XCTAssertEqual(flag(found, kSecAttrCanDecrypt), true)
        XCTAssertEqual(flag(found, kSecAttrCanUnwrap), true)
        XCTAssertEqual(flag(found, kSecAttrCanEncrypt), false)
        XCTAssertEqual(flag(found, kSecAttrCanVerify), false)
        XCTAssertEqual(flag(found, kSecAttrIsPermanent), true)
        XCTAssertEqual(found?[kSecAttrLabel] as? String, "rsa key")
    }

    func testECKeysInEveryForm() throws {
        let sec1 = try fixtures.data("alice.key.der")
        XCTAssertEqual(addKey(sec1, [kSecAttrApplicationTag: "ec"]), errSecSuccess, "class and type come from the data")
        let found = keyAttributes([kSecAttrApplicationTag: "ec"])
        XCTAssertEqual(number(found, kSecAttrKeyType), 73)
        XCTAssertEqual(number(found, kSecAttrKeyClass), 1)
        XCTAssertEqual(number(found, kSecAttrKeySizeInBits), 256)
        let point = Data(try fixtures.data("alice.pub.der").suffix(65))
        let x963 = try XCTUnwrap(found?[kSecValueData] as? Data)
        XCTAssertEqual(x963.count, 97, "04 || X || Y || D")
        XCTAssertEqual(x963.prefix(65), point)
        XCTAssertEqual(found?[kSecAttrApplicationLabel] as? Data, try fixtures.sha1(point))
        // The same key in X9.63 is the same item; its public half is another.
        XCTAssertEqual(addKey(x963, [kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecAttrApplicationTag: "ec"]), errSecDuplicateItem)
        XCTAssertEqual(addKey(point, [kSecAttrKeyClass: kSecAttrKeyClassPublic, kSecAttrApplicationTag: "ec"]), errSecSuccess)
        let publicKey = keyAttributes([kSecAttrApplicationTag: "ec", kSecAttrKeyClass: kSecAttrKeyClassPublic])
        XCTAssertEqual(publicKey?[kSecValueData] as? Data, point)
        XCTAssertEqual(flag(publicKey, kSecAttrCanVerify), true)
        XCTAssertEqual(flag(publicKey, kSecAttrCanSign), false)
        XCTAssertEqual(publicKey?[kSecAttrApplicationLabel] as? Data, found?[kSecAttrApplicationLabel] as? Data)
        // PKCS#8 and SubjectPublicKeyInfo are read as well.
        XCTAssertEqual(addKey(try fixtures.data("bob.key.p8"), [kSecAttrApplicationTag: "bob"]), errSecSuccess)
        XCTAssertEqual(number(keyAttributes([kSecAttrApplicationTag: "bob"]), kSecAttrKeyType), 42)
    }

    func testCapabilitiesGivenByTheCallerAreKept() throws {
        XCTAssertEqual(addKey(try fixtures.data("alice.key.der"), [kSecAttrCanSign: false, kSecAttrCanDerive: false]), errSecSuccess)
        let found = keyAttributes([kSecAttrCanSign: false])
        XCTAssertEqual(flag(found, kSecAttrCanSign), false)
        XCTAssertEqual(flag(found, kSecAttrCanDerive), false)
        XCTAssertEqual(flag(found, kSecAttrCanDecrypt), true)
        XCTAssertNil(keyAttributes([kSecAttrCanSign: true]))
    }

    func testWrongOrBrokenKeysAreRefused() throws {
        let sec1 = try fixtures.data("alice.key.der")
        XCTAssertEqual(addKey(sec1, [kSecAttrKeyClass: kSecAttrKeyClassPublic]), errSecParam, "a private key said to be public")
        XCTAssertEqual(addKey(sec1, [kSecAttrKeyType: kSecAttrKeyTypeRSA]), errSecParam, "an EC key said to be RSA")
        XCTAssertEqual(addKey(Data("not a key".utf8)), errSecDecode)
        XCTAssertEqual(addKey(sec1.prefix(40)), errSecDecode)
        XCTAssertEqual(addKey(Data()), errSecDecode)
        var wrongScalar = try XCTUnwrap(keyAttributesAfterAdding(sec1)?[kSecValueData] as? Data)
        wrongScalar[wrongScalar.count - 1] ^= 1
        XCTAssertEqual(addKey(wrongScalar, [kSecAttrKeyClass: kSecAttrKeyClassPrivate, kSecAttrApplicationTag: "x"]), errSecDecode,
                       "an X9.63 private key whose point is not its scalar's")
        XCTAssertEqual(try keychain.keychain.store.count(), 1)
    }

    private func keyAttributesAfterAdding(_ data: Data) -> [String: Any]? {
        XCTAssertEqual(addKey(data), errSecSuccess)
        return keyAttributes([:])
    }

    func testSymmetricKeysKeepTheirBytes() throws {
        let bytes = Data((0..<32).map { UInt8($0) })
        XCTAssertEqual(addKey(bytes, [kSecAttrKeyClass: kSecAttrKeyClassSymmetric, kSecAttrApplicationTag: "aes"]), errSecSuccess)
        let found = keyAttributes([kSecAttrApplicationTag: "aes"])
        XCTAssertEqual(found?[kSecValueData] as? Data, bytes)
        XCTAssertEqual(number(found, kSecAttrKeySizeInBits), 256)
    }

    func testKeyMaterialIsEncryptedInTheFile() throws {
        let pkcs1 = try fixtures.data("expired.key.der")
        XCTAssertEqual(addKey(pkcs1), errSecSuccess)
        let file = try Data(contentsOf: URL(fileURLWithPath: keychain.path))
        // Any 16-byte window of the key would do; the modulus starts a few bytes in.
        XCTAssertNil(file.range(of: pkcs1.subdata(in: 20..<52)))
        XCTAssertNil(file.range(of: Data("com.example".utf8)))
    }

    func testSecKeyFunctions() throws {
        var error: Unmanaged<CFError>?
        let key = try XCTUnwrap(SecKeyCreateWithData(try fixtures.data("expired.key.der") as CFData,
                                                     [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPrivate] as CFDictionary,
                                                     &error))
        XCTAssertEqual(SecKeyGetBlockSize(key), 256)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        XCTAssertEqual(SecKeyCopyExternalRepresentation(publicKey, &error) as Data?, try fixtures.data("expired.pub.der"))
        XCTAssertEqual((SecKeyCopyAttributes(key)?[kSecAttrKeyClass] as? NSNumber)?.intValue, 1)
        XCTAssertNil(SecKeyCreateWithData(Data("junk".utf8) as CFData, [:] as CFDictionary, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecDecode))
        XCTAssertEqual(SecItemAdd([kSecValueRef: key, kSecAttrApplicationTag: "ref"], nil), errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassKey, kSecValueRef: key]), errSecSuccess)
    }
}
