import KeychainSSH
import XCTest

final class SSHWireTests: XCTestCase {
    func testRoundTripOfEveryType() throws {
        var writer = SSHWireWriter()
        writer.writeByte(11)
        writer.writeBool(true)
        writer.writeUInt32(0xdead_beef)
        writer.writeUInt64(0x0102_0304_0506_0708)
        writer.writeText("ssh-ed25519")
        writer.writeMPInt([0x00, 0x80, 0x01])
        var reader = SSHWireReader(writer.bytes)
        XCTAssertEqual(try reader.readByte(), 11)
        XCTAssertEqual(try reader.readBool(), true)
        XCTAssertEqual(try reader.readUInt32(), 0xdead_beef)
        XCTAssertEqual(try reader.readUInt64(), 0x0102_0304_0506_0708)
        XCTAssertEqual(try reader.readText(), "ssh-ed25519")
        XCTAssertEqual(try reader.readMPInt(), [0x80, 0x01])
        XCTAssertTrue(reader.isAtEnd)
    }

    func testMPIntKeepsPositiveNumbersPositive() {
        var writer = SSHWireWriter()
        writer.writeMPInt([0x80])
        XCTAssertEqual(writer.bytes, [0, 0, 0, 2, 0, 0x80])
    }

    func testHostileLengthsAreRefusedWithoutAllocating() {
        var reader = SSHWireReader([0xff, 0xff, 0xff, 0xf0, 1, 2])
        XCTAssertThrowsError(try reader.readString())
        var short = SSHWireReader([0, 0, 1])
        XCTAssertThrowsError(try short.readUInt32())
        var negative = SSHWireReader([0, 0, 0, 1, 0x80])
        XCTAssertThrowsError(try negative.readMPInt())
    }
}
