@testable import KeychainCore
import XCTest

/// KeychainStore.addOrUpdate: the one add-or-update of `security add-* -U` and the credential
/// helpers' store.
final class AddOrUpdateTests: XCTestCase {
    var scratch: Scratch!

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    func testAddsWhenNothingMatchesAndUpdatesInPlaceOtherwise() throws {
        let store = try scratch.create()
        try store.addOrUpdate(generic("me", secret: "one"))
        let first = try XCTUnwrap(store.find(query("me")).first)
        var changed = generic("me", secret: "two")
        changed[AttributeKey.label] = .string("new label")
        try store.addOrUpdate(changed)
        let found = try store.find(query("me"), limit: nil, includeSecret: true)
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(found[0].rowID, first.rowID, "changed in place: the persistent reference stands")
        XCTAssertEqual(found[0][AttributeKey.creationDate], first[AttributeKey.creationDate], "the creation date is kept")
        XCTAssertEqual(found[0][AttributeKey.label]?.stringValue, "new label")
        XCTAssertEqual(String(decoding: found[0].secret ?? [], as: UTF8.self), "two")
    }

    func testAWiderQueryKeepsTheOldestMatchAndRemovesTheRest() throws {
        let store = try scratch.create()
        try store.add(generic("a"))
        try store.add(generic("b"))
        let oldest = try XCTUnwrap(store.find(query("a")).first)
        try store.addOrUpdate(generic("c", secret: "new"), matching: query(service: "svc"))
        let found = try store.find(query(service: "svc"), limit: nil, includeSecret: true)
        XCTAssertEqual(found.map(\.rowID), [oldest.rowID])
        XCTAssertEqual(found[0][AttributeKey.account]?.stringValue, "c")
        XCTAssertEqual(try secretString(store, query("c")), "new")
    }

    func testAQueryOfAnotherClassIsRefused() throws {
        let store = try scratch.create()
        XCTAssertStatus(try store.addOrUpdate(generic("me"), matching: Query(itemClass: .internetPassword)), .param)
        XCTAssertEqual(try store.count(), 0)
    }
}
