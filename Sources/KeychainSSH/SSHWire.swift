package import KeychainCore

/// Why a message or a key blob could not be read: the agent answers SSH_AGENT_FAILURE, an
/// importer names the file. Never a crash: every read checks its length first.
package struct SSHWireError: Error, Equatable, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Reads RFC 4251's data types (byte, boolean, uint32, uint64, string, mpint, name-list) from a
/// message, the agent protocol's and OpenSSH's key formats' one encoding.
package struct SSHWireReader {
    private let bytes: Bytes
    private(set) package var offset: Int

    package init(_ bytes: Bytes) {
        self.bytes = bytes
        self.offset = 0
    }

    package var isAtEnd: Bool { offset == bytes.count }
    package var remaining: Int { bytes.count - offset }

    package mutating func readByte() throws -> UInt8 {
        guard offset < bytes.count else { throw SSHWireError("the message ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func readBool() throws -> Bool { try readByte() != 0 }

    package mutating func readUInt32() throws -> UInt32 {
        let raw = try readFixed(4)
        return raw.reduce(0) { $0 << 8 | UInt32($1) }
    }

    package mutating func readUInt64() throws -> UInt64 {
        let raw = try readFixed(8)
        return raw.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// `count` bytes as they are, with no length before them.
    package mutating func readFixed(_ count: Int) throws -> Bytes {
        guard count >= 0, count <= remaining else { throw SSHWireError("the message ends early") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// A string: a uint32 length, then that many bytes (a length past the end is an error,
    /// so a hostile length cannot make the reader allocate).
    package mutating func readString() throws -> Bytes {
        let length = try readUInt32()
        guard length <= UInt32(remaining) else { throw SSHWireError("a length of \(length) runs past the message's end") }
        return try readFixed(Int(length))
    }

    /// A string that must be UTF-8 text (key type names, comments, host names).
    package mutating func readText() throws -> String {
        let raw = try readString()
        guard let text = String(validating: raw, as: UTF8.self) else { throw SSHWireError("a name is not UTF-8 text") }
        return text
    }

    /// An mpint as its magnitude, big-endian, without the sign byte; negative numbers are refused
    /// (no key field is negative).
    package mutating func readMPInt() throws -> Bytes {
        var raw = try readString()
        if let first = raw.first, first & 0x80 != 0 { throw SSHWireError("a negative number where a key field belongs") }
        while raw.first == 0 { raw.removeFirst() }
        return raw
    }

    /// What is left, for messages whose last field is "the rest" (extension contents).
    package mutating func readRest() -> Bytes {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }
}

/// Writes the same data types; the inverse of `SSHWireReader`.
package struct SSHWireWriter {
    package private(set) var bytes: Bytes = []

    package init() {}

    package mutating func writeByte(_ value: UInt8) { bytes.append(value) }
    package mutating func writeBool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    package mutating func writeUInt32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    package mutating func writeUInt64(_ value: UInt64) {
        writeUInt32(UInt32(value >> 32))
        writeUInt32(UInt32(truncatingIfNeeded: value))
    }

    package mutating func writeFixed(_ raw: Bytes) { bytes += raw }

    package mutating func writeString(_ raw: Bytes) {
        writeUInt32(UInt32(raw.count))
        bytes += raw
    }

    package mutating func writeText(_ text: String) { writeString(Array(text.utf8)) }

    /// An unsigned magnitude as an mpint: leading zeros dropped, a zero byte put back when the
    /// top bit is set so that the number stays positive.
    package mutating func writeMPInt(_ magnitude: Bytes) {
        var raw = Array(magnitude.drop { $0 == 0 })
        if let first = raw.first, first & 0x80 != 0 { raw.insert(0, at: 0) }
        writeString(raw)
    }

    /// Wipes what was written (a private key's serialization) before the writer goes.
    package mutating func wipe() { bytes.wipe() }
}
