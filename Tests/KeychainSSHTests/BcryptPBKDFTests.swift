import KeychainCore
import KeychainSSH
import XCTest

final class BcryptPBKDFTests: XCTestCase {
    /// OpenBSD's regression vector (python's bcrypt.kdf gives the same bytes).
    func testKnownVector() throws {
        let key = try BcryptPBKDF.derive(passphrase: Array("password".utf8), salt: Array("salt".utf8), rounds: 4, count: 32)
        XCTAssertEqual(key.hex, "5bbf0cc293587f1c3635555c27796598d47e579071bf427e9d8fbe842aba34d9")
    }

    /// 48 bytes, what aes256-ctr takes (key and IV): the output spread over two blocks; from
    /// python's bcrypt.kdf(b"correct horse", bytes(range(16)), 48, 16).
    func testKeyAndIVLengthSpreadOverTwoBlocks() throws {
        let key = try BcryptPBKDF.derive(passphrase: Array("correct horse".utf8), salt: Array(0..<16), rounds: 16, count: 48)
        XCTAssertEqual(key.hex, "6bd628cd9202c5d0cb3e47dc1332be0162d3d4262dac8dac9f00998434479f36930c217fd05e33a7e77e207f680659d2")
    }

    func testRefusesEmptyPassphraseAndZeroRounds() {
        XCTAssertThrowsError(try BcryptPBKDF.derive(passphrase: [], salt: [1], rounds: 16, count: 32))
        XCTAssertThrowsError(try BcryptPBKDF.derive(passphrase: [1], salt: [1], rounds: 0, count: 32))
    }
}
