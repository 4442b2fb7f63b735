import Foundation
import KeychainCore
import KeychainSSH
import XCTest

/// Damaged and hostile key files: each one a thrown SSHKeyFileError, never a crash, a hang or a
/// huge allocation.
final class SSHKeyFileHostileTests: XCTestCase {
    private func assertRefused(
        _ contents: Bytes, passphrase: String? = nil, _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line,
        _ check: (SSHKeyFileError) -> Void = { _ in }
    ) {
        do {
            let entries = try SSHKeyFile.read(contents, passphrase: passphrase.map { Array($0.utf8) })
            XCTFail("read \(entries.count) keys: \(message())", file: file, line: line)
        } catch let error as SSHKeyFileError {
            check(error)
        } catch {
            XCTFail("not an SSHKeyFileError: \(error) \(message())", file: file, line: line)
        }
    }

    /// An openssh-key-v1 file assembled field by field; the section is stored as given.
    private func envelope(
        cipher: String = "none", kdf: String = "none", kdfOptions: Bytes = [], count: UInt32 = 1, publicBlobs: [Bytes], section: Bytes, trailing: Bytes = []
    ) -> Bytes {
        var writer = ByteWriter()
        writer.raw(Array("openssh-key-v1\0".utf8))
        writer.string(cipher)
        writer.string(kdf)
        writer.blob(kdfOptions)
        writer.u32(count)
        for blob in publicBlobs { writer.blob(blob) }
        writer.blob(section)
        writer.raw(trailing)
        return KeyFileFixtures.armour(writer.bytes)
    }

    /// A clear private section: check numbers, the key, the comment, then padding to 8.
    private func section(_ serialized: Bytes, comment: String = "x", check: (UInt32, UInt32) = (7, 7), padding: Bytes? = nil) -> Bytes {
        var writer = ByteWriter()
        writer.u32(check.0)
        writer.u32(check.1)
        writer.raw(serialized)
        writer.string(comment)
        if let padding {
            writer.raw(padding)
        } else {
            var pad: UInt8 = 1
            while writer.bytes.count % 8 != 0 {
                writer.u8(pad)
                pad += 1
            }
        }
        return writer.bytes
    }

    private func ed25519() throws -> (fixtures: KeyFileFixtures, file: String, entry: SSHKeyFileEntry, publicBlob: Bytes) {
        let fixtures = try KeyFileFixtures()
        let file = try fixtures.sshKeygen("ed25519")
        return (fixtures, file, try SSHKeyFile.read(try fixtures.contents(file), passphrase: nil)[0], try fixtures.publicBlob(ofPubFile: file))
    }

    func testTheAssembledFileIsReadSoTheCasesBelowChangeOneThing() throws {
        let key = try ed25519()
        let entries = try SSHKeyFile.read(envelope(publicBlobs: [key.publicBlob], section: section(key.entry.serialized)), passphrase: nil)
        XCTAssertEqual(entries.first?.serialized, key.entry.serialized)
    }

    func testEveryTruncation() throws {
        let key = try ed25519()
        let decoded = KeyFileFixtures.unarmour(try key.fixtures.contents(key.file))
        for length in 0..<decoded.count {
            assertRefused(KeyFileFixtures.armour(Array(decoded.prefix(length))), "\(length) of \(decoded.count) bytes")
        }
        let text = try key.fixtures.contents(key.file)
        assertRefused(Array(text.prefix(text.count - 40)), "no END line") {
            XCTAssertEqual($0, .malformed("the OpenSSH private key's base64 is damaged or its END line missing"))
        }
    }

    /// Every bit flip in a clear file either is refused or lands where nothing checks it (the
    /// comment, the Ed25519 seed); none is read as another valid public key.
    func testBitFlipsInAClearFile() throws {
        let key = try ed25519()
        let decoded = KeyFileFixtures.unarmour(try key.fixtures.contents(key.file))
        for offset in 0..<decoded.count {
            for bit in [0, 7] {
                var damaged = decoded
                damaged[offset] ^= 1 << bit
                if let entries = try? SSHKeyFile.read(KeyFileFixtures.armour(damaged), passphrase: nil) {
                    XCTAssertEqual(try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), key.publicBlob, "offset \(offset)")
                } else {
                    assertRefused(KeyFileFixtures.armour(damaged))
                }
            }
        }
    }

    /// In an encrypted file a flip in the salt, the rounds or the ciphertext's check numbers
    /// means the passphrase no longer opens it; elsewhere the structure breaks.
    func testBitFlipsInAnEncryptedFile() throws {
        let fixtures = try KeyFileFixtures()
        let file = try fixtures.sshKeygen("ed25519", passphrase: "pw", ["-a", "1"])
        let decoded = KeyFileFixtures.unarmour(try fixtures.contents(file))
        for offset in Swift.stride(from: 0, to: decoded.count, by: 5) {
            var damaged = decoded
            damaged[offset] ^= 0x10
            if let entries = try? SSHKeyFile.read(KeyFileFixtures.armour(damaged), passphrase: Array("pw".utf8)) {
                XCTAssertEqual(
                    try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file), "offset \(offset)")
            } else {
                assertRefused(KeyFileFixtures.armour(damaged), passphrase: "pw")
            }
        }
    }

    func testHostileRoundsAreRefusedAtOnce() throws {
        let key = try ed25519()
        for rounds: UInt32 in [0, 1025, 1 << 31, .max] {
            var options = ByteWriter()
            options.blob(Bytes(repeating: 1, count: 16))
            options.u32(rounds)
            let started = Date()
            let file = envelope(
                cipher: "aes256-ctr", kdf: "bcrypt", kdfOptions: options.bytes, publicBlobs: [key.publicBlob], section: Bytes(repeating: 0, count: 64))
            assertRefused(file, passphrase: "pw") { XCTAssertEqual($0, .unsupported("\(rounds) bcrypt rounds (at most 1024 are accepted)")) }
            XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        }
    }

    func testHugeLengthsAndCounts() throws {
        let key = try ed25519()
        let good = KeyFileFixtures.unarmour(envelope(publicBlobs: [key.publicBlob], section: section(key.entry.serialized)))
        // The cipher name's length, the KDF's, the options', the key count, the public blob's
        // length, the private section's length.
        let offsets = [15, 15 + 8, 15 + 16, 15 + 20, 15 + 24, 15 + 28 + key.publicBlob.count]
        for offset in offsets {
            for value: [UInt8] in [[0xff, 0xff, 0xff, 0xff], [0x7f, 0xff, 0xff, 0xf8], [0, 1, 0, 0]] {
                var damaged = good
                damaged.replaceSubrange(offset..<offset + 4, with: value)
                assertRefused(KeyFileFixtures.armour(damaged), "length at \(offset)")
            }
        }
        assertRefused(envelope(count: 0, publicBlobs: [], section: section(key.entry.serialized))) { XCTAssertEqual($0, .malformed("0 keys in one file")) }
    }

    func testBadPaddingCheckNumbersAndTrailingBytes() throws {
        let key = try ed25519()
        let serialized = key.entry.serialized
        assertRefused(envelope(publicBlobs: [key.publicBlob], section: section(serialized, padding: [1, 2, 4, 4]))) {
            XCTAssertEqual($0, .malformed("bad padding after the private key"))
        }
        assertRefused(envelope(publicBlobs: [key.publicBlob], section: section(serialized, check: (7, 8)))) {
            XCTAssertEqual($0, .malformed("the check numbers differ"))
        }
        assertRefused(envelope(publicBlobs: [key.publicBlob], section: section(serialized), trailing: [0])) {
            XCTAssertEqual($0, .malformed("bytes after the private section"))
        }
        assertRefused(envelope(publicBlobs: [key.publicBlob], section: Array(section(serialized).dropLast(1)))) {
            XCTAssertEqual($0, .malformed("the private section is not a whole number of cipher blocks"))
        }
    }

    func testPublicKeyInTheEnvelopeMustBeThePrivateKeys() throws {
        let key = try ed25519()
        let other = try key.fixtures.publicBlob(ofPubFile: try key.fixtures.sshKeygen("ed25519"))
        assertRefused(envelope(publicBlobs: [other], section: section(key.entry.serialized))) {
            XCTAssertEqual($0, .malformed("the public key does not match the private key"))
        }
    }

    func testUnknownCipherKDFAndKeyTypeAreNamed() throws {
        let key = try ed25519()
        assertRefused(envelope(cipher: "3des-cbc", kdf: "bcrypt", publicBlobs: [key.publicBlob], section: section(key.entry.serialized)), passphrase: "pw") {
            XCTAssertEqual($0, .unsupported("cipher 3des-cbc"))
        }
        assertRefused(envelope(cipher: "aes256-ctr", kdf: "scrypt", publicBlobs: [key.publicBlob], section: Bytes(repeating: 0, count: 16)), passphrase: "pw") {
            XCTAssertEqual($0, .unsupported("KDF scrypt"))
        }
        var dss = ByteWriter()
        dss.string("ssh-dss")
        for _ in 0..<5 { dss.mpint([1]) }
        assertRefused(envelope(publicBlobs: [key.publicBlob], section: section(dss.bytes))) { XCTAssertEqual($0, .unsupported("key type ssh-dss")) }
    }

    func testGarbageOversizeAndDamagedPEM() throws {
        assertRefused(Array("-----BEGIN OPENSSH PRIVATE KEY-----\n!!!!\n-----END OPENSSH PRIVATE KEY-----\n".utf8))
        assertRefused(Bytes(repeating: 0x41, count: 300 << 10)) { XCTAssertEqual($0, .malformed("larger than 256 KiB")) }
        let fixtures = try KeyFileFixtures()
        let pem = try fixtures.contents(try fixtures.sshKeygen("ecdsa", bits: 256, ["-m", "PEM"]))
        assertRefused(Array(pem.prefix(pem.count / 2)))
        for offset in Swift.stride(from: 40, to: pem.count - 40, by: 9) {
            var damaged = pem
            damaged[offset] = damaged[offset] == 0x41 ? 0x42 : 0x41
            _ = try? SSHKeyFile.read(damaged, passphrase: nil)
        }
    }
}
