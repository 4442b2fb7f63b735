@testable import KeychainCore
import XCTest

/// A changed byte anywhere must give errSecDecode (or errSecAuthFailed, where a changed keybag
/// cannot be told from a wrong password), never another item's data and never a crash.
final class TamperTests: XCTestCase {
    var scratch: Scratch!

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    private func column(_ store: KeychainStore, _ name: String, row: Int64) throws -> Bytes {
        let stmt = try store.db.statement("SELECT \(name) FROM items WHERE rowid = ?")
        stmt.bind([.int(row)])
        defer { stmt.reset() }
        XCTAssertTrue(try stmt.step())
        return stmt.blob(0)
    }

    private func setColumn(_ store: KeychainStore, _ name: String, row: Int64, _ value: SQLiteValue) throws {
        try store.db.statement("UPDATE items SET \(name) = ? WHERE rowid = ?").run([value, .int(row)])
    }

    func testEveryFlippedByteOfARowIsDetected() throws {
        let store = try scratch.create()
        let item = try store.add(generic("alice", secret: "alice-secret"))
        for name in ["metadata", "secret"] {
            let original = try column(store, name, row: item.rowID)
            for i in 0..<original.count {
                var bad = original
                bad[i] ^= 0x01
                try setColumn(store, name, row: item.rowID, .blob(bad))
                XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode, "\(name) byte \(i)")
            }
            try setColumn(store, name, row: item.rowID, .blob(original))
        }
        XCTAssertEqual(try secretString(store, query("alice")), "alice-secret")
    }

    func testSwappedRowsAreDetected() throws {
        let store = try scratch.create()
        let a = try store.add(generic("alice", secret: "alice-secret"))
        let b = try store.add(generic("bob", secret: "bob-secret"))
        // Swap the secrets only: bob's ciphertext under alice's row.
        let sa = try column(store, "secret", row: a.rowID), sb = try column(store, "secret", row: b.rowID)
        try setColumn(store, "secret", row: a.rowID, .blob(sb))
        try setColumn(store, "secret", row: b.rowID, .blob(sa))
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode)
        XCTAssertStatus(try store.find(query("bob"), includeSecret: true), .decode)
        try setColumn(store, "secret", row: a.rowID, .blob(sa))
        try setColumn(store, "secret", row: b.rowID, .blob(sb))

        // Swap metadata and index columns together: the row id in the additional data gives it away.
        for name in ["metadata", "account", "service", "pk"] {
            let va = try column(store, name, row: a.rowID), vb = try column(store, name, row: b.rowID)
            try setColumn(store, name, row: a.rowID, .blob([0]))  // the unique index forbids a moment with two equal keys
            try setColumn(store, name, row: b.rowID, .blob(va))
            try setColumn(store, name, row: a.rowID, .blob(vb))
        }
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode)
    }

    func testChangedIndexColumnsNeverYieldAnotherItem() throws {
        let store = try scratch.create()
        let a = try store.add(generic("alice", secret: "alice-secret"))
        _ = try store.add(generic("bob", secret: "bob-secret"))
        // Point alice's account hash at bob's: a lookup of bob now also finds alice's row, whose
        // decrypted attributes say "alice", so only bob's item comes back.
        let bobHash = try column(store, "account", row: a.rowID + 1)
        try setColumn(store, "account", row: a.rowID, .blob(bobHash))
        let found = try store.find(query("bob"), limit: nil, includeSecret: true)
        XCTAssertEqual(found.map { String(decoding: $0.secret!, as: UTF8.self) }, ["bob-secret"])
    }

    func testChangedProtectionClassIsDetected() throws {
        let store = try scratch.create()
        let a = try store.add(generic("alice", protection: .afterFirstUnlock))
        try setColumn(store, "lockclass", row: a.rowID, .int(LockClass.whenUnlocked.rawValue))
        XCTAssertStatus(try store.find(query("alice")), .decode)
        try setColumn(store, "lockclass", row: a.rowID, .int(99))
        XCTAssertStatus(try store.find(query("alice")), .decode)
        try setColumn(store, "lockclass", row: a.rowID, .int(LockClass.always.rawValue))
        XCTAssertStatus(try store.find(query("alice")), .decode, "claims the Always space but sits in the protected one")
    }

    func testEveryFlippedByteOfTheKeybagIsDetected() throws {
        _ = try scratch.create(password: "pw")
        let store = try scratch.open()
        let names = ["uuid", "kdf", "wrap.A", "wrap.C", "check.A", "check.C", "key.D", "settings", "settings.mac", "checksum", "version"]
        for name in names {
            let stmt = try store.db.statement("SELECT value FROM keychain WHERE name = ?")
            stmt.bind([.text(name)])
            XCTAssertTrue(try stmt.step(), name)
            let original = stmt.blob(0)
            stmt.reset()
            for i in 0..<original.count {
                var bad = original
                bad[i] ^= 0x80
                try store.db.statement("UPDATE keychain SET value = ? WHERE name = ?").run([.blob(bad), .text(name)])
                if name.hasPrefix("settings") {
                    // Settings carry their own MAC: changed ones give way to the safe defaults and
                    // are reported, and the keychain keeps working.
                    let reopened = try KeychainStore.open(at: scratch.path(), storage: .process)
                    try reopened.unlock(password: Array("pw".utf8))
                    XCTAssertEqual(reopened.status.settingsIntegrity, .damaged, "\(name) byte \(i)")
                    XCTAssertEqual(reopened.settings, .safeDefaults, "\(name) byte \(i)")
                    continue
                }
                XCTAssertThrowsError(
                    try KeychainStore.open(at: scratch.path(), storage: .process).unlock(password: Array("pw".utf8)),
                    "\(name) byte \(i)"
                ) { error in
                    XCTAssertEqual((error as? KeychainError)?.code, .decode, "\(name) byte \(i): \(error)")
                }
            }
            try store.db.statement("UPDATE keychain SET value = ? WHERE name = ?").run([.blob(original), .text(name)])
        }
        XCTAssertNoThrow(try KeychainStore.open(at: scratch.path(), storage: .process).unlock(password: Array("pw".utf8)))
    }

    /// The attack of a same-uid process while the keychain is locked: rewrite the settings so the
    /// keychain no longer locks at logout and never times out. Without class key A it cannot
    /// make their MAC, so the next unlock finds them damaged and applies the safe defaults.
    func testSettingsChangedWithoutTheKeyAreRejected() throws {
        let owner = try scratch.create(password: "pw")
        try owner.setSettings(KeychainSettings(idleTimeout: 60, lockOnSessionEnd: true))
        owner.lock()
        let wanted = KeychainSettings(idleTimeout: 0, lockOnSessionEnd: false)
        XCTAssertStatus(try owner.setSettings(wanted), .interactionNotAllowed, "locked: no change without the password")
        XCTAssertStatus(try owner.setSettings(wanted, password: Array("guess".utf8)), .authFailed)
        try owner.db.statement("UPDATE keychain SET value = ? WHERE name = 'settings'").run([.blob(wanted.bytes)])
        XCTAssertEqual(try scratch.open().settings, wanted, "what the file says, shown as unverified while locked")
        XCTAssertEqual(try scratch.open().status.settingsIntegrity, .unverified)

        let reopened = try scratch.open()
        try reopened.unlock(password: Array("pw".utf8))
        XCTAssertEqual(reopened.status.settingsIntegrity, .damaged)
        XCTAssertEqual(reopened.settings, .safeDefaults)
        XCTAssertTrue(reopened.settings.lockOnSessionEnd)

        // The owner sets them again, with the password while locked or with the keychain unlocked.
        try reopened.setSettings(KeychainSettings(idleTimeout: 30, lockOnSessionEnd: false))
        XCTAssertEqual(reopened.status.settingsIntegrity, .verified)
        reopened.lock()
        try reopened.setSettings(KeychainSettings(idleTimeout: 45, lockOnSessionEnd: false), password: Array("pw".utf8))
        try reopened.unlock(password: Array("pw".utf8))
        XCTAssertEqual(reopened.settings, KeychainSettings(idleTimeout: 45, lockOnSessionEnd: false))
        XCTAssertEqual(reopened.status.settingsIntegrity, .verified)

        // Settings and MAC copied from another keychain do not verify here either.
        let other = try scratch.create("other", password: "pw")
        try other.setSettings(wanted)
        for name in ["settings", "settings.mac"] {
            let stmt = try other.db.statement("SELECT value FROM keychain WHERE name = ?")
            stmt.bind([.text(name)])
            XCTAssertTrue(try stmt.step())
            let value = stmt.blob(0)
            stmt.reset()
            try reopened.db.statement("UPDATE keychain SET value = ? WHERE name = ?").run([.blob(value), .text(name)])
        }
        let victim = try scratch.open()
        try victim.unlock(password: Array("pw".utf8))
        XCTAssertEqual(victim.status.settingsIntegrity, .damaged)
        XCTAssertEqual(victim.settings, .safeDefaults)
    }

    func testAForgedKeybagChecksumStillFailsToUnlock() throws {
        _ = try scratch.create(password: "pw")
        let store = try scratch.open()
        // An attacker who rewrites wrap.A and recomputes the checksum gets the damaged-keybag error
        // at unlock (C opens, A does not), never access.
        var bag = store.keybag
        bag.wrappedA[20] ^= 1
        try bag.save(to: store.db)
        XCTAssertStatus(try KeychainStore.open(at: scratch.path(), storage: .process).unlock(password: Array("pw".utf8)), .decode)
        bag.wrappedC[20] ^= 1
        try bag.save(to: store.db)
        XCTAssertStatus(try KeychainStore.open(at: scratch.path(), storage: .process).unlock(password: Array("pw".utf8)), .authFailed)
    }

    func testGarbageFileIsDecodeError() throws {
        let store = try scratch.create()
        store.lockAll()
        let path = scratch.path("garbage")
        FileManagerless.write(path, Bytes(repeating: 0x41, count: 8192))
        XCTAssertStatus(try KeychainStore.open(at: path, storage: .process), .decode)
        FileManagerless.write(path, [])
        XCTAssertStatus(try KeychainStore.open(at: path, storage: .process), .decode)
    }
}
