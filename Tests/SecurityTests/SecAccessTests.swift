import KeychainCore
import Security
import XCTest

/// SecAccessCreate, SecTrustedApplicationCreateFromPath and kSecAttrAccess: the access list an
/// item is stored with, and never shown back as an attribute.
final class SecAccessTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    private func application(_ path: String?) throws -> SecTrustedApplication {
        var app: SecTrustedApplication?
        let status = path.map { path in path.withCString { SecTrustedApplicationCreateFromPath($0, &app) } } ?? SecTrustedApplicationCreateFromPath(nil, &app)
        XCTAssertEqual(status, errSecSuccess)
        return try XCTUnwrap(app)
    }

    private func access(_ applications: [SecTrustedApplication]?) throws -> SecAccess {
        var access: SecAccess?
        XCTAssertEqual(SecAccessCreate("test item" as CFString, applications.map { $0 as NSArray }, &access), errSecSuccess)
        return try XCTUnwrap(access)
    }

    /// The list stored with the item of `account`, read from the engine.
    private func storedList(_ account: String) throws -> AccessList? {
        let query = Query(itemClass: .genericPassword, attributes: [AttributeKey.account: .string(account)])
        return AccessList.of(try XCTUnwrap(keychain.keychain.store.find(query).first))
    }

    private func add(_ account: String, access: SecAccess?) -> OSStatus {
        var item: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
            kSecAttrService as String: "svc", kSecValueData as String: Data("pw".utf8)
        ]
        if let access { item[kSecAttrAccess as String] = access }
        return SecItemAdd(item as CFDictionary, nil)
    }

    func testTrustedApplicationsBecomeTheItemsList() throws {
        let truePath = try XCTUnwrap(realpath("/bin/true", nil).map { String(cString: $0) })
        XCTAssertEqual(add("listed", access: try access([application("/bin/true"), application("/bin/true")])), errSecSuccess)
        XCTAssertEqual(try storedList("listed"), AccessList([.executable(truePath)]), "resolved, once")
        XCTAssertEqual(add("nobody", access: try access([])), errSecSuccess)
        XCTAssertEqual(try storedList("nobody"), AccessList([]), "an empty list: every program asked")
    }

    func testNilListIsTheCallingProgram() throws {
        let me = try XCTUnwrap(realpath("/proc/self/exe", nil).map { String(cString: $0) })
        XCTAssertEqual(add("caller", access: try access(nil)), errSecSuccess)
        XCTAssertEqual(try storedList("caller"), AccessList([.executable(me)]))
        var data: CFData?
        XCTAssertEqual(SecTrustedApplicationCopyData(try application(nil), &data), errSecSuccess)
        XCTAssertEqual(data.map { String(decoding: $0 as Data, as: UTF8.self) }, me)
    }

    func testMissingPathAndWrongTypesAreRefused() throws {
        var app: SecTrustedApplication?
        XCTAssertEqual("/no/such/program".withCString { SecTrustedApplicationCreateFromPath($0, &app) }, errSecParam)
        XCTAssertNil(app)
        var access: SecAccess?
        XCTAssertEqual(SecAccessCreate("x" as CFString, ["/bin/true"] as NSArray, &access), errSecParam)
        var item: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "raw", kSecValueData as String: Data("pw".utf8)
        ]
        item[kSecAttrAccess as String] = "any"
        XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecParam, "kSecAttrAccess is a SecAccess")
        item[kSecAttrAccess as String] = nil
        item["tapp"] = "any"
        XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecParam, "the engine's attribute is not Apple's API")
    }

    func testResultsNeverHoldTheListAttribute() throws {
        XCTAssertEqual(add("shown", access: try access([application("/bin/true")])), errSecSuccess)
        var result: CFTypeRef?
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
            kSecReturnAttributes as String: true, kSecReturnData as String: true
        ]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let items = try XCTUnwrap(result as? [[String: Any]])
        XCTAssertEqual(items.count, 1)
        XCTAssertNil(items[0]["tapp"])
        XCTAssertNil(items[0][kSecAttrAccess as String])
        XCTAssertEqual(items[0][kSecAttrAccount as String] as? String, "shown")
        var attributesOnly: CFTypeRef?
        let one: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true]
        XCTAssertEqual(SecItemCopyMatching(one as CFDictionary, &attributesOnly), errSecSuccess)
        XCTAssertNil((attributesOnly as? [String: Any])?["tapp"])
    }

    func testUpdateWritesTheList() throws {
        XCTAssertEqual(add("changed", access: try access([application("/bin/true")])), errSecSuccess)
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "changed"]
        XCTAssertEqual(SecItemUpdate(query as CFDictionary, [kSecAttrAccess as String: try access([])] as CFDictionary), errSecSuccess)
        XCTAssertEqual(try storedList("changed"), AccessList([]))
    }

    func testACLListReadsTheApplicationsBack() throws {
        let access = try access([application("/bin/true")])
        var acls: CFArray?
        XCTAssertEqual(SecAccessCopyACLList(access, &acls), errSecSuccess)
        let acl = try XCTUnwrap((acls as? [SecACL])?.first)
        var applications: CFArray?
        var description: CFString?
        var selector = SecKeychainPromptSelector()
        XCTAssertEqual(SecACLCopyContents(acl, &applications, &description, &selector), errSecSuccess)
        XCTAssertEqual(description as String?, "test item")
        var data: CFData?
        let app = try XCTUnwrap((applications as? [SecTrustedApplication])?.first)
        XCTAssertEqual(SecTrustedApplicationCopyData(app, &data), errSecSuccess)
        XCTAssertEqual(data.map { String(decoding: $0 as Data, as: UTF8.self) }, realpath("/bin/true", nil).map { String(cString: $0) })
        XCTAssertEqual(CFGetTypeID(access), SecAccessGetTypeID())
    }
}
