import KeychainCore
import LocalAuthentication
import Security
import XCTest

/// kSecAttrAccessControl and kSecUseAuthenticationUI, as Apple's SecAccessControl.m and SecItem.m define them.
final class AccessControlTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    private func control(_ protection: CFString, _ flags: SecAccessControlCreateFlags) -> SecAccessControl? {
        SecAccessControlCreateWithFlags(kCFAllocatorDefault, protection, flags, nil)
    }

    private func creationError(_ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags) -> CFError? {
        var error: Unmanaged<CFError>?
        let created = SecAccessControlCreateWithFlags(nil, protection, flags, &error)
        XCTAssertNil(created)
        return error?.takeRetainedValue()
    }

    func testEveryFlagHasApplesValue() {
        let expected: [(SecAccessControlCreateFlags, CFOptionFlags)] = [
            (.userPresence, 1), (.biometryAny, 2), (.biometryCurrentSet, 8), (.devicePasscode, 16), (.companion, 32),
            (.or, 1 << 14), (.and, 1 << 15), (.privateKeyUsage, 1 << 30), (.applicationPassword, 1 << 31)
        ]
        for (flag, value) in expected { XCTAssertEqual(flag.rawValue, value) }
    }

    func testCreationFollowsApplesRules() throws {
        for flags: SecAccessControlCreateFlags in [
            [], .userPresence, .biometryCurrentSet, [.biometryAny, .devicePasscode, .or],
            [.biometryAny, .devicePasscode, .and, .applicationPassword], .applicationPassword,
            [.userPresence, .applicationPassword, .privateKeyUsage], .privateKeyUsage
        ] {
            XCTAssertNotNil(control(kSecAttrAccessibleWhenUnlocked, flags), "\(flags)")
        }
        let refused: [(CFTypeRef, SecAccessControlCreateFlags, String)] = [
            ("bogus" as NSString, [], "SecAccessControl: invalid protection"),
            (kCFBooleanTrue, [], "SecAccessControl: invalid protection"),
            (kSecAttrAccessibleWhenUnlocked, [.or, .and], "only one logical operation can be set"),
            (kSecAttrAccessibleWhenUnlocked, [.biometryAny, .biometryCurrentSet], "only one bio constraint can be set"),
            (kSecAttrAccessibleWhenUnlocked, [.userPresence, .biometryAny], "kSecAccessControlUserPresence can be combined only")
        ]
        for (protection, flags, message) in refused {
            let error = try XCTUnwrap(creationError(protection, flags))
            XCTAssertEqual(CFErrorGetDomain(error) as String, "NSOSStatusErrorDomain")
            XCTAssertEqual(CFErrorGetCode(error), Int(errSecParam))
            let info = CFErrorCopyUserInfo(error) as? [String: Any]
            XCTAssertTrue((info?[NSLocalizedDescriptionKey] as? String)?.hasPrefix(message) == true, "\(String(describing: info))")
            XCTAssertTrue((error as Error).localizedDescription.hasPrefix(message))
        }
    }

    func testTypeIDAndEquality() throws {
        let a = try XCTUnwrap(control(kSecAttrAccessibleAfterFirstUnlock, .privateKeyUsage))
        XCTAssertEqual(CFGetTypeID(a), SecAccessControlGetTypeID())
        XCTAssertNotEqual(CFGetTypeID(a), CFDictionaryGetTypeID())
        XCTAssertTrue(CFEqual(a, control(kSecAttrAccessibleAfterFirstUnlock, .privateKeyUsage)))
        XCTAssertFalse(CFEqual(a, control(kSecAttrAccessibleWhenUnlocked, .privateKeyUsage)))
        XCTAssertEqual(SecAccessControlGetProtection(a) as? String, kSecAttrAccessibleAfterFirstUnlock as String)
    }

    /// The item lands in the class the access control names and comes back with it.
    func testStoredInItsProtectionClassAndReturned() throws {
        let access = try XCTUnwrap(control(kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, [.privateKeyUsage, .or]))
        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "acl",
            kSecAttrAccessControl as String: access, kSecValueData as String: Data("s".utf8)
        ]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)

        let stored = try keychain.keychain.store.find(Query(itemClass: .genericPassword, attributes: [AttributeKey.service: .string("acl")]))
        XCTAssertEqual(stored.first?.protection, .afterFirstUnlockThisDeviceOnly)

        var result: CFTypeRef?
        let query = [kSecClass: kSecClassGenericPassword, kSecAttrService: "acl", kSecReturnAttributes: true] as CFDictionary
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        let attributes = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(attributes[kSecAttrAccessible as String] as? String, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String)
        let returned = try XCTUnwrap(attributes[kSecAttrAccessControl as String] as? SecAccessControl)
        XCTAssertTrue(CFEqual(returned, access))
        XCTAssertEqual(CFGetTypeID(returned), SecAccessControlGetTypeID())
    }

    func testQueryByAccessControl() throws {
        let plain = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, []))
        let keyUsage = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, .privateKeyUsage))
        for (account, access) in [("plain", plain), ("usage", keyUsage)] {
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrAccount: account,
                        kSecAttrAccessControl: access
                    ] as CFDictionary, nil), errSecSuccess)
        }
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccessControl: keyUsage,
                    kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll
                ] as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String }, ["usage"])
        let other = try XCTUnwrap(control(kSecAttrAccessibleAfterFirstUnlock, .privateKeyUsage))
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccessControl: other] as CFDictionary, nil),
            errSecItemNotFound)
    }

    func testWhatTheAccessControlCannotBeGiven() throws {
        let access = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, []))
        XCTAssertEqual(
            SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccessControl: "biometry"] as CFDictionary, nil), errSecParam,
            "not a SecAccessControl")
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccessControl: access,
                    kSecAttrSynchronizable: true
                ] as CFDictionary, nil), errSecParam, "synchronizable")
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccessControl: access,
                    kSecAttrAccessible: kSecAttrAccessibleAlways
                ] as CFDictionary, nil), errSecParam, "two protections")
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword] as CFDictionary, nil), errSecItemNotFound, "nothing was added")
    }

    /// Conditions this machine can meet are accepted; biometry without an enrolled finger and a
    /// companion device are errSecNotAvailable, as on a device without them; nothing is added then.
    func testConditionsThisMachineCannotMeetAreRefusedAtAdd() throws {
        let authorizer = ScriptedAuthorizer()
        keychain.keychain.store.presenceAuthorizer = authorizer
        for flags: SecAccessControlCreateFlags in [.biometryAny, .biometryCurrentSet, .companion, [.biometryAny, .and, .devicePasscode]] {
            let access = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, flags))
            XCTAssertEqual(
                SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccessControl: access] as CFDictionary, nil),
                errSecNotAvailable, "\(flags)")
            XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassGenericPassword] as CFDictionary, nil), errSecItemNotFound)
        }
        let accepted: [SecAccessControlCreateFlags] = [
            .userPresence, .devicePasscode, [.biometryAny, .or, .devicePasscode],
            [.privateKeyUsage, .devicePasscode], .privateKeyUsage, .or, .and
        ]
        for (i, flags) in accepted.enumerated() {
            let access = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, flags))
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrAccount: "\(i)",
                        kSecAttrAccessControl: access
                    ] as CFDictionary, nil), errSecSuccess, "\(flags)")
        }
        authorizer.fingers = true
        let finger = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, .biometryCurrentSet))
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "finger",
                    kSecAttrAccessControl: finger
                ] as CFDictionary, nil), errSecSuccess, "with a finger enrolled")
        XCTAssertEqual(authorizer.asked, 0, "adding asks nobody")
        authorizer.fingers = false
        XCTAssertEqual(
            SecItemUpdate(
                [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "0"] as CFDictionary,
                [kSecAttrAccessControl: finger] as CFDictionary), errSecNotAvailable, "nor given by update")
    }

    func testAuthenticationUIValues() {
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"] as CFDictionary, nil), errSecSuccess)
        let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"]
        for ui in [kSecUseAuthenticationUIAllow, kSecUseAuthenticationUIFail, kSecUseAuthenticationUISkip] {
            var query = base
            query[kSecUseAuthenticationUI as String] = ui
            query[kSecUseOperationPrompt as String] = "Read the password"
            query[kSecUseAuthenticationContext as String] = LAContext()
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, nil), errSecSuccess, ui as String)
        }
        var notAContext = base
        notAContext[kSecUseAuthenticationContext as String] = NSObject()
        XCTAssertEqual(SecItemCopyMatching(notAContext as CFDictionary, nil), errSecParam, "kSecUseAuthenticationContext is an LAContext")
        var bogus = base
        bogus[kSecUseAuthenticationUI as String] = "u_AuthUIX"
        XCTAssertEqual(SecItemCopyMatching(bogus as CFDictionary, nil), errSecParam)
        var skip = base
        skip[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUISkip
        XCTAssertEqual(SecItemDelete(skip as CFDictionary), errSecParam, "Skip is for SecItemCopyMatching only")
        XCTAssertEqual(SecItemUpdate(skip as CFDictionary, [kSecAttrLabel: "l"] as CFDictionary), errSecParam)
        XCTAssertEqual(SecItemAdd(skip as CFDictionary, nil), errSecParam)
        var noUI = base
        noUI["u_NoAuthUI"] = "yes"
        XCTAssertEqual(SecItemCopyMatching(noUI as CFDictionary, nil), errSecParam, "kSecUseNoAuthenticationUI is a boolean")
        var allow = base
        allow[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIAllow
        XCTAssertEqual(SecItemDelete(allow as CFDictionary), errSecSuccess)
    }

    /// An item that needs the user's presence: Skip leaves it out (before the limit is applied),
    /// Fail is errSecInteractionNotAllowed, Allow asks once per call; attributes alone never ask.
    func testAllowFailSkipWithAnItemThatNeedsAPerson() throws {
        let authorizer = ScriptedAuthorizer()
        keychain.keychain.store.presenceAuthorizer = authorizer
        let presence = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, .userPresence))
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "s", kSecAttrAccount: "guarded",
                    kSecAttrAccessControl: presence, kSecValueData: Data("secret".utf8)
                ] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: "s", kSecAttrAccount: "open",
                    kSecValueData: Data("open".utf8)
                ] as CFDictionary, nil), errSecSuccess)

        func read(_ ui: CFString?, noUI: Bool = false, data: Bool = true, limit: CFString = kSecMatchLimitAll) -> (OSStatus, [String]) {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
                kSecReturnAttributes as String: true, kSecMatchLimit as String: limit,
                kSecUseOperationPrompt as String: "Read s"
            ]
            if data { query[kSecReturnData as String] = true }
            if let ui { query[kSecUseAuthenticationUI as String] = ui }
            if noUI { query["u_NoAuthUI"] = kCFBooleanTrue }
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &result)
            let list = (result as? [[String: Any]]) ?? (result as? [String: Any]).map { [$0] } ?? []
            return (status, list.compactMap { $0[kSecAttrAccount as String] as? String }.sorted())
        }
        XCTAssertEqual(read(kSecUseAuthenticationUISkip).0, errSecSuccess)
        XCTAssertEqual(read(kSecUseAuthenticationUISkip).1, ["open"], "Skip leaves the guarded item out")
        XCTAssertEqual(read(kSecUseAuthenticationUISkip, limit: kSecMatchLimitOne).1, ["open"], "before the limit")
        XCTAssertEqual(read(kSecUseAuthenticationUIFail).0, errSecInteractionNotAllowed)
        XCTAssertEqual(read(nil, noUI: true).0, errSecInteractionNotAllowed, "kSecUseNoAuthenticationUI means Fail")
        XCTAssertEqual(read(kSecUseAuthenticationUIFail, data: false).1, ["guarded", "open"], "attributes alone need no person")
        XCTAssertEqual(authorizer.asked, 0, "none of these asked")

        XCTAssertEqual(read(kSecUseAuthenticationUIAllow).1, ["guarded", "open"], "granted")
        XCTAssertEqual(authorizer.asked, 1, "once for the call")
        XCTAssertEqual(authorizer.reasons, ["Read s"], "kSecUseOperationPrompt is the reason given")
        XCTAssertEqual(read(nil).1, ["guarded", "open"], "Allow is the default")
        XCTAssertEqual(authorizer.asked, 2, "and each call asks again")
        for (answer, status) in [
            (PresenceAnswer.denied, errSecAuthFailed), (.canceled, errSecUserCanceled),
            (.unavailable("no agent"), errSecInteractionNotAllowed)
        ] {
            authorizer.answer = answer
            XCTAssertEqual(read(nil).0, status, "\(answer)")
        }
    }

    /// Changing or deleting such an item asks first; refused, it stays as it was.
    func testUpdateAndDeleteAskFirst() throws {
        let authorizer = ScriptedAuthorizer()
        keychain.keychain.store.presenceAuthorizer = authorizer
        let presence = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, .devicePasscode))
        let item: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrService: "s", kSecAttrAccount: "a"]
        XCTAssertEqual(SecItemAdd(item.merging([kSecAttrAccessControl: presence, kSecValueData: Data("v1".utf8)]) { $1 } as CFDictionary, nil), errSecSuccess)
        authorizer.answer = .canceled
        XCTAssertEqual(SecItemUpdate(item as CFDictionary, [kSecValueData: Data("v2".utf8)] as CFDictionary), errSecUserCanceled)
        XCTAssertEqual(SecItemDelete(item as CFDictionary), errSecUserCanceled)
        var fail = item
        fail[kSecUseAuthenticationUI] = kSecUseAuthenticationUIFail
        XCTAssertEqual(SecItemDelete(fail as CFDictionary), errSecInteractionNotAllowed)
        XCTAssertEqual(authorizer.asked, 2)
        authorizer.answer = .granted
        XCTAssertEqual(SecItemUpdate(item as CFDictionary, [kSecValueData: Data("v2".utf8)] as CFDictionary), errSecSuccess)
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(item.merging([kSecReturnData: true]) { $1 } as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("v2".utf8))
        XCTAssertEqual(SecItemDelete(item as CFDictionary), errSecSuccess)
        XCTAssertEqual(authorizer.asked, 5)
    }
}
