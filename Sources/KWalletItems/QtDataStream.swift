import KeychainCore

/// Qt 5's QDataStream forms of the two types KWallet keeps: a QString and a
/// QMap<QString, QString>, byte for byte as Qt 5 (QDataStream::Qt_5_x, big-endian) writes them.
package enum QtDataStream {
    /// The length Qt writes for a null QString (QString()), which differs from an empty one.
    static let nullLength: UInt32 = 0xFFFF_FFFF

    /// A QString: its length in bytes (quint32, big-endian), then its UTF-16 code units, big-endian.
    package static func string(_ s: String) -> Bytes {
        var out: Bytes = []
        append(s, to: &out)
        return out
    }

    /// The string of exactly one well-formed QString (a null QString reads as ""); nil for
    /// anything else: short, trailing bytes, an odd length, or UTF-16 that no Swift string holds
    /// (a lone surrogate), so that a caller keeping bytes never takes a lossy reading for them.
    package static func readString(_ b: Bytes) -> String? {
        var reader = Reader(bytes: b)
        guard let s = reader.string(), reader.atEnd else { return nil }
        return s
    }

    /// A QMap<QString, QString> as KWallet's library writes it: the count (quint32), then each key
    /// and value from the first key to the last, keys ordered by UTF-16 code units as QString's
    /// operator< orders them. (Qt 5.15 writes the pairs from the last key instead unless built
    /// without its deprecated APIs, as KDE Frameworks are: kwallet-query's maps are in this order.)
    package static func map(_ m: [String: String]) -> Bytes {
        var out: Bytes = []
        appendUInt32(UInt32(m.count), to: &out)
        for key in m.keys.sorted(by: { $0.utf16.lexicographicallyPrecedes($1.utf16) }) {
            append(key, to: &out)
            append(m[key]!, to: &out)
        }
        return out
    }

    /// The pairs of exactly one well-formed QMap<QString, QString>; nil as for `readString`. A key
    /// written twice keeps the value read last, as QMap::value does after Qt 5 reads it.
    package static func readMap(_ b: Bytes) -> [String: String]? {
        var reader = Reader(bytes: b)
        guard let count = reader.uint32() else { return nil }
        // Each pair takes at least 8 bytes: a hostile count cannot make the loop outrun the input.
        guard UInt64(count) * 8 <= UInt64(b.count) else { return nil }
        var out: [String: String] = [:]
        for _ in 0..<count {
            guard let key = reader.string(), let value = reader.string() else { return nil }
            out[key] = value
        }
        return reader.atEnd ? out : nil
    }

    private static func append(_ s: String, to out: inout Bytes) {
        let units = Array(s.utf16)
        appendUInt32(UInt32(units.count * 2), to: &out)
        for unit in units {
            out.append(UInt8(unit >> 8))
            out.append(UInt8(unit & 0xFF))
        }
    }

    private static func appendUInt32(_ value: UInt32, to out: inout Bytes) {
        out += [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    private struct Reader {
        let bytes: Bytes
        var offset = 0

        var atEnd: Bool { offset == bytes.count }

        mutating func uint32() -> UInt32? {
            guard bytes.count - offset >= 4 else { return nil }
            defer { offset += 4 }
            return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }

        mutating func string() -> String? {
            guard let length = uint32() else { return nil }
            if length == QtDataStream.nullLength { return "" }
            guard length % 2 == 0, UInt64(length) <= UInt64(bytes.count - offset) else { return nil }
            let end = offset + Int(length)
            var units: [UInt16] = []
            units.reserveCapacity(Int(length) / 2)
            var i = offset
            while i < end {
                units.append(UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]))
                i += 2
            }
            offset = end
            let decoded = String(decoding: units, as: UTF16.self)
            // Decoding replaces a lone surrogate: what does not come back unchanged is refused.
            return decoded.utf16.elementsEqual(units) ? decoded : nil
        }
    }
}
