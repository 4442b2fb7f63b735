@testable import KeychainCore
@testable import SecretServiceItems
import XCTest

/// `security sync default on`: what programs store without choosing becomes synchronizable.
final class SyncDefaultTests: StoreTestCase {
    func synchronizable(_ row: Int64) throws -> Bool? {
        var query = Query(itemClass: .genericPassword)
        query.rows = [row]
        query.synchronizable = .any
        query.includesAppItems = true
        return try store.find(query).first?[AttributeKey.synchronizable]?.boolValue
    }

    func testTheSecretServicesUnconfinedItemsFollowTheSetting() throws {
        let before = try store.addSecretItem(label: "l", attributes: ["k": "1"], secret: [1], contentType: "text/plain", replace: false).item
        XCTAssertEqual(try synchronizable(before.row), false, "off unless set")
        try store.setSyncsNewItems(true)
        XCTAssertTrue(store.syncsNewItems)
        let after = try store.addSecretItem(label: "l", attributes: ["k": "2"], secret: [2], contentType: "text/plain", replace: false).item
        XCTAssertEqual(try synchronizable(after.row), true)
        let app = try store.addSecretItem(label: "l", attributes: ["k": "3"], secret: [3], contentType: "text/plain", replace: false, owner: "org.example.App")
            .item
        XCTAssertEqual(try synchronizable(app.row), false, "a sandboxed app's items stay on this machine")
        try store.setSyncsNewItems(false)
        XCTAssertFalse(store.syncsNewItems)
    }

    /// A batch reads the setting once and hands it to each store (the Secret Service's group of
    /// CreateItem calls, an import of a keyring): what it hands in is what the item gets, and a
    /// store is not slowed by asking again. Handed in against the setting here, to tell the two apart.
    func testItemsOfABatchGetTheSettingItReadOnce() throws {
        func add(_ n: UInt8, owner: String? = nil, syncs: Bool) throws -> Int64 {
            try store.addSecretItem(
                label: "l", attributes: ["k": "\(n)"], secret: [n], contentType: "text/plain", replace: false, owner: owner,
                syncsNewItems: syncs
            ).item.row
        }
        XCTAssertFalse(store.syncsNewItems)
        let (on, app) = try store.batch { (try add(4, syncs: true), try add(5, owner: "org.example.App", syncs: true)) }
        XCTAssertEqual(try synchronizable(on), true, "what the batch read, not asked again")
        XCTAssertEqual(try synchronizable(app), false, "an app's item stays on this machine whatever is handed in")
        try store.setSyncsNewItems(true)
        XCTAssertEqual(try synchronizable(try add(6, syncs: false)), false)
        try store.setSyncsNewItems(false)
    }

    /// A keychain too locked to read the setting says so (nil), so that a batch leaves each item
    /// to ask again instead of storing all of them as "off".
    func testASettingTooLockedToReadIsUnknown() throws {
        try store.setSyncsNewItems(true)
        store.lockAll()
        XCTAssertNil(store.readSyncDefault())
        XCTAssertFalse(store.syncsNewItems, "off, for a single store")
        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(store.readSyncDefault(), true)
        try store.setSyncsNewItems(false)
        XCTAssertEqual(store.readSyncDefault(), false)
    }

    func testSyncsOwnItemsAreHiddenFromTheSecretService() throws {
        let before = try store.secretItemRows()
        try store.setSyncsNewItems(true)
        XCTAssertEqual(try store.count(), before.count + 1)
        XCTAssertEqual(try store.secretItemRows(), before, "the setting's item is listed to no client")
        XCTAssertStatus(try store.find(query()), .itemNotFound, "nor found by an ordinary query")
    }
}
