import KeychainCore

/// The recovery key as a person writes it down and types it back: eight groups of six digits,
/// each group a multiple of 11 holding 16 bits of the key.
extension RecoveryKey {
    static let groups = 8
    static let digitsPerGroup = 6

    /// "123456-234567-...": what the person writes down, as bytes the caller can wipe.
    package var formattedBytes: Bytes {
        var out = Bytes()
        for i in 0..<Self.groups {
            if i > 0 { out.append(UInt8(ascii: "-")) }
            var value = (UInt32(bytes[2 * i]) << 8 | UInt32(bytes[2 * i + 1])) * 11
            var digits = Bytes(repeating: UInt8(ascii: "0"), count: Self.digitsPerGroup)
            for position in stride(from: Self.digitsPerGroup - 1, through: 0, by: -1) {
                digits[position] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
            out.append(contentsOf: digits)
            digits.wipe()
        }
        return out
    }

    /// The same as a String (which cannot be wiped): for tests.
    package var formatted: String { String(decoding: formattedBytes, as: UTF8.self) }

    /// Reads what the person typed: 48 digits, in groups of six separated by hyphens, spaces or
    /// nothing. Wipes nothing of `text` (a Swift String cannot be wiped); callers pass bytes.
    package init(parsing text: Bytes) throws {
        var digits = Bytes()
        defer { digits.wipe() }
        for byte in text {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits.append(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "-"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
            default: throw KeychainError.param("a recovery key holds digits and hyphens only")
            }
        }
        guard digits.count == Self.groups * Self.digitsPerGroup else {
            throw KeychainError.param(
                "a recovery key has \(Self.groups * Self.digitsPerGroup) digits (\(Self.groups) groups of \(Self.digitsPerGroup)); this one has \(digits.count)"
            )
        }
        var out = Bytes()
        for group in 0..<Self.groups {
            let value = digits[(group * Self.digitsPerGroup)..<((group + 1) * Self.digitsPerGroup)].reduce(UInt32(0)) { $0 * 10 + UInt32($1) }
            guard value % 11 == 0, value / 11 <= 0xFFFF else {
                out.wipe()
                throw KeychainError.param("group \(group + 1) of the recovery key is mistyped")
            }
            let word = value / 11
            out.append(UInt8(word >> 8))
            out.append(UInt8(word & 0xFF))
        }
        self.init(bytes: out)
    }
}
