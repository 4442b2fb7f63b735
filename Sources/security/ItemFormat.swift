import Glibc
import KeychainCore

/// Items printed as macOS's security prints them, so scripts that parse that output still work.
enum ItemFormat {
    private enum Kind: String { case blob, uint32, sint32, timedate }

    private static let genericLayout: [(String, Kind)] = [
        ("acct", .blob), ("cdat", .timedate), ("crtr", .uint32), ("cusi", .sint32), ("desc", .blob), ("gena", .blob),
        ("icmt", .blob), ("invi", .sint32), ("mdat", .timedate), ("nega", .sint32), ("prot", .blob), ("scrp", .sint32),
        ("svce", .blob), ("type", .uint32),
    ]

    private static let internetLayout: [(String, Kind)] = [
        ("acct", .blob), ("atyp", .blob), ("cdat", .timedate), ("crtr", .uint32), ("cusi", .sint32), ("desc", .blob),
        ("icmt", .blob), ("invi", .sint32), ("mdat", .timedate), ("nega", .sint32), ("path", .blob), ("port", .uint32),
        ("prot", .blob), ("ptcl", .uint32), ("scrp", .sint32), ("sdmn", .blob), ("srvr", .blob), ("type", .uint32),
    ]

    static func describe(_ item: Item, keychain: String) -> String {
        var lines = ["keychain: \"\(keychain)\"", "version: 512", "class: \"\(item.itemClass.rawValue)\"", "attributes:"]
        lines.append("    0x00000007 <blob>=" + blob(item["labl"]))
        if item.itemClass == .internetPassword { lines.append("    0x00000008 <blob>=<NULL>") }
        let layout = item.itemClass == .genericPassword ? genericLayout : internetLayout
        for (name, kind) in layout {
            lines.append("    \"\(name)\"<\(kind.rawValue)>=" + value(item[name], name: name, kind: kind))
        }
        return lines.joined(separator: "\n")
    }

    private static func value(_ v: AttributeValue?, name: String, kind: Kind) -> String {
        guard let v else {
            // macOS shows a port of 0 rather than nothing.
            return name == "port" ? "0x00000000 " : "<NULL>"
        }
        switch (kind, v) {
        case (.timedate, .date(let t)):
            let stamp = timestamp(t)
            return "0x" + (Array(stamp.utf8) + [0]).map { hex2($0) }.joined() + "  \"\(stamp)\\000\""
        case (.uint32, .int(let i)):
            let code = UInt32(truncatingIfNeeded: i)
            let chars = (0..<4).map { UInt8(truncatingIfNeeded: code >> (24 - 8 * UInt32($0))) }
            if name != "port", chars.allSatisfy({ $0 >= 32 && $0 < 127 }) { return "\"\(String(decoding: chars, as: UTF8.self))\"" }
            return "0x" + chars.map { hex2($0) }.joined() + " "
        case (.uint32, .string(let s)):
            return "\"\(s)\""
        case (.sint32, .bool(let b)):
            return "0x0000000\(b ? 1 : 0) "
        default:
            return blob(v)
        }
    }

    private static func blob(_ v: AttributeValue?) -> String {
        switch v {
        case nil: return "<NULL>"
        case .string(let s)?: return quoted(Array(s.utf8))
        case .data(let d)?: return quoted(d)
        case let other?: return "\"\(other)\""
        }
    }

    /// Printable text in quotes; anything else as hex followed by the escaped text, as macOS does.
    private static func quoted(_ bytes: Bytes) -> String {
        if let text = String(validating: bytes, as: UTF8.self), !bytes.contains(where: { $0 < 32 || $0 == 127 }) {
            return "\"\(text.replacingBackslashesAndQuotes())\""
        }
        let escaped = bytes.map { b -> String in
            b >= 32 && b < 127 && b != 92 && b != 34 ? String(UnicodeScalar(b)) : "\\" + String(b, radix: 8).leftPadded(3)
        }.joined()
        return "0x" + bytes.map { hex2($0) }.joined() + "  \"\(escaped)\""
    }

    static func passwordValue(_ secret: Bytes) -> String { quoted(secret) }

    /// The password alone (-w): the text itself, or hex when it is not text, as macOS does.
    static func passwordText(_ secret: Bytes) -> String {
        if let text = String(validating: secret, as: UTF8.self), !secret.contains(where: { $0 < 32 && $0 != 9 }) { return text }
        return secret.map { hex2($0) }.joined()
    }

    private static func hex2(_ b: UInt8) -> String { String(b, radix: 16, uppercase: true).leftPadded(2) }

    private static func timestamp(_ t: Double) -> String {
        var seconds = time_t(t)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        strftime(&buffer, buffer.count, "%Y%m%d%H%M%SZ", &parts)
        return String(cString: buffer)
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }

    func replacingBackslashesAndQuotes() -> String {
        var out = ""
        for c in self {
            if c == "\\" || c == "\"" { out.append("\\") }
            out.append(c)
        }
        return out
    }
}
