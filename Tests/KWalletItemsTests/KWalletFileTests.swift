import Foundation
import KWalletItems
import KeychainCore
import XCTest

/// Wallets written by the real kwalletd5 and by the legacy writer, read back entry by entry.
final class KWalletFileTests: XCTestCase {
    private func readKDEWallet(password: String = KWalletFixtures.kdewalletPassword) throws -> KWalletContents {
        try KWalletFile.read(
            KWalletFixtures.bytes("kdewallet.kwl"), password: Array(password.utf8), salt: KWalletFixtures.bytes("kdewallet.salt"))
    }

    func testReadsEveryKindKwalletd5Wrote() throws {
        let contents = try readKDEWallet()
        // QMap order, by UTF-16; the empty folder is kept.
        XCTAssertEqual(contents.folders, ["Binary", "Empty Folder", "Form Data", "Passwords", "Secret Service", "Ünïcødé €"])
        func entry(_ folder: String, _ key: String) -> KWalletEntry? {
            contents.entries.first { $0.folder == folder && $0.key == key }
        }
        XCTAssertEqual(
            entry("Passwords", "smtp://alice@example.org"),
            KWalletEntry(folder: "Passwords", key: "smtp://alice@example.org", type: .password, value: QtDataStream.string("s3cret")))
        XCTAssertEqual(entry("Ünïcødé €", "clé 🔑")?.value, QtDataStream.string("mot de passe ✓"))
        XCTAssertEqual(entry("Binary", "blob"), KWalletEntry(folder: "Binary", key: "blob", type: .stream, value: Array(0...255) + [0, 255]))
        let map = try XCTUnwrap(entry("Form Data", "https://example.org/login"))
        XCTAssertEqual(map.type, .map)
        // Qt's own QMap serialization (kwallet-query's writeMap), which QtDataStream reads and
        // writes byte for byte.
        XCTAssertEqual(QtDataStream.readMap(map.value), ["user": "alice", "pass": "päss"])
        XCTAssertEqual(QtDataStream.map(["user": "alice", "pass": "päss"]), map.value)
        XCTAssertEqual(
            entry("Secret Service", "GitHub token"),
            KWalletEntry(folder: "Secret Service", key: "GitHub token", type: .password, value: QtDataStream.string("ghp_fixture")))
        XCTAssertEqual(contents.entries.count, 5)
    }

    func testReadsASecondWalletWithItsOwnSalt() throws {
        let contents = try KWalletFile.read(
            KWalletFixtures.bytes("work.kwl"), password: Array(KWalletFixtures.workPassword.utf8), salt: KWalletFixtures.bytes("work.salt"))
        XCTAssertEqual(contents.entries, [KWalletEntry(folder: "Passwords", key: "vpn", type: .password, value: QtDataStream.string("vpn-secret"))])
    }

    func testWrongPasswordOrSaltIsOneClearError() throws {
        XCTAssertThrowsError(try readKDEWallet(password: "not it")) { XCTAssertEqual($0 as? KWalletFileError, .wrongPassword) }
        XCTAssertThrowsError(
            try KWalletFile.read(
                KWalletFixtures.bytes("kdewallet.kwl"), password: Array(KWalletFixtures.kdewalletPassword.utf8), salt: KWalletFixtures.bytes("work.salt"))
        ) { XCTAssertEqual($0 as? KWalletFileError, .wrongPassword) }
        XCTAssertThrowsError(try KWalletFile.read(KWalletFixtures.bytes("kdewallet.kwl"), password: Array(KWalletFixtures.kdewalletPassword.utf8), salt: nil)) {
            guard case .salt(let why)? = $0 as? KWalletFileError else { return XCTFail("\($0)") }
            XCTAssertTrue(why.contains(".salt"), why)
        }
    }

    /// The SHA-1 key of format 0.0 wallets, for passwords of one, three and four 16-byte pieces
    /// (keys of 20, 56 split 20/20/16 and 56 split 14/14/14/14 bytes), in CBC and in the oldest ECB.
    func testReadsLegacySHA1Wallets() throws {
        for (file, password) in [
            ("legacy-sha1.kwl", "legacy"), ("legacy-sha1-40.kwl", "a forty character legacy wallet password"),
            ("legacy-ecb-60.kwl", "sixty characters of password for the oldest ECB-mode wallets")
        ] {
            let bytes = try KWalletFixtures.bytes(file)
            XCTAssertEqual(bytes[13], 0, "\(file) is of format 0.0")
            let contents = try KWalletFile.read(bytes, password: Array(password.utf8), salt: nil)
            XCTAssertEqual(contents.folders, ["Binary", "Form Data", "Passwords"], file)
            XCTAssertEqual(
                contents.entries,
                [
                    KWalletEntry(folder: "Binary", key: "bytes", type: .stream, value: [0, 1, 2, 254, 255]),
                    KWalletEntry(folder: "Passwords", key: "imap://bob@example.org", type: .password, value: QtDataStream.string("legacy-secret"))
                ], file)
            XCTAssertThrowsError(try KWalletFile.read(bytes, password: Array("legacy!".utf8), salt: nil), file) {
                XCTAssertEqual($0 as? KWalletFileError, .wrongPassword)
            }
        }
    }

    func testGPGWalletIsReportedNotReadable() throws {
        var bytes = try KWalletFixtures.bytes("work.kwl")
        bytes.replaceSubrange(14..<16, with: [2, 0])
        XCTAssertThrowsError(try KWalletFile.read(bytes, password: [], salt: nil)) {
            XCTAssertEqual($0 as? KWalletFileError, .gpg)
            XCTAssertTrue("\($0)".contains("GPG"))
        }
    }
}
