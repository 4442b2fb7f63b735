import KeychainCore
import Security
import XCTest

/// SecItemCopyMatching without kSecUseKeychain searches the user's search list, in order, as it
/// does on macOS (the list `security list-keychains -s` writes).
final class SearchListTests: XCTestCase {
    func testCopyMatchingSearchesTheListInOrder() throws {
        try withTwoScratchKeychains("searchlist") { first, second in
            func add(_ account: String, _ secret: String, to keychain: SecKeychain) {
                XCTAssertEqual(
                    SecItemAdd(
                        [
                            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                            kSecValueData as String: Data(secret.utf8), kSecUseKeychain as String: keychain
                        ] as CFDictionary, nil), errSecSuccess)
            }
            func password(_ account: String) -> (OSStatus, String?) {
                var result: CFTypeRef?
                let status = SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                        kSecReturnData as String: true
                    ] as CFDictionary, &result)
                return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
            }
            add("only-second", "s2", to: second)
            add("both", "from-first", to: first)
            add("both", "from-second", to: second)

            try SearchList.set([first.path, second.path])
            XCTAssertEqual(password("only-second").1, "s2")
            XCTAssertEqual(password("both").1, "from-first")
            var all: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "both",
                        kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnData as String: true
                    ] as CFDictionary, &all), errSecSuccess)
            XCTAssertEqual((all as? [Data])?.map { String(decoding: $0, as: UTF8.self) }, ["from-first", "from-second"])

            try SearchList.set([second.path])
            XCTAssertEqual(password("both").1, "from-second")
            try SearchList.set([first.path])
            XCTAssertEqual(password("only-second").0, errSecItemNotFound, "a keychain off the list is not searched")
        }
    }
}
