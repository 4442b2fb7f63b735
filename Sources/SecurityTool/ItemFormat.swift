import Glibc
import KeychainCore

/// Items printed as macOS's security prints them, so scripts that parse that output still work.
enum ItemFormat {
    private enum Kind: String { case blob, uint32, sint32, timedate }

    // The attributes macOS prints for passwords and keys, in its order. Their printed names are the
    // attribute keys themselves; "cusi", "prot" and "scrp" are macOS's own, never set here.
    private typealias Key = AttributeKey

    private static let genericLayout: [(String, Kind)] = [
        (Key.account, .blob), (Key.creationDate, .timedate), (Key.creator, .uint32), ("cusi", .sint32),
        (Key.description, .blob), (Key.generic, .blob), (Key.comment, .blob), (Key.isInvisible, .sint32),
        (Key.modificationDate, .timedate), (Key.isNegative, .sint32), ("prot", .blob), ("scrp", .sint32),
        (Key.service, .blob), (Key.type, .uint32)
    ]

    private static let internetLayout: [(String, Kind)] = [
        (Key.account, .blob), (Key.authenticationType, .blob), (Key.creationDate, .timedate), (Key.creator, .uint32),
        ("cusi", .sint32), (Key.description, .blob), (Key.comment, .blob), (Key.isInvisible, .sint32),
        (Key.modificationDate, .timedate), (Key.isNegative, .sint32), (Key.path, .blob), (Key.port, .uint32),
        ("prot", .blob), (Key.protocol, .uint32), ("scrp", .sint32), (Key.securityDomain, .blob), (Key.server, .blob),
        (Key.type, .uint32)
    ]

    /// macOS's names for a certificate's attributes (the CSSM schema, as printed), mapped to the
    /// attribute keys.
    private static let certificateLayout: [(String, String?, Kind)] = [
        ("alis", nil, .blob), ("cenc", Key.certificateEncoding, .uint32), ("ctyp", Key.certificateType, .uint32),
        ("hpky", Key.publicKeyHash, .blob), ("issu", Key.issuer, .blob), ("labl", Key.label, .blob),
        ("skid", Key.subjectKeyID, .blob), ("snbr", Key.serialNumber, .blob), ("subj", Key.subject, .blob)
    ]

    private static let keyLayout: [(String, Kind)] = [
        (Key.keyClass, .uint32), (Key.label, .blob), (Key.applicationLabel, .blob), (Key.applicationTag, .blob),
        (Key.keyType, .uint32), (Key.keySizeInBits, .uint32), (Key.effectiveKeySize, .uint32), (Key.isPermanent, .sint32),
        (Key.canEncrypt, .sint32), (Key.canDecrypt, .sint32), (Key.canDerive, .sint32), (Key.canSign, .sint32),
        (Key.canVerify, .sint32), (Key.canWrap, .sint32), (Key.canUnwrap, .sint32)
    ]

    static func describe(_ item: Item, keychain: String) -> String {
        switch item.itemClass {
        case .certificate:
            var lines = ["keychain: \"\(keychain)\"", "version: 512", "class: 0x80001000 ", "attributes:"]
            let email = item.secret.flatMap { try? Certificate(der: $0) }?.emailAddresses.first
            for (name, key, kind) in certificateLayout {
                let v = key.map { item[$0] } ?? email.map { AttributeValue.string($0) }
                lines.append("    \"\(name)\"<\(kind.rawValue)>=" + value(v, name: name, kind: kind))
            }
            return lines.joined(separator: "\n")
        case .key:
            // CSSM_DL_DB_RECORD_PUBLIC_KEY, _PRIVATE_KEY, _SYMMETRIC_KEY
            let recordType = ["0x0000000F", "0x00000010", "0x00000011"][Int(item.effectiveValue(AttributeKey.keyClass).intValue ?? 0).clamped]
            var lines = ["keychain: \"\(keychain)\"", "version: 512", "class: \(recordType) ", "attributes:"]
            for (name, kind) in keyLayout {
                let v = item[name]
                lines.append("    \"\(name)\"<\(kind.rawValue)>=" + (kind == .uint32 ? number(v) : value(v, name: name, kind: kind)))
            }
            return lines.joined(separator: "\n")
        default:
            break
        }
        var lines = ["keychain: \"\(keychain)\"", "version: 512", "class: \"\(item.itemClass.rawValue)\"", "attributes:"]
        lines.append("    0x00000007 <blob>=" + blob(item[AttributeKey.label]))
        if item.itemClass == .internetPassword { lines.append("    0x00000008 <blob>=<NULL>") }
        let layout = item.itemClass == .genericPassword ? genericLayout : internetLayout
        for (name, kind) in layout {
            lines.append("    \"\(name)\"<\(kind.rawValue)>=" + value(item[name], name: name, kind: kind))
        }
        // Not a macOS attribute: the sandboxed app that made the item through the Secret Service.
        if let owner = item[AttributeKey.owner] { lines.append("    \"\(AttributeKey.owner)\"<blob>=" + blob(owner)) }
        return lines.joined(separator: "\n")
    }

    private static func value(_ v: AttributeValue?, name: String, kind: Kind) -> String {
        guard let v else {
            // macOS shows a port of 0 rather than nothing.
            return name == AttributeKey.port ? "0x00000000 " : "<NULL>"
        }
        switch (kind, v) {
        case (.timedate, .date(let t)):
            let stamp = timestamp(t)
            return "0x" + (Array(stamp.utf8) + [0]).map { hex2($0) }.joined() + "  \"\(stamp)\\000\""
        case (.uint32, .int(let i)):
            let code = UInt32(truncatingIfNeeded: i)
            let chars = (0..<4).map { UInt8(truncatingIfNeeded: code >> (24 - 8 * UInt32($0))) }
            if name != AttributeKey.port, chars.allSatisfy({ $0 >= 32 && $0 < 127 }) { return "\"\(String(decoding: chars, as: UTF8.self))\"" }
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

    /// keychain_utilities.c's print_buffer: bytes that are all printable ASCII (but for "\\") in
    /// quotes, unescaped; otherwise the hex of every byte, then (when some byte is printable) the
    /// bytes again in quotes with the others as octal escapes. A UTF-8 name thus prints as hex
    /// and escapes, exactly as macOS prints it.
    private static func quoted(_ bytes: Bytes) -> String {
        let printable: (UInt8) -> Bool = { $0 >= 32 && $0 <= 126 && $0 != 92 }
        let anyPrintable = bytes.contains(where: printable)
        let anyOther = bytes.contains(where: { !printable($0) })
        var out = ""
        if anyOther { out += "0x" + bytes.map { hex2($0) }.joined() + (anyPrintable ? "  " : " ") }
        if anyPrintable {
            out +=
                "\""
                + bytes.map { b -> String in
                    printable(b) ? String(UnicodeScalar(b)) : "\\" + String(b, radix: 8).leftPadded(3)
                }.joined() + "\""
        }
        return out
    }

    static func passwordValue(_ secret: Bytes) -> String { quoted(secret) }

    /// The password alone (-w), as keychain_find.c prints it: the bytes themselves when every one
    /// is printable ASCII (isprint in the C locale), else all of them in lowercase hex.
    static func passwordText(_ secret: Bytes) -> String {
        if secret.allSatisfy({ $0 >= 32 && $0 <= 126 }) { return String(decoding: secret, as: UTF8.self) }
        return secret.map { hex2($0).lowercased() }.joined()
    }

    /// Sizes and classes print as numbers, never as four-character codes.
    private static func number(_ v: AttributeValue?) -> String {
        guard case .int(let i)? = v else { return "<NULL>" }
        return "0x" + String(UInt32(truncatingIfNeeded: i), radix: 16, uppercase: true).leftPadded(8) + " "
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

private extension Int {
    var clamped: Int { Swift.min(Swift.max(self, 0), 2) }
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
