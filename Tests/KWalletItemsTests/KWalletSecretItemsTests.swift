import KWalletItems
import KeychainCore
import XCTest

/// kwalletd's Secret Service items in a wallet: told from KWallet's own entries by its attributes
/// file, their labels as its FdoUniqueLabel gives them.
final class KWalletSecretItemsTests: XCTestCase {
    private func entry(_ folder: String, _ key: String, _ type: KWalletEntryType = .password, _ text: String = "s") -> KWalletEntry {
        KWalletEntry(folder: folder, key: key, type: type, value: type == .password ? QtDataStream.string(text) : Array(text.utf8))
    }

    func testTheAttributesFileNamesTheItems() throws {
        let contents = KWalletContents(
            folders: ["Passwords", "Secret Service", "web"],
            entries: [
                entry("Passwords", "native"), entry("Secret Service", "token", .password, "pässword"), entry("Secret Service", "token__0_"),
                entry("Secret Service", "x__y_"), entry("web", "site", .stream, "bytes")
            ])
        let json = """
            {"$fdo_created": "1", "Secret Service/token": {"$fdo_created": "10", "$fdo_modified": "20", "$fdo_mime_type": "text/plain",
             "attributes": {"service": "github.com", "n": 5}},
             "Secret Service/token__0_": {}, "Secret Service/x__y_": {}, "web/site": {"attributes": {"a": "b"}}}
            """
        let split = try contents.splitSecretServiceItems(attributesFile: Array(json.utf8))
        XCTAssertEqual(split.entries, [entry("Passwords", "native")])
        XCTAssertEqual(split.items.map(\.label), ["token", "token", "x__y_", "web/site"])
        let first = try XCTUnwrap(split.items.first)
        // Only string attributes, as kwalletd answers them; a password's text in UTF-8.
        XCTAssertEqual(first.attributes, ["service": "github.com"])
        XCTAssertEqual(first.secret, Array("pässword".utf8))
        XCTAssertEqual([first.contentType, "\(first.created)", "\(first.modified)"], ["text/plain", "10", "20"])
        XCTAssertEqual(split.items[1].contentType, "application/octet-stream")
        XCTAssertEqual(split.items[3].secret, Array("bytes".utf8))
    }

    func testWithoutTheFileEveryEntryIsKWallets() throws {
        let contents = KWalletContents(folders: ["Secret Service"], entries: [entry("Secret Service", "token")])
        XCTAssertEqual(try contents.splitSecretServiceItems(attributesFile: nil).entries, contents.entries)
        XCTAssertThrowsError(try contents.splitSecretServiceItems(attributesFile: Array("[1]".utf8)))
        XCTAssertThrowsError(try contents.splitSecretServiceItems(attributesFile: Array("{\"a\":".utf8)))
    }
}
