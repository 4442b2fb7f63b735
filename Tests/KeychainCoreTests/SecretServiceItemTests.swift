@testable import KeychainCore
@testable import SecretServiceItems
import Glibc
import XCTest

/// The Secret Service's items in the engine: free-form attributes, exact matching, the opaque
/// index, and the mapping to Apple's generic and internet passwords both ways.
final class SecretServiceItemTests: StoreTestCase {
    @discardableResult
    private func add(
        _ attributes: [String: String], secret: String = "s3cret", label: String = "label",
        replace: Bool = false
    ) throws -> SecretItem {
        try store.addSecretItem(
            label: label, attributes: attributes, secret: Array(secret.utf8),
            contentType: "text/plain", replace: replace
        ).item
    }

    /// What a search finds; SearchItems' search of rows only must find the same.
    private func found(_ query: [String: String], owner: String? = nil) throws -> [Int64] {
        let full = try store.searchSecretItems(query, owner: owner)
        let rows = try store.searchSecretItemRows(query, owner: owner)
        XCTAssertEqual(rows.unlocked, full.unlocked.map(\.row), "the search of rows agrees for \(query)")
        XCTAssertEqual(rows.locked, full.locked, "the search of rows agrees for \(query)")
        return rows.unlocked
    }

    /// The attribute index is keyed under class key C: a rotation, which makes a new C, must
    /// leave every item findable by its free-form attributes (and nothing findable by a stale key).
    func testItemsAreStillFoundAfterKeyRotation() throws {
        let a = try add(["application": "chrome", "profile": "work"])
        let b = try add(["user": "alice", "server": "git.example", "protocol": "https"])
        let staleHashes = try store.db.statement("SELECT count(*) FROM secret_attributes")
        XCTAssertTrue(try staleHashes.step())
        let before = staleHashes.int(0)
        staleHashes.reset()
        try store.rotateKeys(password: Array("pw".utf8), newPassword: Array("pw".utf8), scrypt: .fastForTesting)
        XCTAssertEqual(try found(["application": "chrome", "profile": "work"]), [a.row])
        XCTAssertEqual(try found(["user": "alice", "server": "git.example"]), [b.row])
        XCTAssertEqual(try found(["application": "firefox"]), [])
        XCTAssertEqual(try store.secretItem(a.row, includeSecret: true).secret, Array("s3cret".utf8))
        XCTAssertTrue(try staleHashes.step())
        XCTAssertEqual(staleHashes.int(0), before, "the index was rebuilt, not added to")
        staleHashes.reset()
    }

    /// libsecret names its schema in every item and every search (`xdg:schema`), as python-keyring
    /// does its `application`: a search that also gives the service reads that service's rows, not
    /// every item of the schema. (It did read them all, for each lookup, each replace and each
    /// item of an import: 10,000 items of one schema took 277 s to import, 1 s now.) A damaged
    /// item of the same schema under another service shows which rows were read.
    func testASearchBySchemaAndServiceReadsOnlyThatServicesRows() throws {
        let schema = ["xdg:schema": "org.freedesktop.Secret.Generic"]
        let other = try add(schema.merging(["service": "other", "username": "u"]) { $1 })
        let mine = try add(schema.merging(["service": "mine", "username": "u"]) { $1 })
        let network = try add(schema.merging(["service": "mine", "server": "git.example", "user": "u"]) { $1 })
        try store.db.statement("UPDATE items SET metadata = ? WHERE rowid = ?").run([.blob(Array(repeating: 7, count: 96)), .int(other.row)])
        XCTAssertEqual(try found(schema.merging(["service": "mine"]) { $1 }), [mine.row, network.row], "an internet password's service is its own attribute")
        XCTAssertEqual(try found(schema.merging(["service": "mine", "username": "u"]) { $1 }), [mine.row])
        XCTAssertEqual(try found(["service": "mine", "server": "git.example"]), [network.row])
        let again = try add(schema.merging(["service": "mine", "username": "u"]) { $1 }, secret: "new", replace: true)
        XCTAssertEqual(again.row, mine.row, "replaced in place, found by its service")
        XCTAssertThrowsError(try store.searchSecretItems(schema), "a search of the whole schema still reads the damaged item")
    }

    /// An item that comes back from a backup is found by its own attributes, as before: the
    /// Secret Service looks those up in the index only, and the import indexes them.
    func testAnItemFromABackupIsFoundByItsOwnAttributes() throws {
        let chrome = try add(["application": "chrome", "xdg:schema": "chrome_libsecret_os_crypt_password_v2"])
        let backup = try store.exportBackup(password: Array("backup pw".utf8), scrypt: .fastForTesting).backup
        let target = try scratch.create("target")
        XCTAssertEqual(try target.importBackup(backup, password: Array("backup pw".utf8)).imported, 1)
        let found = try target.searchSecretItems(["application": "chrome"]).unlocked
        XCTAssertEqual(found.map(\.attributes), [chrome.attributes])
        XCTAssertEqual(try target.secretItem(try XCTUnwrap(found.first).row, includeSecret: true).secret, Array("s3cret".utf8))
    }

    func testArbitraryAttributesMatchExactlyOnAllPairs() throws {
        let a = try add(["application": "chrome", "xdg:schema": "chrome_libsecret_os_crypt_password_v2"])
        let b = try add(["application": "chrome", "profile": "work"])
        _ = try add(["application": "Chrome"])
        XCTAssertEqual(try found(["application": "chrome"]), [a.row, b.row])
        XCTAssertEqual(try found(["application": "chrome", "profile": "work"]), [b.row])
        XCTAssertEqual(try found(["application": "chrom"]), [])
        XCTAssertEqual(try found(["application": "chrome", "profile": "home"]), [])
        XCTAssertEqual(try found([:]).count, 3)
        let item = try store.secretItem(a.row, includeSecret: true)
        XCTAssertEqual(item.attributes, ["application": "chrome", "xdg:schema": "chrome_libsecret_os_crypt_password_v2"])
        XCTAssertEqual(item.secret, Array("s3cret".utf8))
        XCTAssertEqual(item.label, "label")
        XCTAssertEqual(item.contentType, "text/plain")
        XCTAssertGreaterThan(item.created, 0)
    }

    /// The index is read from its narrowest pair and the others are checked row by row: every
    /// mix of wide and narrow pairs, and a pair more items share than the first count's bound (16),
    /// finds exactly the items holding every pair.
    func testSearchesMixingWideAndNarrowPairsFindExactlyTheMatches() throws {
        var rows: [Int64] = []
        for n in 0..<40 {
            rows.append(try add(["application": "many", "n": String(n), "half": n % 2 == 0 ? "even" : "odd"]).row)
        }
        _ = try add(["application": "other", "n": "7"])
        XCTAssertEqual(try found(["application": "many"]), rows)
        XCTAssertEqual(try found(["application": "many", "n": "7"]), [rows[7]])
        XCTAssertEqual(try found(["n": "7"]).count, 2)
        XCTAssertEqual(try found(["application": "many", "half": "even"]), stride(from: 0, to: 40, by: 2).map { rows[$0] })
        XCTAssertEqual(try found(["application": "many", "half": "odd", "n": "8"]), [])
        XCTAssertEqual(try found(["application": "many", "half": "even", "n": "8"]), [rows[8]])
        XCTAssertEqual(try found(["application": "many", "n": "40"]), [])
    }

    func testLookAlikeItemsAreKeptApartUnlessReplaced() throws {
        let first = try add(["service": "mail", "account": "ann"], secret: "one")
        let second = try add(["service": "mail", "account": "ann"], secret: "two")
        XCTAssertNotEqual(first.row, second.row)
        XCTAssertEqual(try found(["service": "mail"]).count, 2)
        let third = try store.addSecretItem(
            label: "l", attributes: ["service": "mail", "account": "ann"],
            secret: Array("three".utf8), contentType: "text/plain", replace: true)
        XCTAssertEqual(third.item.row, first.row, "the first stays, changed in place")
        XCTAssertEqual(third.replaced, [second.row], "the other goes")
        XCTAssertEqual(try found(["service": "mail"]), [first.row])
        XCTAssertEqual(try store.secretItem(first.row, includeSecret: true).secret, Array("three".utf8))
    }

    /// CreateItem(replace) changes the item it replaces, as gnome-keyring does: the same row (and
    /// object path), its creation date kept, the new label, secret, content type and modification
    /// date taken, the attribute index unchanged.
    func testReplaceChangesTheItemInPlace() throws {
        let old = try store.addSecretItem(
            label: "old", attributes: ["app": "x", "n": "1"], secret: Array("one".utf8), contentType: "text/plain", replace: false,
            created: 1_000_000, modified: 1_000_000)
        let new = try store.addSecretItem(
            label: "new", attributes: ["n": "1", "app": "x"], secret: Array("two".utf8), contentType: "application/octet-stream",
            replace: true)
        XCTAssertEqual(new.item.row, old.item.row)
        XCTAssertFalse(new.isNew)
        XCTAssertEqual(new.replaced, [])
        let item = try store.secretItem(old.item.row, includeSecret: true)
        XCTAssertEqual(item.label, "new")
        XCTAssertEqual(item.contentType, "application/octet-stream")
        XCTAssertEqual(item.secret, Array("two".utf8))
        XCTAssertEqual(item.created, 1_000_000)
        XCTAssertGreaterThan(item.modified, 1_000_000)
        XCTAssertEqual(item.attributes, ["app": "x", "n": "1"])
        XCTAssertEqual(try found(["app": "x"]), [old.item.row])
        XCTAssertEqual(try found(["n": "1", "app": "x"]), [old.item.row])
        let other = try store.addSecretItem(
            label: "l", attributes: ["app": "x", "n": "2"], secret: [1], contentType: "text/plain", replace: true)
        XCTAssertTrue(other.isNew, "nothing with that set: a new item")
    }

    /// A replace stores the secret as a new item would be stored: an item with the same set kept
    /// in a weaker class (Always, readable without the password) or syncing where new items do not
    /// is not given the new secret in place, but gives way to a new item.
    func testReplaceStoresTheSecretAsANewItemWould() throws {
        let attributes = ["service": "svc", "account": "acc"]
        func planted(_ extra: [String: AttributeValue]) throws -> Int64 {
            var values: [String: AttributeValue] = ["svce": .string("svc"), "acct": .string("acc")]
            values.merge(extra) { _, new in new }
            let row = try store.add(Item(itemClass: .genericPassword, attributes: values, secret: Array("old".utf8))).rowID
            XCTAssertEqual(try found(attributes), [row], "the planted item has the same set")
            return row
        }
        func replaced(_ row: Int64, _ what: String) throws {
            let new = try store.addSecretItem(label: "l", attributes: attributes, secret: Array("new".utf8), contentType: "text/plain", replace: true)
            XCTAssertTrue(new.isNew, what)
            XCTAssertEqual(new.replaced, [row], what)
            XCTAssertEqual(try found(attributes), [new.item.row], what)
            var query = Query(itemClass: .genericPassword)
            query.rows = [new.item.row]
            let stored = try XCTUnwrap(store.find(query, limit: nil).first, what)
            XCTAssertEqual(stored.protection, .whenUnlocked, what)
            XCTAssertEqual(stored.effectiveValue("sync"), .bool(false), what)
            _ = try store.delete(query)
        }
        try replaced(try planted(["pdmn": .string(Protection.always.rawValue)]), "a weaker class")
        try replaced(try planted(["sync": .bool(true)]), "syncing")
        let alike = try planted([:])
        let new = try store.addSecretItem(label: "l", attributes: attributes, secret: Array("new".utf8), contentType: "text/plain", replace: true)
        XCTAssertEqual(new.item.row, alike, "kept as a new item would be: changed in place")
    }

    /// A replace still leaves one credential where git-credential-keychain's internet password is
    /// the same one by Apple's rules and the item with the same set differs from the new one in
    /// what else makes that key (its access group, as a look-alike kept apart; whether it syncs).
    func testReplaceInPlaceStillTakesThePlaceOfTheSameInternetPassword() throws {
        let git = ["xdg:schema": "org.git.Password", "server": "h.example", "user": "ann", "protocol": "https"]
        let credential = Item(
            itemClass: .internetPassword, attributes: ["srvr": .string("h.example"), "acct": .string("ann"), "ptcl": .string("htps")],
            secret: Array("old".utf8))
        let byServer = Query(itemClass: .internetPassword, attributes: ["srvr": .string("h.example")])
        func store(_ secret: String, replace: Bool) throws {
            _ = try self.store.addSecretItem(label: "git", attributes: git, secret: Array(secret.utf8), contentType: "text/plain", replace: replace)
        }
        // A look-alike in an access group of its own, beside git-credential-keychain's item.
        try self.store.add(credential)
        try store("old", replace: false)
        try store("new", replace: true)
        XCTAssertEqual(try self.store.find(byServer, limit: nil).count, 1, "one credential for ann@h.example")
        XCTAssertEqual(try secretString(self.store, byServer), "new", "git-credential-keychain reads the new password")
        _ = try self.store.delete(byServer)
        // Stored while `sync default` was on, git's item after it was turned off.
        try self.store.setSyncsNewItems(true)
        try store("old", replace: true)
        try self.store.setSyncsNewItems(false)
        try self.store.add(credential)
        try store("new", replace: true)
        XCTAssertEqual(try secretString(self.store, byServer), "new", "git-credential-keychain reads the new password")
    }

    /// A replace that fails after the other items with the same set went brings them back.
    func testAFailedReplaceRestoresEverything() throws {
        let a = try add(["app": "x"], secret: "a")
        let b = try add(["app": "x"], secret: "b")
        try store.db.execute("CREATE TEMP TRIGGER refuse_updates BEFORE UPDATE ON items BEGIN SELECT RAISE(ABORT, 'refused'); END")
        XCTAssertThrowsError(
            try store.addSecretItem(label: "l", attributes: ["app": "x"], secret: Array("c".utf8), contentType: "text/plain", replace: true))
        try store.db.execute("DROP TRIGGER refuse_updates")
        XCTAssertEqual(try found(["app": "x"]), [a.row, b.row])
        XCTAssertEqual(try store.secretItem(a.row, includeSecret: true).secret, Array("a".utf8))
        XCTAssertEqual(try store.secretItem(b.row, includeSecret: true).secret, Array("b".utf8))
    }

    /// An item whose access control needs the user's presence is listed through the Secret Service,
    /// but its secret is not given, changed or deleted there (polkit could only vouch for the service).
    func testItemsNeedingAPersonAreNotServed() throws {
        let guarded = try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: [
                    "srvr": .string("guarded.example"), "acct": .string("ann"),
                    "accc": .int(Int64(AccessConditions.userPresence.rawValue))
                ],
                secret: Array("pw".utf8)))
        let listed = try store.searchSecretItems(["server": "guarded.example"]).unlocked
        XCTAssertEqual(listed.map(\.row), [guarded.rowID], "listed")
        for attempt in [
            { _ = try self.store.secretItem(guarded.rowID, includeSecret: true) },
            { _ = try self.store.updateSecretItem(guarded.rowID, secret: Array("new".utf8)) },
            { try self.store.deleteSecretItem(guarded.rowID) },
            {
                _ = try self.store.addSecretItem(
                    label: "l", attributes: ["server": "guarded.example", "user": "ann"],
                    secret: [1], contentType: "text/plain", replace: true)
            }
        ] {
            XCTAssertThrowsError(try attempt()) { XCTAssertEqual(($0 as? KeychainError)?.code, .interactionNotAllowed) }
        }
        XCTAssertEqual(try store.searchSecretItems(["server": "guarded.example"]).unlocked.map(\.row), [guarded.rowID], "still there")
    }

    func testNetworkPasswordsAreInternetPasswordsBothWays() throws {
        let stored = try add([
            "xdg:schema": "org.git.Password", "user": "ann", "server": "git.example.com",
            "protocol": "https", "port": "8443", "object": "team/repo.git"
        ])
        XCTAssertEqual(stored.itemClass, .internetPassword)
        // What `security find-internet-password` and git-credential-keychain look for.
        var query = Query(
            itemClass: .internetPassword,
            attributes: [
                "srvr": .string("git.example.com"), "acct": .string("ann"), "ptcl": .string("htps"),
                "port": .int(8443), "path": .string("team/repo.git")
            ])
        XCTAssertEqual(try secretString(store, query), "s3cret")

        // And the reverse: an item stored by another front end, found by network-password attributes.
        try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: ["srvr": .string("other.example"), "acct": .string("bob"), "ptcl": .string("htps")],
                secret: Array("pw".utf8)))
        let result = try store.searchSecretItems(["server": "other.example", "protocol": "https"]).unlocked
        XCTAssertEqual(result.count, 1)
        XCTAssertEqual(
            result.first?.attributes,
            [
                "server": "other.example", "user": "bob", "protocol": "https",
                "xdg:schema": "org.gnome.keyring.NetworkPassword"
            ])
        // libsecret's network-password schema, as clients that search with it send it.
        XCTAssertEqual(try store.searchSecretItems(["xdg:schema": "org.gnome.keyring.NetworkPassword", "server": "other.example"]).unlocked.count, 1)

        // A change made through Apple's API shows through the Secret Service.
        query.attributes = ["srvr": .string("git.example.com")]
        try store.update(query, attributes: ["acct": .string("carol")])
        let changed = try store.secretItem(stored.row)
        XCTAssertEqual(changed.attributes["user"], "carol")
        XCTAssertEqual(changed.attributes["port"], "8443")
        XCTAssertEqual(try found(["xdg:schema": "org.git.Password", "user": "carol"]), [stored.row])
        XCTAssertEqual(try found(["xdg:schema": "org.git.Password", "user": "ann"]), [])
    }

    /// The view reads only stored Apple attributes: that is the same as reading the effective
    /// value only while every mapped attribute's class default shows as nothing.
    func testEveryMappedAttributesDefaultShowsAsNothing() {
        for itemClass in [ItemClass.genericPassword, .internetPassword] {
            for (_, apple) in SecretAttributes.mappedNames(itemClass, stored: [:]) {
                let value = Item(itemClass: itemClass, attributes: [:]).effectiveValue(apple)
                XCTAssertEqual(SecretAttributes.text(value, apple: apple), "", "\(itemClass.rawValue) \(apple)")
            }
        }
    }

    /// A search compares each asked attribute with `SecretAttributes.value`, not the whole view:
    /// for every kind of item, stored by the service or another front end, changed since or not,
    /// each name must read as the view shows it (nil where the view has none).
    func testEachAttributeAloneIsWhatTheViewShows() throws {
        var rows = [
            try add(["xdg:schema": "org.git.Password", "user": "ann", "server": "a.example", "protocol": "https", "port": "8443", "object": "r.git"]).row,
            try add(["server": "b.example", "port": "not-a-port", "authtype": "basic", "domain": "corp"]).row,
            try add(["service": "vpn", "username": "ann", "extra": "x"]).row,
            try add(["service": "vpn", "account": "bob", "username": "also"]).row,
            try add(["application": "chrome"]).row
        ]
        try store.add(
            Item(itemClass: .internetPassword, attributes: ["srvr": .string("c.example"), "acct": .string("carl"), "ptcl": .string("ftp "), "port": .int(21)]))
        try store.add(Item(itemClass: .genericPassword, attributes: ["svce": .string("web"), "acct": .string("dora")]))
        try store.add(Item(itemClass: .internetPassword, attributes: ["srvr": .string("d.example")]))
        // Another front end changes what the service stored: the view follows the Apple attribute.
        try store.update(Query(itemClass: .internetPassword, attributes: ["srvr": .string("a.example")]), attributes: ["acct": .string("zed"), "port": .int(0)])
        rows += try store.secretItemRows().filter { !rows.contains($0) }
        XCTAssertEqual(rows.count, 8)
        let names = [
            "user", "server", "protocol", "port", "object", "authtype", "domain", "service", "account", "username", "xdg:schema", "extra", "application",
            "absent"
        ]
        for row in rows {
            let shown = try store.secretItem(row)
            let item = try XCTUnwrap(store.find(Query(reference: PersistentReference(itemClass: shown.itemClass, rowID: row))).first)
            let stored = SecretAttributes.storedAttributes(of: item)
            XCTAssertEqual(SecretAttributes.view(of: item), shown.attributes)
            for name in Set(names).union(shown.attributes.keys) {
                XCTAssertEqual(SecretAttributes.value(name, of: item, stored: stored), shown.attributes[name], "row \(row) \(name)")
            }
            XCTAssertTrue(SecretAttributes.viewMatches(shown.attributes, item))
            XCTAssertEqual(try found(shown.attributes), [row], "found by its whole view")
            for (name, value) in shown.attributes { XCTAssertFalse(SecretAttributes.viewMatches([name: value + "?"], item)) }
        }
    }

    /// GetSecret(s)' engine call: the secret and content type, with the same refusals as the item.
    func testSecretComesWithItsContentTypeAndTheOwnersChecks() throws {
        let item = try store.addSecretItem(
            label: "app", attributes: ["application": "app"], secret: Array("pw".utf8), contentType: "application/octet-stream",
            replace: false, owner: "org.example.App"
        ).item
        let opened = try store.secret(item.row, owner: "org.example.App")
        XCTAssertEqual(opened.secret, Array("pw".utf8))
        XCTAssertEqual(opened.contentType, "application/octet-stream")
        XCTAssertStatus(try store.secret(item.row, owner: "org.example.Other"), .itemNotFound)
        XCTAssertEqual(try store.secret(item.row).secret, Array("pw".utf8), "an unconfined caller reads any item")
        XCTAssertStatus(try store.secret(item.row + 1000), .itemNotFound)
        store.lock()
        XCTAssertStatus(try store.secret(item.row, owner: "org.example.App"), .interactionNotAllowed)
    }

    func testGenericPasswordsMapServiceAndAccountOrUsername() throws {
        let a = try add(["service": "vpn", "username": "ann"])
        let item = try store.find(query("ann", service: "vpn")).first
        XCTAssertEqual(item?.rowID, a.row)
        try store.add(generic("bob", service: "web"))
        XCTAssertEqual(try store.searchSecretItems(["service": "web"]).unlocked.first?.attributes, ["service": "web", "account": "bob"])
        XCTAssertEqual(try found(["username": "ann"]), [a.row])
    }

    func testReplaceUpdatesTheCredentialAnotherFrontEndStored() throws {
        try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: ["srvr": .string("h.example"), "acct": .string("ann"), "ptcl": .string("htps")],
                secret: Array("old".utf8)))
        let new = try store.addSecretItem(
            label: "git",
            attributes: [
                "xdg:schema": "org.git.Password", "server": "h.example",
                "user": "ann", "protocol": "https"
            ],
            secret: Array("new".utf8), contentType: "text/plain", replace: true)
        XCTAssertEqual(new.replaced.count, 1)
        let q = Query(itemClass: .internetPassword, attributes: ["srvr": .string("h.example")])
        XCTAssertEqual(try store.find(q, limit: nil).count, 1)
        XCTAssertEqual(try secretString(store, q), "new")
    }

    func testUpdateKeepsTheRowAndReindexes() throws {
        let a = try add(["app": "x", "service": "s"])
        let updated = try store.updateSecretItem(
            a.row, label: "new", attributes: ["app": "y", "service": "t"],
            secret: Array("v2".utf8), contentType: "application/octet-stream")
        XCTAssertEqual(updated.row, a.row)
        XCTAssertEqual(updated.label, "new")
        XCTAssertEqual(updated.contentType, "application/octet-stream")
        XCTAssertEqual(try found(["app": "x"]), [])
        XCTAssertEqual(try found(["app": "y"]), [a.row])
        XCTAssertEqual(try store.find(query(service: "t")).first?.rowID, a.row)
        XCTAssertEqual(try store.secretItem(a.row, includeSecret: true).secret, Array("v2".utf8))
        try store.deleteSecretItem(a.row)
        XCTAssertStatus(try store.secretItem(a.row), .itemNotFound)
        XCTAssertEqual(try indexRows(), 0, "the trigger removes a deleted item's hashes")
    }

    func testLockedItemsAreMatchedThroughTheIndexOnly() throws {
        let a = try add(["app": "x"])
        try store.add(generic("bob", service: "web"))
        store.lock()
        let result = try store.searchSecretItems(["app": "x"])
        XCTAssertEqual(result.unlocked.count, 0)
        XCTAssertEqual(result.locked, [a.row])
        XCTAssertEqual(try store.searchSecretItems(["app": "y"]).locked, [])
        XCTAssertStatus(try store.secretItem(a.row), .interactionNotAllowed)
        XCTAssertStatus(try add(["app": "z"]), .interactionNotAllowed)
        XCTAssertStatus(try store.deleteSecretItem(a.row), .interactionNotAllowed)
        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try found(["app": "x"]), [a.row])
    }

    func testNoAttributeNameOrValueIsReadableInTheFile() throws {
        try add(["distinctive-name-7f3a": "distinctive-value-91c2", "service": "svc-5d1e"], secret: "secret-value-44ab")
        store.lockAll()
        let fd = open(scratch.path(), O_RDONLY)
        var bytes = Bytes()
        var buffer = Bytes(repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        close(fd)
        var wal = Bytes()
        let wfd = open(scratch.path() + "-wal", O_RDONLY)
        if wfd >= 0 {
            while true {
                let n = read(wfd, &buffer, buffer.count)
                if n <= 0 { break }
                wal += buffer[0..<n]
            }
            close(wfd)
        }
        let text = String(decoding: bytes + wal, as: UTF8.self)
        for needle in ["distinctive-name-7f3a", "distinctive-value-91c2", "svc-5d1e", "secret-value-44ab"] {
            XCTAssertFalse(text.contains(needle), needle)
        }
        XCTAssertTrue(bytes.count + wal.count > 0)
    }

    private func indexRows() throws -> Int {
        let stmt = try store.db.statement("SELECT count(*) FROM secret_attributes")
        defer { stmt.reset() }
        _ = try stmt.step()
        return Int(stmt.int(0))
    }
}
