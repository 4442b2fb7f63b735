import COpenSSL
import KeychainCore
import SessionBus
import XCTest

@testable import SecretServiceBus

/// dh-ietf1024-sha256-aes128-cbc-pkcs7 as a client does it (libsecret's egg-dh and egg-hkdf): the
/// client's half of the exchange here, the service's in SessionCrypto; both must reach one key.
final class SessionCryptoTests: XCTestCase {
    private static let prime =
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF"

    /// The client's key pair (its secret exponent, its public key) and, once the service's public
    /// key is known, the client's AES key.
    private struct Client {
        let exponent: OpaquePointer
        let publicKey: Bytes

        init() throws {
            var p: OpaquePointer?
            BN_hex2bn(&p, SessionCryptoTests.prime)
            let ctx = BN_CTX_new()
            defer { BN_free(p); BN_CTX_free(ctx) }
            exponent = BN_new()
            XCTAssertEqual(BN_rand(exponent, 256, -1, 0), 1)
            let g = BN_new(), y = BN_new()
            defer { BN_free(g); BN_free(y) }
            BN_set_word(g, 2)
            XCTAssertEqual(BN_mod_exp(y, g, exponent, p, ctx), 1)
            var out = Bytes(repeating: 0, count: 128)
            XCTAssertEqual(BN_bn2binpad(y, &out, 128), 128)
            publicKey = out
        }

        func key(serverPublic: Bytes) -> Bytes {
            var p: OpaquePointer?
            BN_hex2bn(&p, SessionCryptoTests.prime)
            let ctx = BN_CTX_new()
            let theirs = BN_bin2bn(serverPublic, Int32(serverPublic.count), nil), shared = BN_new()
            defer { BN_free(p); BN_CTX_free(ctx); BN_free(theirs); BN_free(shared) }
            BN_mod_exp(shared, theirs, exponent, p, ctx)
            var ikm = Bytes(repeating: 0, count: 128)
            BN_bn2binpad(shared, &ikm, 128)
            func hmac(_ key: Bytes, _ data: Bytes) -> Bytes {
                var out = Bytes(repeating: 0, count: 32)
                var length: UInt32 = 0
                HMAC(EVP_sha256(), key, Int32(key.count), data, data.count, &out, &length)
                return out
            }
            let prk = hmac(Bytes(repeating: 0, count: 32), ikm)
            return Array(hmac(prk, [1]).prefix(16))
        }
    }

    func testBothEndsReachTheSameKey() throws {
        let client = try Client()
        defer { BN_free(client.exponent) }
        let (serverPublic, key) = try SessionCrypto.negotiate(clientPublic: client.publicKey)
        XCTAssertEqual(serverPublic.count, 128)
        XCTAssertEqual(key.count, 16)
        XCTAssertEqual(client.key(serverPublic: serverPublic), key)
        // A leading zero byte less (libsecret sends the number's own length) is the same number.
        let again = try SessionCrypto.negotiate(clientPublic: Array(client.publicKey.drop { $0 == 0 }))
        XCTAssertEqual(client.key(serverPublic: again.publicKey), again.key)
        XCTAssertNotEqual(again.key, key, "each session draws its own exponent")
    }

    /// Values that would force a known shared secret, and what is no group element at all.
    func testPublicKeysOutOfRangeAreRefused() throws {
        // p - 1: the prime ends in 64 one bits.
        var limit = stride(from: 0, to: Self.prime.count, by: 2).map { offset -> UInt8 in
            let start = Self.prime.index(Self.prime.startIndex, offsetBy: offset)
            return UInt8(Self.prime[start..<Self.prime.index(start, offsetBy: 2)], radix: 16)!
        }
        limit[127] -= 1
        for bad: Bytes in [[], [0], [1], limit, Bytes(repeating: 0xFF, count: 128), Bytes(repeating: 1, count: 130)] {
            XCTAssertThrowsError(try SessionCrypto.negotiate(clientPublic: bad), "\(bad.count) bytes") { error in
                guard case .invalidArgs = error as? ServiceError else { return XCTFail("\(error)") }
            }
        }
        XCTAssertNoThrow(try SessionCrypto.negotiate(clientPublic: [2]))
    }

    func testSecretsTravelEncryptedUnderTheSessionKey() throws {
        let key = Bytes(repeating: 0x42, count: 16)
        let session = Session(id: "s1", owner: ":1.9", key: key)
        let wire = try session.encode(Array("hunter2".utf8), path: "/org/freedesktop/secrets/session/s1", contentType: "text/plain")
        XCTAssertEqual(wire.parameters.count, 16, "a fresh IV")
        XCTAssertEqual(wire.value.count, 16, "one padded block")
        XCTAssertNotEqual(wire.value, Array("hunter2".utf8) + Bytes(repeating: 9, count: 9))
        XCTAssertEqual(try session.decode(wire), Array("hunter2".utf8))
        XCTAssertEqual(try SessionCrypto.decrypt(wire.value, key: key, iv: wire.parameters), Array("hunter2".utf8))
        // Another key, a cut IV or a ciphertext that is not whole blocks: InvalidArgs.
        let other = Session(id: "s2", owner: ":1.9", key: Bytes(repeating: 0x43, count: 16))
        var shortIV = wire
        shortIV.parameters.removeLast()
        var cut = wire
        cut.value.removeLast()
        for (what, attempt) in [
            ("another key", { try other.decode(wire) }), ("a short IV", { try session.decode(shortIV) }), ("a cut block", { try session.decode(cut) })
        ] {
            XCTAssertThrowsError(try attempt(), what) { error in
                guard case .invalidArgs = error as? ServiceError else { return XCTFail("\(what): \(error)") }
            }
        }
        // A closed session's key is gone: what it encodes now goes in the clear.
        session.close()
        XCTAssertEqual(try session.encode([1, 2], path: "/p", contentType: "x").parameters, [])
    }

    func testPlainSessionsCarryTheSecretAsItIs() throws {
        let plain = Session(id: "s3", owner: ":1.9", key: nil)
        let wire = try plain.encode([0, 1, 2], path: "/org/freedesktop/secrets/session/s3", contentType: "application/octet-stream")
        XCTAssertEqual(wire.value, [0, 1, 2])
        XCTAssertEqual(wire.parameters, [])
        XCTAssertEqual(wire.session, "/org/freedesktop/secrets/session/s3")
        XCTAssertEqual(try plain.decode(wire), [0, 1, 2])
        XCTAssertThrowsError(try plain.decode(WireSecret(session: "/s", parameters: [1], value: [2], contentType: "")))
    }
}
