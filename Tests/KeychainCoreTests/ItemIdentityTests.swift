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

    /// The primary-key bytes every keychain's uniqueness hashes: made from a table now, they must
    /// stay what they were (each attribute's effective value, canonical by its kind), or existing
    /// items would no longer collide with their duplicates.
    func testPrimaryKeyBytesAreTheEffectiveValuesInCanonicalForm() {
        func reference(_ item: Item) -> Bytes {
            var w = ByteWriter(capacity: 256)
            w.u64(UInt64(item.itemClass.code))
            for name in AttributeSchema.primaryKey(for: item.itemClass) {
                w.string(name)
                KeychainStore.canonical(item.effectiveValue(name), name: name, itemClass: item.itemClass).write(to: &w)
            }
            return w.bytes
        }
        // Values as callers give them: strings for blobs, numbers for booleans, empty codes.
        let values: [String: [AttributeValue]] = [
            AttributeKey.account: [.string("acct"), .data(Array("acct".utf8)), .string("")],
            AttributeKey.service: [.string("svc"), .data([0, 255])],
            AttributeKey.server: [.string("example.com")],
            AttributeKey.protocol: [.string("htps"), .int(7), .string("")],
            AttributeKey.authenticationType: [.string("dflt"), .string("")],
            AttributeKey.port: [.int(8443)],
            AttributeKey.path: [.string("/")],
            AttributeKey.securityDomain: [.string("realm")],
            AttributeKey.accessGroup: [.string("group")],
            AttributeKey.synchronizable: [.bool(true), .int(1), .int(0)],
            AttributeKey.applicationTag: [.data([1, 2]), .string("tag")],
            AttributeKey.keyClass: [.int(1)],
            AttributeKey.keySizeInBits: [.int(256)],
            AttributeKey.certificateType: [.int(3)],
            AttributeKey.issuer: [.data([48, 0])],
            AttributeKey.serialNumber: [.data([1])]
        ]
        for itemClass in ItemClass.allCases {
            let empty = Item(itemClass: itemClass)
            XCTAssertEqual(KeychainStore.primaryKeyBytes(empty), reference(empty), "\(itemClass) with no attributes")
            for name in AttributeSchema.primaryKey(for: itemClass) {
                for value in values[name] ?? [] {
                    var item = Item(itemClass: itemClass)
                    item[name] = value
                    item[AttributeKey.label] = .string("not part of the key")
                    XCTAssertEqual(KeychainStore.primaryKeyBytes(item), reference(item), "\(itemClass) \(name) = \(value)")
                }
            }
            var full = Item(itemClass: itemClass)
            for name in AttributeSchema.primaryKey(for: itemClass) { full[name] = values[name]?.first }
            XCTAssertEqual(KeychainStore.primaryKeyBytes(full), reference(full), "\(itemClass) with every attribute")
        }
    }
}
