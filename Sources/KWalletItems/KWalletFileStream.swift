import KeychainCore

/// A cursor over bytes Qt's QDataStream wrote (big-endian, Qt 5's default version): what a
/// `.kwl` file's name index and decrypted contents are made of. Every length is checked against
/// what is left before anything is read or allocated, so a hostile count ends in `truncated`.
struct KWalletFileStream {
    private let bytes: Bytes
    private(set) var offset: Int

    init(_ bytes: Bytes, from offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }
    var atEnd: Bool { offset >= bytes.count }

    mutating func uint32() throws -> UInt32 {
        let raw = try take(4)
        return raw.reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func take(_ count: Int) throws -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw KWalletFileError.truncated }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    /// A QByteArray: its length then its bytes, 0xFFFFFFFF for a null one (read as empty, as
    /// kwalletd's entries do).
    mutating func byteArray() throws -> Bytes {
        let length = try uint32()
        if length == 0xFFFF_FFFF { return [] }
        return Bytes(try take(Int(length)))
    }

    /// A QString: its length in bytes then UTF-16BE, 0xFFFFFFFF for a null one (read as empty).
    mutating func string() throws -> String {
        let length = try uint32()
        if length == 0xFFFF_FFFF { return "" }
        guard length % 2 == 0 else { throw KWalletFileError.malformed("a name of an odd number of UTF-16 bytes") }
        let raw = try take(Int(length))
        var units = [UInt16]()
        units.reserveCapacity(raw.count / 2)
        var index = raw.startIndex
        while index < raw.endIndex {
            units.append(UInt16(raw[index]) << 8 | UInt16(raw[index + 1]))
            index += 2
        }
        return String(decoding: units, as: UTF16.self)
    }
}
