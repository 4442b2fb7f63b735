import KeychainCore
import KeychainSSH
import XCTest

/// openssh-key-v1 files as ssh-keygen writes them.
final class OpenSSHKeyFileReadTests: XCTestCase {
    func testReadsEveryTypeWithoutPassphrase() throws {
        let fixtures = try KeyFileFixtures()
        for (type, bits) in sshKeygenTypes {
            let file = try fixtures.sshKeygen(type, bits: bits, comment: "me@\(type)")
            let contents = try fixtures.contents(file)
            XCTAssertFalse(SSHKeyFile.isEncrypted(contents))
            let entries = try SSHKeyFile.read(contents, passphrase: nil)
            XCTAssertEqual(entries.count, 1)
            XCTAssertEqual(entries.first?.comment, "me@\(type)")
            XCTAssertEqual(
                try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file), "\(type) \(bits ?? 0)")
        }
    }

    /// -a 2 keeps the debug build's bcrypt short; the default (16) is checked once below.
    func testReadsEveryTypeWithPassphrase() throws {
        let fixtures = try KeyFileFixtures()
        for (type, bits) in sshKeygenTypes {
            let file = try fixtures.sshKeygen(type, bits: bits, passphrase: "sesame", ["-a", "2"])
            let contents = try fixtures.contents(file)
            XCTAssertTrue(SSHKeyFile.isEncrypted(contents))
            let entries = try SSHKeyFile.read(contents, passphrase: Array("sesame".utf8))
            XCTAssertEqual(
                try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file), "\(type) \(bits ?? 0)")
        }
    }

    func testDefaultRoundsAndCipher() throws {
        let fixtures = try KeyFileFixtures()
        let file = try fixtures.sshKeygen("ed25519", passphrase: "correct horse battery staple")
        let entries = try SSHKeyFile.read(try fixtures.contents(file), passphrase: Array("correct horse battery staple".utf8))
        XCTAssertEqual(try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file))
    }

    func testEveryCipherSSHKeygenOffers() throws {
        let fixtures = try KeyFileFixtures()
        let ciphers = [
            "aes128-ctr", "aes192-ctr", "aes256-ctr", "aes128-cbc", "aes192-cbc", "aes256-cbc", "aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
            "chacha20-poly1305@openssh.com"
        ]
        for cipher in ciphers {
            let file = try fixtures.sshKeygen("ed25519", passphrase: "pw", ["-a", "1", "-Z", cipher])
            let contents = try fixtures.contents(file)
            let entries = try SSHKeyFile.read(contents, passphrase: Array("pw".utf8))
            XCTAssertEqual(try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file), cipher)
            XCTAssertThrowsError(try SSHKeyFile.read(contents, passphrase: Array("pW".utf8)), cipher) {
                XCTAssertEqual($0 as? SSHKeyFileError, .wrongPassphrase, cipher)
            }
        }
    }

    func testPassphraseMissingOrWrong() throws {
        let fixtures = try KeyFileFixtures()
        let contents = try fixtures.contents(try fixtures.sshKeygen("ecdsa", bits: 256, passphrase: "right", ["-a", "1"]))
        XCTAssertThrowsError(try SSHKeyFile.read(contents, passphrase: nil)) { XCTAssertEqual($0 as? SSHKeyFileError, .needsPassphrase) }
        XCTAssertThrowsError(try SSHKeyFile.read(contents, passphrase: [])) { XCTAssertEqual($0 as? SSHKeyFileError, .needsPassphrase) }
        XCTAssertThrowsError(try SSHKeyFile.read(contents, passphrase: Array("wrong".utf8))) {
            XCTAssertEqual($0 as? SSHKeyFileError, .wrongPassphrase)
        }
    }

    func testUnencryptedFileIgnoresAPassphrase() throws {
        let fixtures = try KeyFileFixtures()
        let file = try fixtures.sshKeygen("ed25519")
        XCTAssertEqual(try SSHKeyFile.read(try fixtures.contents(file), passphrase: Array("unused".utf8)).count, 1)
    }
}
