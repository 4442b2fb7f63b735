import KeychainCore
import KeychainSSH
import XCTest

/// What SSHKeyFile.write produces: a file ssh-keygen reads, byte for byte the layout ssh-keygen
/// writes itself.
final class OpenSSHKeyFileWriteTests: XCTestCase {
    func testSSHKeygenReadsWhatIsWritten() throws {
        let fixtures = try KeyFileFixtures()
        for (type, bits) in sshKeygenTypes {
            let original = try fixtures.sshKeygen(type, bits: bits, comment: "round trip")
            let entry = try SSHKeyFile.read(try fixtures.contents(original), passphrase: nil)[0]
            let publicBlob = try fixtures.publicBlob(ofPubFile: original)
            for passphrase in [nil, "written pass"] {
                let text = try SSHKeyFile.write(entry, publicBlob: publicBlob, passphrase: passphrase.map { Array($0.utf8) })
                let file = try fixtures.write(text)
                let derived = try fixtures.run("/usr/bin/ssh-keygen", ["-y", "-P", passphrase ?? "", "-f", file]).output
                XCTAssertEqual(KeyFileFixtures.publicBlob(ofLine: derived), publicBlob, "\(type) \(bits ?? 0) \(passphrase ?? "none")")
                XCTAssertTrue(derived.hasSuffix(" round trip\n"), derived)
                let back = try SSHKeyFile.read(Array(text.utf8), passphrase: passphrase.map { Array($0.utf8) })
                XCTAssertEqual(back.first?.serialized, entry.serialized)
                XCTAssertEqual(back.first?.comment, "round trip")
                XCTAssertEqual(SSHKeyFile.isEncrypted(Array(text.utf8)), passphrase != nil)
            }
        }
    }

    /// Without a passphrase only the random check number differs from ssh-keygen's own file:
    /// same envelope, padding, base64 columns and END line.
    func testSameBytesAsSSHKeygenButTheCheckNumber() throws {
        let fixtures = try KeyFileFixtures()
        let original = try fixtures.sshKeygen("ed25519", comment: "exact")
        let theirs = try fixtures.contents(original)
        let entry = try SSHKeyFile.read(theirs, passphrase: nil)[0]
        let ours = Array(try SSHKeyFile.write(entry, publicBlob: try fixtures.publicBlob(ofPubFile: original), passphrase: nil).utf8)
        var theirDecoded = KeyFileFixtures.unarmour(theirs)
        var ourDecoded = KeyFileFixtures.unarmour(ours)
        XCTAssertEqual(theirDecoded.count, ourDecoded.count)
        var envelope = ByteReader(theirDecoded)
        _ = try envelope.fixed(15)
        for _ in 0..<3 { _ = try envelope.blob() }
        _ = try envelope.u32()
        _ = try envelope.blob()
        _ = try envelope.u32()
        let checkOffset = theirDecoded.count - envelope.remaining
        XCTAssertNotEqual(Array(theirDecoded[checkOffset..<checkOffset + 4]), Array(ourDecoded[checkOffset..<checkOffset + 4]), "a fresh check number")
        for offset in checkOffset..<checkOffset + 8 {
            theirDecoded[offset] = 0
            ourDecoded[offset] = 0
        }
        XCTAssertEqual(theirDecoded, ourDecoded)
        XCTAssertEqual(ours.count, theirs.count)
        XCTAssertEqual(
            String(decoding: ours, as: UTF8.self).split(separator: "\n").map(\.count),
            String(decoding: theirs, as: UTF8.self).split(separator: "\n").map(\.count))
    }

    /// The KDF options ssh-keygen writes by default: a 16-byte salt, 16 rounds, aes256-ctr.
    func testEncryptedEnvelopeIsSSHKeygensDefault() throws {
        let fixtures = try KeyFileFixtures()
        let original = try fixtures.sshKeygen("ed25519")
        let entry = try SSHKeyFile.read(try fixtures.contents(original), passphrase: nil)[0]
        let text = try SSHKeyFile.write(entry, publicBlob: try fixtures.publicBlob(ofPubFile: original), passphrase: Array("pw".utf8))
        var reader = ByteReader(KeyFileFixtures.unarmour(Array(text.utf8)))
        XCTAssertEqual(try reader.fixed(15), Array("openssh-key-v1\0".utf8))
        XCTAssertEqual(try reader.string(), "aes256-ctr")
        XCTAssertEqual(try reader.string(), "bcrypt")
        var options = ByteReader(try reader.blob())
        XCTAssertEqual(try options.blob().count, 16)
        XCTAssertEqual(try options.u32(), 16)
        XCTAssertEqual(try reader.u32(), 1)
    }

    func testRefusesAPublicBlobThatIsNotTheKeys() throws {
        let fixtures = try KeyFileFixtures()
        let one = try fixtures.sshKeygen("ed25519")
        let other = try fixtures.sshKeygen("ed25519")
        let entry = try SSHKeyFile.read(try fixtures.contents(one), passphrase: nil)[0]
        XCTAssertThrowsError(try SSHKeyFile.write(entry, publicBlob: try fixtures.publicBlob(ofPubFile: other), passphrase: nil)) {
            guard case .malformed = $0 as? SSHKeyFileError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try SSHKeyFile.write(SSHKeyFileEntry(serialized: [0, 0, 0, 1], comment: ""), publicBlob: [], passphrase: nil))
    }
}
