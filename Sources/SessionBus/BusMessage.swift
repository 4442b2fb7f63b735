import CSDBus
import Glibc
import KeychainCore

/// The D-Bus type codes the provider reads and writes.
package enum BusType {
    package static let string = CChar(UInt8(ascii: "s"))
    package static let objectPath = CChar(UInt8(ascii: "o"))
    package static let boolean = CChar(UInt8(ascii: "b"))
    package static let uint64 = CChar(UInt8(ascii: "t"))
    package static let byte = CChar(UInt8(ascii: "y"))
    package static let array = CChar(UInt8(ascii: "a"))
    package static let variant = CChar(UInt8(ascii: "v"))
    package static let structure = CChar(UInt8(ascii: "r"))
    package static let dictEntry = CChar(UInt8(ascii: "e"))
}

/// The Secret struct of the spec: (session, parameters, value, content type).
package struct WireSecret {
    package var session: String
    package var parameters: Bytes
    package var value: Bytes
    package var contentType: String

    package init(session: String, parameters: Bytes, value: Bytes, contentType: String) {
        (self.session, self.parameters, self.value, self.contentType) = (session, parameters, value, contentType)
    }
}

/// Reads the arguments of one message, in order. Every failure is InvalidArgs: sd-bus has already
/// checked the signature of method calls, so what is left is content the provider refuses.
package struct MessageReader {
    package let message: OpaquePointer

    package init(message: OpaquePointer) { self.message = message }

    private func check(_ rc: Int32, _ what: String) throws {
        if rc < 0 { throw ServiceError.invalidArgs("cannot read \(what): \(String(cString: strerror(-rc)))") }
    }

    package func string(_ type: CChar = BusType.string) throws -> String {
        var pointer: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(message, type, &pointer), "a string")
        guard let pointer else { throw ServiceError.invalidArgs("missing string") }
        return String(cString: pointer)
    }

    package func objectPath() throws -> String { try string(BusType.objectPath) }

    package func bool() throws -> Bool {
        var value: Int32 = 0
        try check(sd_bus_message_read_basic(message, BusType.boolean, &value), "a boolean")
        return value != 0
    }

    package func bytes() throws -> Bytes {
        var pointer: UnsafeRawPointer?
        var size = 0
        try check(sd_bus_message_read_array(message, BusType.byte, &pointer, &size), "a byte array")
        guard let pointer, size > 0 else { return [] }
        return Bytes(UnsafeRawBufferPointer(start: pointer, count: size))
    }

    package func enter(_ type: CChar, _ contents: String) throws -> Bool {
        let rc = sd_bus_message_enter_container(message, type, contents)
        try check(rc, "a container")
        return rc > 0
    }

    package func exit() throws { try check(sd_bus_message_exit_container(message), "the end of a container") }

    package func objectPaths() throws -> [String] { try stringArray(BusType.objectPath) }

    package func strings() throws -> [String] { try stringArray(BusType.string) }

    private func stringArray(_ type: CChar) throws -> [String] {
        _ = try enter(BusType.array, String(UnicodeScalar(UInt8(type))))
        var out: [String] = []
        while true {
            var pointer: UnsafePointer<CChar>?
            let rc = sd_bus_message_read_basic(message, type, &pointer)
            try check(rc, "a string")
            guard rc > 0, let pointer else { break }
            out.append(String(cString: pointer))
        }
        try exit()
        return out
    }

    package func stringDictionary() throws -> [String: String] {
        _ = try enter(BusType.array, "{ss}")
        var out: [String: String] = [:]
        while try enter(BusType.dictEntry, "ss") {
            let key = try string()
            out[key] = try string()
            try exit()
        }
        try exit()
        return out
    }

    /// a{sv}: each value handed to `read` with the reader inside its variant and its signature.
    package func properties(_ read: (String, String) throws -> Bool) throws {
        _ = try enter(BusType.array, "{sv}")
        while try enter(BusType.dictEntry, "sv") {
            let key = try string()
            let signature = try variantSignature()
            _ = try enter(BusType.variant, signature)
            if try !read(key, signature) { try check(sd_bus_message_skip(message, signature), "a property") }
            try exit()
            try exit()
        }
        try exit()
    }

    /// The signature of the variant that comes next.
    package func variantSignature() throws -> String {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        try check(sd_bus_message_peek_type(message, &type, &contents), "a variant")
        guard type == BusType.variant, let contents else { throw ServiceError.invalidArgs("expected a variant") }
        return String(cString: contents)
    }

    package func secret() throws -> WireSecret {
        _ = try enter(BusType.structure, "oayays")
        let secret = WireSecret(session: try objectPath(), parameters: try bytes(), value: try bytes(), contentType: try string())
        try exit()
        return secret
    }
}

/// Builds a reply or signal; throws on allocation failures only.
package struct MessageWriter {
    package let message: OpaquePointer

    package init(message: OpaquePointer) { self.message = message }

    private func check(_ rc: Int32) throws {
        if rc < 0 { throw ServiceError.failed("cannot build a reply: \(String(cString: strerror(-rc)))") }
    }

    package func string(_ value: String, _ type: CChar = BusType.string) throws {
        try check(value.withCString { sd_bus_message_append_basic(message, type, $0) })
    }

    package func objectPath(_ value: String) throws { try string(value, BusType.objectPath) }

    package func bool(_ value: Bool) throws {
        var v: Int32 = value ? 1 : 0
        try check(sd_bus_message_append_basic(message, BusType.boolean, &v))
    }

    package func uint64(_ value: UInt64) throws {
        var v = value
        try check(sd_bus_message_append_basic(message, BusType.uint64, &v))
    }

    package func bytes(_ value: Bytes) throws {
        try check(value.withUnsafeBytes { sd_bus_message_append_array(message, BusType.byte, $0.baseAddress, $0.count) })
    }

    package func container(_ type: CChar, _ contents: String, _ body: () throws -> Void) throws {
        try check(sd_bus_message_open_container(message, type, contents))
        try body()
        try check(sd_bus_message_close_container(message))
    }

    package func objectPaths(_ paths: [String]) throws {
        try container(BusType.array, "o") { for path in paths { try objectPath(path) } }
    }

    package func stringDictionary(_ dictionary: [String: String]) throws {
        try container(BusType.array, "{ss}") {
            for key in dictionary.keys.sorted() {
                try container(BusType.dictEntry, "ss") {
                    try string(key)
                    try string(dictionary[key]!)
                }
            }
        }
    }

    package func secret(_ secret: WireSecret) throws {
        try container(BusType.structure, "oayays") {
            try objectPath(secret.session)
            try bytes(secret.parameters)
            try bytes(secret.value)
            try string(secret.contentType)
        }
    }
}
