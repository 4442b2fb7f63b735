import KeychainCore
import KeychainSSH
import XCTest

final class SSHWireTests: XCTestCase {
    func testRoundTripOfEveryType() throws {
        var writer = ByteWriter()
        writer.u8(11)
        writer.bool(true)
        writer.u32(0xdead_beef)
        writer.string("ssh-ed25519")
        writer.mpint([0x00, 0x80, 0x01])
        writer.raw([9, 9])
        var reader = ByteReader(writer.bytes)
        XCTAssertEqual(try reader.u8(), 11)
        XCTAssertEqual(try reader.bool(), true)
        XCTAssertEqual(try reader.u32(), 0xdead_beef)
        XCTAssertEqual(try reader.string(), "ssh-ed25519")
        XCTAssertEqual(try reader.mpint(), [0x80, 0x01])
        XCTAssertEqual(try reader.fixed(1), [9])
        XCTAssertEqual(reader.rest(), [9])
        XCTAssertTrue(reader.isAtEnd)
    }

    func testMPIntKeepsPositiveNumbersPositive() {
        var writer = ByteWriter()
        writer.mpint([0x80])
        XCTAssertEqual(writer.bytes, [0, 0, 0, 2, 0, 0x80])
    }

    func testHostileLengthsAreRefusedWithoutAllocating() {
        var reader = ByteReader([0xff, 0xff, 0xff, 0xf0, 1, 2])
        XCTAssertThrowsError(try reader.blob())
        var short = ByteReader([0, 0, 1])
        XCTAssertThrowsError(try short.u32())
        var negative = ByteReader([0, 0, 0, 1, 0x80])
        XCTAssertThrowsError(try negative.mpint())
        var fixed = ByteReader([1])
        XCTAssertThrowsError(try fixed.fixed(2))
    }
}
