@testable import KeychainCore
@testable import SecretServiceItems
import Glibc
import XCTest

/// Batches (`KeychainStore.batch`, `addAll`): one transaction for many changes, all or nothing,
/// with every per-item check kept.
final class BatchTests: StoreTestCase {
    struct Stop: Error {}

    func testABatchThatFailsMidwayLeavesNothing() throws {
        try store.add(generic("before"))
        XCTAssertThrowsError(
            try store.batch {
                try store.add(generic("a"))
                try store.add(generic("b"))
                try store.update(query("before"), attributes: [AttributeKey.label: .string("changed")])
                throw Stop()
            })
        XCTAssertEqual(try store.count(), 1)
        XCTAssertStatus(try store.find(query("a")), .itemNotFound)
        XCTAssertNil(try store.find(query("before")).first?[AttributeKey.label], "the update inside was undone too")
        // The store goes on working after the rollback.
        try store.add(generic("after"))
        XCTAssertEqual(try store.count(), 2)
    }

    func testAnItemThatFailsItsChecksUndoesTheWholeAddAll() throws {
        var bad = generic("bad")
        bad.attributes[AttributeKey.port] = .string("not a port")  // no such attribute for a generic password
        XCTAssertStatus(try store.addAll([generic("a"), generic("b"), bad, generic("c")]), .param)
        XCTAssertEqual(try store.count(), 0)
    }

    func testAddAllSkipsDuplicatesAndChecksUniquenessInsideTheBatch() throws {
        try store.add(generic("there"))
        let result = try store.addAll([generic("a"), generic("there"), generic("b"), generic("a", secret: "another")])
        XCTAssertEqual(result.added.count, 2)
        XCTAssertEqual(result.duplicates, 2, "one already in the file, one added earlier in the same batch")
        XCTAssertEqual(try store.count(), 3)
        XCTAssertEqual(try secretString(store, query("a")), "pw")
        XCTAssertEqual(Set(result.added.map(\.rowID)).count, 2, "each added item has its own row")
    }

    func testAFailureInsideABatchIsUndoneAloneWhenCaught() throws {
        try store.batch {
            try store.add(generic("kept"))
            // An operation that fails after writing part of its work: a nested batch.
            XCTAssertThrowsError(
                try store.batch {
                    try store.add(generic("undone"))
                    throw Stop()
                })
            // A duplicate refused inside the batch leaves the rest standing.
            XCTAssertStatus(try store.add(generic("kept")), .duplicateItem)
            try store.add(generic("also kept"))
        }
        XCTAssertEqual(try store.count(), 2)
        XCTAssertStatus(try store.find(query("undone")), .itemNotFound)
    }

    func testNothingIsCommittedAloneOnceSQLiteRolledTheBatchBack() throws {
        XCTAssertThrowsError(
            try store.batch {
                try store.add(generic("a"))
                // What SQLite does by itself after some errors (a full disk, an I/O error).
                try store.db.statement("ROLLBACK").run()
                // A caller that catches each item's error goes on; the next item must not start a
                // transaction of its own and commit outside the batch.
                XCTAssertStatus(try store.add(generic("b")), .io)
            })
        XCTAssertEqual(try store.count(), 0)
        try store.add(generic("after"))
        XCTAssertEqual(try store.count(), 1, "the store goes on working")
    }

    /// Nor any statement: one run then would be committed at once, alone.
    func testNoStatementRunsOnceSQLiteRolledTheBatchBack() throws {
        XCTAssertThrowsError(
            try store.batch {
                try store.add(generic("a"))
                try store.db.statement("ROLLBACK").run()
                XCTAssertStatus(try store.db.execute("INSERT INTO keychain (name, value) VALUES ('stray', x'00')"), .io)
            })
        XCTAssertFalse(try store.db.statement("SELECT 1 FROM keychain WHERE name = 'stray'").step(), "nothing committed alone")
    }

    /// The same inside one operation: an add whose insert fails as a duplicate retries in an access
    /// group of its own (the Secret Service's look-alikes). Where SQLite rolled the batch back with
    /// that failure (here a trigger's RAISE(ROLLBACK)), the retry must not run, and commit, alone.
    func testAnOperationDoesNotGoOnAloneOnceSQLiteRolledTheBatchBack() throws {
        try store.db.execute(
            "CREATE TEMP TRIGGER planted AFTER INSERT ON items WHEN (SELECT count(*) FROM items) >= 2 BEGIN SELECT RAISE(ROLLBACK, 'planted'); END")
        XCTAssertThrowsError(
            try store.batch {
                try store.add(generic("a"))
                XCTAssertThrowsError(
                    try store.addSecretItem(label: "l", attributes: ["k": "v"], secret: [1], contentType: "text/plain", replace: false)
                ) { error in XCTAssertTrue("\(error)".contains("planted"), "SQLite's reason, not a refused retry's: \(error)") }
            })
        try store.db.execute("DROP TRIGGER planted")
        XCTAssertEqual(try store.count(), 0, "nothing committed outside the batch")
        try store.add(generic("after"))
        XCTAssertEqual(try store.count(), 1, "the store goes on working")
    }

    func testOtherConnectionsSeeTheBatchOnlyOnceItIsCommitted() throws {
        let other = try scratch.open()
        try other.unlock(password: Array("pw".utf8))
        try store.batch {
            try store.add(generic("a"))
            XCTAssertEqual(try store.find(query("a")).count, 1, "the batch reads its own writes")
            XCTAssertStatus(try other.find(query("a")), .itemNotFound, "others read the state before the batch")
        }
        XCTAssertEqual(try other.find(query("a")).count, 1)
    }

    func testABatchKeepsEveryItemsLockCheck() throws {
        let items = (0..<5).map { generic("wu\($0)") }
        XCTAssertStatus(
            try store.batch {
                try store.add(items[0])
                try store.add(items[1])
                store.lock()
                try store.add(items[2])
            }, .interactionNotAllowed)
        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try store.count(), 0, "the items added before the lock went with the batch")
    }

    func testABackupComesBackInOneBatchAndDuplicatesStay() throws {
        for name in ["a", "b", "c"] { try store.add(generic(name, secret: "s-" + name)) }
        let backup = try store.exportBackup(password: Array("backup pw".utf8), scrypt: .fastForTesting).backup
        let target = try scratch.create("target")
        try target.add(generic("b", secret: "target's own"))
        let summary = try target.importBackup(backup, password: Array("backup pw".utf8))
        XCTAssertEqual(summary.imported, 2)
        XCTAssertEqual(summary.alreadyPresent, 1)
        XCTAssertEqual(try secretString(target, query("b")), "target's own", "an item already there is left as it is")
        XCTAssertEqual(try secretString(target, query("c")), "s-c")
    }
}

/// The lookup path reads the class keys from the kernel on every call: a lock by another
/// process, however warm this process's caches, takes effect on the very next call.
final class LockSeenOnNextCallTests: XCTestCase {
    var scratch: Scratch!

    override func setUpWithError() throws {
        scratch = Scratch()
        do { _ = try KernelKeyring.persistent() } catch { throw XCTSkip("kernel keyring unavailable: \(error)") }
        guard system("command -v keyctl >/dev/null 2>&1") == 0 else { throw XCTSkip("keyctl (keyutils) is not installed") }
    }

    override func tearDown() { scratch.remove() }

    /// What `security lock-keychain` does, from a process of its own (keyctl, in a session keyring
    /// of its own): find the key in the persistent keyring and invalidate it.
    func lockFromAnotherProcess(_ store: KeychainStore, _ letter: String) {
        let name = "keychain:\(store.identifier):\(letter)"
        let command = "keyctl session - sh -c 'keyctl invalidate \"$(keyctl search \"$(keyctl get_persistent @s)\" user \(name))\"' >/dev/null 2>&1"
        XCTAssertEqual(system(command), 0, command)
    }

    func testALockByAnotherProcessIsSeenOnTheNextCall() throws {
        let store = try scratch.create(storage: .kernel)
        try store.add(generic("wu", secret: "s-wu"))
        try store.add(generic("afu", secret: "s-afu", protection: .afterFirstUnlock))
        // Warm every cache this process keeps: key serials, subkeys, statements, keybag.
        for _ in 0..<3 {
            XCTAssertEqual(try secretString(store, query("wu")), "s-wu")
            XCTAssertEqual(try secretString(store, query("afu")), "s-afu")
        }
        lockFromAnotherProcess(store, "A")
        XCTAssertStatus(try store.find(query("wu"), includeSecret: true), .interactionNotAllowed)
        XCTAssertStatus(try store.find(query("wu")), .interactionNotAllowed, "attributes too")
        XCTAssertStatus(try store.add(generic("new")), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("afu")), "s-afu", "AfterFirstUnlock stays")
        XCTAssertFalse(store.status.whenUnlocked)

        lockFromAnotherProcess(store, "C")
        XCTAssertStatus(try store.find(query("afu"), includeSecret: true), .interactionNotAllowed)

        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(store, query("wu")), "s-wu")
    }

    /// Another connection rotates the keys (new class keys in the kernel, a new keybag in the
    /// file): this store's next lookup checks the new keys against the new keybag and keeps them.
    func testKeysRotatedByAnotherConnectionAreSeenAndKept() throws {
        let store = try scratch.create(storage: .kernel)
        try store.add(generic("wu", secret: "s-wu"))
        XCTAssertEqual(try secretString(store, query("wu")), "s-wu")
        let other = try scratch.open(storage: .kernel)
        try other.rotateKeys(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(store, query("wu")), "s-wu")
        XCTAssertNotNil(KernelKeyring.find("keychain:\(store.identifier):A"), "the new key stays in the kernel")
        XCTAssertNotNil(KernelKeyring.find("keychain:\(store.identifier):C"))
    }
}
