@testable import KeychainCore
@testable import SecretServiceItems
import XCTest

/// What a Secret Service search reads and finds: each item class narrowed by its own columns or by
/// the attribute index, and nothing lost to either, whichever front end stored or changed the item.
final class SecretServiceSearchTests: StoreTestCase {
    @discardableResult
    private func add(_ attributes: [String: String], owner: String? = nil) throws -> SecretItem {
        try store.addSecretItem(
            label: "l", attributes: attributes, secret: Array("s".utf8), contentType: "text/plain", replace: false, owner: owner
        ).item
    }

    private func allRows() throws -> [Int64] {
        let stmt = try store.db.statement("SELECT rowid FROM items ORDER BY rowid")
        defer { stmt.reset() }
        var rows: [Int64] = []
        while try stmt.step() { rows.append(stmt.int(0)) }
        return rows
    }

    /// Every row whose view holds the query, read one by one.
    private func readEveryRow(_ query: [String: String], owner: String?) throws -> [Int64] {
        try allRows().filter { (try? store.secretItem($0))?.matches(query, owner: owner) == true }
    }

    /// Items stored through the Secret Service with and without an owner, by SecItem, changed by
    /// SetAttributes (an item keeps its class) and by SecItem (a mapped attribute changes under
    /// the Secret Service's feet); then random queries, each compared with reading every row.
    func testASearchFindsWhatReadingEveryRowFinds() throws {
        var random = SplitMix(state: 0x1234_5678_9abc_def1)
        let names = ["service", "account", "username", "server", "user", "xdg:schema", "application", "protocol"]
        let values = ["a", "b"]
        func pairs(_ count: Int) -> [String: String] {
            var out: [String: String] = [:]
            for _ in 0..<count { out[names.randomElement(using: &random)!] = values.randomElement(using: &random)! }
            if Int.random(in: 0..<4, using: &random) == 0 { out["xdg:schema"] = SecretAttributes.networkSchema }
            return out
        }
        var misses: [String] = []
        for round in 0..<8 {
            store = try scratch.create("round\(round)")
            for _ in 0..<30 {
                let some = pairs(Int.random(in: 1...4, using: &random))
                switch Int.random(in: 0..<6, using: &random) {
                case 0, 1: _ = try? add(some)
                case 2: _ = try? add(some, owner: ["A", "B"].randomElement(using: &random)!)
                case 3:
                    if let row = try allRows().randomElement(using: &random) {
                        _ = try? store.updateSecretItem(row, attributes: some, owner: (try? store.secretItem(row))?.owner)
                    }
                case 4:
                    if let row = try allRows().randomElement(using: &random), let item = try? store.secretItem(row) {
                        var query = Query(itemClass: item.itemClass)
                        query.rows = [row]
                        query.synchronizable = .any
                        query.includesAppItems = true
                        let key = [item.itemClass == .internetPassword ? "srvr" : "svce", "acct"].randomElement(using: &random)!
                        _ = try? store.update(query, attributes: [key: .string(values.randomElement(using: &random)!)])
                    }
                default:
                    let (first, second) = (values.randomElement(using: &random)!, values.randomElement(using: &random)!)
                    if Bool.random(using: &random) {
                        _ = try? store.add(generic(first, service: second))
                    } else {
                        _ = try? store.add(
                            Item(itemClass: .internetPassword, attributes: ["srvr": .string(first), "acct": .string(second)], secret: [1]))
                    }
                }
            }
            for _ in 0..<150 {
                let query = pairs(Int.random(in: 1...3, using: &random))
                for owner in [nil, "A"] {
                    let expected = try readEveryRow(query, owner: owner)
                    let found = try store.searchSecretItems(query, owner: owner).unlocked.map(\.row)
                    if found != expected { misses.append("\(owner ?? "-") \(query): \(found), not \(expected)") }
                }
            }
        }
        XCTAssertEqual(misses.prefix(10), [], "\(misses.count) searches differ")
    }

    /// An application storing many items under one service, each with an id of its own: a lookup
    /// by service and id finds its item and opens no other (a damaged one under the same service
    /// would fail it). Which way it reads them, the index's narrowest pair rather than every row
    /// of the service, shows in time only: 200 such lookups among 2,000 items took 4 s when every
    /// row of the service was read and checked, 0.02 s now (measured by hand, not here).
    func testOneOfManyItemsUnderAServiceIsFoundAndNoOtherOpened() throws {
        let items = try (0..<40).map { try add(["service": "app", "id": "\($0)", "xdg:schema": "S"]) }
        try store.db.statement("UPDATE items SET metadata = ? WHERE rowid = ?").run([.blob(Array(repeating: 7, count: 96)), .int(items[0].row)])
        XCTAssertEqual(try store.searchSecretItemRows(["service": "app", "id": "7", "xdg:schema": "S"]).unlocked, [items[7].row])
        XCTAssertThrowsError(try store.searchSecretItems(["service": "app"]), "a search of the whole service still reads the damaged item")
    }

    /// Pairs a backup's or another device's item brings in its encoded attributes cannot name the
    /// owner marks (no client's pair starts with NUL): the item stays listed, and in no app's
    /// locked results.
    func testAnItemAddedWholeCannotPlantOwnerMarks() throws {
        let apps = try add(["k": "v"], owner: "A")
        let planted = try store.add(
            Item(
                itemClass: .genericPassword,
                attributes: [
                    "svce": .string("x"), "acct": .string("y"),
                    AttributeKey.freeFormAttributes: .data(FreeFormAttributes.encode(["k": "v", "\u{0}owner": "A", "\u{0}owned": ""]))
                ], secret: [1]))
        XCTAssertTrue(try store.secretItemRows().contains(planted.rowID), "listed as the unconfined item it is")
        XCTAssertEqual(try store.searchSecretItems(["k": "v"]).unlocked.map(\.row), [planted.rowID])
        store.lock()
        XCTAssertEqual(try store.searchSecretItems(["k": "v"], owner: "A").locked, [apps.row], "A's locked results hold A's item only")
        XCTAssertEqual(try store.searchSecretItems(["k": "v"]).locked, [planted.rowID])
    }
}

/// A seeded generator, so that a failing random case comes back the same.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
