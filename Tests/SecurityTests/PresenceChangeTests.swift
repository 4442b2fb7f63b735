import Foundation
@testable import KeychainCore
@testable import LocalAuthentication
import Security
import XCTest

/// What the presence checks guard besides reading: changing and deleting an item sealed under an
/// application password, identities added with access control, a companion-only item, and a
/// cancel in a search over several keychains (each found by an attacker's review of issue 17).
final class PresenceChangeTests: OpenSSLTestCase {
    var authorizer: ScriptedAuthorizer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        authorizer = ScriptedAuthorizer()
        keychain.keychain.store.presenceAuthorizer = authorizer
        // No pinentry: a password can only come from a context's credential.
        setenv("KEYCHAIN_PINENTRY", "/nonexistent/pinentry", 1)
    }

    override func tearDown() {
        unsetenv("KEYCHAIN_PINENTRY")
        super.tearDown()
    }

    private func context(password: String) -> LAContext {
        let context = LAContext()
        context.authorizer = authorizer
        context.setCredential(Data(password.utf8), type: .applicationPassword)
        return context
    }

    private func addSealed(_ secret: String, password: String) {
        let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil)!
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "sealed", kSecAttrAccessControl: access,
                    kSecUseAuthenticationContext: context(password: password),
                    kSecValueData: Data(secret.utf8)
                ] as CFDictionary, nil), errSecSuccess)
    }

    private func read(password: String) -> (OSStatus, String?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "sealed", kSecReturnData: true,
                kSecUseAuthenticationContext: context(password: password)
            ] as CFDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    func testDeletingASealedItemTakesItsPassword() {
        addSealed("owner's", password: "owner-pass")
        let query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "sealed"]
        var failing = query
        failing[kSecUseAuthenticationUI] = kSecUseAuthenticationUIFail
        XCTAssertEqual(SecItemDelete(failing as CFDictionary), errSecInteractionNotAllowed, "no password, asking not allowed")
        XCTAssertEqual(SecItemDelete(query as CFDictionary), errSecInteractionNotAllowed, "no password and no pinentry to ask")
        var wrong = query
        wrong[kSecUseAuthenticationContext] = context(password: "attacker")
        XCTAssertEqual(SecItemDelete(wrong as CFDictionary), errSecAuthFailed)
        XCTAssertEqual(read(password: "owner-pass").1, "owner's", "still there after every refusal")
        var right = query
        right[kSecUseAuthenticationContext] = context(password: "owner-pass")
        XCTAssertEqual(SecItemDelete(right as CFDictionary), errSecSuccess)
        XCTAssertEqual(read(password: "owner-pass").0, errSecItemNotFound)
        XCTAssertEqual(authorizer.asked, 0, "an application password is not polkit's to ask")
    }

    func testChangingASealedItemTakesItsPassword() {
        addSealed("owner's", password: "owner-pass")
        let query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "sealed"]
        for (password, attributes) in [("attacker", [kSecValueData: Data("evil".utf8)]), ("attacker", [kSecAttrLabel: "renamed"])]
            as [(String, [CFString: Any])]
        {
            var wrong = query
            wrong[kSecUseAuthenticationContext] = context(password: password)
            XCTAssertEqual(SecItemUpdate(wrong as CFDictionary, attributes as CFDictionary), errSecAuthFailed)
        }
        var failing = query
        failing[kSecUseAuthenticationUI] = kSecUseAuthenticationUIFail
        XCTAssertEqual(SecItemUpdate(failing as CFDictionary, [kSecValueData: Data("evil".utf8)] as CFDictionary), errSecInteractionNotAllowed)
        XCTAssertEqual(read(password: "owner-pass").1, "owner's")
        XCTAssertEqual(read(password: "attacker").0, errSecAuthFailed)
        var right = query
        right[kSecUseAuthenticationContext] = context(password: "owner-pass")
        XCTAssertEqual(SecItemUpdate(right as CFDictionary, [kSecValueData: Data("new".utf8)] as CFDictionary), errSecSuccess)
        XCTAssertEqual(read(password: "owner-pass").1, "new")
    }

    func testReplacingASealedItemTakesItsPassword() throws {
        addSealed("owner's", password: "owner-pass")
        let store = keychain.keychain.store
        var query = Query(itemClass: .genericPassword)
        query.attributes[AttributeKey.account] = .string("sealed")
        let replacement = Item(itemClass: .genericPassword, attributes: [AttributeKey.account: .string("sealed")], secret: Array("evil".utf8))
        XCTAssertThrowsError(try store.addOrUpdate(replacement, matching: query, presence: PresenceOptions(interaction: .fail))) {
            XCTAssertEqual(($0 as? KeychainCore.KeychainError)?.code, .interactionNotAllowed)
        }
        XCTAssertEqual(read(password: "owner-pass").1, "owner's")
    }

    func testIdentitiesPassTheChecksOfASingleAdd() throws {
        var items: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(
                try fixtures.data("alice.p12") as CFData,
                [kSecImportExportPassphrase as String: OpenSSLFixtures.p12Passphrase] as CFDictionary, &items), errSecSuccess)
        let identity = try XCTUnwrap((items as? [[String: Any]])?.first?[kSecImportItemIdentity as String]) as! SecIdentity
        authorizer.fingers = false
        for (flags, status) in [
            (SecAccessControlCreateFlags.companion, errSecNotAvailable), (.biometryAny, errSecNotAvailable),
            (.applicationPassword, errSecUnimplemented)
        ] {
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, nil)!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecValueRef: identity, kSecAttrAccessControl: access,
                        kSecUseAuthenticationContext: context(password: "p")
                    ] as CFDictionary, nil), status, "\(flags)")
            XCTAssertEqual(try keychain.keychain.store.count(), 0, "nothing stored for \(flags)")
        }
        let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
        XCTAssertEqual(SecItemAdd([kSecValueRef: identity, kSecAttrAccessControl: access] as CFDictionary, nil), errSecSuccess)
        authorizer.answer = .canceled
        var key: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching([kSecClass: kSecClassKey, kSecReturnData: true] as CFDictionary, &key), errSecUserCanceled)
        XCTAssertNil(key)
    }

    func testDeletingAnIdentityTakesItsKeysPassword() throws {
        var items: CFArray?
        XCTAssertEqual(
            SecPKCS12Import(
                try fixtures.data("alice.p12") as CFData,
                [kSecImportExportPassphrase as String: OpenSSLFixtures.p12Passphrase] as CFDictionary, &items), errSecSuccess)
        let identity = try XCTUnwrap((items as? [[String: Any]])?.first?[kSecImportItemIdentity as String]) as! SecIdentity
        var key: SecKey?, certificate: SecCertificate?
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &key), errSecSuccess)
        XCTAssertEqual(SecIdentityCopyCertificate(identity, &certificate), errSecSuccess)
        // The key sealed alone, the certificate plain: they pair into an identity when found.
        let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil)!
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassKey, kSecValueRef: key!, kSecAttrAccessControl: access,
                    kSecUseAuthenticationContext: context(password: "owner-pass")
                ] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecClass: kSecClassCertificate, kSecValueRef: certificate!] as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassIdentity, kSecUseAuthenticationUI: kSecUseAuthenticationUIFail] as CFDictionary),
            errSecInteractionNotAllowed)
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassIdentity, kSecUseAuthenticationContext: context(password: "attacker")] as CFDictionary),
            errSecAuthFailed)
        XCTAssertEqual(try keychain.keychain.store.count(), 2, "both halves kept")
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassIdentity, kSecUseAuthenticationContext: context(password: "owner-pass")] as CFDictionary),
            errSecSuccess)
        XCTAssertEqual(try keychain.keychain.store.count(), 0)
    }

    func testACompanionOnlyItemIsServedToNobody() throws {
        // Stored as an older version or another writer could have: the add-time check bypassed.
        let planted = Item(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.account: .string("companion"),
                AttributeKey.accessControl: .int(Int64(AccessConditions.companion.rawValue))
            ],
            secret: Array("s".utf8))
        try keychain.keychain.store.add([planted])
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "companion",
                    kSecReturnData: true
                ] as CFDictionary, &result), errSecNotAvailable)
        XCTAssertNil(result)
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "companion",
                    kSecReturnAttributes: true
                ] as CFDictionary, &result), errSecSuccess, "attributes ask nothing")
        // Unreadable by anyone, but not undeletable: it does not block a delete of everything.
        XCTAssertEqual(
            SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "plain", kSecValueData: Data("p".utf8)] as CFDictionary, nil),
            errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassGenericPassword] as CFDictionary), errSecSuccess)
        XCTAssertEqual(try keychain.keychain.store.count(), 0)
    }
}

/// A cancel ends a search over the search list: the next keychain neither asks again nor answers
/// in the cancelled item's place.
final class PresenceSearchListTests: XCTestCase {
    func testACancelEndsTheSearch() throws {
        try withTwoScratchKeychains("presence-list") { first, second in
            let authorizer = ScriptedAuthorizer()
            let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil)!
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrAccount: "both", kSecAttrAccessControl: access,
                        kSecValueData: Data("guarded".utf8), kSecUseKeychain: first
                    ] as CFDictionary, nil), errSecSuccess)
            XCTAssertEqual(
                SecItemAdd(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrAccount: "both",
                        kSecValueData: Data("open".utf8), kSecUseKeychain: second
                    ] as CFDictionary, nil), errSecSuccess)
            try SearchList.set([first.path, second.path])
            for listed in try SecKeychain.searchList() { listed.store.presenceAuthorizer = authorizer }
            authorizer.answer = .canceled
            var result: CFTypeRef?
            XCTAssertEqual(
                SecItemCopyMatching(
                    [
                        kSecClass: kSecClassGenericPassword, kSecAttrAccount: "both",
                        kSecReturnData: true
                    ] as CFDictionary, &result), errSecUserCanceled)
            XCTAssertNil(result, "the second keychain's item does not answer in its place")
            XCTAssertEqual(authorizer.asked, 1)
        }
    }
}
