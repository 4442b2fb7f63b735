import Foundation
@testable import KeychainCore
@testable import LocalAuthentication
import Security
import XCTest

/// LAContext over a scripted authorizer, and the SecItem calls made through it
/// (kSecUseAuthenticationContext), as LocalAuthentication and SecItem.h describe them.
final class LocalAuthenticationTests: XCTestCase {
    var keychain: TestKeychain!
    var authorizer: ScriptedAuthorizer!

    override func setUpWithError() throws {
        keychain = try TestKeychain()
        authorizer = ScriptedAuthorizer()
        keychain.keychain.store.presenceAuthorizer = authorizer
    }
    override func tearDown() { keychain.tearDown() }

    private func context() -> LAContext {
        let context = LAContext()
        context.authorizer = authorizer
        return context
    }

    private func addGuarded(_ flags: SecAccessControlCreateFlags = .userPresence, context: LAContext? = nil) -> OSStatus {
        let access = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, flags, nil)!
        var attributes: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded",
            kSecAttrAccessControl: access, kSecValueData: Data("secret".utf8)
        ]
        if let context { attributes[kSecUseAuthenticationContext] = context }
        return SecItemAdd(attributes as CFDictionary, nil)
    }

    private func read(_ context: LAContext?) -> (OSStatus, String?) {
        var query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "guarded", kSecReturnData: true]
        if let context { query[kSecUseAuthenticationContext] = context }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    func testEvaluatePolicyMapsEachAnswerToItsLAError() throws {
        for (answer, code) in [
            (PresenceAnswer.denied, LAError.Code.authenticationFailed), (.canceled, .userCancel),
            (.unavailable("no agent"), .notInteractive)
        ] {
            authorizer.answer = answer
            XCTAssertThrowsError(try context().evaluate(.deviceOwnerAuthentication, reason: "r")) { error in
                XCTAssertEqual((error as? LAError)?.code, code)
                XCTAssertEqual((error as NSError).domain, LAErrorDomain)
                XCTAssertTrue(code ~= error, "catch LAError.\(code) matches")
            }
        }
        authorizer.answer = .granted
        XCTAssertNoThrow(try context().evaluate(.deviceOwnerAuthentication, reason: "Unlock notes"))
        XCTAssertEqual(authorizer.reasons.last, "Unlock notes", "localizedReason is the reason")
    }

    func testEvaluatePolicyReplyAndAsyncForms() async throws {
        let ctx = context()
        let replied = expectation(description: "reply")
        ctx.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "r") { ok, error in
            XCTAssertTrue(ok)
            XCTAssertNil(error)
            replied.fulfill()
        }
        await fulfillment(of: [replied], timeout: 10)
        authorizer.answer = .canceled
        do {
            _ = try await context().evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "r")
            XCTFail("a dismissed request throws")
        } catch LAError.userCancel {
        }
    }

    func testCanEvaluatePolicyAndBiometry() {
        var error: NSError?
        XCTAssertTrue(context().canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        XCTAssertNil(error)
        let ctx = context()
        XCTAssertFalse(ctx.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.biometryNotEnrolled.rawValue)
        XCTAssertEqual(ctx.biometryType, .none)
        XCTAssertThrowsError(try ctx.evaluate(.deviceOwnerAuthenticationWithBiometrics, reason: "r"))
        XCTAssertEqual(authorizer.asked, 0, "biometry without a finger asks nobody")
        authorizer.fingers = true
        XCTAssertTrue(ctx.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(ctx.biometryType, .touchID)
        XCTAssertFalse(ctx.canEvaluatePolicy(.deviceOwnerAuthenticationWithWatch, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.companionNotAvailable.rawValue)
    }

    /// What canEvaluatePolicy says of a machine without a way to ask comes from the authorizer.
    func testCanEvaluatePolicyAsksTheAuthorizerWhetherItCanAsk() {
        var error: NSError?
        authorizer.missing = "nothing to ask with"
        XCTAssertFalse(context().canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.passcodeNotSet.rawValue)
        XCTAssertEqual(error?.localizedDescription, "nothing to ask with")
        authorizer.biometryMissing = "no reader"
        XCTAssertFalse(context().canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
        XCTAssertEqual(error?.code, LAError.Code.biometryNotAvailable.rawValue)
        XCTAssertEqual(authorizer.asked, 0)
    }

    func testAnEvaluatedContextLetsSecItemGoOnUntilInvalidated() throws {
        XCTAssertEqual(addGuarded(), errSecSuccess)
        let ctx = context()
        try ctx.evaluate(.deviceOwnerAuthentication, reason: "r")
        XCTAssertEqual(read(ctx).1, "secret")
        XCTAssertEqual(read(ctx).1, "secret")
        XCTAssertEqual(authorizer.asked, 1, "the evaluation was the only request")
        ctx.invalidate()
        XCTAssertEqual(read(ctx).0, errSecAuthFailed)
        XCTAssertThrowsError(try ctx.evaluate(.deviceOwnerAuthentication, reason: "r")) {
            XCTAssertEqual(($0 as? LAError)?.code, .invalidContext)
        }
        XCTAssertEqual(read(nil).1, "secret", "without the context, it asks again")
        XCTAssertEqual(authorizer.asked, 2)
    }

    func testReuseDurationSparesTheSecondRequest() {
        XCTAssertEqual(addGuarded(), errSecSuccess)
        let brief = context()
        XCTAssertEqual(read(brief).1, "secret")
        XCTAssertEqual(read(brief).1, "secret")
        XCTAssertEqual(authorizer.asked, 2, "with no reuse duration each call asks")
        let reusing = context()
        reusing.touchIDAuthenticationAllowableReuseDuration = 60
        XCTAssertEqual(read(reusing).1, "secret")
        XCTAssertEqual(read(reusing).1, "secret")
        XCTAssertEqual(authorizer.asked, 3, "within the reuse duration, once")
        XCTAssertNoThrow(try reusing.evaluate(.deviceOwnerAuthentication, reason: "r"))
        XCTAssertEqual(authorizer.asked, 3, "a recent grant answers evaluatePolicy too")
        reusing.touchIDAuthenticationAllowableReuseDuration = 10_000
        XCTAssertEqual(reusing.touchIDAuthenticationAllowableReuseDuration, LATouchIDAuthenticationMaximumAllowableReuseDuration)
        let quiet = context()
        quiet.interactionNotAllowed = true
        XCTAssertEqual(read(quiet).0, errSecInteractionNotAllowed, "interactionNotAllowed: Fail")
        XCTAssertThrowsError(try quiet.evaluate(.deviceOwnerAuthentication, reason: "r")) {
            XCTAssertEqual(($0 as? LAError)?.code, .notInteractive)
        }
        XCTAssertEqual(authorizer.asked, 3)
    }

    /// kSecAccessControlApplicationPassword: the secret is sealed under the password the context
    /// carries; without it nothing opens, and a wrong one is errSecAuthFailed.
    func testApplicationPassword() throws {
        setenv("KEYCHAIN_PINENTRY", "/nonexistent/pinentry", 1)
        defer { unsetenv("KEYCHAIN_PINENTRY") }
        XCTAssertEqual(addGuarded(.applicationPassword), errSecInteractionNotAllowed, "no password to seal it with, nobody to ask")
        let owner = context()
        XCTAssertTrue(owner.setCredential(Data("app-pass".utf8), type: .applicationPassword))
        XCTAssertTrue(owner.isCredentialSet(.applicationPassword))
        XCTAssertEqual(addGuarded(.applicationPassword, context: owner), errSecSuccess)
        XCTAssertEqual(read(owner).1, "secret")
        XCTAssertEqual(read(nil).0, errSecInteractionNotAllowed, "no credential")
        let wrong = context()
        wrong.setCredential(Data("not-it".utf8), type: .applicationPassword)
        XCTAssertEqual(read(wrong).0, errSecAuthFailed)
        XCTAssertEqual(authorizer.asked, 0, "an application password alone does not ask polkit")
        // Stored sealed: the engine, holding the class keys but no password, reads the sealed form only.
        let stored = try keychain.keychain.store.find(
            Query(itemClass: .genericPassword, attributes: [AttributeKey.account: .string("guarded")]),
            includeSecret: false
        ).first
        XCTAssertNotEqual(
            stored?.attributes[AttributeKey.sha1], .data(Array(Crypto.sha1(Array("secret".utf8)))),
            "the hash attribute does not give the secret away")
        owner.setCredential(nil, type: .applicationPassword)
        XCTAssertFalse(owner.isCredentialSet(.applicationPassword))
    }

    /// Without a credential on a context, SecItem asks pinentry for the application password (here
    /// the Secret Service suite's scripted stand-in): its answer seals and opens the item; Cancel is
    /// errSecUserCanceled; no pinentry at all, errSecInteractionNotAllowed.
    func testApplicationPasswordAskedThroughPinentry() throws {
        let standIn = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../secret-service/pinentry.sh").standardized.path
        let answers = keychain.directory + "/answers"
        setenv("KEYCHAIN_PINENTRY", standIn, 1)
        setenv("PINENTRY_ANSWERS", answers, 1)
        defer { unsetenv("KEYCHAIN_PINENTRY"); unsetenv("PINENTRY_ANSWERS") }
        func answer(_ lines: String) { _ = FileManager.default.createFile(atPath: answers, contents: Data(lines.utf8)) }

        answer("typed-pass\n")
        XCTAssertEqual(addGuarded(.applicationPassword), errSecSuccess)
        answer("typed-pass\n")
        XCTAssertEqual(read(nil).1, "secret")
        answer("wrong-pass\n")
        XCTAssertEqual(read(nil).0, errSecAuthFailed)
        answer("CANCEL\n")
        XCTAssertEqual(read(nil).0, errSecUserCanceled)
        let withCredential = context()
        withCredential.setCredential(Data("typed-pass".utf8), type: .applicationPassword)
        answer("")
        XCTAssertEqual(read(withCredential).1, "secret", "a context's credential is used without asking")
        setenv("KEYCHAIN_PINENTRY", "/nonexistent/pinentry", 1)
        XCTAssertEqual(read(nil).0, errSecInteractionNotAllowed)
    }

    /// A backup asks for the user's presence once, keeps application-password secrets sealed, and
    /// brings both kinds back with their conditions.
    func testBackupKeepsConditionsAndSeals() throws {
        XCTAssertEqual(addGuarded(), errSecSuccess)
        let owner = context()
        owner.setCredential(Data("app-pass".utf8), type: .applicationPassword)
        let sealed = SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .applicationPassword, nil)!
        XCTAssertEqual(
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "sealed", kSecAttrAccessControl: sealed,
                    kSecUseAuthenticationContext: owner, kSecValueData: Data("sealed-secret".utf8)
                ] as CFDictionary, nil), errSecSuccess)
        let store = keychain.keychain.store
        authorizer.answer = .canceled
        XCTAssertThrowsError(try store.exportBackup(password: Array("backup".utf8), scrypt: .fastForTesting)) {
            XCTAssertEqual(($0 as? KeychainCore.KeychainError)?.code, .userCanceled)
        }
        authorizer.answer = .granted
        let backup = try store.exportBackup(password: Array("backup".utf8), scrypt: .fastForTesting)
        XCTAssertEqual(backup.exported, 2)
        XCTAssertEqual(authorizer.asked, 2, "once per export")
        XCTAssertNil(backup.backup.firstRange(of: Array("sealed-secret".utf8)))

        // Deleting the sealed item takes its application password (PresenceChangeTests).
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassGenericPassword, kSecUseAuthenticationContext: owner] as CFDictionary), errSecSuccess)
        XCTAssertEqual(authorizer.asked, 3, "deleting the guarded item asked")
        _ = try store.importBackup(backup.backup, password: Array("backup".utf8))
        XCTAssertEqual(read(nil).1, "secret")
        XCTAssertEqual(authorizer.asked, 4, "the restored item still asks")
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrAccount: "sealed", kSecReturnData: true,
                    kSecUseAuthenticationContext: owner
                ] as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("sealed-secret".utf8), "still sealed under the same application password")
    }
}
