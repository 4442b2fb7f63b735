/// One attribute's value, typed as the engine stores it (CF types live in the Keychain module).
package enum AttributeValue: Equatable, Hashable, Sendable {
    case string(String)
    case data(Bytes)
    case int(Int64)
    case bool(Bool)
    /// Seconds since 1970, as Foundation's Date.timeIntervalSince1970.
    case date(Double)

    var tag: UInt8 {
        switch self {
        case .string: return 1
        case .data: return 2
        case .int: return 3
        case .bool: return 4
        case .date: return 5
        }
    }

    /// Canonical bytes: what the HMAC index columns and the encrypted metadata are made of.
    func write(to w: inout ByteWriter) {
        w.u8(tag)
        switch self {
        case .string(let s): w.string(s)
        case .data(let d): w.blob(d)
        case .int(let i): w.u64(UInt64(bitPattern: i))
        case .bool(let b): w.u8(b ? 1 : 0)
        case .date(let d): w.u64(d.bitPattern)
        }
    }

    static func read(from r: inout ByteReader) throws -> AttributeValue {
        switch try r.u8() {
        case 1: return .string(try r.string())
        case 2: return .data(try r.blob())
        case 3: return .int(Int64(bitPattern: try r.u64()))
        case 4: return .bool(try r.u8() != 0)
        case 5: return .date(Double(bitPattern: try r.u64()))
        default: throw KeychainError.decode("unknown attribute type")
        }
    }

    package var stringValue: String? {
        switch self {
        case .string(let s): return s
        case .data(let d): return String(validating: d, as: UTF8.self)
        default: return nil
        }
    }

    package var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .bool(let b): return b ? 1 : 0
        default: return nil
        }
    }

    package var boolValue: Bool? {
        switch self {
        case .bool(let b): return b
        case .int(let i): return i != 0
        default: return nil
        }
    }

    /// Equality as kSecMatchCaseInsensitive asks for: strings fold case, everything else exact.
    func matches(_ other: AttributeValue, caseInsensitive: Bool) -> Bool {
        if caseInsensitive, let a = stringValue, let b = other.stringValue {
            return a.lowercased() == b.lowercased()
        }
        if self == other { return true }
        // A protocol or auth type may be given as a string code or a number.
        if let a = stringValue, let b = other.stringValue { return a == b }
        if let a = intValue, let b = other.intValue { return a == b }
        return false
    }
}

package func encodeAttributes(_ attributes: [String: AttributeValue]) -> Bytes {
    var w = ByteWriter()
    w.u32(UInt32(attributes.count))
    for key in attributes.keys.sorted() {
        w.string(key)
        attributes[key]!.write(to: &w)
    }
    return w.bytes
}

package func decodeAttributes(_ bytes: Bytes) throws -> [String: AttributeValue] {
    var r = ByteReader(bytes)
    let count = try r.u32()
    // Grown once, not by doubling (an item has a few dozen attributes; a damaged count is capped).
    var out = [String: AttributeValue](minimumCapacity: Int(min(count, 64)))
    for _ in 0..<count {
        let key = try r.string()
        out[key] = try AttributeValue.read(from: &r)
    }
    guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in attributes") }
    return out
}
