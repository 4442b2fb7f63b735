import Security
import XCTest

// The Swift snippets of ../shared/reference, copied as they stand, `import Security` included.
// Each sits in a function of its own because several redeclare the same names.
// One change was needed: searching-for-keychain-items.txt lost the `}` that closes its last
// `guard ... else {`, and it is restored here.

// Scaffolding the search snippet expects from "Adding a Password to the Keychain".
struct Credentials {
    var username: String
    var password: String
}

enum KeychainError: Error {
    case noPassword
    case unexpectedPasswordData
    case unhandledError(status: OSStatus)
}

final class SnippetTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    // MARK: searching-for-keychain-items.txt

    func searchSnippet(server: String) throws -> Credentials {
        let query: [String: Any] = [kSecClass as String: kSecClassInternetPassword,
                                    kSecAttrServer as String: server,
                                    kSecMatchLimit as String: kSecMatchLimitOne,
                                    kSecReturnAttributes as String: true,
                                    kSecReturnData as String: true]

        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        guard status != errSecItemNotFound else { throw KeychainError.noPassword }
        guard status == errSecSuccess else { throw KeychainError.unhandledError(status: status) }

        guard let existingItem = item as? [String : Any],
            let passwordData = existingItem[kSecValueData as String] as? Data,
            let password = String(data: passwordData, encoding: String.Encoding.utf8),
            let account = existingItem[kSecAttrAccount as String] as? String
        else {
            throw KeychainError.unexpectedPasswordData
        }
        let credentials = Credentials(username: account, password: password)
        return credentials
    }

    func testSearchingForKeychainItems() throws {
        XCTAssertThrowsError(try searchSnippet(server: "www.example.com")) { error in
            guard case KeychainError.noPassword = error else { return XCTFail("\(error)") }
        }
        let add: [String: Any] = [kSecClass as String: kSecClassInternetPassword,
                                  kSecAttrAccount as String: "appleseed",
                                  kSecAttrServer as String: "www.example.com",
                                  kSecValueData as String: Data("pa55w0rd".utf8)]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)
        let credentials = try searchSnippet(server: "www.example.com")
        XCTAssertEqual(credentials.username, "appleseed")
        XCTAssertEqual(credentials.password, "pa55w0rd")
    }

    // MARK: using-the-keychain-in-swift.txt

    func testMinimalAdd() {
        let out = captureStandardOutput {
            let keychainItemQuery = [
            kSecValueData: "Pullip2020".data(using: .utf8)!,
            kSecClass: kSecClassGenericPassword
            ] as CFDictionary
            let status = SecItemAdd(keychainItemQuery, nil)
            print("Operation finished with status: \(status)")
        }
        XCTAssertEqual(out, "Operation finished with status: 0\n")
    }

    func testAddWithAttributes() {
        let out = captureStandardOutput {
            let keychainItem = [
            kSecValueData: "Pullip2020".data(using: .utf8)!,
            kSecAttrAccount: "andyibanez",
            kSecAttrServer: "pullipstyle.com",
            kSecClass: kSecClassInternetPassword
            ] as CFDictionary
            let status = SecItemAdd(keychainItem, nil)
            print("Operation finished with status: \(status)")
        }
        XCTAssertEqual(out, "Operation finished with status: 0\n")
    }

    func testAddReturningAttributes() {
        let out = captureStandardOutput {
            let keychainItem = [
            kSecValueData: "Pullip2020".data(using: .utf8)!,
            kSecAttrAccount: "andyibanez",
            kSecAttrServer: "pullipstyle.com",
            kSecClass: kSecClassInternetPassword,
            kSecReturnAttributes: true
            ] as CFDictionary
            var ref: AnyObject?
            let status = SecItemAdd(keychainItem, &ref)
            let result = ref as! NSDictionary
            print("Operation finished with status: \(status)")
            print("Returned attributes:")
            result.forEach { key, value in
            print("\(key): \(value)")
            }
            print("Website: \(result[kSecAttrServer] ?? "")") // Website: pullipstyle.com
        }
        let lines = out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines.first, "Operation finished with status: 0")
        XCTAssertEqual(lines[1], "Returned attributes:")
        // The text's listing: these keys, in some order, with these values.
        let listed = Dictionary(lines.dropFirst(2).dropLast(2).map { line -> (String, String) in
            let parts = line.split(separator: ":", maxSplits: 1).map(String.init)
            return (parts[0], parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : "")
        }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(Set(listed.keys), ["acct", "atyp", "sha1", "path", "sdmn", "pdmn", "mdat", "sync", "cdat", "ptcl", "srvr", "agrp", "port"])
        XCTAssertEqual(listed["acct"], "andyibanez")
        XCTAssertEqual(listed["srvr"], "pullipstyle.com")
        XCTAssertEqual(listed["pdmn"], "ak")
        XCTAssertEqual(listed["sync"], "0")
        XCTAssertEqual(listed["ptcl"], "0")
        XCTAssertEqual(listed["port"], "0")
        XCTAssertEqual(listed["path"], "")
        XCTAssertNotNil(listed["cdat"].flatMap { $0.range(of: #"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000$"#, options: .regularExpression) })
        XCTAssertEqual(lines[lines.count - 2], "Website: pullipstyle.com")
    }

    func testAddReturningData() {
        let out = captureStandardOutput {
            let keychainItem = [
            kSecValueData: "Pullip2020".data(using: .utf8)!,
            kSecAttrAccount: "andyibanez",
            kSecAttrServer: "pullipstyle.com",
            kSecClass: kSecClassInternetPassword,
            kSecReturnData: true
            ] as CFDictionary
            var ref: AnyObject?
            let status = SecItemAdd(keychainItem, &ref)
            let result = ref as! Data
            print("Operation finished with status: \(status)")
            let password = String(data: result, encoding: .utf8)!
            print("Password: \(password)")
        }
        XCTAssertEqual(out, "Operation finished with status: 0\nPassword: Pullip2020\n")
    }

    func testAddReturningBoth() {
        let out = captureStandardOutput {
            let keychainItem = [
            kSecValueData: "Pullip2020".data(using: .utf8)!,
            kSecAttrAccount: "andyibanez",
            kSecAttrServer: "pullipstyle.com",
            kSecClass: kSecClassInternetPassword,
            kSecReturnData: true,
            kSecReturnAttributes: true
            ] as CFDictionary
            var ref: AnyObject?
            let status = SecItemAdd(keychainItem, &ref)
            let result = ref as! NSDictionary
            print("Operation finished with status: \(status)")
            print("Username: \(result[kSecAttrAccount] ?? "")")
            let passwordData = result[kSecValueData] as! Data
            let passwordString = String(data: passwordData, encoding: .utf8)
            print("Password: \(passwordString ?? "")")
        }
        XCTAssertEqual(out, "Operation finished with status: 0\nUsername: andyibanez\nPassword: Pullip2020\n")
    }

    /// The text's populating loop, then its retrieval, update and delete snippets in order.
    func testRetrieveUpdateDelete() {
        let populated = captureStandardOutput {
            let usernames = ["andyibanez", "alice", "eileen", "blackberry"]
            usernames.forEach { username in
            let keychainItem = [
            kSecValueData: "\(username)-Pullip2020".data(using: .utf8)!,
            kSecAttrAccount: username,
            kSecAttrServer: "pullipstyle.com",
            kSecClass: kSecClassInternetPassword,
            kSecReturnData: true,
            kSecReturnAttributes: true
            ] as CFDictionary
            var ref: AnyObject?
            let status = SecItemAdd(keychainItem, &ref)
            let result = ref as! NSDictionary
            print("Operation finished with status: \(status)")
            print("Username: \(result[kSecAttrAccount] ?? "")")
            let passwordData = result[kSecValueData] as! Data
            let passwordString = String(data: passwordData, encoding: .utf8)
            print("Password: \(passwordString ?? "")")
            }
        }
        XCTAssertEqual(populated, ["andyibanez", "alice", "eileen", "blackberry"].map {
            "Operation finished with status: 0\nUsername: \($0)\nPassword: \($0)-Pullip2020\n"
        }.joined())

        // "the following query will only return one"
        let one = captureStandardOutput {
            let query = [
            kSecClass: kSecClassInternetPassword,
            kSecAttrServer: "pullipstyle.com",
            kSecReturnAttributes: true,
            kSecReturnData: true
            ] as CFDictionary
            var result: AnyObject?
            let status = SecItemCopyMatching(query, &result)
            print("Operation finished with status: \(status)")
            let dic = result as! NSDictionary
            let username = dic[kSecAttrAccount] ?? ""
            let passwordData = dic[kSecValueData] as! Data
            let password = String(data: passwordData, encoding: .utf8)!
            print("Username: \(username)")
            print("Password: \(password)")
        }
        XCTAssertEqual(one, "Operation finished with status: 0\nUsername: andyibanez\nPassword: andyibanez-Pullip2020\n")

        let five = captureStandardOutput {
            let query = [
            kSecClass: kSecClassInternetPassword,
            kSecAttrServer: "pullipstyle.com",
            kSecReturnAttributes: true,
            kSecReturnData: true,
            kSecMatchLimit: 5
            ] as CFDictionary
            var result: AnyObject?
            let status = SecItemCopyMatching(query, &result)
            print("Operation finished with status: \(status)")
            let array = result as! [NSDictionary]
            array.forEach { dic in
            let username = dic[kSecAttrAccount] ?? ""
            let passwordData = dic[kSecValueData] as! Data
            let password = String(data: passwordData, encoding: .utf8)!
            print("Username: \(username)")
            print("Password: \(password)")
            }
        }
        XCTAssertEqual(five, "Operation finished with status: 0\n" + ["andyibanez", "alice", "eileen", "blackberry"].map {
            "Username: \($0)\nPassword: \($0)-Pullip2020\n"
        }.joined())

        let narrowed = captureStandardOutput {
            let query = [
            kSecClass: kSecClassInternetPassword,
            kSecAttrServer: "pullipstyle.com",
            kSecAttrAccount: "andyibanez",
            kSecReturnAttributes: true,
            kSecReturnData: true,
            kSecMatchLimit: 5
            ] as CFDictionary
            var result: AnyObject?
            let status = SecItemCopyMatching(query, &result)
            print("Operation finished with status: \(status)")
            let array = result as! [NSDictionary]
            array.forEach { dic in
            let username = dic[kSecAttrAccount] ?? ""
            let passwordData = dic[kSecValueData] as! Data
            let password = String(data: passwordData, encoding: .utf8)!
            print("Username: \(username)")
            print("Password: \(password)")
            }
        }
        // The text's own output for this snippet.
        XCTAssertEqual(narrowed, "Operation finished with status: 0\nUsername: andyibanez\nPassword: andyibanez-Pullip2020\n")

        // "This will successfully modify the password of all" items of the server.
        let updatedAll = captureStandardOutput {
            let query = [
            kSecClass: kSecClassInternetPassword,
            kSecAttrServer: "pullipstyle.com",
            ] as CFDictionary
            let updateFields = [
            kSecValueData: "newPassword".data(using: .utf8)!
            ] as CFDictionary
            let status = SecItemUpdate(query, updateFields)
            print("Operation finished with status: \(status)")
        }
        XCTAssertEqual(updatedAll, "Operation finished with status: 0\n")
        XCTAssertEqual(passwords(server: "pullipstyle.com"), Array(repeating: "newPassword", count: 4))

        // The text's second update names "pullipstylew.com", a server that holds nothing.
        let updatedOne = captureStandardOutput {
            let query = [
            kSecClass: kSecClassInternetPassword,
            kSecAttrServer: "pullipstylew.com",
            kSecAttrAccount: "andyibanez"
            ] as CFDictionary
            let updateFields = [
            kSecValueData: "newPassword".data(using: .utf8)!
            ] as CFDictionary
            let status = SecItemUpdate(query, updateFields)
            print("Operation finished with status: \(status)")
        }
        XCTAssertEqual(updatedOne, "Operation finished with status: \(errSecItemNotFound)\n")

        // Its delete names the account "andyibanez.com", which matches nothing: all four stay.
        let query = [
        kSecClass: kSecClassInternetPassword,
        kSecAttrServer: "pullipstyle.com",
        kSecAttrAccount: "andyibanez.com"
        ] as CFDictionary
        SecItemDelete(query)
        XCTAssertEqual(passwords(server: "pullipstyle.com").count, 4)
    }

    private func passwords(server: String) -> [String] {
        var result: CFTypeRef?
        let status = SecItemCopyMatching([kSecClass: kSecClassInternetPassword, kSecAttrServer: server,
                                          kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll], &result)
        guard status == errSecSuccess, let array = result as? [Data] else { return [] }
        return array.map { String(decoding: $0, as: UTF8.self) }
    }
}
