import CSDBus
import Glibc
import KeychainCore
import XCTest

@testable import SessionBus

/// Messages written and read back in this process: a bus object that is started on one end of a
/// socketpair is enough to make messages (sd-bus wants an open bus), and a sealed message reads
/// from its start. No bus daemon is needed.
final class BusMessageTests: XCTestCase {
    private var bus: OpaquePointer?
    private var peerEnd: Int32 = -1

    override func setUpWithError() throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds), 0)
        peerEnd = fds[1]
        XCTAssertGreaterThanOrEqual(sd_bus_new(&bus), 0)
        XCTAssertGreaterThanOrEqual(sd_bus_set_fd(bus, fds[0], fds[0]), 0)
        XCTAssertGreaterThanOrEqual(sd_bus_start(bus), 0)
    }

    override func tearDown() {
        // Not flushed: flushing waits for the authentication nobody answers.
        sd_bus_close_unref(bus)
        bus = nil
        close(peerEnd)
    }

    /// A method call built by `write`, sealed and rewound for reading.
    private func message(_ write: (MessageWriter) throws -> Void) throws -> OpaquePointer {
        var message: OpaquePointer?
        XCTAssertGreaterThanOrEqual(sd_bus_message_new_method_call(bus, &message, "org.example.Peer", "/org/example", "org.example.Test", "Call"), 0)
        let made = try XCTUnwrap(message)
        try write(MessageWriter(message: made))
        XCTAssertGreaterThanOrEqual(sd_bus_message_seal(made, 1, 0), 0)
        XCTAssertGreaterThanOrEqual(sd_bus_message_rewind(made, 1), 0)
        return made
    }

    func testBasicValuesComeBackAsWritten() throws {
        let m = try message { w in
            try w.string("héllo")
            try w.objectPath("/org/freedesktop/secrets/collection/login")
            try w.bool(true)
            try w.bool(false)
            try w.uint64(UInt64.max)
            try w.bytes([0, 1, 2, 255])
            try w.bytes([])
        }
        defer { sd_bus_message_unref(m) }
        XCTAssertEqual(String(cString: sd_bus_message_get_signature(m, 1)), "sobbtayay")
        let r = MessageReader(message: m)
        XCTAssertEqual(try r.string(), "héllo")
        XCTAssertEqual(try r.objectPath(), "/org/freedesktop/secrets/collection/login")
        XCTAssertEqual(try r.bool(), true)
        XCTAssertEqual(try r.bool(), false)
        XCTAssertEqual(try r.uint64(), UInt64.max)
        XCTAssertEqual(try r.bytes(), [0, 1, 2, 255])
        XCTAssertEqual(try r.bytes(), [])
    }

    func testListsAndDictionaries() throws {
        let attributes = ["service": "git", "user": "ann", "xdg:schema": "org.freedesktop.Secret.Generic"]
        let m = try message { w in
            try w.objectPaths(["/a/1", "/a/2"])
            try w.objectPaths([])
            try w.stringDictionary(attributes)
            try w.stringDictionary([:])
        }
        defer { sd_bus_message_unref(m) }
        XCTAssertEqual(String(cString: sd_bus_message_get_signature(m, 1)), "aoaoa{ss}a{ss}")
        let r = MessageReader(message: m)
        XCTAssertEqual(try r.objectPaths(), ["/a/1", "/a/2"])
        XCTAssertEqual(try r.objectPaths(), [])
        XCTAssertEqual(try r.stringDictionary(), attributes)
        XCTAssertEqual(try r.stringDictionary(), [:])
    }

    /// A dictionary goes out in its keys' order, so a reply is the same bytes every time.
    func testDictionaryKeysGoOutSorted() throws {
        let m = try message { w in try w.stringDictionary(["b": "2", "c": "3", "a": "1"]) }
        defer { sd_bus_message_unref(m) }
        let r = MessageReader(message: m)
        _ = try r.enter(BusType.array, "{ss}")
        var keys: [String] = []
        while try r.enter(BusType.dictEntry, "ss") {
            keys.append(try r.string())
            _ = try r.string()
            try r.exit()
        }
        XCTAssertEqual(keys, ["a", "b", "c"])
    }

    /// The spec's Secret struct, (oayays).
    func testSecretStructure() throws {
        let sent = WireSecret(
            session: "/org/freedesktop/secrets/session/s1", parameters: Array(repeating: 7, count: 16), value: [1, 2, 3], contentType: "text/plain")
        let m = try message { w in try w.secret(sent) }
        defer { sd_bus_message_unref(m) }
        XCTAssertEqual(String(cString: sd_bus_message_get_signature(m, 1)), "(oayays)")
        let got = try MessageReader(message: m).secret()
        XCTAssertEqual(got.session, sent.session)
        XCTAssertEqual(got.parameters, sent.parameters)
        XCTAssertEqual(got.value, sent.value)
        XCTAssertEqual(got.contentType, sent.contentType)
    }

    /// a{sv}: what the reader takes is read, what it leaves is skipped, and the next argument follows.
    func testPropertiesSkipWhatIsNotRead() throws {
        let m = try message { w in
            try w.container(BusType.array, "{sv}") {
                try w.container(BusType.dictEntry, "sv") {
                    try w.string("org.freedesktop.Secret.Item.Label")
                    try w.container(BusType.variant, "s") { try w.string("my label") }
                }
                try w.container(BusType.dictEntry, "sv") {
                    try w.string("Unknown")
                    try w.container(BusType.variant, "a{ss}") { try w.stringDictionary(["k": "v"]) }
                }
                try w.container(BusType.dictEntry, "sv") {
                    try w.string("org.freedesktop.Secret.Item.Attributes")
                    try w.container(BusType.variant, "a{ss}") { try w.stringDictionary(["user": "ann"]) }
                }
            }
            try w.string("after")
        }
        defer { sd_bus_message_unref(m) }
        let r = MessageReader(message: m)
        var seen: [String: String] = [:]
        var label = ""
        var attributes: [String: String] = [:]
        try r.properties { key, signature in
            seen[key] = signature
            switch key {
            case "org.freedesktop.Secret.Item.Label": label = try r.string()
            case "org.freedesktop.Secret.Item.Attributes": attributes = try r.stringDictionary()
            default: return false
            }
            return true
        }
        XCTAssertEqual(seen, ["org.freedesktop.Secret.Item.Label": "s", "Unknown": "a{ss}", "org.freedesktop.Secret.Item.Attributes": "a{ss}"])
        XCTAssertEqual(label, "my label")
        XCTAssertEqual(attributes, ["user": "ann"])
        XCTAssertEqual(try r.string(), "after")
    }

    /// Content of another type than asked is InvalidArgs, the error a client is answered with.
    func testWrongTypeIsInvalidArgs() throws {
        let m = try message { w in try w.string("not a boolean") }
        defer { sd_bus_message_unref(m) }
        XCTAssertThrowsError(try MessageReader(message: m).bool()) { error in
            guard case .invalidArgs = error as? ServiceError else { return XCTFail("\(error)") }
        }
        let empty = try message { _ in }
        defer { sd_bus_message_unref(empty) }
        XCTAssertThrowsError(try MessageReader(message: empty).variantSignature())
        XCTAssertThrowsError(try MessageReader(message: empty).uint64())
    }

    func testVariantSignatureIsPeekedNotConsumed() throws {
        let m = try message { w in try w.container(BusType.variant, "ay") { try w.bytes([9, 8]) } }
        defer { sd_bus_message_unref(m) }
        let r = MessageReader(message: m)
        XCTAssertEqual(try r.variantSignature(), "ay")
        XCTAssertEqual(try r.variantSignature(), "ay")
        _ = try r.enter(BusType.variant, "ay")
        XCTAssertEqual(try r.bytes(), [9, 8])
    }
}
