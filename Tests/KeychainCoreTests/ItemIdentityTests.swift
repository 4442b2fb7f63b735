@testable import KeychainCore
import XCTest

/// What names an item: its class's code in the `class` column, and the query that finds the
/// items it would collide with.
final class ItemIdentityTests: XCTestCase {
    func testEveryClassCodeReadsBackAsItsClass() {
        for itemClass in ItemClass.allCases { XCTAssertEqual(ItemClass(code: itemClass.code), itemClass) }
        XCTAssertEqual(Set(ItemClass.allCases.map(\.code)).count, ItemClass.allCases.count)
        for code: Int64 in [0, 6, -1, .max] { XCTAssertNil(ItemClass(code: code)) }
    }

    func testTheIdentifyingQueryNamesEveryPrimaryKeyAttributeWithTheDefaultOfAnAbsentOne() {
        for itemClass in ItemClass.allCases {
            let names = AttributeSchema.primaryKey(for: itemClass).filter { $0 != AttributeKey.synchronizable }
            let empty = Item(itemClass: itemClass)
            XCTAssertEqual(Query(identifying: empty).attributes, Dictionary(uniqueKeysWithValues: names.map { ($0, empty.effectiveValue($0)) }))
            var given = Item(itemClass: itemClass)
            given[AttributeKey.accessGroup] = .string("group")
            given[AttributeKey.label] = .string("not part of the key")
            let query = Query(identifying: given)
            XCTAssertEqual(query.attributes[AttributeKey.accessGroup], .string("group"))
            XCTAssertNil(query.attributes[AttributeKey.label])
            XCTAssertEqual(query.attributes.count, names.count)
        }
        var internet = Item(itemClass: .internetPassword)
        internet[AttributeKey.protocol] = .int(7)
        XCTAssertEqual(Query(identifying: internet).attributes[AttributeKey.protocol], .int(7))
        XCTAssertEqual(Query(identifying: Item(itemClass: .internetPassword)).attributes[AttributeKey.protocol], .int(0))
    }
}
