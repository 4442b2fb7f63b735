import KeychainCore
import Security
import XCTest

/// SecItemCopyMatching without kSecUseKeychain searches the user's search list, in order, as it
/// does on macOS (the list `security list-keychains -s` writes).
final class SearchListTests: XCTestCase {
    func testCopyMatchingSearchesTheListInOrder() throws {
        var template = Array("/tmp/keychain-searchlist-XXXXXX".utf8CString)
        let directory = String(cString: try XCTUnwrap(mkdtemp(&template)))
        let savedData = getenv("XDG_DATA_HOME").map { String(cString: $0) }
        let savedPath = getenv("KEYCHAIN_PATH").map { String(cString: $0) }
        setenv("XDG_DATA_HOME", directory, 1)
        unsetenv("KEYCHAIN_PATH")
        SecKeychain.setDefault(nil)
        let first = try SecKeychain.create(at: directory + "/keychains/first.keychain-db", password: "x", storage: .kernel, scrypt: .fastForTesting)
        let second = try SecKeychain.create(at: directory + "/keychains/second.keychain-db", password: "x", storage: .kernel, scrypt: .fastForTesting)
        defer {
            first.store.lockAll()
            second.store.lockAll()
            if let savedData { setenv("XDG_DATA_HOME", savedData, 1) } else { unsetenv("XDG_DATA_HOME") }
            if let savedPath { setenv("KEYCHAIN_PATH", savedPath, 1) }
            try? FileManager.default.removeItem(atPath: directory)
        }
        func add(_ account: String, _ secret: String, to keychain: SecKeychain) {
            XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                                       kSecValueData as String: Data(secret.utf8), kSecUseKeychain as String: keychain] as CFDictionary, nil), errSecSuccess)
        }
        func password(_ account: String) -> (OSStatus, String?) {
            var result: CFTypeRef?
            let status = SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                                              kSecReturnData as String: true] as CFDictionary, &result)
            return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
        }
        add("only-second", "s2", to: second)
        add("both", "from-first", to: first)
        add("both", "from-second", to: second)

        try SearchList.set([first.path, second.path])
        XCTAssertEqual(password("only-second").1, "s2")
        XCTAssertEqual(password("both").1, "from-first")
        var all: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "both",
                                            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnData as String: true] as CFDictionary, &all), errSecSuccess)
        XCTAssertEqual((all as? [Data])?.map { String(decoding: $0, as: UTF8.self) }, ["from-first", "from-second"])

        try SearchList.set([second.path])
        XCTAssertEqual(password("both").1, "from-second")
        try SearchList.set([first.path])
        XCTAssertEqual(password("only-second").0, errSecItemNotFound, "a keychain off the list is not searched")
    }
}
