@testable import KeychainCore
import XCTest

final class KeybagTests: XCTestCase {
    var scratch: Scratch!

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    func testChangePasswordRewrapsAndKeepsItems() throws {
        let store = try scratch.create(password: "old")
        try store.add(generic("a", secret: "kept"))
        try store.changePassword(from: Array("old".utf8), to: Array("new".utf8))
        let reopened = try scratch.open()
        XCTAssertStatus(try reopened.unlock(password: Array("old".utf8)), .authFailed)
        try reopened.unlock(password: Array("new".utf8))
        XCTAssertEqual(try secretString(reopened, query("a")), "kept")
    }

    func testAThousandWrongPasswordsNeverUnlockAndEachPaysTheKDF() throws {
        let store = try scratch.create(password: "right")
        try store.add(generic("a", secret: "kept"))
        store.lockAll()
        let before = Crypto.derivations
        for n in 0..<1000 {
            // Near misses too: a prefix, the password with a suffix, other case, empty.
            let guess = ["righ", "right ", "Right", "", "wrong\(n)", "righT"][n % 6]
            XCTAssertStatus(try store.unlock(password: Array(guess.utf8)), .authFailed, "guess \(guess)")
            XCTAssertFalse(store.status.whenUnlocked || store.status.afterFirstUnlock, "unlocked by \(guess)")
        }
        XCTAssertEqual(Crypto.derivations - before, 1000, "every guess runs the password KDF once")
        // HMAC inside scrypt pads its key with zeros, so a NUL after the password is refused
        // outright rather than accepted as the same password.
        XCTAssertStatus(try store.unlock(password: Array("right\u{0}".utf8)), .param)
        XCTAssertStatus(try store.changePassword(from: Array("right".utf8), to: Array("new\u{0}".utf8)), .param)
        XCTAssertStatus(try store.find(query("a")), .interactionNotAllowed)
        try store.unlock(password: Array("right".utf8))
        XCTAssertEqual(try secretString(store, query("a")), "kept")
    }

    func testChangePasswordNeedsTheOldOne() throws {
        let store = try scratch.create(password: "old")
        XCTAssertStatus(try store.changePassword(from: Array("guess".utf8), to: Array("new".utf8)), .authFailed)
        XCTAssertNoThrow(try scratch.open().verify(password: Array("old".utf8)))
    }

    func testScryptParametersAreStoredAndCanBeRetuned() throws {
        let store = try scratch.create(password: "pw")
        XCTAssertEqual(store.keybag.scrypt, .fastForTesting)
        try store.changePassword(from: Array("pw".utf8), to: Array("pw2".utf8), scrypt: ScryptParameters(n: 1 << 11, r: 8, p: 2))
        let reopened = try scratch.open()
        XCTAssertEqual(reopened.keybag.scrypt, ScryptParameters(n: 1 << 11, r: 8, p: 2))
        XCTAssertNoThrow(try reopened.unlock(password: Array("pw2".utf8)))
    }

    func testTunedParametersArePowersOfTwoInRange() {
        // How long they take is measured by `make bench`, not asserted here.
        let tuned = ScryptParameters.tuned()
        XCTAssertTrue(tuned.isSane)
        XCTAssertGreaterThanOrEqual(tuned.n, 1 << 14)
        XCTAssertLessThanOrEqual(tuned.n, 1 << 20)
    }

    func testInsaneParametersInTheFileAreRefused() throws {
        _ = try scratch.create(password: "pw")
        let store = try scratch.open()
        store.keybag.scrypt = ScryptParameters(n: 1 << 40)
        XCTAssertStatus(try store.keybag.unwrap(password: Array("pw".utf8)), .authFailed)
        store.keybag.scrypt = ScryptParameters(n: 1000)
        XCTAssertStatus(try store.keybag.unwrap(password: Array("pw".utf8)), .authFailed)
    }

    func testSettingsRoundTrip() throws {
        let store = try scratch.create()
        XCTAssertEqual(store.settings, KeychainSettings(idleTimeout: 0, lockOnSessionEnd: true))
        try store.setSettings(KeychainSettings(idleTimeout: 300, lockOnSessionEnd: false))
        XCTAssertEqual(try scratch.open().settings, KeychainSettings(idleTimeout: 300, lockOnSessionEnd: false))
    }

    func testCreatingOverAnExistingKeychainIsRefused() throws {
        let store = try scratch.create()
        try store.add(generic("a"))
        XCTAssertStatus(try scratch.create(), .duplicateKeychain)
        XCTAssertEqual(try scratch.open().count(), 1, "the existing keychain is untouched")
    }
}
