@testable import KeychainCore
@testable import SecretServiceItems
import XCTest

/// What a Secret Service client can reach: replace touches the item with the same attributes only,
/// a sandboxed app's view holds its own items only, and stored dates never trap the service.
final class SecretServiceScopeTests: StoreTestCase {
    @discardableResult
    private func add(_ attributes: [String: String], secret: String = "s", replace: Bool = false, owner: String? = nil) throws -> SecretItem {
        try store.addSecretItem(
            label: "l", attributes: attributes, secret: Array(secret.utf8), contentType: "text/plain",
            replace: replace, owner: owner
        ).item
    }

    private func rows(_ query: [String: String], owner: String? = nil) throws -> [Int64] {
        try store.searchSecretItems(query, owner: owner).unlocked.map(\.row)
    }

    /// One CreateItem(replace) with empty attributes deleted every password of the keychain: the
    /// spec's replace is of the item with the same attributes, not of every item that has them.
    func testReplaceTouchesOnlyTheItemWithTheSameAttributes() throws {
        let git = try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: ["srvr": .string("git.example"), "acct": .string("ann"), "ptcl": .string("htps")],
                secret: Array("git".utf8)))
        let wider = try add(["app": "x", "profile": "work"])
        let empty = try add([:], secret: "first", replace: true)
        XCTAssertEqual(Set(try rows([:])), [git.rowID, wider.row, empty.row], "an empty replace deletes nothing else")
        let narrower = try add(["app": "x"], replace: true)
        XCTAssertEqual(Set(try rows(["app": "x"])), [wider.row, narrower.row], "a subset replaces no superset")
        let same = try store.addSecretItem(
            label: "l", attributes: ["app": "x", "profile": "work"], secret: Array("2".utf8),
            contentType: "text/plain", replace: true)
        XCTAssertEqual(same.item.row, wider.row, "changed in place")
        XCTAssertEqual(same.replaced, [])
        XCTAssertFalse(same.isNew)
        let again = try store.addSecretItem(label: "l", attributes: [:], secret: Array("second".utf8), contentType: "text/plain", replace: true)
        XCTAssertEqual(again.item.row, empty.row, "the item with no attributes is the one an empty replace replaces")
        XCTAssertEqual(try store.secretItem(empty.row, includeSecret: true).secret, Array("second".utf8))
        XCTAssertEqual(try store.find(Query(itemClass: .internetPassword), limit: nil).count, 1, "git's credential is still there")
    }

    func testAnAppSeesOnlyItsOwnItems() throws {
        try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: ["srvr": .string("git.example"), "acct": .string("ann"), "ptcl": .string("htps")],
                secret: Array("git".utf8)))
        let unconfined = try add(["service": "mail", "account": "ann"])
        let mine = try add(["service": "mail", "account": "ann"], secret: "mine", owner: "org.example.A")
        let theirs = try add(["service": "mail", "account": "ann"], secret: "theirs", owner: "org.example.B")
        XCTAssertEqual(try rows(["service": "mail"], owner: "org.example.A"), [mine.row])
        XCTAssertEqual(try rows([:], owner: "org.example.A"), [mine.row])
        XCTAssertEqual(try rows(["server": "git.example"], owner: "org.example.A"), [])
        XCTAssertEqual(try rows(["service": "mail"]), [unconfined.row], "unconfined searches find no app's item in place of their own")
        XCTAssertEqual(Set(try store.secretItemRows()).intersection([mine.row, theirs.row]), [], "nor list one")
        var listing = Query(itemClass: .genericPassword)
        listing.includesAppItems = true
        XCTAssertEqual(try store.find(Query(itemClass: .genericPassword), limit: nil).map(\.rowID), [unconfined.row], "nor SecItem")
        XCTAssertEqual(try store.find(listing, limit: nil).count, 3, "a listing that asks for them sees them")
        XCTAssertEqual(try store.secretItemRows(owner: "org.example.B"), [theirs.row])
        XCTAssertEqual(try store.secretItem(mine.row, includeSecret: true, owner: "org.example.A").secret, Array("mine".utf8))
        XCTAssertEqual(try store.secretItem(mine.row).owner, "org.example.A")
        for row in [unconfined.row, theirs.row] {
            XCTAssertStatus(try store.secretItem(row, includeSecret: true, owner: "org.example.A"), .itemNotFound)
            XCTAssertStatus(try store.updateSecretItem(row, secret: Array("x".utf8), owner: "org.example.A"), .itemNotFound)
            XCTAssertStatus(try store.updateSecretItem(row, attributes: ["service": "mine now"], owner: "org.example.A"), .itemNotFound)
            XCTAssertStatus(try store.deleteSecretItem(row, owner: "org.example.A"), .itemNotFound)
        }
        XCTAssertEqual(try store.secretItem(theirs.row, includeSecret: true).secret, Array("theirs".utf8))
    }

    /// An app's item never takes the place of git's or another program's credential, whatever
    /// attributes it claims, and its replace never deletes one.
    func testAnAppCannotReplaceOrShadowOthersCredentials() throws {
        let git = try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: ["srvr": .string("git.example"), "acct": .string("ann"), "ptcl": .string("htps")],
                secret: Array("git".utf8)))
        let planted = try add(
            ["server": "git.example", "user": "ann", "protocol": "https"], secret: "planted", replace: true,
            owner: "org.example.A")
        XCTAssertEqual(planted.itemClass, .genericPassword, "an app's item is a generic password")
        XCTAssertEqual(try store.find(Query(itemClass: .internetPassword), limit: nil).map(\.rowID), [git.rowID])
        XCTAssertEqual(try rows(["server": "git.example"], owner: "org.example.A"), [planted.row])
        let unconfined = try add(["service": "s", "account": "a"], secret: "kept")
        let colliding = try store.addSecretItem(
            label: "l", attributes: ["service": "s", "account": "a"], secret: Array("app".utf8),
            contentType: "text/plain", replace: true, owner: "org.example.A")
        XCTAssertEqual(colliding.replaced, [])
        XCTAssertEqual(try store.secretItem(unconfined.row, includeSecret: true).secret, Array("kept".utf8))
        let second = try store.addSecretItem(
            label: "l", attributes: ["service": "s", "account": "a"], secret: Array("app2".utf8),
            contentType: "text/plain", replace: true, owner: "org.example.A")
        XCTAssertEqual(second.item.row, colliding.item.row, "its own item it replaces")
        XCTAssertEqual(try store.secretItem(colliding.item.row, includeSecret: true, owner: "org.example.A").secret, Array("app2".utf8))
        XCTAssertEqual(try store.secretItem(unconfined.row, includeSecret: true).secret, Array("kept".utf8))
    }

    func testAnAppsLockedItemsAreMatchedThroughTheIndexAndSurviveRotation() throws {
        let mine = try add(["k": "v"], owner: "org.example.A")
        try add(["k": "v"], owner: "org.example.B")
        store.lock()
        XCTAssertEqual(try store.searchSecretItems(["k": "v"], owner: "org.example.A").locked, [mine.row])
        XCTAssertEqual(try store.secretItemRows(owner: "org.example.A"), [mine.row])
        XCTAssertStatus(try store.secretItem(mine.row, owner: "org.example.A"), .interactionNotAllowed)
        XCTAssertStatus(try store.secretItem(mine.row, owner: "org.example.B"), .itemNotFound)
        try store.unlock(password: Array("pw".utf8))
        try store.rotateKeys(password: Array("pw".utf8), newPassword: Array("pw".utf8), scrypt: .fastForTesting)
        store.lock()
        XCTAssertEqual(try store.searchSecretItems(["k": "v"], owner: "org.example.A").locked, [mine.row])
        try store.unlock(password: Array("pw".utf8))
        _ = try store.updateSecretItem(mine.row, attributes: ["k": "w"], owner: "org.example.A")
        XCTAssertEqual(try rows(["k": "w"], owner: "org.example.A"), [mine.row], "the owner survives new attributes")
        XCTAssertEqual(try rows(["k": "w"], owner: "org.example.B"), [])
    }

    /// A crafted backup can bring any date: `UInt64(d.rounded())` trapped on 1.8e19 or infinity.
    func testStoredDatesAreClamped() throws {
        for (index, date) in [1.8e19, Double.infinity, -Double.infinity, Double.nan, -5, 1.7e9].enumerated() {
            var item = Item(
                itemClass: .genericPassword, attributes: ["svce": .string("dated"), "acct": .string("\(index)")],
                secret: Array("x".utf8))
            item["cdat"] = .date(date)
            item["mdat"] = .date(date)
            let stored = try store.add(item, keepingDates: true)
            let shown = try store.secretItem(stored.rowID)
            XCTAssertLessThanOrEqual(shown.created, 253_402_300_799, "\(date)")
            XCTAssertLessThanOrEqual(shown.modified, 253_402_300_799, "\(date)")
            if date == 1.7e9 { XCTAssertEqual(shown.created, 1_700_000_000) }
        }
    }

    func testOnlyAKeychainOfPasswordsIsTheServicesToDelete() throws {
        try add(["app": "x"])
        XCTAssertTrue(try store.holdsOnlySecretServiceItems())
        var guarded = Item(itemClass: .genericPassword, attributes: ["svce": .string("g")], secret: Array("x".utf8))
        guarded["accc"] = .int(Int64(AccessConditions.userPresence.rawValue))
        _ = try store.add(guarded, keepingDates: false)
        XCTAssertFalse(try store.holdsOnlySecretServiceItems())
    }
}
