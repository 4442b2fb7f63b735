@testable import KeychainCore
import XCTest

/// What a lookup keeps between calls (whether the Always key space holds rows of a class) must
/// never hide an item: a commit by another connection or a write of this one drops it.
final class LookupCacheTests: StoreTestCase {
    func testAnAlwaysItemAddedByAnotherConnectionIsFoundOnTheNextLookup() throws {
        try store.add(generic("wu"))
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
        XCTAssertEqual(try store.find(query("wu")).count, 1)
        let other = try scratch.open()
        try other.unlock(password: Array("pw".utf8))
        try other.add(generic("x", secret: "always", protection: .always))
        XCTAssertEqual(try secretString(store, query("x")), "always")
        try other.delete(query("x"))
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
    }

    func testAnAlwaysItemOfThisConnectionIsFoundAtOnce() throws {
        XCTAssertStatus(try store.find(query("x")), .itemNotFound)
        try store.add(generic("x", secret: "always", protection: .always))
        XCTAssertEqual(try secretString(store, query("x")), "always")
        // Moved out of the Always space and back by updates of this connection.
        try store.update(query("x"), attributes: [AttributeKey.accessible: .string(Protection.whenUnlocked.rawValue)])
        XCTAssertEqual(try store.find(query("x")).first?.protection, .whenUnlocked)
        try store.update(query("x"), attributes: [AttributeKey.accessible: .string(Protection.always.rawValue)])
        XCTAssertEqual(try store.find(query("x")).first?.protection, .always)
    }

    func testTheCacheIsPerClass() throws {
        try store.add(generic("g", protection: .always))
        var internet = Query(itemClass: .internetPassword)
        internet.attributes[AttributeKey.server] = .string("example.com")
        XCTAssertStatus(try store.find(internet), .itemNotFound)
        try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: [AttributeKey.server: .string("example.com"), AttributeKey.accessible: .string(Protection.always.rawValue)],
                secret: Array("i".utf8)))
        XCTAssertEqual(try store.find(internet, includeSecret: true).first?.secret, Array("i".utf8))
        XCTAssertEqual(try store.find(query("g")).count, 1)
    }
}
