import KeychainCore
import Security
import XCTest

final class SecItemTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    private func addGeneric(_ account: String, service: String = "svc", password: String = "pw", extra: [String: Any] = [:]) -> OSStatus {
        var item: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: account,
            kSecAttrService as String: service, kSecValueData as String: Data(password.utf8)
        ]
        item.merge(extra) { _, b in b }
        return SecItemAdd(item as CFDictionary, nil)
    }

    private func addInternet(_ attributes: [String: Any], password: String = "pw") -> OSStatus {
        var item: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecValueData as String: Data(password.utf8)]
        item.merge(attributes) { _, b in b }
        return SecItemAdd(item as CFDictionary, nil)
    }

    private func copy(_ query: [String: Any]) -> (OSStatus, AnyObject?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, result)
    }

    // MARK: Uniqueness

    func testGenericPasswordUniquenessIsAccountServiceGroupSync() {
        XCTAssertEqual(addGeneric("alice"), errSecSuccess)
        XCTAssertEqual(addGeneric("alice"), errSecDuplicateItem)
        XCTAssertEqual(addGeneric("alice", password: "other", extra: [kSecAttrLabel as String: "different label"]), errSecDuplicateItem)
        XCTAssertEqual(
            addGeneric("alice", extra: [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock as String]), errSecDuplicateItem,
            "protection is not part of the primary key")
        XCTAssertEqual(addGeneric("bob"), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", service: "svc2"), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", extra: [kSecAttrAccessGroup as String: "group.b"]), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", extra: [kSecAttrSynchronizable as String: true]), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", extra: [kSecAttrSynchronizable as String: true]), errSecDuplicateItem)
    }

    func testMissingAttributesCountAsEmpty() {
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecValueData as String: Data("a".utf8)], nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecValueData as String: Data("b".utf8)], nil), errSecDuplicateItem)
        XCTAssertEqual(addGeneric("", service: ""), errSecDuplicateItem)
        XCTAssertEqual(addInternet([kSecAttrServer as String: "h"]), errSecSuccess)
        XCTAssertEqual(addInternet([kSecAttrServer as String: "h", kSecAttrPort as String: 0, kSecAttrPath as String: ""]), errSecDuplicateItem)
    }

    func testInternetPasswordUniquenessCoversEveryKeyAttribute() {
        let base: [String: Any] = [
            kSecAttrServer as String: "example.com", kSecAttrAccount as String: "alice", kSecAttrProtocol as String: kSecAttrProtocolHTTPS as String
        ]
        XCTAssertEqual(addInternet(base), errSecSuccess)
        XCTAssertEqual(addInternet(base), errSecDuplicateItem)
        let variations: [(String, Any)] = [
            (kSecAttrPort as String, 8443), (kSecAttrPath as String, "/repo.git"), (kSecAttrProtocol as String, kSecAttrProtocolHTTP),
            (kSecAttrSecurityDomain as String, "realm"), (kSecAttrAuthenticationType as String, kSecAttrAuthenticationTypeHTTPBasic),
            (kSecAttrAccount as String, "bob"), (kSecAttrAccessGroup as String, "g")
        ]
        for (key, value) in variations {
            var item = base
            item[key] = value
            XCTAssertEqual(addInternet(item), errSecSuccess, key)
            XCTAssertEqual(addInternet(item), errSecDuplicateItem, key)
        }
        // Not part of the key: label and comment.
        var labelled = base
        labelled[kSecAttrLabel as String] = "x"
        labelled[kSecAttrComment as String] = "y"
        XCTAssertEqual(addInternet(labelled), errSecDuplicateItem)
    }

    func testUpdateIntoAnExistingKeyIsDuplicate() {
        XCTAssertEqual(addGeneric("alice"), errSecSuccess)
        XCTAssertEqual(addGeneric("bob"), errSecSuccess)
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bob"],
                [kSecAttrAccount as String: "alice"]), errSecDuplicateItem)
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "bob"]).0, errSecSuccess, "nothing changed")
    }

    // MARK: Match limits and return types

    func testReturnTypeCombinations() throws {
        XCTAssertEqual(addGeneric("alice", password: "secret-a", extra: [kSecAttrLabel as String: "A"]), errSecSuccess)
        let q: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "alice"]

        // No return type: status only.
        var (status, result) = copy(q)
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertNil(result)
        XCTAssertEqual(SecItemCopyMatching(q as CFDictionary, nil), errSecSuccess)

        (status, result) = copy(q.merging([kSecReturnData as String: true]) { a, _ in a })
        XCTAssertEqual(result as? Data, Data("secret-a".utf8))

        (status, result) = copy(q.merging([kSecReturnAttributes as String: true]) { a, _ in a })
        let attrs = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(attrs[kSecAttrLabel as String] as? String, "A")
        XCTAssertNil(attrs[kSecValueData as String], "attributes alone carry no secret")
        XCTAssertNotNil(attrs[kSecAttrCreationDate as String] as? Date)

        (status, result) = copy(q.merging([kSecReturnPersistentRef as String: true]) { a, _ in a })
        let persistent = try XCTUnwrap(result as? Data)

        (status, result) = copy(q.merging([kSecReturnRef as String: true]) { a, _ in a })
        XCTAssertTrue(result is SecKeychainItem)

        (status, result) = copy(
            q.merging([kSecReturnData as String: true, kSecReturnPersistentRef as String: true, kSecReturnRef as String: true]) { a, _ in a })
        let all = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(all[kSecValueData as String] as? Data, Data("secret-a".utf8))
        XCTAssertEqual(all[kSecValuePersistentRef as String] as? Data, persistent)
        XCTAssertTrue(all[kSecValueRef as String] is SecKeychainItem)
        XCTAssertNil(all[kSecAttrAccount as String], "attributes were not asked for")
    }

    /// The access list the engine writes on every new item is not an Apple attribute: results
    /// never carry it, and a caller cannot name it (as any attribute a class lacks).
    func testTheAccessListIsNeverAnAppleAttribute() throws {
        XCTAssertEqual(addGeneric("alice"), errSecSuccess)
        let q: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "alice"]
        let (status, result) = copy(q.merging([kSecReturnAttributes as String: true, kSecReturnData as String: true]) { a, _ in a })
        XCTAssertEqual(status, errSecSuccess)
        let attrs = try XCTUnwrap(result as? [String: Any])
        XCTAssertNil(attrs[AccessList.attribute])
        XCTAssertEqual(attrs[kSecAttrAccount as String] as? String, "alice")
        XCTAssertEqual(addGeneric("bob", extra: [AccessList.attribute: "any"]), errSecParam)
        XCTAssertEqual(copy(q.merging([AccessList.attribute: "any"]) { a, _ in a }).0, errSecParam)
        XCTAssertEqual(SecItemUpdate(q as CFDictionary, [AccessList.attribute: "any"] as CFDictionary), errSecParam)
    }

    func testMatchLimits() throws {
        for name in ["a", "b", "c"] { XCTAssertEqual(addGeneric(name), errSecSuccess) }
        let q: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true]

        var (_, result) = copy(q)
        XCTAssertEqual((result as? [String: Any])?[kSecAttrAccount as String] as? String, "a", "default limit is one, oldest first")
        (_, result) = copy(q.merging([kSecMatchLimit as String: kSecMatchLimitOne as String]) { a, _ in a })
        XCTAssertTrue(result is NSDictionary)
        (_, result) = copy(q.merging([kSecMatchLimit as String: 1]) { a, _ in a })
        XCTAssertTrue(result is NSDictionary, "a numeric limit of one is a single result")
        (_, result) = copy(q.merging([kSecMatchLimit as String: 2]) { a, _ in a })
        XCTAssertEqual((result as? [[String: Any]])?.count, 2)
        (_, result) = copy(q.merging([kSecMatchLimit as String: kSecMatchLimitAll as String]) { a, _ in a })
        XCTAssertEqual((result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String }, ["a", "b", "c"])
        (_, result) = copy(q.merging([kSecMatchLimit as String: 50, kSecAttrAccount as String: "b"]) { a, _ in a })
        XCTAssertEqual((result as? [Any])?.count, 1, "a limit above one gives an array even for one match")

        var status: OSStatus
        (status, result) = copy([
            kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll as String
        ])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual((result as? [Data])?.count, 3)

        (status, result) = copy([
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "zzz", kSecMatchLimit as String: kSecMatchLimitAll,
            kSecReturnData as String: true
        ])
        XCTAssertEqual(status, errSecItemNotFound)
        XCTAssertNil(result, "no match gives nil, not an empty array")
    }

    func testUpdateAndDeleteActOnAllMatches() {
        for name in ["a", "b"] { XCTAssertEqual(addGeneric(name), errSecSuccess) }
        XCTAssertEqual(addGeneric("c", service: "other"), errSecSuccess)
        XCTAssertEqual(
            SecItemUpdate([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc"], [kSecValueData as String: Data("new".utf8)]),
            errSecSuccess)
        let (_, result) = copy([
            kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll as String
        ])
        XCTAssertEqual((result as? [Data])?.map { String(decoding: $0, as: UTF8.self) }, ["new", "new", "pw"])
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc"]), errSecSuccess)
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc"]).0, errSecItemNotFound)
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "other"]).0, errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc"]), errSecItemNotFound)
    }

    // MARK: Matching

    func testCaseInsensitiveMatching() {
        XCTAssertEqual(addInternet([kSecAttrServer as String: "Example.COM", kSecAttrAccount as String: "Alice"]), errSecSuccess)
        XCTAssertEqual(copy([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com"]).0, errSecItemNotFound)
        XCTAssertEqual(
            copy([
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com", kSecAttrAccount as String: "ALICE",
                kSecMatchCaseInsensitive as String: true
            ]).0, errSecSuccess)
        XCTAssertEqual(
            copy([
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecMatchCaseInsensitive as String: false
            ]).0, errSecItemNotFound)
    }

    func testSynchronizableFilter() {
        XCTAssertEqual(addGeneric("local"), errSecSuccess)
        XCTAssertEqual(addGeneric("synced", extra: [kSecAttrSynchronizable as String: true]), errSecSuccess)
        func accounts(_ extra: [String: Any]) -> [String] {
            let (_, r) = copy(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true,
                    kSecMatchLimit as String: kSecMatchLimitAll as String
                ].merging(extra) { _, b in b })
            return ((r as? [[String: Any]]) ?? []).compactMap { $0[kSecAttrAccount as String] as? String }
        }
        XCTAssertEqual(accounts([:]), ["local"], "absent means not synchronizable")
        XCTAssertEqual(accounts([kSecAttrSynchronizable as String: true]), ["synced"])
        XCTAssertEqual(accounts([kSecAttrSynchronizable as String: kCFBooleanFalse!]), ["local"])
        XCTAssertEqual(accounts([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny as String]), ["local", "synced"])
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassGenericPassword as String]), errSecSuccess)
        XCTAssertEqual(accounts([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny as String]), ["synced"], "delete without sync spares synced items")
    }

    func testAccessGroups() {
        XCTAssertEqual(addGeneric("a", extra: [kSecAttrAccessGroup as String: "team.one"]), errSecSuccess)
        XCTAssertEqual(addGeneric("b", extra: [kSecAttrAccessGroup as String: "team.two"]), errSecSuccess)
        let (_, r) = copy([kSecClass as String: kSecClassGenericPassword, kSecAttrAccessGroup as String: "team.two", kSecReturnAttributes as String: true])
        XCTAssertEqual((r as? [String: Any])?[kSecAttrAccount as String] as? String, "b")
        let (_, all) = copy([kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true])
        XCTAssertEqual((all as? [Any])?.count, 2, "no group in the query searches all groups")
    }

    func testPersistentReferencesAndItemLists() throws {
        var added: CFTypeRef?
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a", kSecValueData as String: Data("1".utf8),
                    kSecReturnPersistentRef as String: true
                ], &added), errSecSuccess)
        let refA = try XCTUnwrap(added as? Data)
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "b", kSecValueData as String: Data("2".utf8),
                    kSecReturnPersistentRef as String: true
                ], &added), errSecSuccess)
        let refB = try XCTUnwrap(added as? Data)
        XCTAssertNotEqual(refA, refB)

        var (status, result) = copy([kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: refB, kSecReturnData as String: true])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(result as? Data, Data("2".utf8))

        (status, result) = copy([
            kSecClass as String: kSecClassGenericPassword, kSecMatchItemList as String: [refA, refB],
            kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnData as String: true
        ])
        XCTAssertEqual((result as? [Data])?.count, 2)

        // A reference from kSecReturnRef works in kSecValueRef and kSecMatchItemList too.
        (status, result) = copy([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a", kSecReturnRef as String: true])
        let ref = try XCTUnwrap(result as? SecKeychainItem)
        (status, result) = copy([kSecClass as String: kSecClassGenericPassword, kSecValueRef as String: ref, kSecReturnData as String: true])
        XCTAssertEqual(result as? Data, Data("1".utf8))

        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecMatchItemList as String: [refA]]), errSecSuccess)
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: refA]).0, errSecItemNotFound)
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "b"]).0, errSecSuccess)
        // A deleted item's reference never names a later item.
        XCTAssertEqual(addGeneric("c"), errSecSuccess)
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: refA]).0, errSecItemNotFound)
        // References are per class.
        XCTAssertEqual(copy([kSecClass as String: kSecClassInternetPassword, kSecValuePersistentRef as String: refB]).0, errSecItemNotFound)
    }

    func testCreationAndModificationDates() throws {
        let before = Date()
        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        func dates() -> (Date, Date)? {
            let (_, r) = copy([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a", kSecReturnAttributes as String: true])
            guard let d = r as? [String: Any], let c = d[kSecAttrCreationDate as String] as? Date, let m = d[kSecAttrModificationDate as String] as? Date else {
                return nil
            }
            return (c, m)
        }
        let (created, modified) = try XCTUnwrap(dates())
        XCTAssertEqual(created, modified)
        XCTAssertGreaterThanOrEqual(created.timeIntervalSince1970, before.timeIntervalSince1970 - 1)
        usleep(20_000)
        XCTAssertEqual(
            SecItemUpdate([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"], [kSecAttrLabel as String: "new"]), errSecSuccess)
        let (created2, modified2) = try XCTUnwrap(dates())
        XCTAssertEqual(created2, created, "creation date is kept")
        XCTAssertGreaterThan(modified2, modified)
    }

    func testDefaultAccessibilityIsWhenUnlocked() {
        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        let (_, r) = copy([kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true])
        XCTAssertEqual((r as? [String: Any])?[kSecAttrAccessible as String] as? String, kSecAttrAccessibleWhenUnlocked as String)
    }

    func testUpdateChangesProtectionAndKeepsSecret() {
        XCTAssertEqual(addGeneric("a", password: "keep-me"), errSecSuccess)
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass as String: kSecClassGenericPassword as String], [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock as String]),
            errSecSuccess)
        let (_, r) = copy([kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true, kSecReturnData as String: true])
        let d = r as? [String: Any]
        XCTAssertEqual(d?[kSecAttrAccessible as String] as? String, "ck")
        XCTAssertEqual(d?[kSecValueData as String] as? Data, Data("keep-me".utf8))
    }

    // MARK: Malformed input: a status code, never a crash

    func testParameterErrors() {
        var result: CFTypeRef?
        let cases: [(String, [String: Any])] = [
            ("no class", [kSecAttrAccount as String: "a"]),
            ("unknown class", [kSecClass as String: "nope"]),
            ("class of the wrong type", [kSecClass as String: 42]),
            ("account of the wrong type", [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: 42]),
            ("port as a string", [kSecClass as String: kSecClassInternetPassword, kSecAttrPort as String: "eighty"]),
            ("attribute of another class", [kSecClass as String: kSecClassGenericPassword, kSecAttrServer as String: "x"]),
            ("unknown attribute", [kSecClass as String: kSecClassGenericPassword, "zzzz": "x"]),
            ("unknown accessibility", [kSecClass as String: kSecClassGenericPassword, kSecAttrAccessible as String: "zz"]),
            ("limit zero", [kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: 0]),
            ("negative limit", [kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: -3]),
            ("limit as garbage", [kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: "lots"]),
            ("return flag as a string", [kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: "yes"]),
            ("value data as a string", [kSecClass as String: kSecClassGenericPassword, kSecValueData as String: "pw"]),
            ("bad persistent reference", [kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: Data([1, 2, 3])]),
            ("empty item list", [kSecClass as String: kSecClassGenericPassword, kSecMatchItemList as String: [Any]()]),
            ("synchronizable as garbage", [kSecClass as String: kSecClassGenericPassword, kSecAttrSynchronizable as String: "maybe"])
        ]
        for (name, query) in cases {
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecParam, name)
            XCTAssertNil(result, name)
        }
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: Date()], nil), errSecParam)
        XCTAssertEqual(
            SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrSynchronizable as String: kSecAttrSynchronizableAny as String], nil), errSecParam
        )
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: 2], nil), errSecParam)

        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        let q: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"]
        XCTAssertEqual(
            SecItemCopyMatching(q.merging([kSecReturnData as String: true]) { a, _ in a } as CFDictionary, nil), errSecParam,
            "return type with no result pointer")
        XCTAssertEqual(
            SecItemUpdate(q.merging([kSecReturnData as String: true]) { a, _ in a } as CFDictionary, [kSecAttrLabel as String: "x"]), errSecParam,
            "kSecReturn* on update")
        XCTAssertEqual(SecItemUpdate(q as CFDictionary, [kSecClass as String: kSecClassInternetPassword as String]), errSecParam, "class in the changes")
        XCTAssertEqual(SecItemUpdate(q as CFDictionary, [kSecMatchLimit as String: 1]), errSecParam, "search key in the changes")
        XCTAssertEqual(SecItemUpdate(q as CFDictionary, [kSecAttrPort as String: 1]), errSecParam, "attribute of another class in the changes")
        XCTAssertEqual(SecItemUpdate(q as CFDictionary, [:]), errSecParam, "nothing to change")
        XCTAssertEqual(SecItemDelete(q.merging([kSecMatchLimit as String: kSecMatchLimitOne]) { a, _ in a } as CFDictionary), errSecParam, "limit on delete")
        XCTAssertEqual(SecItemDelete(q.merging([kSecMatchLimit as String: 1]) { a, _ in a } as CFDictionary), errSecParam, "limit on delete")
        XCTAssertEqual(SecItemCopyMatching(q as CFDictionary, nil), errSecSuccess, "the item survived every bad call")
        // kSecMatchLimitAll is what delete does anyway (macOS code passes it): accepted, every match goes.
        XCTAssertEqual(addGeneric("b"), errSecSuccess)
        let all = [kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitAll] as CFDictionary
        XCTAssertEqual(SecItemDelete(all), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword] as CFDictionary, nil), errSecItemNotFound)
    }

    func testDataOfTheWrongKindIsNeverStoredAsACertificateKeyOrIdentity() {
        let expected: [(String, OSStatus)] = [
            (kSecClassCertificate as String, errSecDecode), (kSecClassKey as String, errSecDecode), (kSecClassIdentity as String, errSecParam)
        ]
        for (cls, status) in expected {
            XCTAssertEqual(SecItemAdd([kSecClass as String: cls, kSecValueData as String: Data("not a certificate".utf8)], nil), status, cls)
            XCTAssertEqual(SecItemCopyMatching([kSecClass as String: cls], nil), errSecItemNotFound, cls)
        }
    }

    func testOversizedSecretIsAllocationFailure() {
        let big = Data(count: KeychainStore.maximumSecretSize + 1)
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecValueData as String: big], nil), errSecAllocate)
        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        XCTAssertEqual(SecItemUpdate([kSecClass as String: kSecClassGenericPassword as String], [kSecValueData as String: big]), errSecAllocate)
        let hugeAccount = String(repeating: "a", count: KeychainStore.maximumAttributesSize + 1)
        XCTAssertEqual(addGeneric(hugeAccount), errSecAllocate)
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: hugeAccount], nil), errSecAllocate)
        XCTAssertEqual(SecItemUpdate([kSecClass as String: kSecClassGenericPassword as String], [kSecAttrLabel as String: hugeAccount]), errSecAllocate)
        // Large but allowed values round-trip.
        let longAccount = String(repeating: "b", count: 60_000)
        XCTAssertEqual(addGeneric(longAccount), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: longAccount], nil), errSecSuccess)
    }

    func testNoKeychainIsNotAvailable() {
        SecKeychain.setDefault(nil)
        // An empty keychains folder, not the user's: keychains on the user's own search list would
        // be searched and answer errSecItemNotFound.
        let savedData = getenv("XDG_DATA_HOME").map { String(cString: $0) }
        setenv("XDG_DATA_HOME", keychain.directory + "/nothing", 1)
        setenv("KEYCHAIN_PATH", keychain.directory + "/missing.keychain-db", 1)
        defer {
            unsetenv("KEYCHAIN_PATH")
            if let savedData { setenv("XDG_DATA_HOME", savedData, 1) } else { unsetenv("XDG_DATA_HOME") }
        }
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword as String], nil), errSecNotAvailable)
    }

    func testErrorMessages() {
        XCTAssertEqual(SecCopyErrorMessageString(errSecItemNotFound, nil), "The specified item could not be found in the keychain.")
        XCTAssertEqual(SecCopyErrorMessageString(errSecDuplicateItem, nil), "The specified item already exists in the keychain.")
        XCTAssertEqual(SecCopyErrorMessageString(errSecParam, nil), "One or more parameters passed to a function were not valid.")
        for code in [
            errSecSuccess, errSecUnimplemented, errSecAllocate, errSecNotAvailable, errSecAuthFailed,
            errSecInteractionNotAllowed, errSecDecode
        ] {
            XCTAssertFalse(SecCopyErrorMessageString(code, nil)!.hasPrefix("OSStatus"), "\(code)")
        }
    }

    func testUseKeychainTargetsAnotherFile() throws {
        let other = try SecKeychain.create(
            at: keychain.directory + "/keychains/other.keychain-db", password: "x",
            storage: .process, scrypt: .fastForTesting)
        XCTAssertEqual(
            SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "o", kSecUseKeychain as String: other], nil), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "o"], nil), errSecItemNotFound)
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "o", kSecUseKeychain as String: other], nil),
            errSecSuccess)
    }

    /// kSecAttrAccessible's documentation: a synchronizable item's class cannot end in
    /// ThisDeviceOnly. SecItemAdd and SecItemUpdate refuse it with errSecParam and change nothing.
    func testSynchronizableThisDeviceOnlyIsErrSecParam() {
        for accessible in [kSecAttrAccessibleWhenUnlockedThisDeviceOnly, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly] {
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "sync-tdo", kSecAttrSynchronizable as String: true,
                kSecAttrAccessible as String: accessible, kSecValueData as String: Data("x".utf8)
            ]
            XCTAssertEqual(SecItemAdd(item as CFDictionary, nil), errSecParam)
        }
        XCTAssertEqual(
            SecItemCopyMatching(
                [kSecClass as String: kSecClassGenericPassword, kSecAttrSynchronizable as String: kSecAttrSynchronizableAny] as CFDictionary, nil),
            errSecItemNotFound, "nothing was added")
        let local: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "local",
            kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly, kSecValueData as String: Data("x".utf8)
        ]
        XCTAssertEqual(SecItemAdd(local as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "local"] as CFDictionary,
                [kSecAttrSynchronizable as String: true] as CFDictionary), errSecParam)
        let synced: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "synced", kSecAttrSynchronizable as String: true,
            kSecValueData as String: Data("x".utf8)
        ]
        XCTAssertEqual(SecItemAdd(synced as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "synced", kSecAttrSynchronizable as String: true]
                    as CFDictionary, [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly] as CFDictionary), errSecParam)
    }
}
