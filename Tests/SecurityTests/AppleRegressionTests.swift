import Security
import XCTest

/// Apple's own SecItem regression cases and the server code behind them (Security sources,
/// OSX/sec/Security/Regressions/secitem/ and keychain/securityd/), as the data-protection
/// keychain behaves.
final class AppleRegressionTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    private func copy(_ query: [String: Any]) -> (OSStatus, AnyObject?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, result)
    }

    // MARK: si-43-persistent.c: a persistent reference identifies its item by itself

    private let internetItem: [String: Any] = [
        kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "zuigt.nl", kSecAttrAccount as String: "frtnbf",
        kSecAttrPort as String: 80, kSecAttrProtocol as String: kSecAttrProtocolHTTP,
        kSecAttrAuthenticationType as String: kSecAttrAuthenticationTypeDefault
    ]

    private func addReturningPersistentRef(_ item: [String: Any]) throws -> Data {
        var persist: CFTypeRef?
        var attributes = item
        attributes[kSecReturnPersistentRef as String] = true
        attributes[kSecValueData as String] = Data("test".utf8)
        XCTAssertEqual(SecItemAdd(attributes as CFDictionary, &persist), errSecSuccess, "add internet password")
        return try XCTUnwrap(persist as? Data, "got back persistent ref (a CFData)")
    }

    func testPersistentReferenceFindsItsItemWithoutClass() throws {
        let persist = try addReturningPersistentRef(internetItem)
        let byAttributes = internetItem.merging([kSecReturnAttributes as String: true]) { a, _ in a }
        let (status, results) = copy(byAttributes)
        XCTAssertEqual(status, errSecSuccess, "find internet password by attr")
        let byReference: [String: Any] = [kSecReturnAttributes as String: true, kSecValuePersistentRef as String: persist]
        let (status2, results2) = copy(byReference)
        XCTAssertEqual(status2, errSecSuccess, "find internet password by persistent ref")
        XCTAssertEqual(results as? NSDictionary, results2 as? NSDictionary, "same item (attributes)")

        XCTAssertEqual(SecItemDelete(internetItem as CFDictionary), errSecSuccess, "delete internet password")
        XCTAssertEqual(copy(byAttributes).0, errSecItemNotFound, "don't find internet password by attributes")
        XCTAssertEqual(copy(byReference).0, errSecItemNotFound, "don't find internet password by persistent ref anymore")
    }

    func testPersistentReferenceUpdatesAndDeletesOnlyItsItem() throws {
        let persist = try addReturningPersistentRef(internetItem)
        let persist2 = try addReturningPersistentRef(internetItem.merging([kSecAttrAccount as String: "johndoe"]) { _, b in b })

        let query3: [String: Any] = [kSecValuePersistentRef as String: persist]
        XCTAssertEqual(SecItemUpdate(query3 as CFDictionary, [kSecAttrServer as String: "zuigt.com"]), errSecSuccess, "update via persistent ref")
        var (status, results) = copy(query3.merging([kSecReturnAttributes as String: true]) { a, _ in a })
        XCTAssertEqual(status, errSecSuccess, "find updated internet password by persistent ref")
        XCTAssertEqual((results as? [String: Any])?[kSecAttrServer as String] as? String, "zuigt.com", "attribute was modified by update")

        let query4: [String: Any] = [kSecValuePersistentRef as String: persist2, kSecReturnAttributes as String: true]
        (status, results) = copy(query4)
        XCTAssertEqual(status, errSecSuccess, "find non updated internet password by persistent ref")
        XCTAssertEqual((results as? [String: Any])?[kSecAttrServer as String] as? String, "zuigt.nl", "second item was not modified by update")

        XCTAssertEqual(SecItemDelete(query3 as CFDictionary), errSecSuccess, "delete via persistent ref")
        XCTAssertEqual(copy(query3).0, errSecItemNotFound, "don't find deleted internet password by persistent ref")
        XCTAssertEqual(copy(query4).0, errSecSuccess, "find non deleted internet password by persistent ref")
        XCTAssertEqual(SecItemDelete([kSecValuePersistentRef as String: persist2]), errSecSuccess, "delete internet password by persistent ref")
        XCTAssertEqual(copy([kSecClass as String: kSecClassInternetPassword]).0, errSecItemNotFound)
    }

    /// SecDbQuery.c (query_create_with_limit) adds no kSecAttrSynchronizable filter to a query
    /// that holds a persistent reference, so the reference finds a synchronizable item too.
    func testPersistentReferenceNamesASynchronizableItem() throws {
        let persist = try addReturningPersistentRef(internetItem.merging([kSecAttrSynchronizable as String: true]) { _, b in b })
        XCTAssertEqual(copy([kSecClass as String: kSecClassInternetPassword]).0, errSecItemNotFound, "a plain search leaves sync items out")
        let (status, data) = copy([kSecValuePersistentRef as String: persist, kSecReturnData as String: true])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(data as? Data, Data("test".utf8))
        // An explicit kSecAttrSynchronizable is an attribute like any other (query_add_attribute_with_desc
        // records it; only kSecAttrSynchronizableAny is skipped), and a row id with an attribute is illegal.
        XCTAssertEqual(
            copy([kSecValuePersistentRef as String: persist, kSecAttrSynchronizable as String: false]).0, errSecParam,
            "an explicit kSecAttrSynchronizable is an attribute beside the reference")
        XCTAssertEqual(
            copy([kSecValuePersistentRef as String: persist, kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]).0,
            errSecSuccess, "kSecAttrSynchronizableAny is no attribute")
    }

    /// SecItemDb.c (s3dl_copy_matching, s3dl_query_update) and SecItemServer.c (_SecItemDelete):
    /// a row id together with any attribute (query_attr_count(q) > 0) is errSecItemIllegalQuery,
    /// which reaches the caller as errSecParam. kSecClass, kSecReturn*, kSecMatch* and kSecUse*
    /// are no attributes; the attributes to update are a dictionary of their own.
    func testPersistentReferenceWithAnAttributeIsParam() throws {
        let persist = try addReturningPersistentRef(internetItem)
        let attributes: [(String, Any)] = [
            (kSecAttrAccount as String, "frtnbf"), (kSecAttrServer as String, "zuigt.nl"), (kSecAttrLabel as String, "a label"),
            (kSecAttrPort as String, 80), (kSecAttrSynchronizable as String, true),
            (kSecAttrAccessGroup as String, "a group"), (kSecAttrAccessible as String, kSecAttrAccessibleWhenUnlocked)
        ]
        for (name, value) in attributes {
            let query: [String: Any] = [kSecValuePersistentRef as String: persist, name: value]
            XCTAssertEqual(copy(query).0, errSecParam, "copy with \(name)")
            XCTAssertEqual(
                copy(query.merging([kSecClass as String: kSecClassInternetPassword, kSecReturnData as String: true]) { a, _ in a }).0,
                errSecParam, "copy with kSecClass and \(name)")
            XCTAssertEqual(
                SecItemUpdate(query as CFDictionary, [kSecAttrComment as String: "changed"] as CFDictionary), errSecParam,
                "update with \(name)")
            XCTAssertEqual(SecItemDelete(query as CFDictionary), errSecParam, "delete with \(name)")
        }
        // None of those touched the item; what is not an attribute still goes with the reference.
        let plain: [String: Any] = [
            kSecValuePersistentRef as String: persist, kSecClass as String: kSecClassInternetPassword,
            kSecAttrSynchronizable as String: kSecAttrSynchronizableAny
        ]
        let (status, found) = copy(
            plain.merging([
                kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitOne,
                kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail
            ]) { a, _ in a })
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertNil((found as? [String: Any])?[kSecAttrComment as String], "no update went through")
        XCTAssertEqual(
            SecItemUpdate(plain as CFDictionary, [kSecAttrAccount as String: "changed"] as CFDictionary), errSecSuccess,
            "attributes to update are their own dictionary")
        XCTAssertEqual(SecItemDelete(plain as CFDictionary), errSecSuccess)
        XCTAssertEqual(copy([kSecValuePersistentRef as String: persist]).0, errSecItemNotFound)

        var generic: CFTypeRef?
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc", kSecAttrAccount as String: "me",
                    kSecReturnPersistentRef as String: true
                ] as CFDictionary, &generic), errSecSuccess)
        let genericRef = try XCTUnwrap(generic as? Data)
        XCTAssertEqual(copy([kSecValuePersistentRef as String: genericRef, kSecAttrService as String: "svc"]).0, errSecParam)
        XCTAssertEqual(SecItemDelete([kSecValuePersistentRef as String: genericRef, kSecAttrAccount as String: "me"] as CFDictionary), errSecParam)
        XCTAssertEqual(copy([kSecValuePersistentRef as String: genericRef]).0, errSecSuccess)
    }

    func testMalformedPersistentReferenceWithoutClassIsParam() {
        XCTAssertEqual(copy([kSecValuePersistentRef as String: Data([1, 2, 3])]).0, errSecParam)
        XCTAssertEqual(SecItemDelete([kSecValuePersistentRef as String: Data("zzzz12345678".utf8)]), errSecParam)
    }

    // MARK: si-80-empty-data.c: an item added without kSecValueData has no data

    private let emptyDataItem: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "empty-data-account-test", kSecAttrService as String: "empty-data-svce-test"
    ]

    func testItemWithoutDataReturnsNoDataKey() throws {
        XCTAssertEqual(SecItemAdd(emptyDataItem as CFDictionary, nil), errSecSuccess, "add generic password")
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "empty-data-svce-test",
            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnData as String: true, kSecReturnAttributes as String: true
        ]
        let (status, result) = copy(query)
        XCTAssertEqual(status, errSecSuccess, "query generic password")
        let rows = try XCTUnwrap(result as? [Any], "an array of results")
        XCTAssertEqual(rows.count, 1, "return 1-sized array of results")
        let row = try XCTUnwrap(rows.first as? [String: Any], "array row is dictionary")
        XCTAssertNil(row[kSecValueData as String], "result contains no data")
        XCTAssertEqual(row[kSecAttrService as String] as? String, "empty-data-svce-test", "svce attribute is returned")
        XCTAssertEqual(row[kSecAttrAccount as String] as? String, "empty-data-account-test", "account attribute is returned")
        XCTAssertEqual(
            SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "empty-data-svce-test"]), errSecSuccess,
            "delete testing item")
    }

    /// SecItemDb.c, handle_result: kSecReturnData alone gives an empty CFData for an item without
    /// data; a dictionary result leaves the key out (with a persistent reference too).
    func testItemWithoutDataAlone() throws {
        XCTAssertEqual(SecItemAdd(emptyDataItem as CFDictionary, nil), errSecSuccess)
        var (status, result) = copy([kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(result as? Data, Data())
        (status, result) = copy([kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true, kSecReturnPersistentRef as String: true])
        let dict = try XCTUnwrap(result as? [String: Any])
        XCTAssertNil(dict[kSecValueData as String])
        XCTAssertNotNil(dict[kSecValuePersistentRef as String])
    }

    /// Data that is empty is still data: its key stays. And data set later by SecItemUpdate is
    /// data, as an update of attributes only leaves an item without data as it was.
    func testEmptyDataIsDataAndUpdatesKeepTheDifference() throws {
        XCTAssertEqual(SecItemAdd(emptyDataItem as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(
            SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "explicitly-empty", kSecValueData as String: Data()], nil),
            errSecSuccess)
        func data(_ account: String) throws -> Any? {
            let (status, result) = copy([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
                kSecReturnData as String: true, kSecReturnAttributes as String: true
            ])
            XCTAssertEqual(status, errSecSuccess)
            return try XCTUnwrap(result as? [String: Any])[kSecValueData as String]
        }
        XCTAssertEqual(try data("explicitly-empty") as? Data, Data())
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "empty-data-account-test"],
                [kSecAttrLabel as String: "renamed"]), errSecSuccess)
        XCTAssertNil(try data("empty-data-account-test"), "an update of attributes gives no data")
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "empty-data-account-test"],
                [kSecValueData as String: Data("now some".utf8)]), errSecSuccess)
        XCTAssertEqual(try data("empty-data-account-test") as? Data, Data("now some".utf8))
    }

    // MARK: SecItemDb.c, s3dl_query_update: the query of SecItemUpdate takes no match keys

    func testUpdateRefusesMatchKeys() throws {
        XCTAssertEqual(
            SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a", kSecValueData as String: Data("pw".utf8)], nil),
            errSecSuccess)
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"]
        let matchKeys: [(String, Any)] = [
            (kSecMatchLimit as String, kSecMatchLimitOne), (kSecMatchLimit as String, kSecMatchLimitAll), (kSecMatchLimit as String, 1),
            (kSecMatchLimit as String, 5),
            (kSecMatchCaseInsensitive as String, true), (kSecMatchSubjectContains as String, "a")
        ]
        for (key, value) in matchKeys {
            XCTAssertEqual(
                SecItemUpdate(query.merging([key: value]) { a, _ in a } as CFDictionary, [kSecAttrLabel as String: "changed"] as CFDictionary), errSecParam,
                "\(key) = \(value)")
        }
        let persistent = try XCTUnwrap(copy(query.merging([kSecReturnPersistentRef as String: true]) { a, _ in a }).1 as? Data)
        XCTAssertEqual(
            SecItemUpdate(
                query.merging([kSecMatchItemList as String: [persistent]]) { a, _ in a } as CFDictionary, [kSecAttrLabel as String: "changed"] as CFDictionary),
            errSecParam, "kSecMatchItemList")
        let (_, attributes) = copy(query.merging([kSecReturnAttributes as String: true]) { a, _ in a })
        XCTAssertNil((attributes as? [String: Any])?[kSecAttrLabel as String], "nothing was changed")
        XCTAssertEqual(SecItemUpdate(query as CFDictionary, [kSecAttrLabel as String: "changed"]), errSecSuccess, "the same update without match keys")
    }
}
