@testable import KeychainCore
import XCTest

/// `rotateKeys` / `changePassword(rotatingKeys:)`: new class keys, every row re-sealed, in one
/// transaction. The attacker kept a copy of the file from before, and knows the old password.
final class KeyRotationTests: XCTestCase {
    var scratch: Scratch!

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    let protections: [Protection] = [.whenUnlocked, .afterFirstUnlock, .always, .whenUnlockedThisDeviceOnly]

    /// A consistent copy of the file as it is now, as a backup tool or a thief would take it.
    func copy(_ store: KeychainStore, to name: String) throws -> String {
        let path = scratch.path(name)
        try store.db.execute("VACUUM INTO '\(path)'")
        return path
    }

    /// The attacker's file: the items of the current file under the keybag of the old copy,
    /// which the old password opens.
    func splice(keybagOf old: String, into current: KeychainStore, name: String) throws -> KeychainStore {
        let path = try copy(current, to: name)
        let db = try SQLiteDatabase(path: path)
        try db.execute("ATTACH DATABASE '\(old)' AS old; DELETE FROM keychain; INSERT INTO keychain SELECT * FROM old.keychain; DETACH DATABASE old")
        let store = try scratch.open(name)
        try store.unlock(password: Array("old".utf8))
        return store
    }

    func fill(_ store: KeychainStore) throws {
        for (n, protection) in protections.enumerated() {
            try store.add(generic("before-\(n)", secret: "secret-\(n)", protection: protection))
        }
    }

    func testAnOldCopyAndTheOldPasswordOpenNothingAfterARotation() throws {
        let store = try scratch.create(password: "old")
        try fill(store)
        let oldCopy = try copy(store, to: "stolen")
        try store.changePassword(from: Array("old".utf8), to: Array("new".utf8), scrypt: .fastForTesting, rotatingKeys: true)
        try store.add(generic("after", secret: "added-after"))
        try store.add(generic("after-always", secret: "added-after-always", protection: .always))

        let attacker = try splice(keybagOf: oldCopy, into: store, name: "attack")
        XCTAssertTrue(attacker.status.whenUnlocked, "the old password still opens the old keybag")
        for account in ["after", "after-always"] + protections.indices.map({ "before-\($0)" }) {
            var q = query(account)
            q.caseInsensitive = true  // no index hash: every row of the class is opened
            XCTAssertStatus(try attacker.find(q, includeSecret: true), .decode, account)
        }
        // The old keys themselves, row by row: none opens a row of the rotated file.
        let oldBag = try Keybag.load(from: SQLiteDatabase(path: oldCopy))
        let opened = try oldBag.open(password: Array("old".utf8))
        let (a, c) = (opened.a, opened.c)
        let oldKeys = ClassKeys([
            .whenUnlocked: Subkeys(classKey: a), .afterFirstUnlock: Subkeys(classKey: c),
            .always: Subkeys(classKey: oldBag.keyD)
        ])
        let rows = try store.db.statement("SELECT rowid, lockclass, metadata, secret FROM items")
        var count = 0
        while try rows.step() {
            let row = Row(
                rowID: rows.int(0), itemClass: .genericPassword, lockClass: LockClass(rawValue: rows.int(1))!,
                space: KeySpace(LockClass(rawValue: rows.int(1))!), metadata: rows.blob(2), secret: rows.blob(3))
            XCTAssertStatus(try store.openAttributes(row, keys: oldKeys), .decode, "row \(row.rowID)")
            XCTAssertStatus(try store.openSecret(row, keys: oldKeys), .decode, "row \(row.rowID)")
            count += 1
        }
        rows.reset()
        XCTAssertEqual(count, protections.count + 2)
    }

    /// The same attack after a plain password change: the weakness the rotation closes, shown so
    /// that the test above can fail.
    func testAPlainPasswordChangeLeavesTheOldCopyAbleToOpenNewItems() throws {
        let store = try scratch.create(password: "old")
        let oldCopy = try copy(store, to: "stolen")
        try store.changePassword(from: Array("old".utf8), to: Array("new".utf8), scrypt: .fastForTesting)
        try store.add(generic("after", secret: "added-after"))
        let attacker = try splice(keybagOf: oldCopy, into: store, name: "attack")
        XCTAssertEqual(try secretString(attacker, query("after")), "added-after")
    }

    func testEveryItemSurvivesARotation() throws {
        let store = try scratch.create(password: "pw")
        try fill(store)
        try store.setSettings(KeychainSettings(idleTimeout: 120, lockOnSessionEnd: false))
        let before = try store.find(Query(itemClass: .genericPassword), limit: nil, includeSecret: true)
        let oldD = store.keybag.keyD, oldCheckA = store.keybag.checkA, oldCheckC = store.keybag.checkC
        try store.rotateKeys(password: Array("pw".utf8), scrypt: .fastForTesting)
        XCTAssertNotEqual(store.keybag.keyD, oldD)
        XCTAssertNotEqual(store.keybag.checkA, oldCheckA)
        XCTAssertNotEqual(store.keybag.checkC, oldCheckC)

        for reopened in [store, try scratch.open()] {
            if reopened !== store { try reopened.unlock(password: Array("pw".utf8)) }
            let after = try reopened.find(Query(itemClass: .genericPassword), limit: nil, includeSecret: true)
            XCTAssertEqual(after.map(\.attributes), before.map(\.attributes))
            XCTAssertEqual(after.map(\.secret), before.map(\.secret))
            XCTAssertEqual(after.map(\.rowID), before.map(\.rowID))
            for (n, _) in protections.enumerated() {
                // Through the new index hashes, not a scan.
                XCTAssertEqual(try secretString(reopened, query("before-\(n)", service: "svc")), "secret-\(n)")
            }
            XCTAssertEqual(reopened.settings, KeychainSettings(idleTimeout: 120, lockOnSessionEnd: false))
            XCTAssertEqual(reopened.status.settingsIntegrity, .verified)
        }
        XCTAssertStatus(try store.add(generic("before-0")), .duplicateItem, "uniqueness holds under the new keys")
    }

    func testARotationThatCannotOpenARowChangesNothing() throws {
        let store = try scratch.create(password: "pw")
        try fill(store)
        let damaged = try store.add(generic("damaged", secret: "x"))
        try store.db.statement("UPDATE items SET secret = x'00' WHERE rowid = ?").run([.int(damaged.rowID)])
        let keybagBefore = try store.db.statement("SELECT name, value FROM keychain ORDER BY name")
        var before: [Bytes] = []
        while try keybagBefore.step() { before.append(keybagBefore.blob(1)) }
        keybagBefore.reset()

        XCTAssertStatus(try store.rotateKeys(password: Array("pw".utf8), scrypt: .fastForTesting), .decode)
        let keybagAfter = try store.db.statement("SELECT name, value FROM keychain ORDER BY name")
        var after: [Bytes] = []
        while try keybagAfter.step() { after.append(keybagAfter.blob(1)) }
        keybagAfter.reset()
        XCTAssertEqual(before, after, "the keybag is the old one")
        let reopened = try scratch.open()
        try reopened.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(reopened, query("before-0")), "secret-0", "rows are the old ones")
    }

    func testARotationNeedsThePassword() throws {
        let store = try scratch.create(password: "pw")
        try fill(store)
        XCTAssertStatus(try store.rotateKeys(password: Array("guess".utf8)), .authFailed)
        XCTAssertEqual(try secretString(store, query("before-0")), "secret-0")
    }

    /// Another process holds the keychain open across the rotation: it must read the new keybag
    /// before it seals anything, and never seal a new item under a key the file no longer has.
    func testAnotherProcessSeesTheNewKeysAtOnce() throws {
        do { _ = try KernelKeyring.persistent() } catch { throw XCTSkip("kernel keyring unavailable: \(error)") }
        let store = try scratch.create(password: "pw", storage: .kernel)
        try fill(store)
        let other = try scratch.open(storage: .kernel)
        XCTAssertEqual(try secretString(other, query("before-2")), "secret-2")
        let oldA = KernelKeyring.read(store.kernelName(.whenUnlocked))!

        try store.rotateKeys(password: Array("pw".utf8), scrypt: .fastForTesting)
        XCTAssertEqual(try secretString(other, query("before-2")), "secret-2", "Always items, under the new D")
        try other.add(generic("from-other", secret: "o"))
        XCTAssertEqual(try secretString(try scratch.open(storage: .kernel), query("from-other")), "o")

        // A crash between the commit and the kernel update leaves the old key in the kernel: it
        // no longer fits the keybag, so it is treated as locked and removed, never used to seal.
        try KernelKeyring.store(oldA, description: store.kernelName(.whenUnlocked))
        XCTAssertStatus(try other.add(generic("sealed-under-old")), .interactionNotAllowed)
        XCTAssertNil(KernelKeyring.find(store.kernelName(.whenUnlocked)), "the stale key is gone")
    }
}
