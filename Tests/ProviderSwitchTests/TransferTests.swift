import XCTest

@testable import ProviderSwitch
@testable import SessionBus

/// Import's and export's names for what they bring: keychains from collection paths, kwalletd's
/// files and objects, and the tally they report.
final class TransferTests: XCTestCase {
    /// gnome-keyring's and this service's `_xx` escapes undone where they give a plain character.
    func testKeychainNamesFromPathElements() {
        XCTAssertEqual(BusImport.keychainName(element: "login"), "login")
        XCTAssertEqual(BusImport.keychainName(element: "my_20keys"), "my keys")
        XCTAssertEqual(BusImport.keychainName(element: "a_2db_2ec_5fd"), "a-b.c_d")
        XCTAssertEqual(BusImport.keychainName(element: "a_2fb"), "a_2fb", "a slash stays escaped")
        XCTAssertEqual(BusImport.keychainName(element: "_2e_2e"), "__2e_2e", "no hidden file, no parent folder")
        XCTAssertEqual(BusImport.keychainName(element: ""), "imported")
        XCTAssertEqual(BusImport.keychainName(element: "x_4"), "x_4")
        XCTAssertEqual(BusImport.keychainName(element: "_zz"), "_zz")
    }

    func testKWalletsNamesAndObjects() {
        XCTAssertEqual(KWalletDaemon.objectPath(for: "org.kde.kwalletd5"), "/modules/kwalletd5")
        XCTAssertEqual(KWalletDaemon.objectPath(for: "org.kde.kwalletd6"), "/modules/kwalletd6")
        XCTAssertNil(KWalletDaemon.objectPath(for: "org.freedesktop.secrets"))
        let five = BusClient.Peer(uniqueName: ":1.2", uid: 1000, pid: 7, command: "kwalletd5", executable: "/usr/bin/kwalletd5")
        let six = BusClient.Peer(uniqueName: ":1.3", uid: 1000, pid: 8, command: "x", executable: "/usr/bin/kwalletd6")
        let other = BusClient.Peer(uniqueName: ":1.4", uid: 1000, pid: 9, command: "gnome-keyring-d", executable: nil)
        XCTAssertTrue(KWalletDaemon.isKWallet(five))
        XCTAssertTrue(KWalletDaemon.isKWallet(six))
        XCTAssertFalse(KWalletDaemon.isKWallet(other))
        XCTAssertEqual(KWalletDaemon.service(of: five), "org.kde.kwalletd5")
        XCTAssertEqual(KWalletDaemon.service(of: six), "org.kde.kwalletd6")
        XCTAssertTrue(KWalletDaemon.isEntryItem(["kwallet.folder": "Passwords", "kwallet.key": "mail"]))
        XCTAssertFalse(KWalletDaemon.isEntryItem(["kwallet.folder": "Passwords"]))
    }

    /// kwalletd's file names for a wallet's attributes: `;XX` for what a file name cannot hold.
    func testWalletFileNames() {
        XCTAssertEqual(KWalletSecretItems.encode("kdewallet"), "kdewallet")
        XCTAssertEqual(KWalletSecretItems.encode("my wallet (2)"), "my wallet (2)")
        XCTAssertEqual(KWalletSecretItems.encode("/tmp/x"), ";2Ftmp;2Fx")
        XCTAssertEqual(KWalletSecretItems.encode("a;b"), "a;3Bb")
        XCTAssertEqual(KWalletSecretItems.encode("é"), ";C3;A9")
    }

    func testTheTally() {
        let tally = TransferTally(verb: "import", dryRun: false)
        tally.count(added: true, "a")
        tally.count(added: true, "b")
        tally.count(added: false, "c")
        tally.fail("d", "why", count: 3)
        tally.skip("e", "why")
        XCTAssertEqual(tally.added, 2)
        XCTAssertEqual(tally.alreadyThere, 1)
        XCTAssertEqual(tally.failed, 3)
        XCTAssertEqual(tally.skipped, 1)
        // A batch rolled back puts its counts back.
        let before = tally.counts
        tally.count(added: true, "f")
        tally.fail("g", "why")
        tally.counts = before
        XCTAssertEqual(tally.added, 2)
        XCTAssertEqual(tally.failed, 3)
        XCTAssertEqual("would add".padded(14), "would add     ")
        XCTAssertEqual("a-long-word-here".padded(4), "a-long-word-here ")
        XCTAssertEqual("f".leftPadded(2), "0f")
    }
}
