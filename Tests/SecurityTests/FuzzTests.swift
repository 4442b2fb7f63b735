import KeychainCore
import Security
import XCTest

/// SecItem calls with random dictionaries: random keys (Apple's and made-up ones) and values of
/// every type a caller could pass. No crash, and only documented result codes. Seeded, so a
/// failure names the seed and iteration that reproduce it; KEYCHAIN_FUZZ_ITERATIONS raises the
/// count (`make stress`).
final class FuzzTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    static let documented: Set<OSStatus> = [
        errSecSuccess, errSecUnimplemented, errSecParam, errSecAllocate, errSecDuplicateItem, errSecItemNotFound,
        errSecInteractionNotAllowed, errSecDecode, errSecNoSuchKeychain, errSecNotAvailable
    ]

    static let keys: [String] = [
        kSecClass as String, kSecAttrAccount as String, kSecAttrService as String, kSecAttrServer as String, kSecAttrPort as String, kSecAttrProtocol as String,
        kSecAttrPath as String,
        kSecAttrSecurityDomain as String, kSecAttrAuthenticationType as String, kSecAttrAccessible as String, kSecAttrAccessGroup as String,
        kSecAttrLabel as String,
        kSecAttrComment as String, kSecAttrDescription as String, kSecAttrGeneric as String, kSecAttrType as String, kSecAttrCreator as String,
        kSecAttrIsInvisible as String,
        kSecAttrIsNegative as String, kSecAttrCreationDate as String, kSecAttrModificationDate as String, kSecAttrSynchronizable as String,
        kSecValueData as String,
        kSecValueRef as String, kSecValuePersistentRef as String, kSecReturnData as String, kSecReturnAttributes as String, kSecReturnRef as String,
        kSecReturnPersistentRef as String, kSecMatchLimit as String, kSecMatchCaseInsensitive as String, kSecMatchItemList as String, kSecUseKeychain as String,
        kSecAttrAccessControl as String, kSecUseDataProtectionKeychain as String, kSecAttrKeyType as String, kSecAttrApplicationTag as String, "", "bogus",
        "\u{0}",
        kSecAttrKeyClass as String, kSecAttrKeySizeInBits as String, kSecAttrCanSign as String, kSecAttrSubject as String, kSecAttrSerialNumber as String,
        kSecMatchSubjectContains as String, kSecMatchIssuers as String, kSecMatchEmailAddressIfPresent as String, kSecMatchValidOnDate as String,
        kSecMatchTrustedOnly as String,
        kSecValueData as String, kSecValueData as String
    ]

    static let constants: [Any] = [
        kSecClassGenericPassword, kSecClassInternetPassword, kSecClassCertificate, kSecClassKey, kSecClassIdentity,
        kSecMatchLimitOne, kSecMatchLimitAll, kSecAttrAccessibleWhenUnlocked, kSecAttrAccessibleAfterFirstUnlock,
        kSecAttrAccessibleAlwaysThisDeviceOnly, kSecAttrProtocolHTTPS, kSecAttrAuthenticationTypeHTTPBasic,
        kSecAttrSynchronizableAny, kSecAttrKeyTypeRSA, kSecAttrKeyTypeEC, kSecAttrKeyClassPrivate, kSecAttrKeyClassPublic
    ]

    /// Real certificates and keys (made by openssl), whole or damaged, for OpenSSL's parsers.
    static let materials: [Data] = {
        guard let fixtures = try? OpenSSLFixtures.get() else { return [] }
        return ["alice.der", "ca.der", "alice.key.der", "expired.key.der", "bob.key.p8", "alice.p12", "alice.pem"]
            .compactMap { try? fixtures.data($0) }
    }()

    func randomValue(_ g: inout SeededGenerator, depth: Int = 0) -> Any {
        switch Int.random(in: 0..<15, using: &g) {
        case 0: return Self.constants.randomElement(using: &g)!
        case 1: return ["", "a", "example.com", "\u{0}x", "ü€𝄞", String(repeating: "s", count: 70_000)].randomElement(using: &g)!
        case 2: return [0, 1, -1, Int.max, Int.min, 65_536, 443].randomElement(using: &g)!
        case 3: return [Double.nan, .infinity, -0.0, 1e308].randomElement(using: &g)!
        case 4: return Bool.random(using: &g)
        case 5: return Data((0..<Int.random(in: 0..<64, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
        case 6: return Date(timeIntervalSince1970: [0, -1e12, 1e12, .nan].randomElement(using: &g)!)
        case 7: return NSNull()
        case 8 where depth < 3: return (0..<Int.random(in: 0..<3, using: &g)).map { _ in randomValue(&g, depth: depth + 1) }
        case 9 where depth < 3: return [Self.keys.randomElement(using: &g)!: randomValue(&g, depth: depth + 1)]
        case 10: return Data(repeating: 7, count: [0, 1, 1 << 16].randomElement(using: &g)!)
        case 11: return UInt64.max
        case 12: return NSNumber(value: Bool.random(using: &g))
        case 13 where !Self.materials.isEmpty:
            var material = Self.materials.randomElement(using: &g)!
            switch Int.random(in: 0..<3, using: &g) {
            case 0: material[Int.random(in: 0..<material.count, using: &g)] ^= UInt8.random(in: 1...255, using: &g)
            case 1: material = material.prefix(Int.random(in: 0..<material.count, using: &g))
            default: break
            }
            return material
        default: return "item\(Int.random(in: 0..<4, using: &g))"
        }
    }

    func randomDictionary(_ g: inout SeededGenerator) -> [String: Any] {
        var dictionary: [String: Any] = [:]
        if Int.random(in: 0..<4, using: &g) != 0 {
            dictionary[kSecClass as String] = [
                kSecClassGenericPassword, kSecClassInternetPassword, kSecClassCertificate, kSecClassKey,
                kSecClassIdentity as String
            ].randomElement(using: &g)!
        }
        for _ in 0..<Int.random(in: 0..<7, using: &g) {
            dictionary[Self.keys.randomElement(using: &g)!] = randomValue(&g)
        }
        return dictionary
    }

    func testRandomDictionariesGiveOnlyDocumentedCodes() {
        let iterations = Int(ProcessInfo.processInfo.environment["KEYCHAIN_FUZZ_ITERATIONS"] ?? "") ?? 3000
        let seed: UInt64 = 20_261_121
        var g = SeededGenerator(state: seed)
        var seen: [OSStatus: Int] = [:]
        for n in 0..<iterations {
            let query = randomDictionary(&g)
            var result: CFTypeRef?
            let status: OSStatus
            switch Int.random(in: 0..<4, using: &g) {
            case 0 where Bool.random(using: &g): status = SecItemAdd(query as CFDictionary, &result)
            case 0: status = SecItemAdd(query as CFDictionary, nil)
            case 1: status = SecItemCopyMatching(query as CFDictionary, &result)
            case 2: status = SecItemUpdate(query as CFDictionary, randomDictionary(&g) as CFDictionary)
            default: status = SecItemDelete(query as CFDictionary)
            }
            seen[status, default: 0] += 1
            XCTAssertTrue(Self.documented.contains(status), "seed \(seed) iteration \(n): status \(status) for \(query.keys.sorted())")
        }
        // The generator reaches the interesting outcomes, not only errSecParam.
        for expected in [errSecSuccess, errSecParam, errSecItemNotFound, errSecDuplicateItem] {
            XCTAssertGreaterThan(seen[expected, default: 0], 0, "no call gave \(expected): \(seen)")
        }
    }
}
