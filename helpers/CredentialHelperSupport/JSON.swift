/// Just enough JSON for docker's credential protocol, without Foundation: a reader of any JSON
/// value and a writer of string maps that escapes as Go's encoding/json does.
package indirect enum JSONValue: Equatable, Sendable {
    case string(String)
    case number(String)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case let (.string(x), .string(y)), let (.number(x), .number(y)): return x == y
        case let (.bool(x), .bool(y)): return x == y
        case (.null, .null): return true
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    package var kind: String {
        switch self {
        case .string: return "string"
        case .number: return "number"
        case .bool: return "bool"
        case .null: return "null"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

package struct JSONError: Error, Equatable, CustomStringConvertible {
    package let description: String
}

package enum JSON {
    /// Parses the first JSON value of `bytes`; what follows it is ignored, as Go's Decoder does.
    package static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        var parser = Parser(bytes: bytes)
        parser.skipSpace()
        guard parser.index < bytes.count else { throw JSONError(description: "EOF") }
        return try parser.value(depth: 0)
    }

    /// `{"k":"v",...}` in the given key order, escaped as Go does (HTML-safe), with no spaces.
    package static func encode(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { quote($0.0) + ":" + quote($0.1) }.joined(separator: ",") + "}"
    }

    /// Any JSON value as Go's json.MarshalIndent(v, "", "\t") lays it out: one member or element
    /// per line, tabs, "key": value; empty objects and arrays as {} and []. Numbers as they were read.
    package static func encodeIndented(_ value: JSONValue, depth: Int = 0) -> String {
        let inner = String(repeating: "\t", count: depth + 1), outer = String(repeating: "\t", count: depth)
        switch value {
        case .string(let s): return quote(s)
        case .number(let n): return n
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .array(let items):
            guard !items.isEmpty else { return "[]" }
            return "[\n" + items.map { inner + encodeIndented($0, depth: depth + 1) }.joined(separator: ",\n") + "\n" + outer + "]"
        case .object(let pairs):
            guard !pairs.isEmpty else { return "{}" }
            return "{\n" + pairs.map { inner + quote($0.0) + ": " + encodeIndented($0.1, depth: depth + 1) }.joined(separator: ",\n") + "\n" + outer + "}"
        }
    }

    /// `s` as a JSON string, escaped as Go's encoding/json escapes it (HTML-safe): docker's tools
    /// expect its output byte for byte.
    package static func quote(_ s: String) -> String { "\"" + escaped(s, alsoEscaping: goEscapes) + "\"" }

    /// The inside of a JSON string. Control characters are always escaped; `alsoEscaping` names the
    /// other scalars written as \u escapes.
    package static func escaped(_ s: String, alsoEscaping: (Unicode.Scalar) -> Bool) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || alsoEscaping(scalar):
                out += "\\u" + hex4(scalar.value)
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// What Go's encoding/json escapes besides control characters: <, > and & (for HTML) and the
    /// line and paragraph separators (for JavaScript).
    private static func goEscapes(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "<", ">", "&", "\u{2028}", "\u{2029}": return true
        default: return false
        }
    }

    private static func hex4(_ v: UInt32) -> String {
        let digits = Array("0123456789abcdef")
        return String((0..<4).map { digits[Int((v >> (12 - 4 * UInt32($0))) & 0xf)] })
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[index]) { index += 1 }
        }

        func fail(_ what: String) -> JSONError {
            guard index < bytes.count else { return JSONError(description: "unexpected EOF") }
            let c = bytes[index]
            let shown = c >= 0x20 && c < 0x7f ? "'\(Character(UnicodeScalar(c)))'" : "'\\x\(String(c, radix: 16))'"
            return JSONError(description: "invalid character \(shown) \(what)")
        }

        mutating func value(depth: Int) throws -> JSONValue {
            guard depth < 512 else { throw JSONError(description: "exceeded max depth") }
            skipSpace()
            guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw fail("looking for beginning of value")
            }
        }

        mutating func literal(_ word: String) throws {
            for b in word.utf8 {
                guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
                guard bytes[index] == b else { throw fail("in literal \(word)") }
                index += 1
            }
        }

        mutating func number() throws -> String {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            var digits = 0
            while index < bytes.count,
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index])
                    || [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"), UInt8(ascii: "+"), UInt8(ascii: "-")].contains(bytes[index])
            {
                index += 1
                digits += 1
            }
            guard digits > 0 else { throw fail("in numeric literal") }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func string() throws -> String {
            index += 1
            var out = [UInt8]()
            while true {
                guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
                let c = bytes[index]
                index += 1
                switch c {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
                    let e = bytes[index]
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                    case UInt8(ascii: "b"): out.append(8)
                    case UInt8(ascii: "f"): out.append(12)
                    case UInt8(ascii: "n"): out.append(10)
                    case UInt8(ascii: "r"): out.append(13)
                    case UInt8(ascii: "t"): out.append(9)
                    case UInt8(ascii: "u"):
                        var scalar = try hex()
                        if (0xD800..<0xDC00).contains(scalar), index + 1 < bytes.count,
                            bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        {
                            index += 2
                            let low = try hex()
                            scalar = (0xDC00..<0xE000).contains(low) ? 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00) : 0xFFFD
                        }
                        out.append(contentsOf: Array(String(UnicodeScalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8))
                    default:
                        index -= 1
                        throw fail("in string escape code")
                    }
                case 0..<0x20:
                    index -= 1
                    throw fail("in string literal")
                default:
                    out.append(c)
                }
            }
        }

        mutating func hex() throws -> UInt32 {
            guard index + 4 <= bytes.count else { throw JSONError(description: "unexpected EOF") }
            guard let v = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) else {
                throw fail("in \\u hexadecimal character escape")
            }
            index += 4
            return v
        }

        mutating func array(depth: Int) throws -> JSONValue {
            index += 1
            var items: [JSONValue] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                throw fail("after array element")
            }
        }

        mutating func object(depth: Int) throws -> JSONValue {
            index += 1
            var pairs: [(String, JSONValue)] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(pairs) }
            while true {
                skipSpace()
                guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
                guard bytes[index] == UInt8(ascii: "\"") else { throw fail("looking for beginning of object key string") }
                let key = try string()
                skipSpace()
                guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
                guard bytes[index] == UInt8(ascii: ":") else { throw fail("after object key") }
                index += 1
                pairs.append((key, try value(depth: depth + 1)))
                skipSpace()
                guard index < bytes.count else { throw JSONError(description: "unexpected EOF") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(pairs) }
                throw fail("after object key:value pair")
            }
        }
    }
}
