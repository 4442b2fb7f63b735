import Foundation
import KeychainCore
import KeychainSSH
import XCTest

/// PEM (PKCS#1, SEC1) and PKCS#8 private keys, as ssh-keygen -m and openssl write them.
final class PEMKeyFileTests: XCTestCase {
    private let pemTypes: [(type: String, bits: Int?)] = [("ecdsa", 256), ("ecdsa", 384), ("ecdsa", 521), ("rsa", 2048)]

    func testSSHKeygenPEMAndPKCS8WithoutPassphrase() throws {
        let fixtures = try KeyFileFixtures()
        for format in ["PEM", "PKCS8"] {
            for (type, bits) in pemTypes {
                let file = try fixtures.sshKeygen(type, bits: bits, ["-m", format])
                let contents = try fixtures.contents(file)
                XCTAssertFalse(String(decoding: contents, as: UTF8.self).contains("OPENSSH"), "\(format) \(type)")
                XCTAssertFalse(SSHKeyFile.isEncrypted(contents))
                let entries = try SSHKeyFile.read(contents, passphrase: nil)
                XCTAssertEqual(entries.count, 1)
                XCTAssertEqual(
                    try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file),
                    "\(format) \(type) \(bits ?? 0)")
            }
        }
    }

    /// ssh-keygen encrypts PEM with Proc-Type/DEK-Info (AES-128-CBC) and PKCS#8 with PBES2.
    func testSSHKeygenPEMAndPKCS8WithPassphrase() throws {
        let fixtures = try KeyFileFixtures()
        for format in ["PEM", "PKCS8"] {
            for (type, bits) in [("ecdsa", 384), ("rsa", 2048)] {
                let file = try fixtures.sshKeygen(type, bits: bits, passphrase: "pem pass", ["-m", format])
                let contents = try fixtures.contents(file)
                XCTAssertTrue(SSHKeyFile.isEncrypted(contents), "\(format) \(type)")
                let entries = try SSHKeyFile.read(contents, passphrase: Array("pem pass".utf8))
                XCTAssertEqual(
                    try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file), "\(format) \(type)")
                XCTAssertThrowsError(try SSHKeyFile.read(contents, passphrase: nil)) { XCTAssertEqual($0 as? SSHKeyFileError, .needsPassphrase) }
                XCTAssertThrowsError(try SSHKeyFile.read(contents, passphrase: Array("pem pasS".utf8))) {
                    XCTAssertEqual($0 as? SSHKeyFileError, .wrongPassphrase, "\(format) \(type)")
                }
            }
        }
    }

    /// PKCS#8 from openssl, clear and encrypted: ssh-keygen -y derives the public key to compare
    /// with, except for Ed25519, which OpenSSH 9.2 reads only in its own format: its public key
    /// is then the end of openssl's SubjectPublicKeyInfo.
    func testOpenSSLEd25519AndEncryptedPKCS8() throws {
        let fixtures = try KeyFileFixtures()
        for algorithm in ["ED25519", "EC", "RSA"] {
            for encrypted in [false, true] {
                let file = fixtures.path("openssl-\(algorithm)-\(encrypted)")
                var arguments = ["genpkey", "-algorithm", algorithm, "-out", file]
                if algorithm == "EC" { arguments += ["-pkeyopt", "ec_paramgen_curve:P-256"] }
                if algorithm == "RSA" { arguments += ["-pkeyopt", "rsa_keygen_bits:2048"] }
                if encrypted { arguments += ["-aes-256-cbc", "-pass", "pass:open sesame"] }
                try fixtures.run("/usr/bin/openssl", arguments)
                let contents = try fixtures.contents(file)
                XCTAssertEqual(SSHKeyFile.isEncrypted(contents), encrypted)
                let entries = try SSHKeyFile.read(contents, passphrase: encrypted ? Array("open sesame".utf8) : nil)
                let expected: Bytes
                if algorithm == "ED25519" {
                    let spki = fixtures.path("spki")
                    try fixtures.run("/usr/bin/openssl", ["pkey", "-in", file, "-passin", "pass:open sesame", "-pubout", "-outform", "DER", "-out", spki])
                    var writer = ByteWriter()
                    writer.string("ssh-ed25519")
                    writer.blob(Array(try fixtures.contents(spki).suffix(32)))
                    expected = writer.bytes
                } else {
                    expected = KeyFileFixtures.publicBlob(ofLine: try fixtures.run("/usr/bin/ssh-keygen", ["-y", "-P", "open sesame", "-f", file]).output)
                }
                XCTAssertEqual(try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), expected, "\(algorithm) \(encrypted)")
            }
        }
    }

    /// The private fields too, not only the public ones: ssh-keygen -p rewrites the same PEM or
    /// PKCS#8 key as openssh-key-v1 from its own conversion, and the serializations must agree
    /// byte for byte (RSA's d, iqmp, p, q; ECDSA's d).
    func testPrivateFieldsAreSSHKeygensOwnConversion() throws {
        let fixtures = try KeyFileFixtures()
        for format in ["PEM", "PKCS8"] {
            for (type, bits) in pemTypes {
                let file = try fixtures.sshKeygen(type, bits: bits, ["-m", format])
                let ours = try SSHKeyFile.read(try fixtures.contents(file), passphrase: nil)[0]
                try fixtures.run("/usr/bin/ssh-keygen", ["-q", "-p", "-P", "", "-N", "", "-f", file])
                let converted = try fixtures.contents(file)
                XCTAssertTrue(String(decoding: converted, as: UTF8.self).hasPrefix("-----BEGIN OPENSSH PRIVATE KEY-----"))
                XCTAssertEqual(try SSHKeyFile.read(converted, passphrase: nil)[0].serialized, ours.serialized, "\(format) \(type) \(bits ?? 0)")
            }
        }
    }

    /// OpenSSH 9.2 reads no Ed25519 PKCS#8, so the seed is checked by use: the key, written as
    /// openssh-key-v1, signs with ssh-keygen -Y and the signature verifies under the public key.
    func testEd25519SeedFromPKCS8Signs() throws {
        let fixtures = try KeyFileFixtures()
        let pkcs8 = fixtures.path("ed25519.p8")
        try fixtures.run("/usr/bin/openssl", ["genpkey", "-algorithm", "ED25519", "-out", pkcs8])
        let entry = try SSHKeyFile.read(try fixtures.contents(pkcs8), passphrase: nil)[0]
        let publicBlob = try KeyFileFixtures.publicBlob(ofSerialized: entry.serialized)
        let key = try fixtures.write(try SSHKeyFile.write(entry, publicBlob: publicBlob, passphrase: nil))
        let data = try fixtures.write("signed text\n")
        try fixtures.run("/usr/bin/ssh-keygen", ["-q", "-Y", "sign", "-f", key, "-n", "file", data])
        let signers = try fixtures.write("me ssh-ed25519 \(Data(publicBlob).base64EncodedString())\n")
        let verified = try fixtures.run("/bin/sh", ["-c", "ssh-keygen -Y verify -f \(signers) -I me -n file -s \(data).sig < \(data)"])
        XCTAssertTrue(verified.output.contains("Good \"file\" signature for me"), verified.output)
        var damaged = entry.serialized
        damaged[damaged.count - 40] ^= 1  // in the seed: the signature no longer verifies
        let bad = try fixtures.write(try SSHKeyFile.write(SSHKeyFileEntry(serialized: damaged, comment: ""), publicBlob: publicBlob, passphrase: nil))
        let other = try fixtures.write("signed text\n")
        try fixtures.run("/usr/bin/ssh-keygen", ["-q", "-Y", "sign", "-f", bad, "-n", "file", other])
        let refused = try fixtures.run("/bin/sh", ["-c", "ssh-keygen -Y verify -f \(signers) -I me -n file -s \(other).sig < \(other)"], allowFailure: true)
        XCTAssertNotEqual(refused.status, 0)
    }

    /// SEC1 lets a file carry a compressed point; OpenSSH's blob wants it uncompressed.
    func testCompressedECPointComesOutUncompressed() throws {
        let fixtures = try KeyFileFixtures()
        let file = try fixtures.sshKeygen("ecdsa", bits: 256, ["-m", "PEM"])
        let compressed = fixtures.path("compressed")
        try fixtures.run("/usr/bin/openssl", ["ec", "-in", file, "-conv_form", "compressed", "-out", compressed])
        let entries = try SSHKeyFile.read(try fixtures.contents(compressed), passphrase: nil)
        XCTAssertEqual(try KeyFileFixtures.publicBlob(ofSerialized: entries[0].serialized), try fixtures.publicBlob(ofPubFile: file))
    }

    func testKeyTypesOpenSSHDoesNotUseAreRefusedByName() throws {
        let fixtures = try KeyFileFixtures()
        let file = fixtures.path("ed448")
        try fixtures.run("/usr/bin/openssl", ["genpkey", "-algorithm", "ED448", "-out", file])
        XCTAssertThrowsError(try SSHKeyFile.read(try fixtures.contents(file), passphrase: nil)) {
            XCTAssertEqual($0 as? SSHKeyFileError, .unsupported("key type ED448"))
        }
        let secp256k1 = fixtures.path("k1")
        try fixtures.run("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp256k1", "-out", secp256k1])
        XCTAssertThrowsError(try SSHKeyFile.read(try fixtures.contents(secp256k1), passphrase: nil)) {
            XCTAssertEqual($0 as? SSHKeyFileError, .unsupported("elliptic curve secp256k1"))
        }
    }

    func testNotAKeyAtAll() throws {
        for contents in [Bytes(), Array("hello".utf8), Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)] {
            XCTAssertThrowsError(try SSHKeyFile.read(contents, passphrase: nil)) {
                guard case .malformed = $0 as? SSHKeyFileError else { return XCTFail("\($0)") }
            }
        }
    }
}
