/// The few pieces of the D-Bus wire format that `BusDaemonConnection` needs to ask the bus daemon
/// about a name and to call the portal's access dialog: method calls with strings, uint32s,
/// arrays, structs and variants written, replies read, and any value of any signature skipped (a
/// future key of GetConnectionCredentials). Little-endian out;
/// either order in. Every read is bounds-checked: a short or malformed message throws.
struct BusWriter {
    private(set) var bytes: [UInt8] = []

    mutating func align(_ boundary: Int) {
        while bytes.count % boundary != 0 { bytes.append(0) }
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint32(_ value: UInt32) {
        align(4)
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    mutating func string(_ value: String) {
        uint32(UInt32(value.utf8.count))
        bytes += value.utf8
        bytes.append(0)
    }

    mutating func signature(_ value: String) {
        bytes.append(UInt8(value.utf8.count))
        bytes += value.utf8
        bytes.append(0)
    }

    /// An array of elements aligned to `alignment`, each written by `elements`: its length is
    /// counted from the first element, after the padding that aligns it.
    mutating func array(alignment: Int, _ elements: (inout BusWriter) -> Void) {
        uint32(0)
        let lengthAt = bytes.count - 4
        align(alignment)
        let start = bytes.count
        elements(&self)
        withUnsafeBytes(of: UInt32(bytes.count - start).littleEndian) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
    }

    /// A struct's or a dict entry's start: members follow, each written in turn.
    mutating func structure() { align(8) }

    /// A variant: its signature, then the value `value` writes.
    mutating func variant(_ signature: String, _ value: (inout BusWriter) -> Void) {
        self.signature(signature)
        value(&self)
    }

    /// A whole method call: the header's fields, then `body` (marshalled from offset 0, which the
    /// body's 8-byte alignment keeps valid).
    static func methodCall(
        serial: UInt32, destination: String, path: String, interface: String, member: String, signature: String, body: [UInt8]
    ) -> [UInt8] {
        var message = BusWriter()
        message.bytes = [UInt8(ascii: "l"), 1, 0, 1]
        message.uint32(UInt32(body.count))
        message.uint32(serial)
        var fields = BusWriter()
        // Each field a struct (code, variant), 8-aligned from the message's start: the fields
        // array begins at offset 16, so alignment within it is alignment in the message.
        func field(_ code: UInt8, _ type: String, _ value: String) {
            fields.align(8)
            fields.byte(code)
            fields.signature(type)
            if type == "g" { fields.signature(value) } else { fields.string(value) }
        }
        field(1, "o", path)
        field(2, "s", interface)
        field(3, "s", member)
        field(6, "s", destination)
        if !signature.isEmpty { field(8, "g", signature) }
        message.uint32(UInt32(fields.bytes.count))
        message.bytes += fields.bytes
        message.align(8)
        return message.bytes + body
    }
}

/// Reads one message's fields and body.
struct BusReader {
    enum Malformed: Error { case message }

    let bytes: [UInt8]
    var offset: Int
    let bigEndian: Bool

    init(_ bytes: [UInt8], offset: Int = 0, bigEndian: Bool) {
        self.bytes = bytes
        self.offset = offset
        self.bigEndian = bigEndian
    }

    mutating func align(_ boundary: Int) throws {
        let aligned = (offset + boundary - 1) / boundary * boundary
        guard aligned <= bytes.count else { throw Malformed.message }
        offset = aligned
    }

    mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw Malformed.message }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint32() throws -> UInt32 {
        try align(4)
        guard offset + 4 <= bytes.count else { throw Malformed.message }
        let raw = bytes[offset..<offset + 4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        offset += 4
        return bigEndian ? raw.byteSwapped : raw
    }

    mutating func string() throws -> String {
        let count = Int(try uint32())
        return try text(count)
    }

    mutating func signature() throws -> String {
        let count = Int(try byte())
        return try text(count)
    }

    /// Reads an array: `element` is called at each element's start (aligned to `alignment`)
    /// until the array's length is used up.
    mutating func array(alignment: Int, _ element: (inout BusReader) throws -> Void) throws {
        let length = Int(try uint32())
        guard length <= 1 << 26 else { throw Malformed.message }
        try align(alignment)
        let end = offset + length
        guard end <= bytes.count else { throw Malformed.message }
        while offset < end {
            try align(alignment)
            try element(&self)
        }
        guard offset == end else { throw Malformed.message }
    }

    private mutating func text(_ count: Int) throws -> String {
        guard count < bytes.count, offset + count < bytes.count, bytes[offset + count] == 0 else { throw Malformed.message }
        defer { offset += count + 1 }
        return String(decoding: bytes[offset..<offset + count], as: UTF8.self)
    }

    /// Walks over one value of the single complete type `type`.
    mutating func skip(_ type: Substring) throws {
        guard let code = type.first else { throw Malformed.message }
        switch code {
        case "y": offset += 1
        case "n", "q":
            try align(2)
            offset += 2
        case "b", "i", "u", "h": _ = try uint32()
        case "x", "t", "d":
            try align(8)
            offset += 8
        case "s", "o": _ = try string()
        case "g": _ = try signature()
        case "v":
            let inner = try signature()
            guard try Self.completeType(inner[...]).count == inner.count else { throw Malformed.message }
            try skip(inner[...])
        case "a":
            let length = Int(try uint32())
            guard length <= 1 << 26 else { throw Malformed.message }
            let element = try Self.completeType(type.dropFirst())
            try align(Self.alignment(of: element.first ?? "y"))
            offset += length
        case "(", "{":
            try align(8)
            var rest = type.dropFirst()
            while let next = rest.first, next != ")", next != "}" {
                let member = try Self.completeType(rest)
                try skip(member)
                rest = rest.dropFirst(member.count)
            }
        default: throw Malformed.message
        }
        guard offset <= bytes.count else { throw Malformed.message }
    }

    /// The first single complete type at the start of `signature`.
    static func completeType(_ signature: Substring) throws -> Substring {
        guard let code = signature.first else { throw Malformed.message }
        switch code {
        case "a": return signature.prefix(1 + (try completeType(signature.dropFirst())).count)
        case "(", "{":
            var depth = 0
            for (index, character) in zip(signature.indices, signature) {
                if character == "(" || character == "{" { depth += 1 }
                if character == ")" || character == "}" { depth -= 1 }
                if depth == 0 { return signature[...index] }
            }
            throw Malformed.message
        case "y", "b", "n", "q", "i", "u", "x", "t", "d", "h", "s", "o", "g", "v": return signature.prefix(1)
        default: throw Malformed.message
        }
    }

    static func alignment(of code: Character) -> Int {
        switch code {
        case "n", "q": return 2
        case "b", "i", "u", "h", "s", "o", "a": return 4
        case "x", "t", "d", "(", "{": return 8
        default: return 1
        }
    }
}
