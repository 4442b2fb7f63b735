@testable import KeychainCore
import XCTest

final class KeybagTests: XCTestCase {
    var scratch: Scratch!

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    func testChangePasswordRewrapsAndKeepsItems() throws {
        let store = try scratch.create(password: "old")
        try store.add(generic("a", secret: "kept"))
        try store.changePassword(from: Array("old".utf8), to: Array("new".utf8), scrypt: .fastForTesting)
        let reopened = try scratch.open()
        XCTAssertStatus(try reopened.unlock(password: Array("old".utf8)), .authFailed)
        try reopened.unlock(password: Array("new".utf8))
        XCTAssertEqual(try secretString(reopened, query("a")), "kept")
    }

    /// "The old password opens nothing in it": neither the write-ahead log nor a page of the file
    /// the log had not yet been copied over keeps the keybag from before a change, while the
    /// connection that made it (the Secret Service's, a session long) keeps the log open.
    func testNoCopyOfTheOldKeybagStaysInTheFiles() throws {
        for rotating in [false, true] {
            let name = rotating ? "rotated" : "changed"
            let store = try scratch.create(name, password: "old")
            try store.add(generic("a", secret: "kept"))
            let old = try wrappedKeyA(store)
            try store.changePassword(from: Array("old".utf8), to: Array("new".utf8), scrypt: .fastForTesting, rotatingKeys: rotating)
            for file in [store.path, store.path + "-wal"] {
                XCTAssertFalse(fileHolds(file, old), "\(name): the old wrapped key A is in \(file)")
            }
            XCTAssertEqual(try secretString(store, query("a")), "kept")
        }
    }

    /// Another program reading an older snapshot keeps the log from being emptied at the change;
    /// the connection that made it empties it at its next transaction or read once that reader has
    /// moved on (the automatic checkpoints never would, nor cut the log back).
    func testAReaderOnAnOlderSnapshotOnlyDelaysTheOldKeybagsEnd() throws {
        let store = try scratch.create("held", password: "old")
        try store.add(generic("a", secret: "kept"))
        let old = try wrappedKeyA(store)
        let reader = try SQLiteDatabase(path: store.path)
        try reader.execute("BEGIN")
        let select = try reader.statement("SELECT count(*) FROM items")
        XCTAssertTrue(try select.step())
        try store.changePassword(from: Array("old".utf8), to: Array("new".utf8), scrypt: .fastForTesting)
        XCTAssertTrue(store.previousKeybagsLinger, "the reader's snapshot kept the log")
        XCTAssertTrue(fileHolds(store.path, old) || fileHolds(store.path + "-wal", old), "and with it the old keybag")
        select.reset()
        try reader.execute("COMMIT")
        XCTAssertEqual(try secretString(store, query("a")), "kept")
        XCTAssertFalse(store.previousKeybagsLinger, "emptied after the next read")
        for file in [store.path, store.path + "-wal"] {
            XCTAssertFalse(fileHolds(file, old), "the old wrapped key A is in \(file)")
        }
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

    func testTunedParametersStartAtTheFloor() {
        // How long they take is measured by `make bench`, not asserted here.
        let tuned = ScryptParameters.tuned()
        XCTAssertTrue(tuned.isSane)
        XCTAssertGreaterThanOrEqual(tuned.n, 1 << 17, "never below current guidance")
        XCTAssertEqual(tuned.r, 8)
        XCTAssertLessThanOrEqual(tuned.memory, ScryptParameters.maximumMemory)
        XCTAssertEqual(ScryptParameters.floor.memory, 128 << 20)
    }

    func testAPasswordChangeRaisesACostBelowTheFloor() throws {
        let store = try scratch.create(password: "pw")
        try store.changePassword(from: Array("pw".utf8), to: Array("pw2".utf8))
        XCTAssertGreaterThanOrEqual(try scratch.open().keybag.scrypt.n, 1 << 17)
    }

    func testInsaneParametersInMemoryAreRefusedBeforeDeriving() throws {
        _ = try scratch.create(password: "pw")
        let store = try scratch.open()
        let before = Crypto.derivations
        store.keybag.scrypt = ScryptParameters(n: 1 << 40)
        XCTAssertStatus(try store.keybag.open(password: Array("pw".utf8)), .decode)
        store.keybag.scrypt = ScryptParameters(n: 1000)
        XCTAssertStatus(try store.keybag.open(password: Array("pw".utf8)), .decode)
        XCTAssertEqual(Crypto.derivations, before)
    }

    /// Parameters the KDF must never be asked to run: more than 1 GiB, more work than the largest
    /// tuning, not a power of two, or outside scrypt's definition.
    static let absurd: [ScryptParameters] = [
        ScryptParameters(n: 1 << 34), ScryptParameters(n: 1 << 20, r: 16), ScryptParameters(n: 1 << 21),
        ScryptParameters(n: 1 << 20, r: 8, p: 2), ScryptParameters(n: 1 << 10, r: 8, p: 17), ScryptParameters(n: 1 << 10, r: 33),
        ScryptParameters(n: 1000), ScryptParameters(n: 1), ScryptParameters(n: 0), ScryptParameters(n: 1 << 10, r: 0),
        ScryptParameters(n: 1 << 10, r: 8, p: 0), ScryptParameters(n: 1 << 63), ScryptParameters(n: 1 << 62, r: 1 << 40, p: 1 << 40)
    ]

    func testBoundsAcceptEveryTuningAndRefuseTheAbsurd() {
        for n in 1...20 { XCTAssertTrue(ScryptParameters(n: 1 << UInt64(n)).isSane, "2^\(n)") }
        for params in Self.absurd { XCTAssertFalse(params.isSane, "\(params)") }
    }

    /// The keybag edited to ask for absurd parameters, with its checksum recomputed so that only
    /// the bounds stand in the way: errSecDecode before any derivation, at open and at unwrap.
    func testAbsurdKDFParametersAreNeverWritten() throws {
        var before = Crypto.derivations
        XCTAssertStatus(
            try KeychainStore.create(
                at: scratch.path(), password: Array("pw".utf8), scrypt: ScryptParameters(n: 1 << 21),
                storage: .process), .param)
        XCTAssertEqual(Crypto.derivations, before)
        XCTAssertFalse(KeychainFile.exists(scratch.path()), "nothing left behind")
        let store = try scratch.create(password: "pw")
        before = Crypto.derivations
        XCTAssertStatus(try store.changePassword(from: Array("pw".utf8), to: Array("x".utf8), scrypt: ScryptParameters(n: 1 << 20, r: 8, p: 2)), .param)
        XCTAssertStatus(try store.exportBackup(password: Array("b".utf8), scrypt: ScryptParameters(n: 3)), .param)
        XCTAssertEqual(Crypto.derivations - before, 1, "only the unwrap of the password change derived")
        try store.unlock(password: Array("pw".utf8))
    }

    func testAbsurdKDFParametersInTheKeybagAreRefusedBeforeDeriving() throws {
        _ = try scratch.create(password: "pw")
        let original = try scratch.open().keybag
        for params in Self.absurd {
            var bag = original
            bag.scrypt = params
            let db = try SQLiteDatabase(path: scratch.path())
            try db.statement("UPDATE keychain SET value = ? WHERE name = ?").run([.blob(bag.kdfRecord), .text("kdf")])
            try db.statement("UPDATE keychain SET value = ? WHERE name = ?")
                .run([.blob(Keybag.checksum([bag.uuid, bag.kdfRecord, bag.wrappedA, bag.wrappedC, bag.checkA, bag.checkC, bag.keyD])), .text("checksum")])
            let before = Crypto.derivations
            XCTAssertStatus(try KeychainStore.open(at: scratch.path(), storage: .process), .decode, "\(params)")
            XCTAssertStatus(try bag.open(password: Array("pw".utf8)), .decode, "\(params)")
            XCTAssertEqual(Crypto.derivations, before, "no derivation ran for \(params)")
        }
    }

    func testAHostileBackupsKDFIsRefusedBeforeDeriving() throws {
        let store = try scratch.create(password: "pw")
        try store.add(generic("a", secret: "kept"))
        let backup = try store.exportBackup(password: Array("backup pw".utf8), scrypt: .fastForTesting).backup
        let header = KeychainStore.backupMagic.count
        for params in Self.absurd {
            var hostile = backup
            var w = ByteWriter()
            w.u64(params.n)
            w.u64(params.r)
            w.u64(params.p)
            hostile.replaceSubrange(header..<(header + 24), with: w.bytes)
            let before = Crypto.derivations
            XCTAssertStatus(try store.importBackup(hostile, password: Array("backup pw".utf8)), .decode, "\(params)")
            XCTAssertEqual(Crypto.derivations, before, "no derivation ran for \(params)")
        }
        XCTAssertEqual(try store.importBackup(backup, password: Array("backup pw".utf8)).alreadyPresent, 1)
    }

    /// A keychain as version 1 wrote it: the same rows, a keybag without check values or settings
    /// MAC, its wrapped keys bound to the version 1 additional data. Written field by field from
    /// the format, not through the code under test.
    func writeVersion1Keybag(_ store: KeychainStore, password: String, settings: KeychainSettings) throws {
        let bag = store.keybag
        let opened = try bag.open(password: Array(password.utf8))
        let (a, c) = (opened.a, opened.c)
        let salt = try Crypto.random(16)
        let kek = try Crypto.scrypt(password: Array(password.utf8), salt: salt, parameters: bag.scrypt)
        func aad(_ letter: String) -> Bytes {
            var w = ByteWriter()
            w.string("keychain-keybag-v1")
            w.blob(bag.uuid)
            w.string(letter)
            w.u64(bag.scrypt.n)
            w.u64(bag.scrypt.r)
            w.u64(bag.scrypt.p)
            w.blob(salt)
            return w.bytes
        }
        var kdf = ByteWriter()
        kdf.u64(bag.scrypt.n)
        kdf.u64(bag.scrypt.r)
        kdf.u64(bag.scrypt.p)
        kdf.blob(salt)
        let wrapA = try Crypto.seal(a, key: kek, aad: aad("A")), wrapC = try Crypto.seal(c, key: kek, aad: aad("C"))
        var sum = ByteWriter()
        for field in [bag.uuid, kdf.bytes, wrapA, wrapC, bag.keyD, settings.bytes] { sum.blob(field) }
        try store.db.execute("DELETE FROM keychain")
        let insert = try store.db.statement("INSERT INTO keychain(name, value) VALUES (?, ?)")
        for (name, value) in [
            ("version", Bytes(bigEndian: 1)), ("uuid", bag.uuid), ("kdf", kdf.bytes), ("wrap.A", wrapA),
            ("wrap.C", wrapC), ("key.D", bag.keyD), ("settings", settings.bytes), ("checksum", Crypto.sha256(sum.bytes))
        ] {
            try insert.run([.text(name), .blob(value)])
        }
    }

    func testAVersion1KeychainIsUpgradedAtTheNextUnlock() throws {
        let store = try scratch.create(password: "pw")
        try store.add(generic("wu", secret: "s-wu"))
        try store.add(generic("always", secret: "s-always", protection: .always))
        let v1Settings = KeychainSettings(idleTimeout: 900, lockOnSessionEnd: false)
        try writeVersion1Keybag(store, password: "pw", settings: v1Settings)

        let old = try scratch.open()
        XCTAssertEqual(old.keybag.version, 1)
        XCTAssertEqual(try secretString(old, query("always")), "s-always", "Always items need no unlock")
        XCTAssertStatus(try old.unlock(password: Array("wrong".utf8)), .authFailed)
        XCTAssertEqual(try scratch.open().keybag.version, 1, "a wrong password upgrades nothing")

        try old.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(old, query("wu")), "s-wu")
        let upgraded = try scratch.open()
        XCTAssertEqual(upgraded.keybag.version, 2)
        XCTAssertEqual(upgraded.keybag.checkA.count, 16)
        XCTAssertEqual(upgraded.keybag.scrypt, .fastForTesting, "the same KDF cost; a password change raises it")
        try upgraded.unlock(password: Array("pw".utf8))
        XCTAssertEqual(upgraded.settings, v1Settings, "the owner's settings, now authenticated")
        XCTAssertEqual(upgraded.status.settingsIntegrity, .verified)
        XCTAssertEqual(try secretString(upgraded, query("wu")), "s-wu")
        XCTAssertEqual(try secretString(upgraded, query("always")), "s-always")
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
