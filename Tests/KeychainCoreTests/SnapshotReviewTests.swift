@testable import KeychainCore
@testable import SecretServiceItems
import XCTest

/// What a lookup's read snapshot and the Always-space cache must never do, with a second
/// connection (another process's view of the file) changing things between two calls: hide an
/// item, serve a lock's keys, miss a rotation, or find more or fewer Secret Service items than the
/// index's plain intersection of pairs.
final class SnapshotReviewTests: StoreTestCase {
    private struct Undo: Error {}

    private func other(_ storage: KeyStorage = .process) throws -> KeychainStore {
        let other = try scratch.open(storage: storage)
        try other.unlock(password: Array("pw".utf8))
        return other
    }

    /// Another connection's batch that added an Always item and rolled back leaves nothing to
    /// find; its commit of the same item afterwards is found on the next lookup.
    func testAnAlwaysItemOfAnotherConnectionsRolledBackBatchThenItsCommit() throws {
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
        let other = try other()
        XCTAssertThrowsError(
            try other.batch {
                try other.add(generic("x", secret: "always", protection: .always))
                throw Undo()
            })
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
        try other.add(generic("x", secret: "always", protection: .always))
        XCTAssertEqual(try secretString(store, query("x")), "always")
    }

    /// This connection's batch that deleted the only Always item and rolled back: the item is
    /// back, and the next lookup finds it.
    func testAnAlwaysItemRestoredByThisConnectionsRollbackIsFound() throws {
        try store.add(generic("x", secret: "always", protection: .always))
        XCTAssertEqual(try secretString(store, query("x")), "always")
        XCTAssertThrowsError(
            try store.batch {
                try store.delete(query("x"))
                XCTAssertStatus(try store.find(query("x")), .itemNotFound, "gone inside the batch")
                throw Undo()
            })
        XCTAssertEqual(try secretString(store, query("x")), "always")
        // And the other way round: an Always item deleted by another connection's committed batch.
        let other = try other()
        _ = try other.batch { try other.delete(query("x")) }
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
    }

    /// The WAL reset under the cache: another connection checkpoints and truncates the WAL, then
    /// adds an Always item (the WAL starts over with new salts); the next lookup finds it, and
    /// its deletion after another reset is seen too.
    func testAnAlwaysItemAddedAfterTheWALWasResetIsFound() throws {
        try store.add(generic("wu"))
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
        let other = try other()
        for round in 0..<3 {
            try other.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            try other.add(generic("x", secret: "always-\(round)", protection: .always))
            XCTAssertEqual(try secretString(store, query("x")), "always-\(round)", "round \(round)")
            try other.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            try other.delete(query("x"))
            XCTAssertStatus(try store.find(query("x")), .itemNotFound, "round \(round)")
        }
    }

    /// An Always item of another connection, under a key rotation of that connection: the new D
    /// opens it at once, whatever this store kept of the old keybag and the Always space.
    func testAnAlwaysItemAcrossARotationByAnotherConnection() throws {
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
        let other = try other()
        try other.add(generic("x", secret: "always", protection: .always))
        try other.rotateKeys(password: Array("pw".utf8), scrypt: .fastForTesting)
        XCTAssertEqual(try secretString(store, query("x")), "always")
        try other.add(generic("y", secret: "after", protection: .always))
        XCTAssertEqual(try secretString(store, query("y")), "after")
    }

    /// With A and C locked (after a reboot) only the Always space can be searched: an Always item
    /// another connection adds then is found, and the locked space still answers "locked".
    func testAnAlwaysItemAddedWhileThisStoreIsLockedIsFound() throws {
        try store.add(generic("wu"))
        store.lockAll()
        XCTAssertStatus(try store.find(query("x")), .interactionNotAllowed)
        let other = try other()
        try other.add(generic("x", secret: "always", protection: .always))
        XCTAssertEqual(try secretString(store, query("x")), "always")
        try other.delete(query("x"))
        XCTAssertStatus(try store.find(query("x")), .interactionNotAllowed)
    }

    /// A lock by another process, then its unlock, seen by the Secret Service's search and item
    /// read on their very next call (both read the keys inside their snapshot).
    func testSecretServiceReadsSeeALockByAnotherProcessAtOnce() throws {
        do { _ = try KernelKeyring.persistent() } catch { throw XCTSkip("kernel keyring unavailable: \(error)") }
        let store = try scratch.create("kernel", storage: .kernel)
        let added = try store.addSecretItem(
            label: "l", attributes: ["app": "x"], secret: Array("s".utf8), contentType: "text/plain", replace: false
        ).item
        for _ in 0..<3 {
            XCTAssertEqual(try store.searchSecretItems(["app": "x"]).unlocked.map(\.row), [added.row])
            XCTAssertEqual(try store.secretItem(added.row, includeSecret: true).secret, Array("s".utf8))
        }
        let other = try scratch.open("kernel", storage: .kernel)
        other.lock()
        let found = try store.searchSecretItems(["app": "x"])
        XCTAssertEqual(found.unlocked.count, 0, "no attributes of a locked item")
        XCTAssertEqual(found.locked, [added.row])
        XCTAssertStatus(try store.secretItem(added.row, includeSecret: true), .interactionNotAllowed)
        try other.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try store.secretItem(added.row, includeSecret: true).secret, Array("s".utf8))
    }

    /// A key rotation by another connection between two Secret Service reads: the next search
    /// and read open the items under the new keys.
    func testSecretServiceReadsAfterARotationByAnotherConnection() throws {
        let added = try store.addSecretItem(
            label: "l", attributes: ["app": "x"], secret: Array("s".utf8), contentType: "text/plain", replace: false
        ).item
        XCTAssertEqual(try store.searchSecretItems(["app": "x"]).unlocked.map(\.row), [added.row])
        let other = try other()
        try other.rotateKeys(password: Array("pw".utf8), scrypt: .fastForTesting)
        // This store's process keys are the old ones: it is locked now (C too, whose index key
        // the attribute index is read with), and serves nothing under them.
        XCTAssertStatus(try store.secretItem(added.row, includeSecret: true), .interactionNotAllowed)
        XCTAssertEqual(try store.searchSecretItems(["app": "x"]).unlocked.map(\.row), [])
        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try store.secretItem(added.row, includeSecret: true).secret, Array("s".utf8))
        XCTAssertEqual(try store.searchSecretItems(["app": "x"]).unlocked.map(\.row), [added.row])
    }

    /// Searches read from the narrowest pair find exactly what the plain intersection finds: a
    /// pair every item shares (more than the first count's bound), narrow pairs, pairs no item
    /// has, app-owned items that only their app sees, unlocked and locked.
    func testTheNarrowestPairFindsExactlyTheMatchesForEveryOwner() throws {
        let owners: [String?] = [nil, "org.example.A", "org.example.B"]
        var stored: [(row: Int64, attributes: [String: String], owner: String?)] = []
        for i in 0..<72 {
            var attributes = ["app": "x", "k": "\(i % 4)"]
            if i % 3 == 0 { attributes["m"] = "\(i % 2)" }
            if i == 5 { attributes["rare"] = "yes" }
            let owner = owners[i % owners.count]
            let item = try store.addSecretItem(
                label: "l\(i)", attributes: attributes, secret: Array("s\(i)".utf8), contentType: "text/plain",
                replace: false, owner: owner
            ).item
            stored.append((item.row, attributes, owner))
        }
        let queries: [[String: String]] = [
            ["app": "x"], ["k": "1"], ["app": "x", "k": "2"], ["app": "x", "m": "0"], ["k": "3", "m": "1", "app": "x"],
            ["app": "x", "rare": "yes"], ["rare": "yes", "k": "1"], ["app": "y"], ["app": "x", "k": "9"],
            ["m": "0", "k": "0"]
        ]
        func expected(_ query: [String: String], _ owner: String?) -> Set<Int64> {
            Set(stored.filter { item in item.owner == owner && query.allSatisfy { item.attributes[$0.key] == $0.value } }.map(\.row))
        }
        for query in queries {
            for owner in owners {
                let found = try store.searchSecretItems(query, owner: owner)
                XCTAssertEqual(Set(found.unlocked.map(\.row)), expected(query, owner), "\(query) as \(owner ?? "unconfined")")
                XCTAssertEqual(found.locked, [])
                // The index read alone, before any caller's check: the plain intersection of the
                // pairs' rows (an unconfined query's pairs are every item's, owned ones too).
                let indexed = try store.rowsIndexed(with: FreeFormAttributes.scoped(query, owner: owner), keys: store.currentKeys())
                let intersection = Set(
                    stored.filter { item in (owner == nil || item.owner == owner) && query.allSatisfy { item.attributes[$0.key] == $0.value } }
                        .map(\.row))
                XCTAssertEqual(indexed, intersection, "index: \(query) as \(owner ?? "unconfined")")
            }
        }
        store.lock()
        for query in queries {
            for owner in owners {
                let found = try store.searchSecretItems(query, owner: owner)
                XCTAssertEqual(found.unlocked.map(\.row), [])
                XCTAssertEqual(Set(found.locked), expected(query, owner), "locked: \(query) as \(owner ?? "unconfined")")
            }
        }
    }
}
