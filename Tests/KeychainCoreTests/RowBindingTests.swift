@testable import KeychainCore
import XCTest

/// Issue 20, point 6: a row's secret and metadata are bound to each other and to the row's
/// version, so pasting back an older ciphertext of the same row (from an old copy of the file,
/// or saved by a same-uid process before an update) is errSecDecode, not the older data.
final class RowBindingTests: XCTestCase {
    var scratch: Scratch!

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    private func columns(_ store: KeychainStore, row: Int64) throws -> (metadata: Bytes, secret: Bytes) {
        let stmt = try store.db.statement("SELECT metadata, secret FROM items WHERE rowid = ?")
        stmt.bind([.int(row)])
        defer { stmt.reset() }
        XCTAssertTrue(try stmt.step())
        return (stmt.blob(0), stmt.blob(1))
    }

    private func set(_ store: KeychainStore, row: Int64, metadata: Bytes, secret: Bytes) throws {
        try store.db.statement("UPDATE items SET metadata = ?, secret = ? WHERE rowid = ?")
            .run([.blob(metadata), .blob(secret), .int(row)])
    }

    func testAnOlderSecretUnderNewerMetadataIsDetected() throws {
        let store = try scratch.create()
        let item = try store.add(generic("alice", secret: "old-password"))
        let before = try columns(store, row: item.rowID)
        XCTAssertEqual(try store.update(query("alice"), attributes: [:], secret: Array("new-password".utf8)), 1)
        let after = try columns(store, row: item.rowID)

        // The attack: the row's old secret pasted back under its current metadata.
        try set(store, row: item.rowID, metadata: after.metadata, secret: before.secret)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: false), .decode, "attribute-only reads check the binding too")

        try set(store, row: item.rowID, metadata: after.metadata, secret: after.secret)
        XCTAssertEqual(try secretString(store, query("alice")), "new-password")
    }

    func testOlderMetadataOverANewerSecretIsDetected() throws {
        let store = try scratch.create()
        let item = try store.add(generic("alice", secret: "pw"))
        let before = try columns(store, row: item.rowID)
        XCTAssertEqual(try store.update(query("alice"), attributes: [AttributeKey.label: .string("renamed")]), 1)
        let after = try columns(store, row: item.rowID)
        XCTAssertNotEqual(before.secret, after.secret, "an update reseals the secret under the new metadata")

        try set(store, row: item.rowID, metadata: before.metadata, secret: after.secret)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: false), .decode)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode)
    }

    // MARK: Rows written before the binding (format 1)

    /// Seals `item` into its row as the engine did before row format 2.
    private func writeFormat1(_ store: KeychainStore, row: Int64, item: Item, secret: String) throws {
        let keys = try store.currentKeys()
        let lockClass = item.protection.lockClass
        func aad(_ field: String) -> Bytes {
            store.additionalData(rowID: row, itemClass: item.itemClass, lockClass: lockClass, field: field)
        }
        let itemKey = try Crypto.random(Crypto.keyLength)
        var body = ByteWriter()
        body.blob(try Crypto.seal(itemKey, key: keys.wrappingKey(lockClass)!, aad: aad("item-key")))
        body.blob(try Crypto.seal(Array(secret.utf8), key: itemKey, aad: aad("secret")))
        let metadata = try Crypto.seal(encodeAttributes(item.attributes), key: keys.metadataKey(lockClass)!, aad: aad("metadata"))
        try set(store, row: row, metadata: metadata, secret: body.bytes)
    }

    func testFormat1RowsStillReadAndAreRewrittenByTheirNextUpdate() throws {
        let store = try scratch.create()
        let added = try store.add(generic("alice", secret: "unused"))
        try writeFormat1(store, row: added.rowID, item: added, secret: "format-1 secret")
        XCTAssertEqual(try secretString(store, query("alice")), "format-1 secret")

        let format1 = try columns(store, row: added.rowID)
        XCTAssertEqual(try store.update(query("alice"), attributes: [AttributeKey.label: .string("updated")]), 1)
        XCTAssertEqual(try secretString(store, query("alice")), "format-1 secret")
        let format2 = try columns(store, row: added.rowID)

        // A downgrade, piece by piece: the format-1 secret under the format-2 metadata, and the
        // format-1 metadata over the format-2 secret, are both refused.
        try set(store, row: added.rowID, metadata: format2.metadata, secret: format1.secret)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode)
        try set(store, row: added.rowID, metadata: format1.metadata, secret: format2.secret)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode)
    }

    func testKeyRotationRewritesFormat1Rows() throws {
        let store = try scratch.create()
        let added = try store.add(generic("alice", secret: "unused"))
        try writeFormat1(store, row: added.rowID, item: added, secret: "kept")
        try store.rotateKeys(password: Array("pw".utf8), newPassword: Array("pw".utf8), scrypt: .fastForTesting)
        XCTAssertEqual(try secretString(store, query("alice")), "kept")
        let rotated = try columns(store, row: added.rowID)
        let keys = try store.currentKeys()
        let v2 = store.additionalData(
            rowID: added.rowID, itemClass: .genericPassword, lockClass: .whenUnlocked,
            field: "metadata", version: [])
        XCTAssertNoThrow(
            try Crypto.open(rotated.metadata, key: keys.metadataKey(.whenUnlocked)!, aad: v2),
            "the rotated row is sealed in format 2")
    }
}
