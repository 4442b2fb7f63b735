import KeychainBroker
import KeychainCore
import XCTest

final class BrokerWireTests: XCTestCase {
    let keybag = CustodyKeybag(uuid: Array(repeating: 7, count: 16), fields: ["uuid": [7, 7], "kdf": [1, 2, 3]], path: "/home/u/k.keychain-db")
    let item = ItemKeyRequest(
        keychain: Array(repeating: 7, count: 16), rowID: -3, itemClass: .internetPassword, lockClass: .afterFirstUnlock, metadata: [1, 2, 3],
        wrappedKey: [4, 5], generation: 0x0102_0304_0506_0708)

    var requests: [BrokerRequest] {
        [
            .state(keybag), .unlock(keybag, password: Array("pw".utf8)), .verify(keybag, password: []), .lock(keybag),
            .changePassword(keybag, old: [1], new: [2], scrypt: ScryptParameters(n: 1024, r: 8, p: 1)),
            .settingsMAC(keybag, settings: [9], password: nil), .settingsMAC(keybag, settings: [], password: [1]),
            .wrap(item, itemKey: Array(repeating: 1, count: 32)),
            .unwrap(item, interaction: .allowed, answer: .always, password: [8]),
            .unwrap(item, interaction: .notAllowed, answer: .none, password: []), .checkBinding(item), .whoAmI,
            .accessLog(since: 1_700_000_000), .forget(path: "/k", password: [3]), .lockAll,
            .create(path: "/k", password: [4], scrypt: ScryptParameters(n: 2048, r: 8, p: 1)),
            .rotateBegin(keybag, password: [1], newPassword: nil, scrypt: ScryptParameters(n: 1024)),
            .rotateBegin(keybag, password: [1], newPassword: [2], scrypt: ScryptParameters(n: 1024)),
            .rotateRows(
                keychain: [1, 2], rows: [Row(rowID: 7, itemClass: .internetPassword, lockClass: .always, space: .always, metadata: [1], secret: [2, 3])]),
            .rotateCommit(keybag), .session(.opened, path: "/k"), .session(.closed, path: "/k"), .session(.count, path: "/k")
        ]
    }

    /// Each request decodes to itself: the same bytes when encoded again.
    func testEveryRequestRoundTrips() throws {
        for request in requests {
            let bytes = request.encoded()
            let (decoded, uid) = try BrokerRequest.decode(bytes)
            XCTAssertNil(uid)
            XCTAssertEqual(decoded.op, request.op)
            XCTAssertEqual(decoded.encoded(), bytes, "\(request.op)")
        }
        let (_, uid) = try BrokerRequest.decode(BrokerRequest.lockAll.encoded(onBehalfOf: 1001))
        XCTAssertEqual(uid, 1001)
    }

    func testEveryReplyRoundTrips() throws {
        let subkeys = ClientSubkeys(metadata: [1], index: [2])
        let entry = AccessLogEntry(
            time: 5, uid: 1000, keychain: "/k", itemClass: "genp", label: "l", service: "s", account: "a", caller: "/usr/bin/git (pid 9)",
            chain: "/usr/bin/bash", decision: "trusted")
        let cases: [(BrokerReply, BrokerOp)] = [
            (.unlocked(first: true), .unlock), (.unlocked(first: false), .unlock), (.done, .lock),
            (.state(CustodyState(open: [.whenUnlocked: subkeys, .afterFirstUnlock: subkeys], settingsVerified: true)), .state),
            (.state(CustodyState(open: [:], settingsVerified: nil, generation: 42)), .state), (.stale, .unwrap), (.stale, .checkBinding), (.wait, .unwrap),
            (.fields(["a": [1]]), .changePassword), (.bytes([1, 2]), .wrap),
            (.key([3], alwaysEntry: "exe:/usr/bin/git"), .unwrap), (.question("may it?"), .unwrap),
            (.caller(CallerDescription(summary: "me", entry: "exe:/x", warnings: ["w"])), .whoAmI), (.log([entry, entry]), .accessLog),
            (.failure(KeychainError(.interactionNotAllowed, "no")), .unwrap), (.sessions(3), .session)
        ]
        for (reply, op) in cases {
            let bytes = reply.encoded()
            XCTAssertEqual(try BrokerReply.decode(bytes, for: op).encoded(), bytes, "\(op)")
        }
        guard case .failure(let error) = try BrokerReply.decode(BrokerReply.failure(KeychainError(.authFailed, "x")).encoded(), for: .unwrap) else {
            return XCTFail("not a failure")
        }
        XCTAssertEqual(error.code, .authFailed)
        XCTAssertEqual(error.detail, "x")
    }

    /// Every prefix of every request is an error, and so is any trailing byte.
    func testTruncatedAndTrailingRequestsAreErrors() {
        for request in requests {
            let bytes = request.encoded()
            for length in 0..<bytes.count { XCTAssertThrowsError(try BrokerRequest.decode(Array(bytes.prefix(length))), "\(request.op) at \(length)") }
            XCTAssertThrowsError(try BrokerRequest.decode(bytes + [0]))
        }
    }

    func testMalformedRequestsAreErrors() {
        XCTAssertThrowsError(try BrokerRequest.decode([0]))
        XCTAssertThrowsError(try BrokerRequest.decode([99]))
        XCTAssertThrowsError(try BrokerRequest.decode(Bytes(repeating: 13, count: BrokerWire.maximumMessage + 1)))
        // A keybag claiming a million fields is refused before anything is allocated for them.
        var w = ByteWriter()
        w.u8(BrokerOp.state.rawValue)
        w.blob([1])
        w.string("/k")
        w.u32(1_000_000)
        XCTAssertThrowsError(try BrokerRequest.decode(w.bytes))
        // A blob longer than what is left.
        XCTAssertThrowsError(try BrokerRequest.decode([BrokerOp.accessLog.rawValue, 0, 0]))
        XCTAssertThrowsError(try BrokerRequest.decode([BrokerOp.forget.rawValue, 0xff, 0xff, 0xff, 0xff]))
        // Unknown classes, flags and answers.
        var bad = BrokerRequest.unwrap(item, interaction: .allowed, answer: .once, password: []).encoded()
        let flags = bad.count - 6
        bad[flags] = 2
        XCTAssertThrowsError(try BrokerRequest.decode(bad))
        bad[flags] = 1
        bad[flags + 1] = 4
        XCTAssertThrowsError(try BrokerRequest.decode(bad))
        var badClass = BrokerRequest.checkBinding(item).encoded()
        badClass[1 + 4 + 16 + 8] = 77
        XCTAssertThrowsError(try BrokerRequest.decode(badClass))
        // A field twice.
        var twice = ByteWriter()
        twice.u8(BrokerOp.lock.rawValue)
        twice.blob([1])
        twice.string("/k")
        twice.u32(2)
        for _ in 0..<2 {
            twice.string("uuid")
            twice.blob([1])
        }
        XCTAssertThrowsError(try BrokerRequest.decode(twice.bytes))
    }

    func testMalformedRepliesAreErrors() throws {
        XCTAssertThrowsError(try BrokerReply.decode([], for: .state))
        XCTAssertThrowsError(try BrokerReply.decode(BrokerReply.done.encoded() + [1], for: .lock))
        XCTAssertThrowsError(try BrokerReply.decode(BrokerReply.unlocked(first: true).encoded() + [1], for: .unlock))
        XCTAssertThrowsError(try BrokerReply.decode(BrokerReply.done.encoded() + [2], for: .unlock))
        // A question is an answer to unwrap only.
        XCTAssertThrowsError(try BrokerReply.decode(BrokerReply.question("q").encoded(), for: .state))
        var w = ByteWriter()
        w.u32(0)
        w.string("")
        w.u32(UInt32(BrokerWire.maximumMessage))
        XCTAssertThrowsError(try BrokerReply.decode(w.bytes, for: .accessLog))
        let state = BrokerReply.state(CustodyState(open: [.whenUnlocked: ClientSubkeys(metadata: [], index: [])], settingsVerified: nil)).encoded()
        for length in 0..<state.count { XCTAssertThrowsError(try BrokerReply.decode(Array(state.prefix(length)), for: .state)) }
    }
}
