import Foundation
import KeychainCore
import KeychainSSH
import XCTest

final class SSHKeyTests: XCTestCase {
    static let kinds: [(String, Int?, String)] = [
        ("ed25519", nil, "ssh-ed25519"), ("ecdsa", 256, "ecdsa-sha2-nistp256"), ("ecdsa", 384, "ecdsa-sha2-nistp384"),
        ("ecdsa", 521, "ecdsa-sha2-nistp521"), ("rsa", 2048, "ssh-rsa")
    ]

    func testEveryKindSignsWhatSSHKeygenVerifies() throws {
        for (type, bits, name) in Self.kinds {
            let generated = try OpenSSHTools.generate(type, bits: bits)
            let key = try SSHPrivateKey(serialized: generated.serialized)
            XCTAssertEqual(key.keyType, name)
            XCTAssertEqual(key.publicBlob, generated.publicBlob, name)
            XCTAssertEqual(key.serialized(), generated.serialized, name)
            let listed = try OpenSSHTools.run(["/usr/bin/ssh-keygen", "-lf", generated.path + ".pub"]).output
            XCTAssertEqual(String(key.bits), String(listed.split(separator: " ")[0]), name)
            // ssh-keygen -Y signs RSA with rsa-sha2-512 and accepts nothing weaker.
            let check = try OpenSSHTools.checkWithSSHKeygen(key, flags: type == "rsa" ? 4 : 0)
            XCTAssertEqual(check.status, 0, "\(name): \(check.output)")
            let data = Array("data".utf8)
            let signature = try key.sign(data, flags: 0)
            XCTAssertTrue(SSHPublicKey.verify(signature: signature, of: data, by: key.publicBlob), name)
            XCTAssertFalse(SSHPublicKey.verify(signature: signature, of: data + [0], by: key.publicBlob), name)
        }
    }

    func testFingerprintIsSSHKeygens() throws {
        for (type, bits, _) in Self.kinds {
            let generated = try OpenSSHTools.generate(type, bits: bits)
            let listed = try OpenSSHTools.run(["/usr/bin/ssh-keygen", "-lf", generated.path + ".pub"]).output
            XCTAssertEqual(String(listed.split(separator: " ")[1]), SSHPublicKey.fingerprint(of: generated.publicBlob))
            let md5 = try OpenSSHTools.run(["/usr/bin/ssh-keygen", "-E", "md5", "-lf", generated.path + ".pub"]).output
            XCTAssertEqual(String(md5.split(separator: " ")[1]), SSHPublicKey.fingerprint(of: generated.publicBlob, hash: .md5))
            let line = try String(contentsOfFile: generated.path + ".pub", encoding: .utf8)
            XCTAssertEqual(SSHPublicKey.authorizedKeysLine(of: generated.publicBlob, comment: "test key") + "\n", line)
        }
    }

    func testRSAFlagsChooseTheHash() throws {
        let key = try SSHPrivateKey(serialized: try OpenSSHTools.generate("rsa", bits: 2048).serialized)
        let data = Array("data".utf8)
        for (flags, algorithm) in [(UInt32(0), "ssh-rsa"), (2, "rsa-sha2-256"), (4, "rsa-sha2-512"), (6, "rsa-sha2-256")] {
            let signature = try key.sign(data, flags: flags)
            var reader = ByteReader(signature)
            XCTAssertEqual(try reader.string(), algorithm)
            XCTAssertTrue(SSHPublicKey.verify(signature: signature, of: data, by: key.publicBlob), algorithm)
        }
    }

    func testCertificatesSignWithTheirKey() throws {
        for (type, bits, name) in Self.kinds {
            let generated = try OpenSSHTools.generate(type, bits: bits)
            let certificate = try OpenSSHTools.certify(generated)
            var writer = ByteWriter()
            writer.string(name + "-cert-v01@openssh.com")
            writer.blob(certificate)
            writer.raw(Self.certificatePrivateFields(of: generated, type: type))
            let key = try SSHPrivateKey(serialized: writer.bytes)
            XCTAssertEqual(key.publicBlob, certificate)
            XCTAssertEqual(key.keyType, name + "-cert-v01@openssh.com")
            XCTAssertEqual(key.serialized(), writer.bytes)
            let check = try OpenSSHTools.checkWithSSHKeygen(key, flags: type == "rsa" ? 4 : 0)
            XCTAssertEqual(check.status, 0, "\(name) certificate: \(check.output)")

            // The certificate of one key with the private part of another is refused.
            let other = try OpenSSHTools.generate(type, bits: bits)
            var mismatched = ByteWriter()
            mismatched.string(name + "-cert-v01@openssh.com")
            mismatched.blob(certificate)
            mismatched.raw(Self.certificatePrivateFields(of: other, type: type))
            XCTAssertThrowsError(try SSHPrivateKey(serialized: mismatched.bytes), name)
        }
    }

    /// The private fields a certificate's serialization carries after the certificate: the plain
    /// key's, less the public ones the certificate holds (Ed25519 repeats its public key).
    static func certificatePrivateFields(of key: GeneratedKey, type: String) -> Bytes {
        var reader = ByteReader(key.privateFields)
        switch type {
        case "ecdsa":
            _ = try! reader.blob()
            _ = try! reader.blob()
        case "rsa":
            _ = try! reader.blob()
            _ = try! reader.blob()
        default:
            break
        }
        return reader.rest()
    }

    func testHostileKeysAreRefused() throws {
        let ed25519 = try OpenSSHTools.generate("ed25519")
        var reader = ByteReader(ed25519.serialized)
        _ = try reader.string()
        let pk = try reader.blob()
        var sk = try reader.blob()

        func serialized(_ type: String, _ fields: (inout ByteWriter) -> Void) -> Bytes {
            var writer = ByteWriter()
            writer.string(type)
            fields(&writer)
            return writer.bytes
        }
        // A secret half that is not the stated public key's.
        sk[0] ^= 1
        XCTAssertThrowsError(
            try SSHPrivateKey(
                serialized: serialized("ssh-ed25519") {
                    $0.blob(pk); $0.blob(sk)
                }))
        // Unknown and security-key types.
        XCTAssertThrowsError(try SSHPrivateKey(serialized: serialized("sk-ssh-ed25519@openssh.com") { $0.blob(pk) }))
        XCTAssertThrowsError(try SSHPrivateKey(serialized: serialized("ssh-dss") { $0.blob(pk) }))
        // Every truncation of a good key.
        for length in 0..<ed25519.serialized.count {
            XCTAssertThrowsError(try SSHPrivateKey(serialized: Array(ed25519.serialized[0..<length])))
        }
        // Random damage to every kind: refused or read, never a crash.
        var generator = SystemRandomNumberGenerator()
        for key in [ed25519.serialized, TestKeys.ecdsa.serialized, TestKeys.rsa.serialized] {
            for _ in 0..<100 {
                var damaged = key
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
                if let read = try? SSHPrivateKey(serialized: damaged) {
                    XCTAssertTrue(SSHPublicKey.verify(signature: try read.sign([1], flags: 4), of: [1], by: read.publicBlob))
                }
            }
        }
        // A certificate whose CA is itself a certificate.
        let user = try OpenSSHTools.generate("ed25519")
        let userCertificate = try OpenSSHTools.certify(user)
        var nested = ByteWriter()
        nested.string("ssh-ed25519-cert-v01@openssh.com")
        nested.blob(Array(repeating: 0, count: 32))
        nested.blob(Array(user.publicBlob.suffix(32)))
        nested.u64(1)
        nested.u32(1)
        nested.string("id")
        nested.blob([])
        nested.u64(0)
        nested.u64(UInt64.max)
        nested.blob([])
        nested.blob([])
        nested.blob([])
        nested.blob(userCertificate)
        nested.blob([0, 0, 0, 1, 0x41])
        XCTAssertFalse(SSHPublicKey.isValid(nested.bytes))
        XCTAssertTrue(SSHPublicKey.isValid(userCertificate))
        // An EC point off the curve.
        let ecdsa = try OpenSSHTools.generate("ecdsa", bits: 256)
        var bad = ecdsa.serialized
        let pointStart = 4 + 19 + 4 + 8 + 4 + 1
        bad[pointStart + 10] ^= 0x40
        XCTAssertThrowsError(try SSHPrivateKey(serialized: bad))
        XCTAssertFalse(SSHPublicKey.isValid(Array(bad[0..<(pointStart + 64)])))
        // RSA under 1024 bits, made by OpenSSL since ssh-keygen refuses to.
        let path = OpenSSHTools.scratch + "/small.pem"
        try OpenSSHTools.run(["/usr/bin/openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:768", "-out", path])
        let text = try OpenSSHTools.run(["/usr/bin/openssl", "pkey", "-in", path, "-noout", "-text"]).output
        func number(_ label: String) -> Bytes {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            guard let start = lines.firstIndex(where: { $0.hasPrefix(label + ":") }) else { return [] }
            return OpenSSHTools.hex(lines[(start + 1)...].prefix { $0.hasPrefix(" ") }.joined().filter { $0.isHexDigit })
        }
        let small = serialized("ssh-rsa") {
            $0.mpint(number("modulus"))
            $0.mpint([1, 0, 1])
            for label in ["privateExponent", "coefficient", "prime1", "prime2"] { $0.mpint(number(label)) }
        }
        XCTAssertEqual(number("modulus").count, 97)
        XCTAssertThrowsError(try SSHPrivateKey(serialized: small)) { error in
            XCTAssertTrue("\(error)".contains("under 1024"), "\(error)")
        }
    }

    func testTPMKeySignsThroughItsSeam() throws {
        // A software P-256 key stands in for the TPM: the seam gets the digest and the blob.
        let stand = try OpenSSHTools.generate("ecdsa", bits: 256)
        let software = try SSHPrivateKey(serialized: stand.serialized)
        var fields = ByteReader(stand.privateFields)
        _ = try fields.string()
        let point = try fields.blob()
        var writer = ByteWriter()
        writer.string(SSHPrivateKey.tpmKeyType)
        writer.blob(point)
        writer.blob(Array("tpm-blob".utf8))
        let tpmKey = try SSHPrivateKey(serialized: writer.bytes)
        XCTAssertTrue(tpmKey.isTPMResident)
        XCTAssertEqual(tpmKey.keyType, "ecdsa-sha2-nistp256")
        XCTAssertEqual(tpmKey.publicBlob, stand.publicBlob)
        XCTAssertEqual(tpmKey.serialized(), writer.bytes)

        SSHPrivateKey.tpmSign = nil
        XCTAssertThrowsError(try tpmKey.sign([1, 2, 3], flags: 0))
        let seen = SeenBlobs()
        // The stand-in signs the digest it is given: ECDSA over SHA-256 of the data equals
        // signing that digest raw, which the test cannot do through the key's API, so it keeps
        // the data and signs it instead, checking the digest it was handed.
        let data = Array("to sign".utf8)
        SSHPrivateKey.tpmSign = { digest, blob in
            seen.record(blob, digest)
            let signature = try software.sign(data, flags: 0)
            var reader = ByteReader(signature)
            _ = try reader.string()
            var numbers = ByteReader(try reader.blob())
            return (try numbers.mpint(), try numbers.mpint())
        }
        defer { SSHPrivateKey.tpmSign = nil }
        let signature = try tpmKey.sign(data, flags: 0)
        XCTAssertTrue(SSHPublicKey.verify(signature: signature, of: data, by: stand.publicBlob))
        XCTAssertEqual(seen.blobs, [Array("tpm-blob".utf8)])
        XCTAssertEqual(seen.digests, [Crypto.sha256(data)])
        // A TPM that answers with a signature over something else is caught.
        XCTAssertThrowsError(try tpmKey.sign(data + [0], flags: 0))
    }
}

final class SeenBlobs: @unchecked Sendable {
    var blobs: [Bytes] = []
    var digests: [Bytes] = []
    func record(_ blob: Bytes, _ digest: Bytes) {
        blobs.append(blob)
        digests.append(digest)
    }
}
