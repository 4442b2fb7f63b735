import KWalletItems
import KeychainCore
import KeychainTestSupport
import SecretServiceItems
import XCTest

/// KWallet's folders and entries in a keychain, and how the Secret Service sees the same ones.
final class KWalletStoreTests: StoreTestCase {
    private func password(_ folder: String, _ key: String, _ text: String) -> KWalletEntry {
        KWalletEntry(folder: folder, key: key, type: .password, value: QtDataStream.string(text))
    }

    func testEveryTypeReadsBackByteForByte() throws {
        let entries = [
            password("Passwords", "mail", "sécret😀"),
            KWalletEntry(folder: "Passwords", key: "null", type: .password, value: [0xFF, 0xFF, 0xFF, 0xFF]),
            KWalletEntry(folder: "Passwords", key: "odd", type: .password, value: [0, 0, 0, 2, 0, 0x61, 7]),
            KWalletEntry(folder: "Form Data", key: "login", type: .map, value: QtDataStream.map(["user": "ann", "pass": "x"])),
            KWalletEntry(folder: "Form Data", key: "blob", type: .stream, value: [0, 1, 2, 0xFF, 0]),
            KWalletEntry(folder: "Form Data", key: "what", type: .unknown, value: [])
        ]
        for entry in entries { XCTAssertEqual(try store.writeKWalletEntry(entry, owner: nil), .added) }
        for entry in entries { XCTAssertEqual(try store.kwalletEntry(folder: entry.folder, key: entry.key, owner: nil), entry) }
        XCTAssertEqual(try store.kwalletEntries(folder: "Form Data", owner: nil).map(\.key), ["blob", "login", "what"])
        XCTAssertEqual(try store.kwalletFolders(owner: nil), ["Form Data", "Passwords"])
        XCTAssertNil(try store.kwalletEntry(folder: "Passwords", key: "none", owner: nil))
    }

    func testAnIdenticalWriteIsUnchangedAndAnotherValueChanges() throws {
        let entry = password("Passwords", "mail", "one")
        XCTAssertEqual(try store.writeKWalletEntry(entry, owner: nil), .added)
        XCTAssertEqual(try store.writeKWalletEntry(entry, owner: nil), .unchanged)
        let modified = try XCTUnwrap(store.searchSecretItems(["kwallet.key": "mail"]).unlocked.first).modified
        XCTAssertEqual(try store.writeKWalletEntry(password("Passwords", "mail", "two"), owner: nil), .changed)
        var asMap = entry
        asMap.type = .stream
        XCTAssertEqual(try store.writeKWalletEntry(asMap, owner: nil), .changed, "the same bytes under another type")
        XCTAssertEqual(try store.kwalletEntry(folder: "Passwords", key: "mail", owner: nil), asMap)
        XCTAssertEqual(try store.searchSecretItems(["kwallet.key": "mail"]).unlocked.count, 1)
        XCTAssertGreaterThan(modified, 0)
    }

    func testFoldersStayWhenEmptyAndGoWithTheirEntries() throws {
        XCTAssertTrue(try store.createKWalletFolder("Passwords", owner: nil))
        XCTAssertFalse(try store.createKWalletFolder("Passwords", owner: nil))
        try store.writeKWalletEntry(password("Mail", "a", "1"), owner: nil)
        XCTAssertFalse(try store.createKWalletFolder("Mail", owner: nil), "a folder with entries exists")
        XCTAssertEqual(try store.kwalletFolders(owner: nil), ["Mail", "Passwords"])
        XCTAssertTrue(try store.removeKWalletEntry(folder: "Mail", key: "a", owner: nil))
        XCTAssertFalse(try store.removeKWalletEntry(folder: "Mail", key: "a", owner: nil))
        XCTAssertEqual(try store.kwalletFolders(owner: nil), ["Mail", "Passwords"], "removing the last entry keeps the folder")
        try store.writeKWalletEntry(password("Mail", "b", "2"), owner: nil)
        XCTAssertTrue(try store.removeKWalletFolder("Mail", owner: nil))
        XCTAssertFalse(try store.removeKWalletFolder("Mail", owner: nil))
        XCTAssertEqual(try store.kwalletFolders(owner: nil), ["Passwords"])
        XCTAssertNil(try store.kwalletEntry(folder: "Mail", key: "b", owner: nil))
        // The markers are no item of an unconfined Secret Service client.
        XCTAssertEqual(try store.secretItemRows(owner: nil), [])
        XCTAssertEqual(try store.searchSecretItems([:]).unlocked.count, 0)
    }

    func testRenameMovesTheEntryButNeverOverAnother() throws {
        let entry = KWalletEntry(folder: "F", key: "old", type: .map, value: QtDataStream.map(["k": "v"]))
        try store.writeKWalletEntry(entry, owner: nil)
        try store.writeKWalletEntry(password("F", "taken", "kept"), owner: nil)
        XCTAssertFalse(try store.renameKWalletEntry(folder: "F", from: "old", to: "taken", owner: nil), "KWallet never overwrites")
        XCTAssertFalse(try store.renameKWalletEntry(folder: "F", from: "old", to: "old", owner: nil))
        XCTAssertTrue(try store.renameKWalletEntry(folder: "F", from: "old", to: "new", owner: nil))
        XCTAssertFalse(try store.renameKWalletEntry(folder: "F", from: "old", to: "x", owner: nil))
        var renamed = entry
        renamed.key = "new"
        XCTAssertEqual(try store.kwalletEntries(folder: "F", owner: nil), [renamed, password("F", "taken", "kept")])
        let item = try XCTUnwrap(store.searchSecretItems(["kwallet.key": "new"]).unlocked.first)
        XCTAssertEqual(item.label, "F/new")
        XCTAssertEqual(item.attributes["username"], "new")
    }

    func testAnAppSeesOnlyItsOwnEntriesAndFolders() throws {
        try store.writeKWalletEntry(password("Shared", "k", "mine"), owner: nil)
        try store.writeKWalletEntry(password("Shared", "k", "app's"), owner: "org.example.App")
        try store.createKWalletFolder("AppOnly", owner: "org.example.App")
        XCTAssertEqual(try store.kwalletFolders(owner: "org.example.App"), ["AppOnly", "Shared"])
        XCTAssertEqual(try store.kwalletFolders(owner: nil), ["Shared"])
        XCTAssertEqual(try store.kwalletFolders(owner: "org.example.Other"), [])
        XCTAssertEqual(try store.kwalletEntry(folder: "Shared", key: "k", owner: "org.example.App")?.value, QtDataStream.string("app's"))
        XCTAssertEqual(try store.kwalletEntry(folder: "Shared", key: "k", owner: nil)?.value, QtDataStream.string("mine"))
        XCTAssertNil(try store.kwalletEntry(folder: "Shared", key: "k", owner: "org.example.Other"))
        XCTAssertFalse(try store.removeKWalletFolder("Shared", owner: "org.example.Other"))
        XCTAssertFalse(try store.renameKWalletEntry(folder: "Shared", from: "k", to: "x", owner: "org.example.Other"))
        XCTAssertTrue(try store.removeKWalletFolder("Shared", owner: "org.example.App"))
        XCTAssertEqual(try store.kwalletEntry(folder: "Shared", key: "k", owner: nil)?.value, QtDataStream.string("mine"))
    }

    /// The Secret Service and `security find-generic-password -s Folder -a key` see a password as
    /// its text; a map or a password that is not one clean QString as KWallet's bytes.
    func testTheSecretServiceShowsAPasswordAsText() throws {
        try store.writeKWalletEntry(password("Mail", "ann@example.org", "pässword"), owner: nil)
        let item = try XCTUnwrap(store.searchSecretItems(["service": "Mail", "username": "ann@example.org"]).unlocked.first)
        XCTAssertEqual(item.label, "Mail/ann@example.org")
        XCTAssertEqual(item.attributes["kwallet.type"], "password")
        XCTAssertEqual(item.attributes["kwallet.folder"], "Mail")
        XCTAssertNil(item.attributes["kwallet.raw"])
        XCTAssertEqual(try store.secret(item.row).secret, Array("pässword".utf8))
        XCTAssertEqual(try store.secret(item.row).contentType, "text/plain")
        let found = try store.find(query("ann@example.org", service: "Mail"), limit: nil, includeSecret: true)
        XCTAssertEqual(found.map(\.secret), [Array("pässword".utf8)], "what find-generic-password -s Mail -a ann@example.org answers")

        let null = KWalletEntry(folder: "Mail", key: "null", type: .password, value: [0xFF, 0xFF, 0xFF, 0xFF])
        try store.writeKWalletEntry(null, owner: nil)
        let raw = try XCTUnwrap(store.searchSecretItems(["kwallet.key": "null"]).unlocked.first)
        XCTAssertEqual(raw.attributes["kwallet.raw"], "1")
        XCTAssertEqual(try store.secret(raw.row).secret, [0xFF, 0xFF, 0xFF, 0xFF])

        let map = QtDataStream.map(["a": "b"])
        try store.writeKWalletEntry(KWalletEntry(folder: "Mail", key: "m", type: .map, value: map), owner: nil)
        let mapItem = try XCTUnwrap(store.searchSecretItems(["kwallet.key": "m"]).unlocked.first)
        XCTAssertEqual(try store.secret(mapItem.row).secret, map)
        XCTAssertEqual(try store.secret(mapItem.row).contentType, "application/octet-stream")
    }

    /// A password changed through the Secret Service is the new text through KWallet.
    func testASecretServiceChangeShowsThroughKWallet() throws {
        try store.writeKWalletEntry(password("Mail", "ann", "one"), owner: nil)
        let item = try XCTUnwrap(store.searchSecretItems(["service": "Mail"]).unlocked.first)
        try store.updateSecretItem(item.row, secret: Array("two".utf8))
        XCTAssertEqual(try store.kwalletEntry(folder: "Mail", key: "ann", owner: nil)?.value, QtDataStream.string("two"))
    }

    /// kwalletd answers folderDoesNotExist and keyDoesNotExist from a closed wallet exactly; so
    /// does a WhenUnlocked-locked keychain, from its attribute index, for each owner's own view.
    func testALockedKeychainStillSaysWhatDoesNotExist() throws {
        try store.writeKWalletEntry(password("Mail", "ann", "one"), owner: nil)
        try store.createKWalletFolder("Empty", owner: nil)
        try store.writeKWalletEntry(password("App Folder", "key", "two"), owner: "org.example.App")
        store.lock()
        XCTAssertEqual(try store.kwalletFolderIsAbsent("Mail", owner: nil), false)
        XCTAssertEqual(try store.kwalletFolderIsAbsent("Empty", owner: nil), false, "an empty folder exists")
        XCTAssertEqual(try store.kwalletFolderIsAbsent("Nothing", owner: nil), true)
        XCTAssertEqual(try store.kwalletFolderIsAbsent("App Folder", owner: nil), true, "another view's folder")
        XCTAssertEqual(try store.kwalletFolderIsAbsent("App Folder", owner: "org.example.App"), false)
        XCTAssertEqual(try store.kwalletFolderIsAbsent("Mail", owner: "org.example.App"), true)
        XCTAssertEqual(try store.kwalletEntryIsAbsent(folder: "Mail", key: "ann", owner: nil), false)
        XCTAssertEqual(try store.kwalletEntryIsAbsent(folder: "Mail", key: "bob", owner: nil), true)
        XCTAssertEqual(try store.kwalletEntryIsAbsent(folder: "Other", key: "ann", owner: nil), true)
        XCTAssertEqual(try store.kwalletEntryIsAbsent(folder: "App Folder", key: "key", owner: nil), true)
        XCTAssertEqual(try store.kwalletEntryIsAbsent(folder: "App Folder", key: "key", owner: "org.example.App"), false)
        XCTAssertStatus(try store.kwalletEntry(folder: "Mail", key: "ann", owner: nil), .interactionNotAllowed, "still locked")
        store.lockAll()
        XCTAssertNil(try store.kwalletFolderIsAbsent("Nothing", owner: nil), "no index key before the first unlock")
        XCTAssertNil(try store.kwalletEntryIsAbsent(folder: "Mail", key: "bob", owner: nil))
    }

    func testALockedKeychainIsAnErrorNotAnEmptyWallet() throws {
        try store.writeKWalletEntry(password("Mail", "ann", "one"), owner: nil)
        store.lock()
        XCTAssertStatus(try store.kwalletFolders(owner: nil), .interactionNotAllowed)
        XCTAssertStatus(try store.kwalletEntry(folder: "Mail", key: "ann", owner: nil), .interactionNotAllowed)
        store.lockAll()
        XCTAssertStatus(try store.kwalletFolders(owner: nil), .interactionNotAllowed, "nor after a reboot")
    }
}
