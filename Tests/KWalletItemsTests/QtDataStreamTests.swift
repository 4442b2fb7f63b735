import KWalletItems
import XCTest

/// Qt 5's bytes, written out by hand from QDataStream's rules (and matched against what kwalletd5
/// stored through kwallet-query): a KDE program must read back exactly what it wrote.
final class QtDataStreamTests: XCTestCase {
    func testAStringIsItsByteLengthThenUTF16BigEndian() {
        XCTAssertEqual(QtDataStream.string("ab"), [0, 0, 0, 4, 0, 0x61, 0, 0x62])
        XCTAssertEqual(QtDataStream.string(""), [0, 0, 0, 0])
        // Outside the BMP: a surrogate pair, four bytes.
        XCTAssertEqual(QtDataStream.string("é😀"), [0, 0, 0, 6, 0, 0xE9, 0xD8, 0x3D, 0xDE, 0x00])
    }

    func testStringsRoundTrip() {
        for text in ["", "pässwörd", "日本語", "😀 x", String(repeating: "z", count: 70_000)] {
            XCTAssertEqual(QtDataStream.readString(QtDataStream.string(text)), text)
        }
    }

    func testANullStringReadsAsEmpty() {
        XCTAssertEqual(QtDataStream.readString([0xFF, 0xFF, 0xFF, 0xFF]), "")
    }

    func testMalformedStringsAreRefused() {
        for bytes: [UInt8] in [
            [], [0, 0, 0], [0, 0, 0, 3, 0, 0x61, 0], [0, 0, 0, 4, 0, 0x61],
            [0, 0, 0, 2, 0, 0x61, 0],  // trailing byte
            [0, 0, 0, 2, 0xD8, 0x3D],  // a lone surrogate: no Swift string holds it
            [0x7F, 0xFF, 0xFF, 0xFE, 0, 0]  // a length far beyond the input
        ] {
            XCTAssertNil(QtDataStream.readString(bytes), "\(bytes)")
        }
    }

    /// KWallet's library (and so kwallet-query) writes a QMap's pairs from its first key, keys in
    /// UTF-16 order: the bytes kwallet-query stored through kwalletd5 (Tests/kde).
    func testAMapIsItsCountThenPairsFromTheFirstKey() {
        let bytes = QtDataStream.map(["b": "2", "a": "1"])
        XCTAssertEqual(
            bytes,
            [0, 0, 0, 2] + QtDataStream.string("a") + QtDataStream.string("1") + QtDataStream.string("b") + QtDataStream.string("2"))
        // U+FF5E sorts after U+1F600 by code point, before it by UTF-16 units (0xD83D): Qt's order.
        let order = QtDataStream.map(["\u{FF5E}": "", "😀": ""])
        XCTAssertEqual(Array(order[4..<12]), QtDataStream.string("😀"))
        XCTAssertEqual(QtDataStream.map([:]), [0, 0, 0, 0])
    }

    func testMapsRoundTrip() {
        let maps: [[String: String]] = [
            [:], ["login": "ann", "password": "pä😀ss", "": ""], Dictionary(uniqueKeysWithValues: (0..<300).map { ("k\($0)", "v\($0)") })
        ]
        for map in maps { XCTAssertEqual(QtDataStream.readMap(QtDataStream.map(map)), map) }
    }

    func testMalformedMapsAreRefused() {
        let one = QtDataStream.map(["a": "1"])
        XCTAssertNil(QtDataStream.readMap(Array(one.dropLast())))
        XCTAssertNil(QtDataStream.readMap(one + [0]))
        XCTAssertNil(QtDataStream.readMap([0xFF, 0xFF, 0xFF, 0xFF]), "a hostile count is refused at once")
        XCTAssertNil(QtDataStream.readMap([0, 0, 0, 1] + QtDataStream.string("key only")))
    }

    /// Reading keeps the value read last for a key written twice, as QMap::value does in Qt 5.
    func testADuplicateKeyKeepsTheValueReadLast() {
        let bytes = [0, 0, 0, 2] + QtDataStream.string("k") + QtDataStream.string("old") + QtDataStream.string("k") + QtDataStream.string("new")
        XCTAssertEqual(QtDataStream.readMap(bytes), ["k": "new"])
    }
}
