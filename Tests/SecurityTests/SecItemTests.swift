import Security
import XCTest

final class SecItemTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    private func addGeneric(_ account: String, service: String = "svc", password: String = "pw", extra: [String: Any] = [:]) -> OSStatus {
        var item: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: account,
                                   kSecAttrService: service, kSecValueData: Data(password.utf8)]
        item.merge(extra) { _, b in b }
        return SecItemAdd(item, nil)
    }

    private func addInternet(_ attributes: [String: Any], password: String = "pw") -> OSStatus {
        var item: [String: Any] = [kSecClass: kSecClassInternetPassword, kSecValueData: Data(password.utf8)]
        item.merge(attributes) { _, b in b }
        return SecItemAdd(item, nil)
    }

    private func copy(_ query: [String: Any]) -> (OSStatus, AnyObject?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query, &result)
        return (status, result)
    }

    // MARK: Uniqueness

    func testGenericPasswordUniquenessIsAccountServiceGroupSync() {
        XCTAssertEqual(addGeneric("alice"), errSecSuccess)
        XCTAssertEqual(addGeneric("alice"), errSecDuplicateItem)
        XCTAssertEqual(addGeneric("alice", password: "other", extra: [kSecAttrLabel: "different label"]), errSecDuplicateItem)
        XCTAssertEqual(addGeneric("alice", extra: [kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock]), errSecDuplicateItem,
                       "protection is not part of the primary key")
        XCTAssertEqual(addGeneric("bob"), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", service: "svc2"), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", extra: [kSecAttrAccessGroup: "group.b"]), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", extra: [kSecAttrSynchronizable: true]), errSecSuccess)
        XCTAssertEqual(addGeneric("alice", extra: [kSecAttrSynchronizable: true]), errSecDuplicateItem)
    }

    func testMissingAttributesCountAsEmpty() {
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecValueData: Data("a".utf8)], nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecValueData: Data("b".utf8)], nil), errSecDuplicateItem)
        XCTAssertEqual(addGeneric("", service: ""), errSecDuplicateItem)
        XCTAssertEqual(addInternet([kSecAttrServer: "h"]), errSecSuccess)
        XCTAssertEqual(addInternet([kSecAttrServer: "h", kSecAttrPort: 0, kSecAttrPath: ""]), errSecDuplicateItem)
    }

    func testInternetPasswordUniquenessCoversEveryKeyAttribute() {
        let base: [String: Any] = [kSecAttrServer: "example.com", kSecAttrAccount: "alice", kSecAttrProtocol: kSecAttrProtocolHTTPS]
        XCTAssertEqual(addInternet(base), errSecSuccess)
        XCTAssertEqual(addInternet(base), errSecDuplicateItem)
        let variations: [(String, Any)] = [
            (kSecAttrPort, 8443), (kSecAttrPath, "/repo.git"), (kSecAttrProtocol, kSecAttrProtocolHTTP),
            (kSecAttrSecurityDomain, "realm"), (kSecAttrAuthenticationType, kSecAttrAuthenticationTypeHTTPBasic),
            (kSecAttrAccount, "bob"), (kSecAttrAccessGroup, "g"),
        ]
        for (key, value) in variations {
            var item = base
            item[key] = value
            XCTAssertEqual(addInternet(item), errSecSuccess, key)
            XCTAssertEqual(addInternet(item), errSecDuplicateItem, key)
        }
        // Not part of the key: label and comment.
        var labelled = base
        labelled[kSecAttrLabel] = "x"
        labelled[kSecAttrComment] = "y"
        XCTAssertEqual(addInternet(labelled), errSecDuplicateItem)
    }

    func testUpdateIntoAnExistingKeyIsDuplicate() {
        XCTAssertEqual(addGeneric("alice"), errSecSuccess)
        XCTAssertEqual(addGeneric("bob"), errSecSuccess)
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "bob"],
                                     [kSecAttrAccount: "alice"]), errSecDuplicateItem)
        XCTAssertEqual(copy([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "bob"]).0, errSecSuccess, "nothing changed")
    }

    // MARK: Match limits and return types

    func testReturnTypeCombinations() throws {
        XCTAssertEqual(addGeneric("alice", password: "secret-a", extra: [kSecAttrLabel: "A"]), errSecSuccess)
        let q: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "alice"]

        // No return type: status only.
        var (status, result) = copy(q)
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertNil(result)
        XCTAssertEqual(SecItemCopyMatching(q, nil), errSecSuccess)

        (status, result) = copy(q.merging([kSecReturnData: true]) { a, _ in a })
        XCTAssertEqual(result as? Data, Data("secret-a".utf8))

        (status, result) = copy(q.merging([kSecReturnAttributes: true]) { a, _ in a })
        let attrs = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(attrs[kSecAttrLabel] as? String, "A")
        XCTAssertNil(attrs[kSecValueData], "attributes alone carry no secret")
        XCTAssertNotNil(attrs[kSecAttrCreationDate] as? Date)

        (status, result) = copy(q.merging([kSecReturnPersistentRef: true]) { a, _ in a })
        let persistent = try XCTUnwrap(result as? Data)

        (status, result) = copy(q.merging([kSecReturnRef: true]) { a, _ in a })
        XCTAssertTrue(result is SecKeychainItem)

        (status, result) = copy(q.merging([kSecReturnData: true, kSecReturnPersistentRef: true, kSecReturnRef: true]) { a, _ in a })
        let all = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(all[kSecValueData] as? Data, Data("secret-a".utf8))
        XCTAssertEqual(all[kSecValuePersistentRef] as? Data, persistent)
        XCTAssertTrue(all[kSecValueRef] is SecKeychainItem)
        XCTAssertNil(all[kSecAttrAccount], "attributes were not asked for")
    }

    func testMatchLimits() throws {
        for name in ["a", "b", "c"] { XCTAssertEqual(addGeneric(name), errSecSuccess) }
        let q: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecReturnAttributes: true]

        var (_, result) = copy(q)
        XCTAssertEqual((result as? [String: Any])?[kSecAttrAccount] as? String, "a", "default limit is one, oldest first")
        (_, result) = copy(q.merging([kSecMatchLimit: kSecMatchLimitOne]) { a, _ in a })
        XCTAssertTrue(result is NSDictionary)
        (_, result) = copy(q.merging([kSecMatchLimit: 1]) { a, _ in a })
        XCTAssertTrue(result is NSDictionary, "a numeric limit of one is a single result")
        (_, result) = copy(q.merging([kSecMatchLimit: 2]) { a, _ in a })
        XCTAssertEqual((result as? [[String: Any]])?.count, 2)
        (_, result) = copy(q.merging([kSecMatchLimit: kSecMatchLimitAll]) { a, _ in a })
        XCTAssertEqual((result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount] as? String }, ["a", "b", "c"])
        (_, result) = copy(q.merging([kSecMatchLimit: 50, kSecAttrAccount: "b"]) { a, _ in a })
        XCTAssertEqual((result as? [Any])?.count, 1, "a limit above one gives an array even for one match")

        var status: OSStatus
        (status, result) = copy([kSecClass: kSecClassGenericPassword, kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual((result as? [Data])?.count, 3)

        (status, result) = copy([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "zzz", kSecMatchLimit: kSecMatchLimitAll, kSecReturnData: true])
        XCTAssertEqual(status, errSecItemNotFound)
        XCTAssertNil(result, "no match gives nil, not an empty array")
    }

    func testUpdateAndDeleteActOnAllMatches() {
        for name in ["a", "b"] { XCTAssertEqual(addGeneric(name), errSecSuccess) }
        XCTAssertEqual(addGeneric("c", service: "other"), errSecSuccess)
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrService: "svc"], [kSecValueData: Data("new".utf8)]), errSecSuccess)
        let (_, result) = copy([kSecClass: kSecClassGenericPassword, kSecReturnData: true, kSecMatchLimit: kSecMatchLimitAll])
        XCTAssertEqual((result as? [Data])?.map { String(decoding: $0, as: UTF8.self) }, ["new", "new", "pw"])
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: "svc"]), errSecSuccess)
        XCTAssertEqual(copy([kSecClass: kSecClassGenericPassword, kSecAttrService: "svc"]).0, errSecItemNotFound)
        XCTAssertEqual(copy([kSecClass: kSecClassGenericPassword, kSecAttrService: "other"]).0, errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: "svc"]), errSecItemNotFound)
    }

    // MARK: Matching

    func testCaseInsensitiveMatching() {
        XCTAssertEqual(addInternet([kSecAttrServer: "Example.COM", kSecAttrAccount: "Alice"]), errSecSuccess)
        XCTAssertEqual(copy([kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com"]).0, errSecItemNotFound)
        XCTAssertEqual(copy([kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrAccount: "ALICE",
                             kSecMatchCaseInsensitive: true]).0, errSecSuccess)
        XCTAssertEqual(copy([kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com",
                             kSecMatchCaseInsensitive: false]).0, errSecItemNotFound)
    }

    func testSynchronizableFilter() {
        XCTAssertEqual(addGeneric("local"), errSecSuccess)
        XCTAssertEqual(addGeneric("synced", extra: [kSecAttrSynchronizable: true]), errSecSuccess)
        func accounts(_ extra: [String: Any]) -> [String] {
            let (_, r) = copy([kSecClass: kSecClassGenericPassword, kSecReturnAttributes: true,
                               kSecMatchLimit: kSecMatchLimitAll].merging(extra) { _, b in b })
            return ((r as? [[String: Any]]) ?? []).compactMap { $0[kSecAttrAccount] as? String }
        }
        XCTAssertEqual(accounts([:]), ["local"], "absent means not synchronizable")
        XCTAssertEqual(accounts([kSecAttrSynchronizable: true]), ["synced"])
        XCTAssertEqual(accounts([kSecAttrSynchronizable: kCFBooleanFalse!]), ["local"])
        XCTAssertEqual(accounts([kSecAttrSynchronizable: kSecAttrSynchronizableAny]), ["local", "synced"])
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassGenericPassword]), errSecSuccess)
        XCTAssertEqual(accounts([kSecAttrSynchronizable: kSecAttrSynchronizableAny]), ["synced"], "delete without sync spares synced items")
    }

    func testAccessGroups() {
        XCTAssertEqual(addGeneric("a", extra: [kSecAttrAccessGroup: "team.one"]), errSecSuccess)
        XCTAssertEqual(addGeneric("b", extra: [kSecAttrAccessGroup: "team.two"]), errSecSuccess)
        let (_, r) = copy([kSecClass: kSecClassGenericPassword, kSecAttrAccessGroup: "team.two", kSecReturnAttributes: true])
        XCTAssertEqual((r as? [String: Any])?[kSecAttrAccount] as? String, "b")
        let (_, all) = copy([kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true])
        XCTAssertEqual((all as? [Any])?.count, 2, "no group in the query searches all groups")
    }

    func testPersistentReferencesAndItemLists() throws {
        var added: CFTypeRef?
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecValueData: Data("1".utf8),
                                   kSecReturnPersistentRef: true], &added), errSecSuccess)
        let refA = try XCTUnwrap(added as? Data)
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "b", kSecValueData: Data("2".utf8),
                                   kSecReturnPersistentRef: true], &added), errSecSuccess)
        let refB = try XCTUnwrap(added as? Data)
        XCTAssertNotEqual(refA, refB)

        var (status, result) = copy([kSecClass: kSecClassGenericPassword, kSecValuePersistentRef: refB, kSecReturnData: true])
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(result as? Data, Data("2".utf8))

        (status, result) = copy([kSecClass: kSecClassGenericPassword, kSecMatchItemList: [refA, refB],
                                 kSecMatchLimit: kSecMatchLimitAll, kSecReturnData: true])
        XCTAssertEqual((result as? [Data])?.count, 2)

        // A reference from kSecReturnRef works in kSecValueRef and kSecMatchItemList too.
        (status, result) = copy([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecReturnRef: true])
        let ref = try XCTUnwrap(result as? SecKeychainItem)
        (status, result) = copy([kSecClass: kSecClassGenericPassword, kSecValueRef: ref, kSecReturnData: true])
        XCTAssertEqual(result as? Data, Data("1".utf8))

        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassGenericPassword, kSecMatchItemList: [refA]]), errSecSuccess)
        XCTAssertEqual(copy([kSecClass: kSecClassGenericPassword, kSecValuePersistentRef: refA]).0, errSecItemNotFound)
        XCTAssertEqual(copy([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "b"]).0, errSecSuccess)
        // A deleted item's reference never names a later item.
        XCTAssertEqual(addGeneric("c"), errSecSuccess)
        XCTAssertEqual(copy([kSecClass: kSecClassGenericPassword, kSecValuePersistentRef: refA]).0, errSecItemNotFound)
        // References are per class.
        XCTAssertEqual(copy([kSecClass: kSecClassInternetPassword, kSecValuePersistentRef: refB]).0, errSecItemNotFound)
    }

    func testCreationAndModificationDates() throws {
        let before = Date()
        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        func dates() -> (Date, Date)? {
            let (_, r) = copy([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecReturnAttributes: true])
            guard let d = r as? [String: Any], let c = d[kSecAttrCreationDate] as? Date, let m = d[kSecAttrModificationDate] as? Date else { return nil }
            return (c, m)
        }
        let (created, modified) = try XCTUnwrap(dates())
        XCTAssertEqual(created, modified)
        XCTAssertGreaterThanOrEqual(created.timeIntervalSince1970, before.timeIntervalSince1970 - 1)
        usleep(20_000)
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"], [kSecAttrLabel: "new"]), errSecSuccess)
        let (created2, modified2) = try XCTUnwrap(dates())
        XCTAssertEqual(created2, created, "creation date is kept")
        XCTAssertGreaterThan(modified2, modified)
    }

    func testDefaultAccessibilityIsWhenUnlocked() {
        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        let (_, r) = copy([kSecClass: kSecClassGenericPassword, kSecReturnAttributes: true])
        XCTAssertEqual((r as? [String: Any])?[kSecAttrAccessible] as? String, kSecAttrAccessibleWhenUnlocked)
    }

    func testUpdateChangesProtectionAndKeepsSecret() {
        XCTAssertEqual(addGeneric("a", password: "keep-me"), errSecSuccess)
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassGenericPassword], [kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock]), errSecSuccess)
        let (_, r) = copy([kSecClass: kSecClassGenericPassword, kSecReturnAttributes: true, kSecReturnData: true])
        let d = r as? [String: Any]
        XCTAssertEqual(d?[kSecAttrAccessible] as? String, "ck")
        XCTAssertEqual(d?[kSecValueData] as? Data, Data("keep-me".utf8))
    }

    // MARK: Malformed input: a status code, never a crash

    func testParameterErrors() {
        var result: CFTypeRef?
        let cases: [(String, [String: Any])] = [
            ("no class", [kSecAttrAccount: "a"]),
            ("unknown class", [kSecClass: "nope"]),
            ("class of the wrong type", [kSecClass: 42]),
            ("account of the wrong type", [kSecClass: kSecClassGenericPassword, kSecAttrAccount: 42]),
            ("port as a string", [kSecClass: kSecClassInternetPassword, kSecAttrPort: "eighty"]),
            ("attribute of another class", [kSecClass: kSecClassGenericPassword, kSecAttrServer: "x"]),
            ("unknown attribute", [kSecClass: kSecClassGenericPassword, "zzzz": "x"]),
            ("unknown accessibility", [kSecClass: kSecClassGenericPassword, kSecAttrAccessible: "zz"]),
            ("limit zero", [kSecClass: kSecClassGenericPassword, kSecMatchLimit: 0]),
            ("negative limit", [kSecClass: kSecClassGenericPassword, kSecMatchLimit: -3]),
            ("limit as garbage", [kSecClass: kSecClassGenericPassword, kSecMatchLimit: "lots"]),
            ("return flag as a string", [kSecClass: kSecClassGenericPassword, kSecReturnData: "yes"]),
            ("value data as a string", [kSecClass: kSecClassGenericPassword, kSecValueData: "pw"]),
            ("bad persistent reference", [kSecClass: kSecClassGenericPassword, kSecValuePersistentRef: Data([1, 2, 3])]),
            ("empty item list", [kSecClass: kSecClassGenericPassword, kSecMatchItemList: [Any]()]),
            ("synchronizable as garbage", [kSecClass: kSecClassGenericPassword, kSecAttrSynchronizable: "maybe"]),
        ]
        for (name, query) in cases {
            XCTAssertEqual(SecItemCopyMatching(query, &result), errSecParam, name)
            XCTAssertNil(result, name)
        }
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: Date()], nil), errSecParam)
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrSynchronizable: kSecAttrSynchronizableAny], nil), errSecParam)
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecMatchLimit: 2], nil), errSecParam)

        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        let q: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"]
        XCTAssertEqual(SecItemCopyMatching(q.merging([kSecReturnData: true]) { a, _ in a }, nil), errSecParam, "return type with no result pointer")
        XCTAssertEqual(SecItemUpdate(q.merging([kSecReturnData: true]) { a, _ in a }, [kSecAttrLabel: "x"]), errSecParam, "kSecReturn* on update")
        XCTAssertEqual(SecItemUpdate(q, [kSecClass: kSecClassInternetPassword]), errSecParam, "class in the changes")
        XCTAssertEqual(SecItemUpdate(q, [kSecMatchLimit: 1]), errSecParam, "search key in the changes")
        XCTAssertEqual(SecItemUpdate(q, [kSecAttrPort: 1]), errSecParam, "attribute of another class in the changes")
        XCTAssertEqual(SecItemUpdate(q, [:]), errSecParam, "nothing to change")
        XCTAssertEqual(SecItemDelete(q.merging([kSecMatchLimit: kSecMatchLimitAll]) { a, _ in a }), errSecParam, "limit on delete")
        XCTAssertEqual(SecItemDelete(q.merging([kSecMatchLimit: 1]) { a, _ in a }), errSecParam, "limit on delete")
        XCTAssertEqual(SecItemCopyMatching(q, nil), errSecSuccess, "the item survived every bad call")
    }

    func testUnimplementedAccessControl() {
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccessControl: "biometry"], nil), errSecUnimplemented)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword], nil), errSecItemNotFound, "nothing was added")
    }

    func testDataOfTheWrongKindIsNeverStoredAsACertificateKeyOrIdentity() {
        let expected: [(String, OSStatus)] = [(kSecClassCertificate, errSecDecode), (kSecClassKey, errSecDecode), (kSecClassIdentity, errSecParam)]
        for (cls, status) in expected {
            XCTAssertEqual(SecItemAdd([kSecClass: cls, kSecValueData: Data("not a certificate".utf8)], nil), status, cls)
            XCTAssertEqual(SecItemCopyMatching([kSecClass: cls], nil), errSecItemNotFound, cls)
        }
    }

    func testOversizedSecretIsAllocationFailure() {
        let big = Data(count: KeychainStore.maximumSecretSize + 1)
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecValueData: big], nil), errSecAllocate)
        XCTAssertEqual(addGeneric("a"), errSecSuccess)
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassGenericPassword], [kSecValueData: big]), errSecAllocate)
        let hugeAccount = String(repeating: "a", count: KeychainStore.maximumAttributesSize + 1)
        XCTAssertEqual(addGeneric(hugeAccount), errSecAllocate)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccount: hugeAccount], nil), errSecAllocate)
        XCTAssertEqual(SecItemUpdate([kSecClass: kSecClassGenericPassword], [kSecAttrLabel: hugeAccount]), errSecAllocate)
        // Large but allowed values round-trip.
        let longAccount = String(repeating: "b", count: 60_000)
        XCTAssertEqual(addGeneric(longAccount), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccount: longAccount], nil), errSecSuccess)
    }

    func testNoKeychainIsNotAvailable() {
        SecKeychain.setDefault(nil)
        setenv("KEYCHAIN_PATH", keychain.directory + "/missing.keychain-db", 1)
        defer { unsetenv("KEYCHAIN_PATH") }
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword], nil), errSecNotAvailable)
    }

    func testErrorMessages() {
        XCTAssertEqual(SecCopyErrorMessageString(errSecItemNotFound, nil), "The specified item could not be found in the keychain.")
        XCTAssertEqual(SecCopyErrorMessageString(errSecDuplicateItem, nil), "The specified item already exists in the keychain.")
        XCTAssertEqual(SecCopyErrorMessageString(errSecParam, nil), "One or more parameters passed to a function were not valid.")
        for code in [errSecSuccess, errSecUnimplemented, errSecAllocate, errSecNotAvailable, errSecAuthFailed,
                     errSecInteractionNotAllowed, errSecDecode] {
            XCTAssertFalse(SecCopyErrorMessageString(code, nil)!.hasPrefix("OSStatus"), "\(code)")
        }
    }

    func testUseKeychainTargetsAnotherFile() throws {
        let other = try SecKeychain.create(at: keychain.directory + "/keychains/other.keychain-db", password: "x",
                                           storage: .process, scrypt: .fastForTesting)
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "o", kSecUseKeychain: other], nil), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "o"], nil), errSecItemNotFound)
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "o", kSecUseKeychain: other], nil), errSecSuccess)
    }
}
