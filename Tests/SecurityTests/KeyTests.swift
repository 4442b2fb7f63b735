import KeychainCore
import Security
import XCTest

/// kSecClassKey as String: RSA and EC keys made by openssl, stored in Apple's external representation.
final class KeyTests: OpenSSLTestCase {
    func addKey(_ data: Data, _ extra: [String: Any] = [:]) -> OSStatus {
        var item: [String: Any] = [kSecClass as String: kSecClassKey, kSecValueData as String: data]
        item.merge(extra) { _, b in b }
        return SecItemAdd(item as CFDictionary, nil)
    }

    func keyAttributes(_ query: [String: Any]) -> [String: Any]? {
        var full: [String: Any] = [kSecClass as String: kSecClassKey, kSecReturnAttributes as String: true, kSecReturnData as String: true]
        full.merge(query) { _, b in b }
        var result: CFTypeRef?
        guard SecItemCopyMatching(full as CFDictionary, &result) == errSecSuccess else { return nil }
        return result as? [String: Any]
    }

    func number(_ attributes: [String: Any]?, _ key: String) -> Int? { (attributes?[key] as? NSNumber)?.intValue }
    func flag(_ attributes: [String: Any]?, _ key: String) -> Bool? { (attributes?[key] as? NSNumber)?.boolValue }

    func testRSAPrivateKeyAttributes() throws {
        let pkcs1 = try fixtures.data("expired.key.der")
        XCTAssertEqual(
            addKey(
                pkcs1,
                [
                    kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                    kSecAttrApplicationTag as String: Data("com.example.rsa".utf8), kSecAttrLabel as String: "rsa key"
                ]), errSecSuccess)
        let found = keyAttributes([kSecAttrApplicationTag as String: Data("com.example.rsa".utf8)])
        XCTAssertEqual(number(found, kSecAttrKeyType as String), 42)
        XCTAssertEqual(number(found, kSecAttrKeyClass as String), 1)
        XCTAssertEqual(number(found, kSecAttrKeySizeInBits as String), 2048)
        XCTAssertEqual(number(found, kSecAttrEffectiveKeySize as String), 2048)
        XCTAssertEqual(found?[kSecValueData as String] as? Data, pkcs1, "PKCS#1, as SecKeyCopyExternalRepresentation")
        // kSecAttrApplicationLabel as String: SHA-1 of the PKCS#1 public key, computed by openssl.
        XCTAssertEqual(found?[kSecAttrApplicationLabel as String] as? Data, try fixtures.sha1(fixtures.data("expired.pub.der")))
        XCTAssertEqual(flag(found, kSecAttrCanSign as String), true)
        XCTAssertEqual(flag(found, kSecAttrCanDecrypt as String), true)
        XCTAssertEqual(flag(found, kSecAttrCanUnwrap as String), true)
        XCTAssertEqual(flag(found, kSecAttrCanEncrypt as String), false)
        XCTAssertEqual(flag(found, kSecAttrCanVerify as String), false)
        XCTAssertEqual(flag(found, kSecAttrIsPermanent as String), true)
        XCTAssertEqual(found?[kSecAttrLabel as String] as? String, "rsa key")
    }

    func testECKeysInEveryForm() throws {
        let sec1 = try fixtures.data("alice.key.der")
        XCTAssertEqual(addKey(sec1, [kSecAttrApplicationTag as String: "ec"]), errSecSuccess, "class and type come from the data")
        let found = keyAttributes([kSecAttrApplicationTag as String: "ec"])
        XCTAssertEqual(number(found, kSecAttrKeyType as String), 73)
        XCTAssertEqual(number(found, kSecAttrKeyClass as String), 1)
        XCTAssertEqual(number(found, kSecAttrKeySizeInBits as String), 256)
        let point = Data(try fixtures.data("alice.pub.der").suffix(65))
        let x963 = try XCTUnwrap(found?[kSecValueData as String] as? Data)
        XCTAssertEqual(x963.count, 97, "04 || X || Y || D")
        XCTAssertEqual(x963.prefix(65), point)
        XCTAssertEqual(found?[kSecAttrApplicationLabel as String] as? Data, try fixtures.sha1(point))
        // The same key in X9.63 is the same item; its public half is another.
        XCTAssertEqual(addKey(x963, [kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrApplicationTag as String: "ec"]), errSecDuplicateItem)
        XCTAssertEqual(addKey(point, [kSecAttrKeyClass as String: kSecAttrKeyClassPublic, kSecAttrApplicationTag as String: "ec"]), errSecSuccess)
        let publicKey = keyAttributes([kSecAttrApplicationTag as String: "ec", kSecAttrKeyClass as String: kSecAttrKeyClassPublic as String])
        XCTAssertEqual(publicKey?[kSecValueData as String] as? Data, point)
        XCTAssertEqual(flag(publicKey, kSecAttrCanVerify as String), true)
        XCTAssertEqual(flag(publicKey, kSecAttrCanSign as String), false)
        XCTAssertEqual(publicKey?[kSecAttrApplicationLabel as String] as? Data, found?[kSecAttrApplicationLabel as String] as? Data)
        // PKCS#8 and SubjectPublicKeyInfo are read as well.
        XCTAssertEqual(addKey(try fixtures.data("bob.key.p8"), [kSecAttrApplicationTag as String: "bob"]), errSecSuccess)
        XCTAssertEqual(number(keyAttributes([kSecAttrApplicationTag as String: "bob"]), kSecAttrKeyType as String), 42)
    }

    func testCapabilitiesGivenByTheCallerAreKept() throws {
        XCTAssertEqual(addKey(try fixtures.data("alice.key.der"), [kSecAttrCanSign as String: false, kSecAttrCanDerive as String: false]), errSecSuccess)
        let found = keyAttributes([kSecAttrCanSign as String: false])
        XCTAssertEqual(flag(found, kSecAttrCanSign as String), false)
        XCTAssertEqual(flag(found, kSecAttrCanDerive as String), false)
        XCTAssertEqual(flag(found, kSecAttrCanDecrypt as String), true)
        XCTAssertNil(keyAttributes([kSecAttrCanSign as String: true]))
    }

    func testWrongOrBrokenKeysAreRefused() throws {
        let sec1 = try fixtures.data("alice.key.der")
        XCTAssertEqual(addKey(sec1, [kSecAttrKeyClass as String: kSecAttrKeyClassPublic as String]), errSecParam, "a private key said to be public")
        XCTAssertEqual(addKey(sec1, [kSecAttrKeyType as String: kSecAttrKeyTypeRSA as String]), errSecParam, "an EC key said to be RSA")
        XCTAssertEqual(addKey(Data("not a key".utf8)), errSecDecode)
        XCTAssertEqual(addKey(sec1.prefix(40)), errSecDecode)
        XCTAssertEqual(addKey(Data()), errSecDecode)
        var wrongScalar = try XCTUnwrap(keyAttributesAfterAdding(sec1)?[kSecValueData as String] as? Data)
        wrongScalar[wrongScalar.count - 1] ^= 1
        XCTAssertEqual(
            addKey(wrongScalar, [kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrApplicationTag as String: "x"]), errSecDecode,
            "an X9.63 private key whose point is not its scalar's")
        XCTAssertEqual(try keychain.keychain.store.count(), 1)
    }

    private func keyAttributesAfterAdding(_ data: Data) -> [String: Any]? {
        XCTAssertEqual(addKey(data), errSecSuccess)
        return keyAttributes([:])
    }

    func testSymmetricKeysKeepTheirBytes() throws {
        let bytes = Data((0..<32).map { UInt8($0) })
        XCTAssertEqual(addKey(bytes, [kSecAttrKeyClass as String: kSecAttrKeyClassSymmetric, kSecAttrApplicationTag as String: "aes"]), errSecSuccess)
        let found = keyAttributes([kSecAttrApplicationTag as String: "aes"])
        XCTAssertEqual(found?[kSecValueData as String] as? Data, bytes)
        XCTAssertEqual(number(found, kSecAttrKeySizeInBits as String), 256)
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
        let key = try XCTUnwrap(
            SecKeyCreateWithData(
                try fixtures.data("expired.key.der") as CFData,
                [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate as String] as CFDictionary,
                &error))
        XCTAssertEqual(SecKeyGetBlockSize(key), 256)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        XCTAssertEqual(SecKeyCopyExternalRepresentation(publicKey, &error) as Data?, try fixtures.data("expired.pub.der"))
        XCTAssertEqual((SecKeyCopyAttributes(key)?[kSecAttrKeyClass as String] as? NSNumber)?.intValue, 1)
        XCTAssertNil(SecKeyCreateWithData(Data("junk".utf8) as CFData, [:] as CFDictionary, &error))
        XCTAssertEqual(error?.takeRetainedValue().code, Int(errSecDecode))
        XCTAssertEqual(SecItemAdd([kSecValueRef as String: key, kSecAttrApplicationTag as String: "ref"], nil), errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassKey, kSecValueRef as String: key]), errSecSuccess)
    }
}
