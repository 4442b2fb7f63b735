import Foundation
import KWalletItems
import KeychainCore
import XCTest

/// Damaged and hostile `.kwl` files: each one a thrown KWalletFileError, never a crash, a hang or
/// a huge allocation, and quickly (the PAM module reads wallets during a login).
final class KWalletFileHostileTests: XCTestCase {
    private let password = Array("hostile".utf8)
    private let contents = KWalletContents(
        folders: ["Empty", "Passwords"],
        entries: [KWalletEntry(folder: "Passwords", key: "k", type: .password, value: QtDataStream.string("v"))])

    /// A format 0.0 wallet (the SHA-1 key costs a millisecond, so thousands of reads stay fast).
    private func wallet(plaintext: Bytes? = nil, index: Bytes? = nil) throws -> Bytes {
        try KWalletFile.write(contents, password: password, salt: nil, plaintext: plaintext, index: index)
    }

    private func assertRefused(
        _ file: Bytes, salt: Bytes? = nil, _ message: @autoclosure () -> String = "", file source: StaticString = #filePath, line: UInt = #line,
        _ check: (KWalletFileError) -> Void = { _ in }
    ) {
        do {
            let read = try KWalletFile.read(file, password: password, salt: salt)
            XCTFail("read \(read.entries.count) entries: \(message())", file: source, line: line)
        } catch let error as KWalletFileError {
            check(error)
            XCTAssertFalse("\(error)".contains("\n"), "one line", file: source, line: line)
        } catch {
            XCTFail("not a KWalletFileError: \(error) \(message())", file: source, line: line)
        }
    }

    func testTheWriterRoundTrips() throws {
        XCTAssertEqual(try KWalletFile.read(wallet(), password: password, salt: nil), contents)
        let salt = try Crypto.random(56)
        XCTAssertEqual(try KWalletFile.read(KWalletFile.write(contents, password: password, salt: salt), password: password, salt: salt), contents)
    }

    func testTruncatedAtEveryLength() throws {
        let file = try wallet()
        for length in 0..<file.count {
            assertRefused(Array(file.prefix(length)), "truncated at \(length)")
        }
    }

    /// A flipped byte anywhere is refused, or (in the random filler's first bytes, which nothing
    /// checks, as in kwalletd) changes nothing that is read.
    func testFlippedBytes() throws {
        let file = try wallet()
        let original = try KWalletFile.read(file, password: password, salt: nil)
        for at in file.indices {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = file
                damaged[at] ^= mask
                do {
                    let read = try KWalletFile.read(damaged, password: password, salt: nil)
                    XCTAssertEqual(read, original, "byte \(at) ^ \(mask)")
                } catch {
                    XCTAssertTrue(error is KWalletFileError, "byte \(at): \(error)")
                }
            }
        }
    }

    func testOversizedFileIsRefusedUnread() {
        var file = Bytes(repeating: 0, count: KWalletFile.maximumFileSize + 1)
        file.replaceSubrange(0..<12, with: Array("KWALLET\n\r".utf8) + [0] + Array("\r\n".utf8))
        let start = ContinuousClock.now
        assertRefused(file) { XCTAssertEqual($0, .tooLarge) }
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(1))
    }

    func testNotAWalletAndUnknownFormats() throws {
        assertRefused(Array("GnomeKeyring\n\r\0\n".utf8) + Bytes(repeating: 0, count: 64)) { XCTAssertEqual($0, .notAWallet) }
        var file = try wallet()
        file[12] = 1
        assertRefused(file) { XCTAssertEqual($0, .unsupportedVersion(1, 0)) }
        file = try wallet()
        file[14] = 1  // 3DES, which kwalletd never implemented
        assertRefused(file) { XCTAssertEqual($0, .unknownCipher(cipher: 1, hash: 0)) }
    }

    /// The encrypted part is Blowfish blocks: one byte more or less is not a wallet's.
    func testEncryptedPartNotOfWholeBlocks() throws {
        let file = try wallet()
        assertRefused(file + [0]) { XCTAssertEqual($0, .truncated) }
        assertRefused(Array(file.dropLast())) { XCTAssertEqual($0, .truncated) }
    }

    func testHugeCountsInTheIndex() throws {
        // More folders than kwalletd's own sanity check allows.
        assertRefused(try wallet(index: [0, 1, 0, 0])) { XCTAssertEqual($0, .malformed("65536 folders in the name index")) }
        // A count the file's bytes cannot hold.
        assertRefused(try wallet(index: [0, 0, 0xFF, 0xFF])) { XCTAssertEqual($0, .truncated) }
        assertRefused(try wallet(index: [0, 0, 0, 1] + Bytes(repeating: 7, count: 16) + [0xFF, 0xFF, 0xFF, 0xFF])) { XCTAssertEqual($0, .truncated) }
        // An index that names other folders than the encrypted part holds.
        assertRefused(try wallet(index: [0, 0, 0, 0])) { XCTAssertEqual($0, .malformed("the name index does not match the encrypted entries")) }
    }

    /// Counts and lengths inside the encrypted part, which passes its SHA-1: each checked against
    /// what is left before anything is allocated.
    func testHugeCountsAndLengthsInTheContents() throws {
        let folder = QtDataStream.string("F")
        for (plaintext, expected): (Bytes, KWalletFileError) in [
            (folder + [0xFF, 0xFF, 0xFF, 0xFF], .truncated),  // 4 billion entries
            ([0xFF, 0xFF, 0xFF, 0xF0], .truncated),  // a folder name of 4 GiB
            ([0, 0, 0, 3, 0, 65, 0], .malformed("a name of an odd number of UTF-16 bytes")),
            (folder + [0, 0, 0, 1] + QtDataStream.string("k") + [0, 0, 0, 1, 0x7F, 0xFF, 0xFF, 0xFF], .truncated),  // a 2 GiB value
            (folder + [0, 0, 0, 0] + folder + [0, 0, 0, 0], .malformed("the folder \"F\" appears twice")),
            (folder, .truncated)  // a folder without its count
        ] {
            assertRefused(try wallet(plaintext: plaintext), "\(plaintext)") { XCTAssertEqual($0, expected) }
        }
    }

    func testHostileSaltIsRefusedBeforeAnyDerivation() throws {
        let salt = try Crypto.random(56)
        let file = try KWalletFile.write(contents, password: password, salt: salt)
        let start = ContinuousClock.now
        assertRefused(file, salt: Bytes(repeating: 1, count: 1 << 20)) {
            guard case .salt = $0 else { return XCTFail("\($0)") }
        }
        assertRefused(file, salt: []) {
            guard case .salt = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(50))
    }

    /// The format fixes the key derivation's cost (50000 PBKDF2-SHA512 rounds, 2000 SHA-1s per 16
    /// bytes of password): no byte of a file can ask for more. A whole read of a real wallet, and
    /// a password of a megabyte, stay well under a second.
    func testKeyDerivationCostIsFixed() throws {
        let file = try KWalletFixtures.bytes("kdewallet.kwl")
        var start = ContinuousClock.now
        _ = try KWalletFile.read(file, password: Array(KWalletFixtures.kdewalletPassword.utf8), salt: KWalletFixtures.bytes("kdewallet.salt"))
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(500))
        start = ContinuousClock.now
        XCTAssertThrowsError(try KWalletFile.read(try wallet(), password: Bytes(repeating: 0x61, count: 1 << 20), salt: nil))
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(500))
    }

    /// Random damage, thousands of times: nothing is asserted but that each read returns or throws
    /// a KWalletFileError, and that all of them together stay within a bound.
    func testRandomDamageInBoundedTime() throws {
        let file = try wallet()
        var generator = SystemRandomNumberGenerator()
        let start = ContinuousClock.now
        for _ in 0..<3000 {
            var damaged = file
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: damaged[Int.random(in: damaged.indices, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                case 1: damaged.removeLast(Int.random(in: 0...min(16, damaged.count - 1), using: &generator))
                default: damaged.insert(UInt8.random(in: 0...255, using: &generator), at: Int.random(in: 0...damaged.count, using: &generator))
                }
            }
            do { _ = try KWalletFile.read(damaged, password: password, salt: nil) } catch { XCTAssertTrue(error is KWalletFileError) }
        }
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(20))
    }
}
