import KeychainCore
import Security
import XCTest

final class KeychainQueryTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    func testSaveFetchDelete() throws {
        let query = KeychainQuery()
        query.service = "MyService"
        query.account = "user@example.com"
        query.password = "mySecurePassword"
        try query.save()

        let fetch = KeychainQuery(service: "MyService", account: "user@example.com")
        try fetch.fetch()
        XCTAssertEqual(fetch.password, "mySecurePassword")

        // Saving again replaces the password rather than failing as a duplicate.
        query.password = "changed"
        try query.save()
        try fetch.fetch()
        XCTAssertEqual(fetch.password, "changed")
        XCTAssertEqual(try KeychainQuery(service: "MyService").fetchAll().count, 1)

        try fetch.deleteItem()
        XCTAssertThrowsError(try fetch.fetch()) { XCTAssertEqual(($0 as? SecError)?.status, errSecItemNotFound) }
        XCTAssertThrowsError(try fetch.deleteItem()) { XCTAssertEqual(($0 as? SecError)?.status, errSecItemNotFound) }
    }

    func testSaveWithoutPasswordIsParamError() {
        XCTAssertThrowsError(try KeychainQuery(service: "s", account: "a").save()) {
            XCTAssertEqual(($0 as? SecError)?.status, errSecParam)
        }
    }

    func testLabelAndAccessGroupAreStored() throws {
        let query = KeychainQuery(service: "MyService", account: "a")
        query.label = "My Secure Password"
        query.accessGroup = "group.com.example.myapp"
        query.password = "x"
        try query.save()
        let items = try KeychainQuery(service: "MyService").fetchAll()
        XCTAssertEqual(items.first?[kSecAttrLabel as String] as? String, "My Secure Password")
        XCTAssertEqual(items.first?[kSecAttrAccessGroup as String] as? String, "group.com.example.myapp")
        XCTAssertTrue(try KeychainQuery(service: "Other").fetchAll().isEmpty)
    }

    func testPasswordObjectThroughCodable() throws {
        struct Credentials: Codable, Equatable {
            var username: String
            var apiKey: String
        }
        let save = KeychainQuery(service: "MyService", account: "user@example.com")
        try save.setPasswordObject(Credentials(username: "user@example.com", apiKey: "abc123"))
        try save.save()
        let fetch = KeychainQuery(service: "MyService", account: "user@example.com")
        try fetch.fetch()
        XCTAssertEqual(try fetch.passwordObject(Credentials.self), Credentials(username: "user@example.com", apiKey: "abc123"))

        let dictionary = KeychainQuery(service: "Dict", account: "a")
        try dictionary.setPasswordObject(["username": "u", "apiKey": "abc123", "token": "xyz789"])
        try dictionary.save()
        try fetch.fetch()
        let reread = KeychainQuery(service: "Dict", account: "a")
        try reread.fetch()
        XCTAssertEqual(try reread.passwordObject([String: String].self)?["apiKey"], "abc123")
        XCTAssertThrowsError(try reread.passwordObject(Int.self), "a type mismatch is an error, not garbage")
    }

    func testSynchronizationModes() throws {
        XCTAssertFalse(KeychainQuery.isSynchronizationAvailable)
        let synced = KeychainQuery(service: "S", account: "a")
        synced.synchronizationMode = .yes
        synced.password = "1"
        try synced.save()
        let local = KeychainQuery(service: "S", account: "a")
        local.synchronizationMode = .no
        local.password = "2"
        try local.save()

        let any = KeychainQuery(service: "S")
        any.synchronizationMode = .any
        XCTAssertEqual(try any.fetchAll().count, 2)
        let onlyNo = KeychainQuery(service: "S", account: "a")
        onlyNo.synchronizationMode = .no
        try onlyNo.fetch()
        XCTAssertEqual(onlyNo.password, "2")
    }

    func testConveniences() {
        XCTAssertNil(SAMKeychain.password(forService: "svc", account: "a"))
        XCTAssertTrue(SAMKeychain.setPassword("one", forService: "svc", account: "a"))
        XCTAssertTrue(SAMKeychain.setPassword("two", forService: "svc", account: "b"))
        XCTAssertTrue(SAMKeychain.setPassword("three", forService: "other", account: "c"))
        XCTAssertEqual(SAMKeychain.password(forService: "svc", account: "a"), "one")
        XCTAssertEqual(SAMKeychain.passwordData(forService: "svc", account: "b"), Data("two".utf8))
        XCTAssertEqual(Set(SAMKeychain.accounts(forService: "svc").compactMap { $0[kSecAttrAccount as String] as? String }), ["a", "b"])
        XCTAssertEqual(SAMKeychain.allAccounts().count, 3)
        XCTAssertTrue(SAMKeychain.deletePassword(forService: "svc", account: "a"))
        XCTAssertFalse(SAMKeychain.deletePassword(forService: "svc", account: "a"))
        XCTAssertNil(SAMKeychain.password(forService: "svc", account: "a"))
    }
}
