internal import COpenSSL

/// Secrets travel as byte arrays rather than Foundation.Data so that the engine links without Foundation.
package typealias Bytes = [UInt8]

extension Array where Element == UInt8 {
    /// Overwrites the buffer in place; OPENSSL_cleanse cannot be optimized away.
    package mutating func wipe() {
        withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { OPENSSL_cleanse(base, raw.count) }
        }
    }

    init(bigEndian value: UInt64) {
        self = (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    /// Hexadecimal digits (either case) back to bytes; nil for an odd count or another character.
    package init?(hexDigits text: some Collection<UInt8>) {
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 65...70: return c - 55
            case 97...102: return c - 87
            default: return nil
            }
        }
        guard text.count % 2 == 0 else { return nil }
        var out = Bytes()
        out.reserveCapacity(text.count / 2)
        var iterator = text.makeIterator()
        while let first = iterator.next(), let second = iterator.next() {
            guard let high = nibble(first), let low = nibble(second) else { return nil }
            out.append(high << 4 | low)
        }
        self = out
    }

    package var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Compares in time that does not depend on where the first difference is.
func constantTimeEqual(_ a: Bytes, _ b: Bytes) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<a.count { diff |= a[i] ^ b[i] }
    return diff == 0
}

/// A little writer/reader pair for the engine's own binary records (attributes, keybag fields).
package struct ByteWriter {
    package private(set) var bytes = Bytes()

    package init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    package mutating func u8(_ v: UInt8) { bytes.append(v) }
    package mutating func u32(_ v: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 24))
        bytes.append(UInt8(truncatingIfNeeded: v >> 16))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }
    package mutating func u64(_ v: UInt64) {
        u32(UInt32(truncatingIfNeeded: v >> 32))
        u32(UInt32(truncatingIfNeeded: v))
    }
    package mutating func blob(_ b: Bytes) { u32(UInt32(b.count)); bytes.append(contentsOf: b) }
    /// Bytes with no length before them (fixed-size fields, a record's already-encoded part).
    package mutating func raw(_ b: Bytes) { bytes.append(contentsOf: b) }
    /// Overwrites what was written (a private key's serialization) before the writer goes.
    package mutating func wipe() { bytes.wipe() }
    package mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }
}

package struct ByteReader {
    private let bytes: Bytes
    private var offset = 0

    package init(_ bytes: Bytes) { self.bytes = bytes }

    package var isAtEnd: Bool { offset == bytes.count }
    package var remaining: Int { bytes.count - offset }

    package mutating func u8() throws -> UInt8 {
        guard offset < bytes.count else { throw KeychainError.decode("truncated record") }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func u32() throws -> UInt32 {
        guard bytes.count - offset >= 4 else { throw KeychainError.decode("truncated record") }
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    package mutating func u64() throws -> UInt64 {
        let high = try u32()
        return UInt64(high) << 32 | UInt64(try u32())
    }

    /// `n` bytes with no length before them.
    package mutating func fixed(_ n: Int) throws -> Bytes {
        guard n >= 0, n <= bytes.count - offset else { throw KeychainError.decode("truncated record") }
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    /// Everything not read yet (a message's last field that runs to its end).
    package mutating func rest() -> Bytes {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }

    /// The next blob's length, checked against what is left.
    private mutating func length() throws -> Int {
        let n = Int(try u32())
        guard n <= bytes.count - offset else { throw KeychainError.decode("truncated record") }
        return n
    }

    package mutating func blob() throws -> Bytes {
        let n = try length()
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    package mutating func string() throws -> String {
        let n = try length()
        let start = offset
        offset += n
        // Validated in place, without a copy of the bytes first. ASCII (attribute names, most
        // values) needs no decoder: String(validating:) instantiates generic metadata per call.
        let s = bytes.withUnsafeBufferPointer { buffer -> String? in
            let utf8 = UnsafeBufferPointer(rebasing: buffer[start..<start + n])
            if utf8.allSatisfy({ $0 < 0x80 }) { return String(decoding: utf8, as: UTF8.self) }
            return String(validating: utf8, as: UTF8.self)
        }
        guard let s else { throw KeychainError.decode("invalid UTF-8 in record") }
        return s
    }
}
