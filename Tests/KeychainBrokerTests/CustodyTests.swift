import CLinux
import Glibc
import KeychainBroker
import KeychainCore
import KeychainTestSupport
import XCTest

/// The service's custody over real keybags and rows, made by the engine in a scratch folder.
final class CustodyTests: XCTestCase {
    var scratch: Scratch!
    var store: KeychainStore!
    var now: UInt64 = 1_800_000_000
    let me = BrokerPeer(uid: 1000, pid: getpid())
    let security = CallerRecord(entry: .executable("/usr/bin/security"), canMatchSilently: true, summary: "/usr/bin/security (pid 1)")
    let stranger = CallerRecord(entry: .executable("/usr/bin/stranger"), canMatchSilently: true, summary: "/usr/bin/stranger (pid 2)")
    let copy = CallerRecord(entry: nil, canMatchSilently: false, summary: "/home/u/copy (pid 3)")

    override func setUpWithError() throws {
        scratch = Scratch()
        store = try scratch.create(password: "pw")
    }

    override func tearDown() { scratch.remove() }

    func service(_ facts: CallerRecord, state: BrokerState = BrokerState(), store: BrokerStateStore? = nil) -> BrokerService {
        var state = state
        state.log.toSyslog = false
        return BrokerService(evaluate: { _, _ in facts }, store: store, state: state, clock: { [unowned self] in self.now })
    }

    func keybag(_ store: KeychainStore) -> CustodyKeybag {
        var fields: [String: Bytes] = [:]
        for (name, value) in store.keybag.fields { fields[name] = value }
        return CustodyKeybag(uuid: store.keybag.uuid, fields: fields, path: store.path)
    }

    /// The newest row, as the engine stored it, as a request for its item key.
    func lastRow() throws -> (request: ItemKeyRequest, body: Bytes) {
        let stmt = try store.db.statement("SELECT rowid, class, lockclass, metadata, secret FROM items ORDER BY rowid DESC LIMIT 1")
        XCTAssertTrue(try stmt.step())
        var r = ByteReader(stmt.blob(4))
        let wrapped = try r.blob(), body = try r.blob()
        let request = ItemKeyRequest(
            keychain: store.keybag.uuid, rowID: stmt.int(0), itemClass: ItemClass(code: stmt.int(1))!, lockClass: LockClass(rawValue: stmt.int(2))!,
            metadata: stmt.blob(3), wrappedKey: wrapped)
        return (request, body)
    }

    func secret(of request: ItemKeyRequest, body: Bytes, key: Bytes) throws -> String {
        let aad = KeychainStore.additionalData(
            keychain: request.keychain, rowID: request.rowID, itemClass: request.itemClass, lockClass: request.lockClass, field: "secret",
            version: KeychainStore.version(ofMetadata: request.metadata))
        return String(decoding: try Crypto.open(body, key: key, aad: aad), as: UTF8.self)
    }

    func key(_ reply: BrokerReply) throws -> (Bytes, String) {
        guard case .key(let key, let entry) = reply else {
            XCTFail("not a key: \(reply)")
            throw KeychainError.decode("not a key")
        }
        return (key, entry)
    }

    func assertCode(_ code: KeychainError.Code, _ body: () throws -> Any, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { XCTAssertEqual(($0 as? KeychainError)?.code, code, "\($0)", file: file, line: line) }
    }

    func testUnlockGivesSubkeysThatOpenTheEnginesRows() throws {
        _ = try store.add(generic("alice", secret: "s3cret"))
        let (request, body) = try lastRow()
        let broker = service(security)
        guard case .state(let locked) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertTrue(locked.open.isEmpty)
        XCTAssertNil(locked.settingsVerified)

        XCTAssertNotNil(try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me))
        guard case .state(let open) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertEqual(Set(open.open.keys), [.whenUnlocked, .afterFirstUnlock])
        XCTAssertEqual(open.settingsVerified, true)
        // The client's metadata subkey opens the engine's metadata: the same derivation and AAD.
        let row = Row(
            rowID: request.rowID, itemClass: request.itemClass, lockClass: request.lockClass, space: .protected, metadata: request.metadata, secret: [])
        XCTAssertNotNil(try KeychainStore.openMetadata(row, keychain: request.keychain, key: open.open[.whenUnlocked]!.metadata).version)
        // The broker opens the engine's item key, and that key the engine's secret: byte-identical
        // additional data on both sides. The item trusts its creator (this test program): the
        // keychain's own tool is asked, and opens it once allowed.
        assertCode(.interactionNotAllowed) { try broker.handle(.unwrap(request, interaction: .notAllowed, answer: .none, password: []), from: self.me) }
        let (itemKey, entry) = try key(try broker.handle(.unwrap(request, interaction: .allowed, answer: .once, password: Array("pw".utf8)), from: me))
        XCTAssertEqual(entry, "")
        XCTAssertEqual(try secret(of: request, body: body, key: itemKey), "s3cret")
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).map(\.decision), ["not allowed", "allowed once"])
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).first?.account, "alice")
        // Another uid holds nothing of it.
        guard case .state(let theirs) = try broker.handle(.state(keybag(store)), from: BrokerPeer(uid: 1001, pid: getpid())) else { return XCTFail() }
        XCTAssertTrue(theirs.open.isEmpty)
    }

    func testWrongPasswordHoldsNothingAndIsRateLimited() throws {
        let broker = service(security)
        for _ in 0..<5 { assertCode(.authFailed) { try broker.handle(.unlock(self.keybag(self.store), password: Array("no".utf8)), from: self.me) } }
        guard case .state(let state) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertTrue(state.open.isEmpty)
        // The sixth try within the minute is refused unchecked, the right password too.
        assertCode(.authFailed) { try broker.handle(.unlock(self.keybag(self.store), password: Array("pw".utf8)), from: self.me) }
        // Another uid is not held up.
        XCTAssertNoThrow(try broker.handle(.verify(keybag(store), password: Array("pw".utf8)), from: BrokerPeer(uid: 1001, pid: getpid())))
        now += 61
        XCTAssertNoThrow(try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me))
    }

    func testLockForgetsWhenUnlockedOnly() throws {
        _ = try store.add(generic("a", protection: .whenUnlocked))
        let (whenUnlocked, _) = try lastRow()
        _ = try store.add(generic("c", protection: .afterFirstUnlock))
        let (afterFirst, body) = try lastRow()
        let broker = service(security)
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        _ = try broker.handle(.lock(keybag(store)), from: me)
        guard case .state(let state) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertEqual(Set(state.open.keys), [.afterFirstUnlock])
        XCTAssertNil(state.settingsVerified)
        XCTAssertThrowsError(try broker.handle(.unwrap(whenUnlocked, interaction: .notAllowed, answer: .none, password: []), from: me)) {
            XCTAssertEqual(($0 as? KeychainError)?.code, KeychainError.locked().code)
        }
        let (itemKey, _) = try key(try broker.handle(.unwrap(afterFirst, interaction: .allowed, answer: .once, password: Array("pw".utf8)), from: me))
        XCTAssertEqual(try secret(of: afterFirst, body: body, key: itemKey), "pw")
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        _ = try broker.handle(.lockAll, from: me)
        guard case .state(let all) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertEqual(Set(all.open.keys), [.afterFirstUnlock])
    }

    /// A request read with a state whose keys changed since (a lock, lockAll, an unlock, the
    /// idle timeout) is refused as stale, not answered: the client asks for the state again.
    func testARequestOfAnEarlierGenerationIsStale() throws {
        try store.setSettings(KeychainSettings(idleTimeout: 300))
        _ = try store.add(generic("a", protection: .whenUnlocked))
        var (request, _) = try lastRow()
        let broker = service(security)
        func generation() throws -> UInt64 {
            guard case .state(let state) = try broker.handle(.state(keybag(store)), from: me) else { throw KeychainError.decode("no state") }
            return state.generation
        }
        func isStale(_ generation: UInt64) throws -> Bool {
            request.generation = generation
            if case .stale = try broker.handle(.checkBinding(request), from: me) { return true }
            return false
        }
        let locked = try generation()
        XCTAssertEqual(try generation(), locked, "no change, the same generation")
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        XCTAssertTrue(try isStale(locked))
        let unlocked = try generation()
        XCTAssertNotEqual(unlocked, locked)
        XCTAssertFalse(try isStale(unlocked))
        XCTAssertFalse(try isStale(0), "0 asks for no check")
        request.generation = locked
        if case .stale = try broker.handle(.unwrap(request, interaction: .notAllowed, answer: .none, password: []), from: me) {
        } else {
            XCTFail("an unwrap of an earlier generation is stale")
        }
        _ = try broker.handle(.lock(keybag(store)), from: me)
        XCTAssertTrue(try isStale(unlocked))
        let relocked = try generation()
        XCTAssertFalse([locked, unlocked].contains(relocked), "never back to an earlier value")
        assertCode(.interactionNotAllowed) { try isStale(relocked) }

        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        var current = try generation()
        _ = try broker.handle(.lockAll, from: me)
        XCTAssertTrue(try isStale(current))
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        current = try generation()
        now += 301
        XCTAssertTrue(try isStale(current), "the idle timeout's lock")
    }

    func testIdleTimeoutFromTheVerifiedSettings() throws {
        try store.setSettings(KeychainSettings(idleTimeout: 300))
        let broker = service(security)
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        now += 200
        guard case .state(let used) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertNotNil(used.open[.whenUnlocked])
        now += 299
        broker.sweep()
        guard case .state(let still) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertNotNil(still.open[.whenUnlocked], "each state call restarts the idle clock")
        now += 300
        broker.sweep()
        guard case .state(let idle) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertNil(idle.open[.whenUnlocked])
        XCTAssertNotNil(idle.open[.afterFirstUnlock])
    }

    func testUnlistedCallersAreAskedAndAnswersNeedThePassword() throws {
        _ = try store.add(generic("bob", secret: "hidden"))
        let (request, body) = try lastRow()
        let unlock = BrokerRequest.unlock(keybag(store), password: Array("pw".utf8))
        var broker = service(stranger)
        _ = try broker.handle(unlock, from: me)
        assertCode(.interactionNotAllowed) { try broker.handle(.unwrap(request, interaction: .notAllowed, answer: .none, password: []), from: self.me) }
        guard case .question(let text) = try broker.handle(.unwrap(request, interaction: .allowed, answer: .none, password: []), from: me) else {
            return XCTFail()
        }
        XCTAssertTrue(text.contains("/usr/bin/stranger") && text.contains("bob"), text)
        assertCode(.authFailed) { try broker.handle(.unwrap(request, interaction: .allowed, answer: .deny, password: []), from: self.me) }
        // "yes" without the password is asked again.
        guard case .question(let again) = try broker.handle(.unwrap(request, interaction: .allowed, answer: .once, password: Array("yes".utf8)), from: me)
        else { return XCTFail() }
        XCTAssertTrue(again.hasPrefix("Wrong password."))
        let (once, noEntry) = try key(try broker.handle(.unwrap(request, interaction: .allowed, answer: .once, password: Array("pw".utf8)), from: me))
        XCTAssertEqual(noEntry, "")
        XCTAssertEqual(try secret(of: request, body: body, key: once), "hidden")
        let (_, entry) = try key(try broker.handle(.unwrap(request, interaction: .allowed, answer: .always, password: Array("pw".utf8)), from: me))
        XCTAssertEqual(entry, try XCTUnwrap(AccessList.creatorAttribute?.stringValue) + "\nexe:/usr/bin/stranger")
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).map(\.decision), ["not allowed", "denied", "allowed once", "always allowed"])

        // An unidentified caller gets Allow once, never an entry.
        // (A connection of its own: a peer keeps what it was found to be.)
        broker = service(copy)
        let fresh = BrokerPeer(uid: 1000, pid: getpid())
        _ = try broker.handle(unlock, from: fresh)
        guard case .question(let unidentified) = try broker.handle(.unwrap(request, interaction: .allowed, answer: .none, password: []), from: fresh) else {
            return XCTFail()
        }
        XCTAssertTrue(unidentified.contains("allowed once only"), unidentified)
        let (_, none) = try key(try broker.handle(.unwrap(request, interaction: .allowed, answer: .always, password: Array("pw".utf8)), from: fresh))
        XCTAssertEqual(none, "")
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).last?.decision, "unidentified")
    }

    /// Issue 55: while one process of a program is asking the person about an item, another of
    /// the same program waits instead of opening a second dialog, and shares the answer (once, or
    /// the refusal) for a few seconds; a question whose asker went away may be asked again.
    func testOneQuestionAtATimePerProgramAndItem() throws {
        _ = try store.add(generic("bob", secret: "hidden"))
        let (request, body) = try lastRow()
        var now: UInt64 = 1_000
        let broker = service(stranger)
        broker.clock = { now }
        // Both pinned at connect (a pidfd): the same process, so of one tree (review 55).
        let pidfd = clinux_pidfd_open(getpid())
        defer { close(pidfd) }
        let first = BrokerPeer(uid: 1000, pid: getpid(), pidfd: pidfd), second = BrokerPeer(uid: 1000, pid: getpid(), pidfd: pidfd)
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: first)
        func ask(_ peer: BrokerPeer, _ answer: WireAnswer = .none, _ password: String = "") throws -> BrokerReply {
            try broker.handle(.unwrap(request, interaction: .allowed, answer: answer, password: Array(password.utf8)), from: peer)
        }
        guard case .question = try ask(first) else { return XCTFail("the first asks") }
        guard case .wait = try ask(second) else { return XCTFail("the second waits") }
        guard case .question = try ask(first) else { return XCTFail("the asker itself may ask again") }
        let (once, _) = try key(try ask(first, .once, "pw"))
        XCTAssertEqual(try secret(of: request, body: body, key: once), "hidden")
        let (shared, entry) = try key(try ask(second))
        XCTAssertEqual(entry, "", "a shared answer is once")
        XCTAssertEqual(try secret(of: request, body: body, key: shared), "hidden")
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).last?.decision, "allowed once (the answer to the same question asked by another process)")

        guard case .question = try ask(first) else { return XCTFail("the one it was answered for asks again: once is once") }
        guard case .wait = try ask(second) else { return XCTFail("waits again") }
        assertCode(.authFailed) { try ask(first, .deny) }
        assertCode(.authFailed) { try ask(second) }
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).last?.decision, "denied (the answer to the same question asked by another process)")
        let third = BrokerPeer(uid: 1000, pid: getpid(), pidfd: pidfd)
        guard case .question = try ask(third) else { return XCTFail("one that did not wait is asked itself") }

        broker.connectionClosed(third)
        now += 10
        guard case .question = try ask(first) else { return XCTFail("asked again") }
        guard case .wait = try ask(second) else { return XCTFail("waits") }
        assertCode(.authFailed) { try ask(first, .deny) }
        now += 10
        guard case .question = try ask(second) else { return XCTFail("an answer is shared for a few seconds only") }
        broker.connectionClosed(second)
        guard case .question = try ask(first) else { return XCTFail("asked again") }
        guard case .wait = try ask(second) else { return XCTFail("waits") }
        broker.connectionClosed(first)
        guard case .question = try ask(second) else { return XCTFail("the asker went away: the next asks") }
        // An asker that could ask nobody gives the question up too.
        assertCode(.interactionNotAllowed) {
            try broker.handle(.unwrap(request, interaction: .notAllowed, answer: .none, password: []), from: second)
        }
        guard case .question = try ask(first) else { return XCTFail("given up: the next asks") }
    }

    /// Review 55: an answer goes only to a waiting process of the asker's own tree (here: the
    /// asker itself, or not its parent), and never to `security` or an interpreter, which wait
    /// for the question to end and are then asked themselves.
    func testAnAnswerIsSharedWithinTheAskersTreeOnly() throws {
        _ = try store.add(generic("bob", secret: "hidden"))
        let (request, _) = try lastRow()
        var child: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/usr/bin/sleep"), strdup("1000"), nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&child, "/usr/bin/sleep", nil, nil, argv, nil), 0)
        defer {
            kill(child, SIGKILL)
            waitpid(child, nil, 0)
        }
        let own = clinux_pidfd_open(getpid()), childs = clinux_pidfd_open(child)
        defer { close(own); close(childs) }
        let tool = CallerRecord(entry: .executable("/opt/tools/security"), canMatchSilently: true, summary: "/opt/tools/security (pid 4)")
        let python = CallerRecord(
            entry: .interpreter("/usr/bin/python3"), canMatchSilently: true, isInterpreter: true, summary: "/usr/bin/python3 (pid 5)")
        for (facts, asker, waiter, why) in [
            (stranger, childs, own, "the asker's parent"), (tool, own, own, "security, the same process"), (python, own, own, "an interpreter")
        ] {
            let broker = service(facts)
            let first = BrokerPeer(uid: 1000, pid: asker == own ? getpid() : child, pidfd: asker)
            let second = BrokerPeer(uid: 1000, pid: waiter == own ? getpid() : child, pidfd: waiter)
            _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: first)
            func ask(_ peer: BrokerPeer, _ answer: WireAnswer = .none, _ password: String = "") throws -> BrokerReply {
                try broker.handle(.unwrap(request, interaction: .allowed, answer: answer, password: Array(password.utf8)), from: peer)
            }
            guard case .question = try ask(first) else { return XCTFail("\(why): the first asks") }
            guard case .wait = try ask(second) else { return XCTFail("\(why): the second waits while the question is open") }
            _ = try key(try ask(first, .once, "pw"))
            guard case .question = try ask(second) else { return XCTFail("\(why): asked itself, not given the answer") }
            guard case .wait = try ask(first) else { return XCTFail("\(why): one question at a time") }
        }
    }

    func testAListInTheMetadataIsTheBrokersToRead() throws {
        let broker = service(stranger)
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        guard case .state(let state) = try broker.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        // A new row as the engine will seal it: the list in the metadata, the key wrapped by the broker.
        func row(_ list: String, rowID: Int64) throws -> ItemKeyRequest {
            let attributes: [String: AttributeValue] = [AccessList.attribute: .string(list), AttributeKey.account: .string("x")]
            let metadata = try Crypto.seal(
                encodeAttributes(attributes), key: state.open[.whenUnlocked]!.metadata,
                aad: KeychainStore.additionalData(
                    keychain: store.keybag.uuid, rowID: rowID, itemClass: .genericPassword, lockClass: .whenUnlocked, field: "metadata", version: []))
            var request = ItemKeyRequest(
                keychain: store.keybag.uuid, rowID: rowID, itemClass: .genericPassword, lockClass: .whenUnlocked, metadata: metadata, wrappedKey: [])
            guard case .bytes(let wrapped) = try broker.handle(.wrap(request, itemKey: Array(repeating: 5, count: 32)), from: me) else {
                throw KeychainError.decode("no wrap")
            }
            request.wrappedKey = wrapped
            return request
        }
        let listed = try row("exe:/usr/bin/stranger", rowID: 10)
        XCTAssertEqual(
            try key(try broker.handle(.unwrap(listed, interaction: .notAllowed, answer: .none, password: []), from: me)).0, Array(repeating: 5, count: 32))
        XCTAssertNoThrow(try broker.handle(.checkBinding(listed), from: me))
        let other = try row("exe:/usr/bin/git", rowID: 11)
        assertCode(.interactionNotAllowed) { try broker.handle(.unwrap(other, interaction: .notAllowed, answer: .none, password: []), from: self.me) }
        // The first row's wrapped key under the second row's metadata (a list swapped in) opens nothing.
        var swapped = listed
        swapped.metadata = try row("any", rowID: 10).metadata
        assertCode(.decode) { try broker.handle(.checkBinding(swapped), from: self.me) }
        assertCode(.decode) { try broker.handle(.unwrap(swapped, interaction: .notAllowed, answer: .none, password: []), from: self.me) }
    }

    /// A format-1 row's metadata is not bound to its secret: whoever holds the metadata subkey
    /// (every process of the user) can seal new metadata over an old secret. Its shape must not
    /// imply trust then (free-form attributes would name the Secret Service).
    func testAFormatOneRowsShapeImpliesNoTrust() throws {
        let daemon = CallerRecord(
            entry: .executable("/usr/bin/keychain-secret-service"), canMatchSilently: true, summary: "keychain-secret-service (pid 4)")
        let broker = service(daemon)
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        let uuid = store.keybag.uuid
        var classKey = try XCTUnwrap(broker.state.custody[CustodyID(uid: 1000, uuid: uuid)]?.a)
        defer { classKey.wipe() }
        func aad(_ field: String) -> Bytes {
            KeychainStore.additionalData(keychain: uuid, rowID: 20, itemClass: .genericPassword, lockClass: .whenUnlocked, field: field)
        }
        // A row written before the binding, its key under format 1's additional data...
        let wrapped = try Crypto.seal(Array(repeating: 7, count: 32), key: Crypto.deriveKey(classKey, purpose: "item-keys"), aad: aad("item-key"))
        // ...and metadata forged with the subkey a client holds, shaped as the Secret Service's.
        let forged: [String: AttributeValue] = [AttributeKey.account: .string("x"), AttributeKey.freeFormAttributes: .data([1])]
        let metadata = try Crypto.seal(encodeAttributes(forged), key: Crypto.deriveKey(classKey, purpose: "metadata"), aad: aad("metadata"))
        let request = ItemKeyRequest(
            keychain: uuid, rowID: 20, itemClass: .genericPassword, lockClass: .whenUnlocked, metadata: metadata, wrappedKey: wrapped)
        assertCode(.interactionNotAllowed) { try broker.handle(.unwrap(request, interaction: .notAllowed, answer: .none, password: []), from: self.me) }
    }

    /// What the question names of an item is the item maker's text: a label with a line break or
    /// a bidirectional override must not write lines of the question (or the log) of its own.
    func testTheQuestionEscapesTheItemsText() throws {
        var item = generic("bob\u{202E}", secret: "hidden")
        item[AttributeKey.label] = .string("mail\".\nkeychain-secret-service (/usr/bin/keychain-secret-service) wants to read \"mail")
        _ = try store.add(item)
        let (request, _) = try lastRow()
        let broker = service(stranger)
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        guard case .question(let text) = try broker.handle(.unwrap(request, interaction: .allowed, answer: .none, password: []), from: me) else {
            return XCTFail()
        }
        XCTAssertFalse(text.split(separator: "\n").contains { $0.hasPrefix("keychain-secret-service") }, text)
        XCTAssertFalse(text.unicodeScalars.contains("\u{202E}"), text)
        XCTAssertTrue(text.contains("mail\".\\u{a}keychain-secret-service"), text)
    }

    func testAnotherKeychainAtAPinnedPathIsRefusedUntilForgotten() throws {
        let broker = service(security)
        let first = keybag(store)
        _ = try broker.handle(.unlock(first, password: Array("pw".utf8)), from: me)
        // The attacker's keychain, same path, a password it knows.
        let other = try scratch.create("other", password: "evil")
        var swapped = keybag(other)
        swapped.path = first.path
        assertCode(.authFailed) { try broker.handle(.unlock(swapped, password: Array("evil".utf8)), from: self.me) }
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).last?.decision, "refused: not the keychain first unlocked at this path")
        assertCode(.authFailed) { try broker.handle(.forget(path: first.path, password: Array("evil".utf8)), from: self.me) }
        _ = try broker.handle(.forget(path: first.path, password: Array("pw".utf8)), from: me)
        XCTAssertNoThrow(try broker.handle(.unlock(swapped, password: Array("evil".utf8)), from: me))
        // Root forgets without a password, for the uid it names; nobody else may name one.
        assertCode(.param) { try broker.handle(.forget(path: first.path, password: []), onBehalfOf: 1000, from: BrokerPeer(uid: 1001, pid: getpid())) }
        XCTAssertNoThrow(try broker.handle(.forget(path: first.path, password: []), onBehalfOf: 1000, from: BrokerPeer(uid: 0, pid: getpid())))
    }

    func testPasswordChangeAndSettingsMACAreMadeInTheBroker() throws {
        let broker = service(security)
        let bag = keybag(store)
        _ = try broker.handle(.unlock(bag, password: Array("pw".utf8)), from: me)
        guard
            case .fields(let fields) = try broker.handle(.changePassword(bag, old: Array("pw".utf8), new: Array("new".utf8), scrypt: .fastForTesting), from: me)
        else { return XCTFail() }
        let changed = CustodyKeybag(uuid: bag.uuid, fields: fields, path: bag.path)
        XCTAssertNoThrow(try broker.handle(.verify(changed, password: Array("new".utf8)), from: me))
        assertCode(.authFailed) { try broker.handle(.verify(changed, password: Array("pw".utf8)), from: self.me) }
        guard case .state(let state) = try broker.handle(.state(changed), from: me) else { return XCTFail() }
        XCTAssertEqual(state.open.count, 2, "the same class keys under the new password")
        let settings = KeychainSettings(idleTimeout: 60).bytes
        guard case .bytes(let held) = try broker.handle(.settingsMAC(changed, settings: settings, password: nil), from: me),
            case .bytes(let derived) = try broker.handle(.settingsMAC(changed, settings: settings, password: Array("new".utf8)), from: me)
        else { return XCTFail() }
        XCTAssertEqual(held, derived)
        XCTAssertEqual(held.count, 32)
    }

    /// Review 55: an unlocked keychain is enough for settings that lock more, not for those that
    /// lock less than the ones in force (the keybag's, verified): those need the password.
    func testSettingsThatLockLessNeedThePassword() throws {
        try store.setSettings(KeychainSettings(idleTimeout: 300, lockOnSessionEnd: true))
        let broker = service(security)
        let bag = keybag(store)
        _ = try broker.handle(.unlock(bag, password: Array("pw".utf8)), from: me)
        func mac(_ settings: KeychainSettings, _ password: String? = nil) throws -> BrokerReply {
            try broker.handle(.settingsMAC(bag, settings: settings.bytes, password: password.map { Array($0.utf8) }), from: me)
        }
        for stronger in [KeychainSettings(idleTimeout: 300), KeychainSettings(idleTimeout: 60), KeychainSettings(idleTimeout: 1)] {
            guard case .bytes = try mac(stronger) else { return XCTFail("\(stronger) locks as much or more") }
        }
        for weaker in [
            KeychainSettings(idleTimeout: 300, lockOnSessionEnd: false), KeychainSettings(idleTimeout: 301), KeychainSettings(idleTimeout: 0)
        ] {
            assertCode(.interactionNotAllowed) { try mac(weaker) }
            assertCode(.authFailed) { try mac(weaker, "wrong") }
            guard case .bytes = try mac(weaker, "pw") else { return XCTFail("\(weaker) with the password") }
        }
        XCTAssertTrue(broker.notes.last?.contains("refused settings that lock less") == true, "\(broker.notes)")
        // Settings whose MAC fails: the safe defaults are in force, and lock at logout stays on.
        var damaged = bag
        damaged.fields["settings"] = KeychainSettings(idleTimeout: 0, lockOnSessionEnd: false).bytes
        assertCode(.interactionNotAllowed) {
            try broker.handle(.settingsMAC(damaged, settings: KeychainSettings(lockOnSessionEnd: false).bytes, password: nil), from: self.me)
        }
    }

    /// The settings' MAC has no counter: once the broker made a MAC for other settings, the pair
    /// the file held before (written back) no longer verifies; the new pair does.
    func testSettingsWrittenBackAreNotVerified() throws {
        try store.setSettings(KeychainSettings(idleTimeout: 0, lockOnSessionEnd: false))
        let broker = service(security)
        let old = keybag(store)
        _ = try broker.handle(.unlock(old, password: Array("pw".utf8)), from: me)
        guard case .state(let before) = try broker.handle(.state(old), from: me) else { return XCTFail() }
        XCTAssertEqual(before.settingsVerified, true)
        let stronger = KeychainSettings(idleTimeout: 300)
        guard case .bytes(let mac) = try broker.handle(.settingsMAC(old, settings: stronger.bytes, password: nil), from: me) else {
            return XCTFail()
        }
        guard case .state(let replayed) = try broker.handle(.state(old), from: me) else { return XCTFail() }
        XCTAssertEqual(replayed.settingsVerified, false, "the earlier pair, written back")
        var new = old
        new.fields["settings"] = stronger.bytes
        new.fields["settings.mac"] = mac
        guard case .state(let current) = try broker.handle(.state(new), from: me) else { return XCTFail() }
        XCTAssertEqual(current.settingsVerified, true)
    }

    /// The sessions that decide the last logout's lock are counted by root's requests only (the PAM
    /// module): a process of the user cannot raise the count to keep the keychain unlocked after it.
    func testSessionsAreCountedForRootOnly() throws {
        let broker = service(security)
        let root = BrokerPeer(uid: 0, pid: getpid())
        let login = "/home/u/.local/share/keychains/login.keychain-db"
        assertCode(.param) { try broker.handle(.session(.opened, path: login), from: me) }
        assertCode(.param) { try broker.handle(.session(.opened, path: login), onBehalfOf: 1000, from: me) }
        assertCode(.param) { try broker.handle(.session(.opened, path: login), from: root) }
        assertCode(.param) { try broker.handle(.session(.opened, path: "relative"), onBehalfOf: 1000, from: root) }
        func count(_ event: SessionEvent, _ path: String = login) throws -> UInt32 {
            guard case .sessions(let count) = try broker.handle(.session(event, path: path), onBehalfOf: 1000, from: root) else {
                XCTFail("not a count")
                return .max
            }
            return count
        }
        XCTAssertEqual(try count(.opened), 1)
        XCTAssertEqual(try count(.opened), 2)
        XCTAssertEqual(try count(.count), 2)
        XCTAssertEqual(try count(.closed), 1)
        XCTAssertEqual(try count(.closed), 0)
        XCTAssertEqual(try count(.closed), 0, "never below none")
        XCTAssertNil(broker.state.sessions[1000])
        XCTAssertEqual(try count(.opened), 1)
        // Another login keychain of the uid (another user given the uid since) starts at none.
        XCTAssertEqual(try count(.count, "/home/v/.local/share/keychains/login.keychain-db"), 0)
        XCTAssertEqual(try count(.closed, "/home/v/.local/share/keychains/login.keychain-db"), 0)

        // A restart keeps the count; a state saved before sessions were counted reads as none.
        let restored = try BrokerState.decode(broker.state.encoded(), toSyslog: false)
        XCTAssertEqual(restored.sessions, [1000: [login: 1]])
        var older = BrokerState()
        older.sessions = [:]
        let bytes = older.encoded()
        XCTAssertEqual(try BrokerState.decode(Array(bytes.dropLast(4)), toSyslog: false).sessions, [:])
    }

    func testTheStateOutlivesARestartUnderTheKeyringsKey() throws {
        guard (try? KernelKeyring.persistent()) != nil else { throw XCTSkip("no persistent kernel keyring here") }
        let stateStore = BrokerStateStore(directory: scratch.directory, keyName: "keychain-broker-test:\(getpid()):\(UInt64(SystemClock.now() * 1000))")
        defer { stateStore.removeKey() }
        let broker = service(security, store: stateStore)
        _ = broker.handle(BrokerRequest.unlock(keybag(store), password: Array("pw".utf8)).encoded(), from: me)
        // The file holds no class key in the clear.
        let file = FileManagerless.read(scratch.directory + "/state")
        XCTAssertFalse(file.isEmpty)
        XCTAssertFalse(fileHolds(scratch.directory + "/state", Array(store.keybag.uuid)))
        var st = stat()
        XCTAssertEqual(stat(scratch.directory + "/state", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)

        let restored = try XCTUnwrap(try stateStore.load(toSyslog: false))
        let restarted = service(security, state: restored)
        guard case .state(let state) = try restarted.handle(.state(keybag(store)), from: me) else { return XCTFail() }
        XCTAssertEqual(Set(state.open.keys), [.whenUnlocked, .afterFirstUnlock])
        // Without the keyring's key the file is noise.
        stateStore.removeKey()
        XCTAssertNil(try stateStore.load(toSyslog: false))
    }

    /// Issue 54: a keychain made where the broker runs gets its class keys from the broker, which
    /// keeps them unlocked and pins the path; the engine writes the keybag and holds no class key.
    func testANewKeychainIsMadeInTheBrokerAndPinned() throws {
        let broker = service(security)
        let path = scratch.directory + "/keychains/made.keychain-db"
        let exchange: @Sendable (BrokerRequest) throws -> BrokerReply = { [me] request in
            do { return try broker.handle(request, from: me) } catch let error as KeychainError { return .failure(error) }
        }
        KeychainStore.custodian = BrokerCustodian(exchange: exchange, answerer: nil)
        defer { KeychainStore.custodian = nil }
        let made = try KeychainStore.create(at: path, password: Array("pw".utf8), scrypt: .fastForTesting)
        XCTAssertEqual(made.storage, .broker)
        XCTAssertTrue(made.status.whenUnlocked, "left unlocked in the broker")
        XCTAssertNil(made.heldClassKey(.whenUnlocked))
        XCTAssertNil(KernelKeyring.find("keychain:\(made.keybag.uuid.hex):A"))
        XCTAssertEqual(broker.notes.last?.hasSuffix("created"), true)
        let bag = keybag(made)
        guard case .state(let state) = try broker.handle(.state(bag), from: me) else { return XCTFail() }
        XCTAssertEqual(Set(state.open.keys), [.whenUnlocked, .afterFirstUnlock])
        XCTAssertEqual(state.settingsVerified, true)
        // The file is an ordinary keychain: its password opens it without the broker.
        var keys = try Keybag(fields: try Keybag.fields(in: made.db)).open(password: Array("pw".utf8))
        keys.wipe()

        // Pinned: another keychain at the path is refused, and making one there is too.
        var swapped = keybag(store)
        swapped.path = path
        assertCode(.authFailed) { try broker.handle(.unlock(swapped, password: Array("pw".utf8)), from: self.me) }
        assertCode(.duplicateKeychain) {
            try broker.handle(.create(path: path, password: Array("evil".utf8), scrypt: .fastForTesting), from: self.me)
        }
        assertCode(.param) { try broker.handle(.create(path: "relative", password: Array("pw".utf8), scrypt: .fastForTesting), from: self.me) }
        // A KDF cost out of bounds is refused before anything is made.
        assertCode(.param) {
            try broker.handle(.create(path: path + "2", password: Array("pw".utf8), scrypt: ScryptParameters(n: 3)), from: self.me)
        }
    }

    /// Issue 54: `--rotate-keys` through the broker: new class keys made there, every row sealed
    /// again there (secrets never returned), the new keys kept unlocked, the pin's keybag the new one.
    func testARotationIsMadeInTheBroker() throws {
        let broker = service(security)
        let exchange: @Sendable (BrokerRequest) throws -> BrokerReply = { [me] request in
            do { return try broker.handle(request, from: me) } catch let error as KeychainError { return .failure(error) }
        }
        KeychainStore.custodian = BrokerCustodian(exchange: exchange, answerer: nil)
        AccessList.creatorEntry = .executable("/usr/bin/security")
        defer {
            KeychainStore.custodian = nil
            AccessList.creatorEntry = nil
        }
        let made = try KeychainStore.create(at: scratch.directory + "/keychains/rotated.keychain-db", password: Array("pw".utf8), scrypt: .fastForTesting)
        _ = try made.add(generic("alice", secret: "s3cret"))
        _ = try made.add(generic("dave", secret: "d", protection: .always))
        let old = keybag(made)
        assertCode(.authFailed) {
            try broker.handle(.rotateBegin(old, password: Array("no".utf8), newPassword: nil, scrypt: .fastForTesting), from: self.me)
        }
        assertCode(.param) { try broker.handle(.rotateRows(keychain: old.uuid, rows: []), from: self.me) }

        try made.rotateKeys(password: Array("pw".utf8), newPassword: Array("new".utf8), scrypt: .fastForTesting)
        XCTAssertEqual(made.storage, .broker)
        XCTAssertEqual(try secretString(made, query("alice")), "s3cret")
        XCTAssertNotEqual(made.keybag.keyD, try Keybag(fields: old.fields).keyD)
        XCTAssertEqual(broker.notes.filter { $0.hasSuffix("keys rotated") }.count, 1)
        guard case .state(let stale) = try broker.handle(.state(old), from: me) else { return XCTFail() }
        XCTAssertTrue(stale.open.isEmpty, "the old keybag opens nothing the broker holds now")
        XCTAssertEqual(broker.state.pins[1000]?[made.path]?.fields, keybag(made).fields)
        assertCode(.param) { try broker.handle(.rotateCommit(self.keybag(made)), from: self.me) }
        // The file opens with the new password alone, anywhere: its Always item too.
        KeychainStore.custodian = nil
        let elsewhere = try KeychainStore.open(at: made.path, storage: .process)
        try elsewhere.unlock(password: Array("new".utf8))
        XCTAssertEqual(try secretString(elsewhere, query("alice")), "s3cret")
        XCTAssertEqual(try secretString(elsewhere, query("dave")), "d")
    }

    /// Issue 54: the first unlock of a keychain in the broker says so (its keys were in the user's
    /// reach before), once: logged with the advice, and flagged in the reply.
    func testTheFirstUnlockInTheBrokerAdvisesARotation() throws {
        let broker = service(security)
        guard case .unlocked(first: true) = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me) else { return XCTFail() }
        XCTAssertEqual(broker.notes.filter { $0.contains("--rotate-keys") }.count, 1)
        XCTAssertTrue(broker.state.log.entries(of: 1000, since: 0).isEmpty, "not an item's access: not in the user's log")
        guard case .unlocked(first: false) = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me) else { return XCTFail() }
        let reply = try BrokerReply.decode(BrokerReply.unlocked(first: true).encoded(), for: .unlock)
        guard case .unlocked(first: true) = reply else { return XCTFail() }
    }

    /// Issue 54: pins live in a folder that outlives a reboot; a broker that starts with an empty
    /// state (a new /run) still refuses another keychain at a pinned path.
    func testPinsOutliveAFreshState() throws {
        let pins = scratch.directory + "/pins"
        XCTAssertEqual(mkdir(pins, 0o700), 0)
        let first = BrokerStateStore(directory: scratch.directory + "/run1", pinsDirectory: pins)
        mkdir(first.directory, 0o700)
        let broker = service(security, store: first)
        _ = broker.handle(BrokerRequest.unlock(keybag(store), password: Array("pw".utf8)).encoded(), from: me)
        var st = stat()
        XCTAssertEqual(stat(pins + "/pins", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)

        // After a reboot: no state, the same pins folder.
        let second = BrokerStateStore(directory: scratch.directory + "/run2", pinsDirectory: pins)
        XCTAssertNil(try second.load(toSyslog: false))
        var state = BrokerState()
        state.pins = try XCTUnwrap(try second.loadPins())
        let rebooted = service(security, state: state, store: second)
        let other = try scratch.create("other", password: "evil")
        var swapped = keybag(other)
        swapped.path = store.path
        assertCode(.authFailed) { try rebooted.handle(.unlock(swapped, password: Array("evil".utf8)), from: self.me) }
        XCTAssertNoThrow(try rebooted.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me))
        // Forgetting it is kept too.
        _ = rebooted.handle(BrokerRequest.forget(path: store.path, password: Array("pw".utf8)).encoded(), from: me)
        XCTAssertEqual(try second.loadPins()?[1000]?.isEmpty ?? true, true)
        // A damaged pins file is reported, not taken for no pins.
        try PlainFiles.write(pins + "/pins", Array("garbage".utf8))
        XCTAssertThrowsError(try second.loadPins())
    }

    func testPinsPerUserAreBounded() throws {
        var state = BrokerState()
        for n in 0..<BrokerState.maximumPinsPerUser { state.pins[1000, default: [:]]["/k\(n)"] = Pin(uuid: [UInt8](repeating: 1, count: 16), fields: [:]) }
        let broker = service(security, state: state)
        assertCode(.param) { try broker.handle(.unlock(self.keybag(self.store), password: Array("pw".utf8)), from: self.me) }
        assertCode(.param) { try broker.handle(.create(path: "/k-new", password: Array("pw".utf8), scrypt: .fastForTesting), from: self.me) }
        // Another uid has room of its own.
        XCTAssertNoThrow(try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: BrokerPeer(uid: 1001, pid: getpid())))
    }

    func testOnlyRootNamesAnotherUid() throws {
        let broker = service(security)
        assertCode(.param) { try broker.handle(.lockAll, onBehalfOf: 1001, from: self.me) }
        XCTAssertNoThrow(try broker.handle(.lockAll, onBehalfOf: 1001, from: BrokerPeer(uid: 0, pid: getpid())))
    }

    func testMalformedMessagesGetAnErrorReply() throws {
        let broker = service(security)
        for message in [[], [0xff], Bytes(repeating: 2, count: 100)] as [Bytes] {
            guard case .failure = try BrokerReply.decode(broker.handle(message, from: me), for: .state) else { return XCTFail() }
        }
    }
}
