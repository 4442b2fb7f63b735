import KeychainCore
/// A gnome-keyring keyring file (`~/.local/share/keyrings/NAME.keyring`), read without
/// gnome-keyring, so that a desktop's secrets can move into keychains.
///
/// Two formats, as gnome-keyring writes them (pkcs11/secret-store/gkm-secret-binary.c and
/// gkm-secret-textual.c):
///
/// - encrypted: "GnomeKeyring\n\r\0\n", version 0.0, crypto 0 (AES-128-CBC), hash 0 (MD5), the
///   keyring's name, two times, flags, lock timeout, hash iterations, an 8-byte salt, 16 reserved
///   bytes, the items' ids, types and attributes with hashed values (for lookups while locked),
///   then the encrypted block: key and IV are the first and second 16 bytes of SHA-256 iterated
///   over password || salt (egg-symkey.c's egg_symkey_generate_simple), the plaintext starts with
///   an MD5 of the rest (a wrong password shows as a mismatch), then each item's label, secret,
///   created and modified times, reserved fields, attributes (string or uint32) and ACL. Integers
///   are big-endian; strings and byte arrays carry a 32-bit length, 0xffffffff meaning none.
/// - plain text: a GLib key file, used for keyrings whose password is empty: a [keyring] group,
///   then a group per item ([ID]: item-type, display-name, secret or binary-secret in hex, mtime,
///   ctime) with [ID:attributeN] groups (name, type string|uint32, value) and [ID:aclN] groups.
///
/// Hostile files are expected: every length is checked against what is left, nothing is
/// allocated from a count before the bytes behind it are seen, and a KDF iteration count above
/// `maximumIterations` is refused before any hashing.
package struct GnomeKeyring: Sendable {
    package enum Format: Sendable, Equatable {
        case encrypted, plainText
    }

    package struct Item: Sendable, Equatable {
        /// The item's number in the file, for messages.
        package var id: String
        package var label: String
        package var secret: Bytes
        /// The attributes as gnome-keyring's Secret Service shows them: as stored, uint32 values in
        /// decimal, and `xdg:schema` from the item's type when the attributes do not name one.
        package var attributes: [String: String]
        /// Seconds since 1970; 0 when the file does not say.
        package var created: UInt64
        package var modified: UInt64
    }

    /// The keyring's display name (the collection's label).
    package var label: String
    package var format: Format
    package var items: [Item]
    /// Items of a plain-text keyring that could not be read, and why; the others are still read.
    package var unreadable: [(id: String, reason: String)] = []

    /// gnome-keyring picks 1000 to 4095 iterations; a file asking for more than this is damaged or
    /// hostile, and is refused before a single hash (10^6 iterations take about a third of a second).
    package static let maximumIterations: UInt32 = 1_000_000
    /// Keyring files hold passwords and keys: megabytes at most. Larger ones are refused unread.
    package static let maximumFileSize = 64 << 20

    static let header: Bytes = Array("GnomeKeyring\n\r".utf8) + [0, 10]

    /// The format of a keyring file's bytes, or nil when it is neither.
    package static func format(of bytes: Bytes) -> Format? {
        if bytes.starts(with: header) { return .encrypted }
        return PlainTextKeyring.looksLikeOne(bytes) ? .plainText : nil
    }

    /// Reads a keyring file. An encrypted one needs its password: a wrong one is errSecAuthFailed,
    /// a damaged or hostile file errSecDecode, each with one line saying why.
    package static func read(_ bytes: Bytes, password: Bytes?) throws -> GnomeKeyring {
        guard bytes.count <= maximumFileSize else {
            throw KeychainError.decode("the file is larger than \(maximumFileSize >> 20) MiB; not a keyring gnome-keyring writes")
        }
        switch format(of: bytes) {
        case .encrypted?:
            return try EncryptedKeyring.read(bytes, password: password ?? [])
        case .plainText?:
            return try PlainTextKeyring.read(bytes)
        case nil:
            throw KeychainError.decode("not a gnome-keyring keyring file (neither its encrypted nor its plain-text format)")
        }
    }

    /// gnome-keyring's names for the item types of its older API (gkm-secret-compat.c): the schema
    /// an item without an `xdg:schema` attribute shows.
    static func schema(forType type: UInt32) -> String? {
        switch type & 0xffff {
        case 0: return "org.freedesktop.Secret.Generic"
        case 1: return "org.gnome.keyring.NetworkPassword"
        case 2: return "org.gnome.keyring.Note"
        case 3: return "org.gnome.keyring.ChainedKeyring"
        case 4: return "org.gnome.keyring.EncryptionKey"
        case 0x100: return "org.gnome.keyring.PkStorage"
        default: return nil
        }
    }

    static func withSchema(_ attributes: [String: String], type: UInt32) -> [String: String] {
        guard attributes["xdg:schema"] == nil, let schema = schema(forType: type) else { return attributes }
        var out = attributes
        out["xdg:schema"] = schema
        return out
    }
}

// MARK: - The encrypted format

enum EncryptedKeyring {
    /// A cursor over big-endian fields; every read checks what is left.
    struct Reader {
        let bytes: Bytes
        var offset: Int
        /// What the bytes are, for the message when they end too soon.
        let part: String

        init(_ bytes: Bytes, offset: Int = 0, part: String) {
            self.bytes = bytes
            self.offset = offset
            self.part = part
        }

        var remaining: Int { bytes.count - offset }

        func truncated() -> KeychainError {
            KeychainError.decode("the keyring file is truncated or damaged (it ends inside \(part))")
        }

        mutating func byte() throws -> UInt8 {
            guard remaining >= 1 else { throw truncated() }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func u32() throws -> UInt32 {
            guard remaining >= 4 else { throw truncated() }
            defer { offset += 4 }
            return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }

        mutating func time() throws -> UInt64 {
            UInt64(try u32()) << 32 | UInt64(try u32())
        }

        mutating func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, remaining >= count else { throw truncated() }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        /// A byte array: nil for 0xffffffff (none), refused at 2^31-1 and more as egg-buffer does.
        mutating func byteArray() throws -> ArraySlice<UInt8>? {
            let length = try u32()
            if length == 0xffff_ffff { return nil }
            guard length < 0x7fff_ffff else { throw KeychainError.decode("the keyring file is damaged (\(part) holds a length of \(length) bytes)") }
            return try take(Int(length))
        }

        /// A string: UTF-8 without NUL bytes, or nil (none).
        mutating func string() throws -> String? {
            guard let raw = try byteArray() else { return nil }
            guard !raw.contains(0), let text = String(validating: raw, as: UTF8.self) else {
                throw KeychainError.decode("the keyring file is damaged (\(part) holds a string that is not UTF-8 text)")
            }
            return text
        }

        /// An attribute list: name, type (0 string, 1 uint32), value. Hashed lists carry MD5s of
        /// string values and a mix of uint32s; they are read to be skipped.
        mutating func attributes() throws -> [String: String] {
            let count = try u32()
            var out: [String: String] = [:]
            for _ in 0..<count {
                let name = try string()
                let value: String
                switch try u32() {
                case 0: value = try string() ?? ""
                case 1: value = String(try u32())
                case let type: throw KeychainError.decode("the keyring file is damaged (\(part) has an attribute of unknown type \(type))")
                }
                if let name { out[name] = value }
            }
            return out
        }
    }

    static func read(_ bytes: Bytes, password: Bytes) throws -> GnomeKeyring {
        var r = Reader(bytes, offset: GnomeKeyring.header.count, part: "its header")
        let version = (try r.byte(), try r.byte())
        let (crypto, hash) = (try r.byte(), try r.byte())
        guard version == (0, 0) else {
            throw KeychainError.decode("unsupported keyring file version \(version.0).\(version.1) (gnome-keyring writes 0.0)")
        }
        guard crypto == 0, hash == 0 else {
            throw KeychainError.decode("unsupported keyring encryption (crypto \(crypto), hash \(hash); gnome-keyring writes AES-128 and MD5, 0 and 0)")
        }
        let label = try r.string() ?? ""
        _ = try r.time()  // the keyring's times (written modified first, read back as created first)
        _ = try r.time()
        _ = try r.u32()  // flags: lock on idle, lock after
        _ = try r.u32()  // lock timeout
        let iterations = try r.u32()
        // Refused before anything else is read or hashed: the count is the file's to choose.
        guard iterations >= 1 else { throw KeychainError.decode("the keyring file asks for 0 hash iterations; damaged") }
        guard iterations <= GnomeKeyring.maximumIterations else {
            throw KeychainError.decode(
                "the keyring file asks for \(iterations) hash iterations; more than \(GnomeKeyring.maximumIterations) is refused (gnome-keyring uses fewer than 4096)"
            )
        }
        var salt = Array(try r.take(8))
        defer { salt.wipe() }
        for _ in 0..<4 { _ = try r.u32() }

        // The unencrypted index: ids, types, hashed attributes. Only the types are kept.
        r = Reader(bytes, offset: r.offset, part: "its item index")
        let count = try r.u32()
        var types: [UInt32] = []
        for _ in 0..<count {
            _ = try r.u32()
            types.append(try r.u32())
            _ = try r.attributes()
        }

        r = Reader(bytes, offset: r.offset, part: "its encrypted part")
        let size = try r.u32()
        guard size % 16 == 0, size >= 16 else {
            throw KeychainError.decode("the keyring file is damaged (its encrypted part is \(size) bytes, not whole AES blocks)")
        }
        var ciphertext = Array(try r.take(Int(size)))
        defer { ciphertext.wipe() }

        var derived = Crypto.iteratedSHA256(password, salt: salt, iterations: Int(iterations))
        var key = Array(derived[0..<16]), iv = Array(derived[16..<32])
        defer { derived.wipe(); key.wipe(); iv.wipe() }
        var plain = try Crypto.aes128CBC(ciphertext, key: key, iv: iv, encrypt: false)
        defer { plain.wipe() }
        guard Crypto.equal(Crypto.md5(Array(plain[16...])), Array(plain[0..<16])) else {
            throw KeychainError(.authFailed, "the password does not open this keyring")
        }

        var items: [GnomeKeyring.Item] = []
        var p = Reader(plain, offset: 16, part: "an encrypted item")
        for (index, type) in types.enumerated() {
            let itemLabel = try p.string() ?? ""
            let secret = try p.byteArray().map(Array.init) ?? []
            let created = try p.time()
            let modified = try p.time()
            _ = try p.string()
            for _ in 0..<4 { _ = try p.u32() }
            let attributes = try p.attributes()
            let acl = try p.u32()
            for _ in 0..<acl {
                _ = try p.u32()  // access types
                _ = try p.string()  // display name
                _ = try p.string()  // path
                _ = try p.string()  // reserved
                _ = try p.u32()
            }
            items.append(
                GnomeKeyring.Item(
                    id: String(index + 1), label: itemLabel, secret: secret,
                    attributes: GnomeKeyring.withSchema(attributes, type: type),
                    created: created, modified: modified))
        }
        return GnomeKeyring(label: label, format: .encrypted, items: items)
    }
}

// MARK: - The plain-text format

/// A GLib key file as GKeyFile reads it: groups in brackets, `key=value` lines (space around the
/// key and before the value ignored), `#` comments, blank lines; a repeated group adds to the
/// first, a repeated key replaces; strings unescape \s \n \t \r \\.
enum PlainTextKeyring {
    struct KeyFile {
        /// Groups in the order they first appear, with their keys (the last value of a key wins).
        var order: [String] = []
        var groups: [String: [String: Bytes]] = [:]

        func value(_ group: String, _ key: String) -> Bytes? { groups[group]?[key] }

        /// g_key_file_get_string: UTF-8 with escapes undone, nil when absent or invalid.
        func string(_ group: String, _ key: String) -> String? {
            guard let raw = value(group, key), !raw.contains(0), let text = String(validating: raw, as: UTF8.self) else { return nil }
            var out = ""
            var escaped = false
            for scalar in text.unicodeScalars {
                if escaped {
                    switch scalar {
                    case "s": out.append(" ")
                    case "n": out.append("\n")
                    case "t": out.append("\t")
                    case "r": out.append("\r")
                    case "\\": out.append("\\")
                    default: return nil
                    }
                    escaped = false
                } else if scalar == "\\" {
                    escaped = true
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
            return escaped ? nil : out
        }

        /// key_file_get_uint64 of gkm-secret-textual.c: g_ascii_strtoull in base 10, nothing after.
        func uint64(_ group: String, _ key: String) -> UInt64? {
            guard let raw = value(group, key) else { return nil }
            var bytes = raw[...].drop { $0 == 32 || (9...13).contains($0) }
            var negative = false
            if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                negative = sign == UInt8(ascii: "-")
                bytes = bytes.dropFirst()
            }
            guard !bytes.isEmpty else { return raw.isEmpty ? 0 : nil }
            var value: UInt64 = 0
            var overflow = false
            for byte in bytes {
                guard (48...57).contains(byte) else { return nil }
                let (times, o1) = value.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times.addingReportingOverflow(UInt64(byte - 48))
                overflow = overflow || o1 || o2
                value = sum
            }
            if overflow { return UInt64.max }
            return negative ? 0 &- value : value
        }

        /// g_key_file_get_integer: a 32-bit decimal, nil when absent or not one.
        func int32(_ group: String, _ key: String) -> Int32? {
            guard let raw = value(group, key), let text = String(validating: raw, as: UTF8.self) else { return nil }
            return Int32(text.trimmingSpaces())
        }
    }

    static func looksLikeOne(_ bytes: Bytes) -> Bool {
        // The first line that is not blank or a comment opens the [keyring] group.
        for line in lines(bytes) {
            let trimmed = line.drop { $0 == 32 || $0 == 9 }
            if trimmed.isEmpty || trimmed.first == UInt8(ascii: "#") { continue }
            return trimmed.starts(with: Array("[keyring]".utf8))
        }
        return false
    }

    static func lines(_ bytes: Bytes) -> [ArraySlice<UInt8>] {
        bytes.split(separator: 10, omittingEmptySubsequences: false).map { $0.last == 13 ? $0.dropLast() : $0 }
    }

    static func parse(_ bytes: Bytes) throws -> KeyFile {
        var file = KeyFile()
        var current: String?
        for (number, line) in lines(bytes).enumerated() {
            let trimmed = line.drop { $0 == 32 || (9...13).contains($0) }
            if trimmed.isEmpty || trimmed.first == UInt8(ascii: "#") { continue }
            if trimmed.first == UInt8(ascii: "["), let close = trimmed.lastIndex(of: UInt8(ascii: "]")) {
                let name = trimmed[(trimmed.startIndex + 1)..<close]
                guard !name.contains(UInt8(ascii: "[")), !name.contains(UInt8(ascii: "]")), !name.contains(where: { $0 < 32 }),
                    let text = String(validating: name, as: UTF8.self)
                else {
                    throw KeychainError.decode("the plain-text keyring is damaged (line \(number + 1): an invalid group name)")
                }
                if file.groups[text] == nil {
                    file.groups[text] = [:]
                    file.order.append(text)
                }
                current = text
                continue
            }
            guard let equals = trimmed.firstIndex(of: UInt8(ascii: "=")) else {
                throw KeychainError.decode("the plain-text keyring is damaged (line \(number + 1) is not a group, a key or a comment)")
            }
            guard let group = current else {
                throw KeychainError.decode("the plain-text keyring is damaged (line \(number + 1): a key before any group)")
            }
            var keyEnd = equals
            while keyEnd > trimmed.startIndex, [32, 9].contains(trimmed[keyEnd - 1]) { keyEnd -= 1 }
            let key = String(decoding: trimmed[trimmed.startIndex..<keyEnd], as: UTF8.self)
            guard !key.isEmpty else {
                throw KeychainError.decode("the plain-text keyring is damaged (line \(number + 1): a value without a key)")
            }
            let value = trimmed[(equals + 1)...].drop { $0 == 32 || (9...13).contains($0) }
            file.groups[group]![key] = Array(value)
        }
        return file
    }

    static func read(_ bytes: Bytes) throws -> GnomeKeyring {
        let file = try parse(bytes)
        guard file.order.first == "keyring" else {
            throw KeychainError.decode("the plain-text keyring is damaged (it does not start with a [keyring] group)")
        }
        var keyring = GnomeKeyring(label: file.string("keyring", "display-name") ?? "", format: .plainText, items: [])
        for id in file.order where id != "keyring" && !id.contains(":") {
            let type = file.int32(id, "item-type").map { UInt32(bitPattern: $0) } ?? 0
            var secret: Bytes = []
            if let text = file.string(id, "secret") {
                secret = Array(text.utf8)
            } else if let hex = file.value(id, "binary-secret") {
                guard let decoded = decodeHex(hex) else {
                    keyring.unreadable.append((id, "its binary-secret is not hexadecimal"))
                    continue
                }
                secret = decoded
            }
            var attributes: [String: String] = [:]
            let prefix = id + ":attribute"
            for group in file.order where group.hasPrefix(prefix) {
                guard let name = file.string(group, "name") else { continue }
                if file.string(group, "type") == "uint32" {
                    // gkm-secret-textual.c reads 64 bits and keeps the low 32.
                    if let number = file.uint64(group, "value") { attributes[name] = String(UInt32(truncatingIfNeeded: number)) }
                } else {
                    attributes[name] = file.string(group, "value") ?? ""
                }
            }
            keyring.items.append(
                GnomeKeyring.Item(
                    id: id, label: file.string(id, "display-name") ?? "", secret: secret,
                    attributes: GnomeKeyring.withSchema(attributes, type: type),
                    created: file.uint64(id, "ctime") ?? 0, modified: file.uint64(id, "mtime") ?? 0))
        }
        return keyring
    }

    static func decodeHex(_ text: Bytes) -> Bytes? { Bytes(hexDigits: text) }
}

private extension String {
    func trimmingSpaces() -> String {
        let scalars = unicodeScalars.drop { $0 == " " || $0 == "\t" }
        var end = scalars.endIndex
        while end > scalars.startIndex, [" ", "\t"].contains(scalars[scalars.index(before: end)]) { end = scalars.index(before: end) }
        return String(String.UnicodeScalarView(scalars[scalars.startIndex..<end]))
    }
}
