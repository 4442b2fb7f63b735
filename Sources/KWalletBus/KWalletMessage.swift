import CSDBus
import Glibc
import KeychainCore
import SecretServiceBus
import SessionBus

/// The D-Bus types KWallet's interface adds to the Secret Service's.
extension BusType {
    static let int32 = CChar(UInt8(ascii: "i"))
    static let int64 = CChar(UInt8(ascii: "x"))
}

extension MessageReader {
    func int32() throws -> Int32 {
        var value: Int32 = 0
        guard sd_bus_message_read_basic(message, BusType.int32, &value) > 0 else { throw ServiceError.invalidArgs("cannot read an int32") }
        return value
    }

    func int64() throws -> Int64 {
        var value: Int64 = 0
        guard sd_bus_message_read_basic(message, BusType.int64, &value) > 0 else { throw ServiceError.invalidArgs("cannot read an int64") }
        return value
    }
}

extension MessageWriter {
    func int32(_ value: Int32) throws {
        var v = value
        guard sd_bus_message_append_basic(message, BusType.int32, &v) >= 0 else { throw ServiceError.failed("cannot build a reply") }
    }

    func strings(_ values: [String]) throws {
        try container(BusType.array, "s") { for value in values { try string(value) } }
    }

    /// a{sv}, as Qt sends a QVariantMap: each value a variant of `signature`.
    func variantMap<Value>(_ pairs: [(String, Value)], _ signature: String, _ write: (Value) throws -> Void) throws {
        try container(BusType.array, "{sv}") {
            for (key, value) in pairs {
                try container(BusType.dictEntry, "sv") {
                    try string(key)
                    try container(BusType.variant, signature) { try write(value) }
                }
            }
        }
    }
}

/// A call answered later (after the keychain's prompt): its message kept until then.
final class DelayedReply {
    private let message: OpaquePointer

    init(_ message: OpaquePointer) {
        self.message = sd_bus_message_ref(message)
    }

    deinit { sd_bus_message_unref(message) }

    func send(_ body: (MessageWriter) throws -> Void) {
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { return }
        defer { sd_bus_message_unref(reply) }
        guard (try? body(MessageWriter(message: reply))) != nil else { return }
        _ = sd_bus_send(nil, reply, nil)
    }
}
