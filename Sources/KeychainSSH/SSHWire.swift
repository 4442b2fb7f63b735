package import KeychainCore

// RFC 4251's data types over the engine's ByteReader/ByteWriter, which already read and write
// its uint32, uint64 and string (a uint32 length, then the bytes, checked against what is left,
// so a hostile length cannot make a reader allocate). The agent protocol and OpenSSH's key and
// certificate formats add booleans and mpints.

extension ByteReader {
    package mutating func bool() throws -> Bool { try u8() != 0 }

    /// An mpint as its magnitude, big-endian, without leading zeros; negative numbers are refused
    /// (no key field is negative).
    package mutating func mpint() throws -> Bytes {
        let raw = try blob()
        if let first = raw.first, first & 0x80 != 0 { throw KeychainError.decode("a negative number where a key field belongs") }
        return Array(raw.drop { $0 == 0 })
    }
}

extension ByteWriter {
    package mutating func bool(_ value: Bool) { u8(value ? 1 : 0) }

    /// An unsigned magnitude as an mpint: leading zeros dropped, a zero byte put back when the top
    /// bit is set so that the number stays positive.
    package mutating func mpint(_ magnitude: Bytes) {
        var trimmed = Array(magnitude.drop { $0 == 0 })
        if let first = trimmed.first, first & 0x80 != 0 { trimmed.insert(0, at: 0) }
        blob(trimmed)
        trimmed.wipe()
    }
}
