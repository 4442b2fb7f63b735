import Glibc
import KeychainBroker
import KeychainCore
import KeychainTestSupport
import XCTest

/// The client: who it talks to, and how it asks the person when the broker says so.
final class BrokerClientTests: XCTestCase {
    func testTheClientTrustsOnlyAnotherSystemUid() {
        XCTAssertNil(BrokerConnection.refusal(brokerUid: 998, ownUid: 1000, uidMin: 1000))
        XCTAssertNotNil(BrokerConnection.refusal(brokerUid: 1000, ownUid: 1000, uidMin: 1000))
        XCTAssertNotNil(BrokerConnection.refusal(brokerUid: 1001, ownUid: 1000, uidMin: 1000))
        XCTAssertNotNil(BrokerConnection.refusal(brokerUid: 5, ownUid: 5, uidMin: 1000))
    }

    /// UID_MIN as login.defs writes it: the first uncommented line of that name, its number.
    func testUidMinIsReadFromLoginDefs() {
        func uidMin(_ text: String) -> UInt32? { BrokerSocket.uidMin(in: Array(text.utf8)) }
        XCTAssertEqual(uidMin("# UID_MIN 5\nUID_MAX\t\t\t60000\nUID_MIN\t\t\t 1000\n"), 1000)
        XCTAssertEqual(uidMin("  UID_MIN 500\r\n"), 500)
        XCTAssertNil(uidMin("UID_MINIMUM 5\nUID_MIN\nUID_MIN x1\nSYS_UID_MIN 100\n"))
        XCTAssertNil(uidMin("UID_MIN 99999999999\n"))
        XCTAssertNil(uidMin(""))
    }

    /// A socket served by this process's own uid is refused before a byte is sent.
    func testASocketOfOurOwnUidIsRefused() throws {
        var template = Array("/tmp/keychain-broker-client-XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer { _ = system("rm -rf '\(directory)'") }
        let listening = try BrokerListener.bind(directory + "/socket")
        defer { close(listening) }
        let connection = BrokerConnection(path: directory + "/socket")
        XCTAssertThrowsError(try connection.exchange(.whoAmI)) {
            XCTAssertTrue("\($0)".contains("own uid"), "\($0)")
        }
        // Nothing was sent: the listener's backlog holds a connection with nothing to read.
        let accepted = accept(listening, nil, nil)
        XCTAssertGreaterThanOrEqual(accepted, 0)
        var byte: UInt8 = 0
        XCTAssertEqual(recv(accepted, &byte, 1, Int32(MSG_DONTWAIT)), 0)
        close(accepted)
    }

    final class Answers: AccessAnswerer, @unchecked Sendable {
        private var grants: [AccessGrant?]
        private let lock = Mutex()
        init(_ grants: [AccessGrant?]) { self.grants = grants }
        func answer(_ question: String) throws -> AccessGrant? {
            lock.withLock { grants.isEmpty ? nil : grants.removeFirst() }
        }
    }

    func custodian(_ grants: [AccessGrant?]) throws -> (BrokerCustodian, ItemKeyRequest, BrokerService, Scratch) {
        let scratch = Scratch()
        let store = try scratch.create(password: "pw")
        _ = try store.add(generic("x", secret: "s"))
        let stmt = try store.db.statement("SELECT rowid, metadata, secret FROM items")
        XCTAssertTrue(try stmt.step())
        var r = ByteReader(stmt.blob(2))
        let request = ItemKeyRequest(
            keychain: store.keybag.uuid, rowID: stmt.int(0), itemClass: .genericPassword, lockClass: .whenUnlocked, metadata: stmt.blob(1),
            wrappedKey: try r.blob())
        var state = BrokerState()
        state.log.toSyslog = false
        let facts = CallerRecord(entry: .executable("/usr/bin/other"), canMatchSilently: true, summary: "other")
        let service = BrokerService(evaluate: { _, _ in facts }, state: state)
        let peer = BrokerPeer(uid: 1000, pid: getpid())
        let exchange: @Sendable (BrokerRequest) throws -> BrokerReply = { request in
            do { return try service.handle(request, from: peer) } catch let error as KeychainError { return .failure(error) }
        }
        let custodian = BrokerCustodian(exchange: exchange, answerer: Answers(grants))
        var fields: [String: Bytes] = [:]
        for (name, value) in store.keybag.fields { fields[name] = value }
        try custodian.unlock(CustodyKeybag(uuid: store.keybag.uuid, fields: fields, path: store.path), password: Array("pw".utf8))
        return (custodian, request, service, scratch)
    }

    /// The broker's "stale" reaches the engine as `CustodyGenerationChanged`, on which it asks
    /// for the state again; a request of the current generation is answered.
    func testAStaleReplyIsTheGenerationChanged() throws {
        let (custodian, request, _, scratch) = try custodian([])
        defer { scratch.remove() }
        var stale = request
        stale.generation = 1
        XCTAssertThrowsError(try custodian.checkBinding(stale)) { XCTAssertTrue($0 is CustodyGenerationChanged, "\($0)") }
        XCTAssertThrowsError(try custodian.unwrap(stale, interaction: .notAllowed)) { XCTAssertTrue($0 is CustodyGenerationChanged, "\($0)") }
        let store = try scratch.open()
        var fields: [String: Bytes] = [:]
        for (name, value) in store.keybag.fields { fields[name] = value }
        var current = request
        current.generation = try custodian.state(of: CustodyKeybag(uuid: store.keybag.uuid, fields: fields, path: store.path)).generation
        XCTAssertNoThrow(try custodian.checkBinding(current))
    }

    func testAnAlwaysAnswerBringsTheCallersEntry() throws {
        let (custodian, request, _, scratch) = try custodian([.always(password: Array("pw".utf8))])
        defer { scratch.remove() }
        let key = try custodian.unwrap(request, interaction: .allowed)
        XCTAssertEqual(key.key.count, 32)
        // The whole list to write: the item's creator (this test program), then the asker.
        let creator = AccessList(text: try XCTUnwrap(AccessList.creatorAttribute?.stringValue))
        XCTAssertEqual(key.alwaysAllow, AccessList(creator.entries + [.executable("/usr/bin/other")]))
    }

    func testWrongPasswordsAreAskedAgainThreeTimes() throws {
        let wrong = AccessGrant.once(password: Array("no".utf8))
        let (custodian, request, _, scratch) = try custodian([wrong, wrong, .once(password: Array("pw".utf8))])
        defer { scratch.remove() }
        XCTAssertNil(try custodian.unwrap(request, interaction: .allowed).alwaysAllow)
        let (refused, request2, service2, scratch2) = try self.custodian([wrong, wrong, wrong, .once(password: Array("pw".utf8))])
        defer { scratch2.remove() }
        XCTAssertThrowsError(try refused.unwrap(request2, interaction: .allowed)) { XCTAssertEqual(($0 as? KeychainError)?.code, .authFailed) }
        XCTAssertEqual(service2.state.log.entries(of: 1000, since: 0).map(\.decision), ["denied"])
    }

    func testNobodyToAskIsInteractionNotAllowed() throws {
        let (custodian, request, service, scratch) = try custodian([nil])
        defer { scratch.remove() }
        XCTAssertThrowsError(try custodian.unwrap(request, interaction: .allowed)) { XCTAssertEqual(($0 as? KeychainError)?.code, .interactionNotAllowed) }
        XCTAssertThrowsError(try custodian.unwrap(request, interaction: .notAllowed)) { XCTAssertEqual(($0 as? KeychainError)?.code, .interactionNotAllowed) }
        XCTAssertEqual(service.state.log.entries(of: 1000, since: 0).map(\.decision), ["not allowed", "not allowed"])
    }

    func testKeepsAllButKeychainsSealedToATPM() {
        let custodian = BrokerCustodian(exchange: { _ in .done }, answerer: nil)
        XCTAssertTrue(custodian.keeps(CustodyKeybag(uuid: [], fields: ["version": [0, 0, 0, 0, 0, 0, 0, 2]], path: "/k")))
        XCTAssertFalse(custodian.keeps(CustodyKeybag(uuid: [], fields: ["version": [0, 0, 0, 0, 0, 0, 0, 3]], path: "/k")))
    }
}

final class BrokerSocketTests: XCTestCase {
    /// Messages keep their boundaries and sizes; an empty one ends the conversation.
    func testMessagesOfAnySizeUpToTheBufferArriveWhole() throws {
        var pair: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair), 0)
        defer { pair.forEach { close($0) } }
        BrokerSocket.allowLargeMessages(pair[0])
        let large = Bytes(repeating: 0xab, count: 200_000)
        try BrokerSocket.send(pair[0], large)
        try BrokerSocket.send(pair[0], [1, 2, 3])
        XCTAssertEqual(try BrokerSocket.receive(pair[1]), large)
        XCTAssertEqual(try BrokerSocket.receive(pair[1]), [1, 2, 3])
        try BrokerSocket.send(pair[0], [])
        XCTAssertNil(try BrokerSocket.receive(pair[1]))
    }
}
