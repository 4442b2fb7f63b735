@testable import KeychainCore
import XCTest

/// Known-answer tests for the primitives, since HMAC is composed here from SHA-256.
final class CryptoTests: XCTestCase {
    private func hex(_ s: String) -> Bytes {
        var out = Bytes()
        var chars = Array(s.utf8)
        while chars.count >= 2 {
            out.append(UInt8(String(decoding: chars[0..<2], as: UTF8.self), radix: 16)!)
            chars.removeFirst(2)
        }
        return out
    }

    func testHMACSHA256AgainstRFC4231() {
        let vectors: [(Bytes, Bytes, String)] = [
            (
                Bytes(repeating: 0x0b, count: 20), Array("Hi There".utf8),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            (
                Bytes(repeating: 0xaa, count: 20), Bytes(repeating: 0xdd, count: 50),
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
            ),
            // A key longer than the block is hashed first.
            (
                Bytes(repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            )
        ]
        for (key, message, expected) in vectors {
            XCTAssertEqual(Crypto.hmacSHA256(key: key, message), hex(expected))
        }
    }

    func testDigests() {
        XCTAssertEqual(Crypto.sha256(Array("abc".utf8)), hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        XCTAssertEqual(Crypto.sha1(Array("abc".utf8)), hex("a9993e364706816aba3e25717850c26c9cd0d89d"))
    }

    func testAESGCMRoundTripAndTamper() throws {
        let key = try Crypto.random(32)
        let sealed = try Crypto.seal(Array("secret".utf8), key: key, aad: [1, 2, 3])
        XCTAssertEqual(try Crypto.open(sealed, key: key, aad: [1, 2, 3]), Array("secret".utf8))
        XCTAssertThrowsError(try Crypto.open(sealed, key: key, aad: [1, 2, 4]))
        XCTAssertEqual(try Crypto.open(try Crypto.seal([], key: key, aad: []), key: key, aad: []), [])
    }

    /// Machines without AES-NI use OpenSSL for AES-GCM; a file written on one must open on the other.
    func testOpenSSLFallbackIsTheSameCipher() throws {
        let key = try Crypto.random(32), message = Array("moved between machines".utf8), aad = Array("row".utf8)
        let accelerated = Crypto.sodiumAESGCM
        defer { Crypto.sodiumAESGCM = accelerated }
        let bySodium = try Crypto.seal(message, key: key, aad: aad)
        Crypto.sodiumAESGCM = false
        XCTAssertEqual(try Crypto.open(bySodium, key: key, aad: aad), message)
        let byOpenSSL = try Crypto.seal(message, key: key, aad: aad)
        XCTAssertThrowsError(try Crypto.open(byOpenSSL, key: key, aad: [0]))
        Crypto.sodiumAESGCM = accelerated
        XCTAssertEqual(try Crypto.open(byOpenSSL, key: key, aad: aad), message)
    }

    func testScryptAgainstRFC7914() throws {
        let out = try Crypto.scrypt(password: Array("password".utf8), salt: Array("NaCl".utf8), parameters: ScryptParameters(n: 1024, r: 8, p: 16))
        XCTAssertEqual(
            out,
            Array(
                hex("fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640").prefix(
                    32)))
    }
}
