import CLinux
import Glibc
import KeychainBroker
import KeychainCore
import KeychainPeers
import KeychainTestSupport
import XCTest

/// A deputy's relayed caller (issue 55): the wire's marks, the deputy check, and the decision
/// made for the relayed process, not for the deputy.
final class RelayedCallerTests: XCTestCase {
    let item = ItemKeyRequest(
        keychain: Array(repeating: 7, count: 16), rowID: 4, itemClass: .key, lockClass: .whenUnlocked, metadata: [1], wrappedKey: [2], generation: 9)
    let agent = CallerRecord(
        entry: .executable("/usr/bin/keychain-ssh-agent"), canMatchSilently: true, summary: "keychain-ssh-agent (/usr/bin/keychain-ssh-agent)")
    let ssh = CallerRecord(entry: .executable("/usr/bin/ssh"), canMatchSilently: true, summary: "ssh (/usr/bin/ssh) ← bash")

    func testRelayMarksTravelInTheUnwrapsOpByte() throws {
        let request = BrokerRequest.unwrap(item, interaction: .allowed, answer: .none, password: [])
        let plain = request.encoded()
        XCTAssertEqual(plain[0], BrokerOp.unwrap.rawValue)
        XCTAssertEqual(RelayMarks.of(plain), [])
        for marks: RelayMarks in [[.relayedCaller], [.relayedCaller, .confirmEach]] {
            let bytes = request.encoded(relay: marks)
            XCTAssertEqual(bytes[0], BrokerOp.unwrap.rawValue | marks.rawValue)
            XCTAssertEqual(Array(bytes.dropFirst()), Array(plain.dropFirst()), "the marks change the op byte only")
            XCTAssertEqual(RelayMarks.of(bytes), marks)
            let (decoded, uid) = try BrokerRequest.decode(bytes)
            XCTAssertNil(uid)
            XCTAssertEqual(decoded.encoded(relay: marks), bytes)
        }
        XCTAssertEqual(RelayMarks.relayedCaller.rawValue, 0x40)
        XCTAssertEqual(RelayMarks.confirmEach.rawValue, 0x20)
        // With root's uid as well.
        let (_, uid) = try BrokerRequest.decode(request.encoded(onBehalfOf: 1000, relay: [.relayedCaller]))
        XCTAssertEqual(uid, 1000)
        // whoAmI may carry a relay (the Secret Service asks who stores an item); marks on any
        // other request, or confirmEach alone, are malformed.
        XCTAssertNoThrow(try BrokerRequest.decode(BrokerRequest.whoAmI.encoded(relay: [.relayedCaller])))
        XCTAssertThrowsError(try BrokerRequest.decode(BrokerRequest.lockAll.encoded(relay: [.relayedCaller])))
        XCTAssertThrowsError(try BrokerRequest.decode(BrokerRequest.wrap(item, itemKey: [1]).encoded(relay: [.relayedCaller])))
        XCTAssertThrowsError(try BrokerRequest.decode(request.encoded(relay: [.confirmEach])))
    }

    func testOnlyAnIdentifiedDeputyOnTheListRelays() {
        let decision = AccessDecision(deputies: ["/run/x/keychain-ssh-agent", "/usr/bin/keychain-ssh-agent"])
        XCTAssertTrue(decision.isDeputy(agent))
        XCTAssertTrue(AccessDecision().isDeputy(agent), "the default list names the installed agent")
        XCTAssertFalse(decision.isDeputy(ssh), "not on the list")
        var traced = agent
        traced.canMatchSilently = false
        traced.warnings = ["traced"]
        XCTAssertFalse(decision.isDeputy(traced))
        let interpreter = CallerRecord(
            entry: .interpreter("/usr/bin/keychain-ssh-agent"), canMatchSilently: true, isInterpreter: true, summary: "an interpreter")
        XCTAssertFalse(decision.isDeputy(interpreter))
        let unidentified = CallerRecord(entry: nil, canMatchSilently: false, summary: "a copy")
        XCTAssertFalse(decision.isDeputy(unidentified))
    }

    /// This process's own pidfd, as SO_PEERPIDFD gives it on one end of a socket pair.
    /// A pidfd of this process, as a deputy would pass its client's (pidfd_open: Linux 5.3).
    func ownPidfd() throws -> Int32 {
        let pidfd = clinux_pidfd_open(getpid())
        guard pidfd >= 0 else { throw XCTSkip("no pidfd_open") }
        return pidfd
    }

    /// A deputy asks several item keys for one client (the SSH agent, per signature), each with
    /// a new pidfd of it: the process is judged once while it runs the same image.
    func testARelayedProcessIsJudgedOncePerConnection() throws {
        final class Count: @unchecked Sendable { var value = 0 }
        let evaluations = Count()
        let peer = BrokerPeer(uid: 1000, pid: getpid())
        let evaluate: CallerEvaluator = { handle, uid in
            evaluations.value += 1
            return CallerRecord(CallerTrust.evaluate(handle, uid: uid))
        }
        var summaries: Set<String> = []
        for _ in 0..<3 {
            let relayed = try XCTUnwrap(RelayedProcess(pidfd: try ownPidfd(), marks: [.relayedCaller]))
            summaries.insert(peer.facts(of: relayed, evaluate).summary)
        }
        XCTAssertEqual(evaluations.value, 1)
        XCTAssertEqual(summaries.count, 1, "\(summaries)")
    }

    /// A shell that waits for a line on its stdin, then runs sleep in its place: a client of the
    /// SSH agent, which the broker judges as it connects and which may exec before it signs.
    final class Client {
        let pid: pid_t
        private let input: Int32

        init() throws {
            var fds: [Int32] = [-1, -1]
            XCTAssertEqual(clinux_pipe_cloexec(&fds), 0)
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
            let words: [String] = ["/bin/sh", "-c", "read line; exec /usr/bin/sleep 1000"]
            let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            var child: pid_t = 0
            let status = posix_spawn(&child, "/bin/sh", &actions, nil, argv, nil)
            close(fds[0])
            input = fds[1]
            guard status == 0 else { throw XCTSkip("no /bin/sh") }
            pid = child
            var real = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            XCTAssertNotNil(realpath("/bin/sh", &real))
            try waitForExec(of: String(cString: real))
        }

        deinit {
            kill(pid, SIGKILL)
            while waitpid(pid, nil, 0) < 0 && errno == EINTR {}
            close(input)
        }

        /// A new pidfd of it, as the agent passes with each request it relays.
        func relayed() throws -> RelayedProcess {
            try XCTUnwrap(RelayedProcess(pidfd: clinux_pidfd_open(pid), marks: [.relayedCaller]))
        }

        /// Has it exec sleep, and waits until it runs it (bounded only so that a broken test ends).
        func exec() throws {
            XCTAssertEqual(write(input, "go\n", 3), 3)
            try waitForExec(of: "/usr/bin/sleep")
        }

        private func waitForExec(of path: String) throws {
            for _ in 0..<6000 {
                if ProcessLineage.executable(of: pid) == path {
                    // Asleep: the loader has mapped its libraries (`CallerTrust.stillSame` would
                    // see one mapped after a judging).
                    for _ in 0..<500 where !(PlainFiles.read("/proc/\(pid)/wchan").map { String(decoding: $0, as: UTF8.self).contains("sleep") } ?? true) {
                        usleep(10_000)
                    }
                    return
                }
                usleep(10_000)
            }
            XCTFail("\(pid) never ran \(path)")
        }
    }

    final class Evaluations: @unchecked Sendable {
        var count = 0
        var evaluate: CallerEvaluator {
            { handle, uid in
                self.count += 1
                return CallerRecord(CallerTrust.evaluate(handle, uid: uid))
            }
        }
    }

    /// The agent has each client judged as it connects (a relayed whoAmI sent ahead) and relays
    /// it again for the signature's unwrap: clients that connect at once are each judged once,
    /// not again because another was judged in between.
    func testClientsJudgedAheadStayJudgedWhileOthersAreJudged() throws {
        let evaluations = Evaluations()
        let peer = BrokerPeer(uid: 0, pid: getpid())
        let first = try Client(), second = try Client()
        // Each judged ahead (a whoAmI), then its unwraps: the first checks its mappings too.
        for (client, forKey) in [(first, false), (second, false), (first, true), (second, true), (second, true), (first, true)] {
            let facts = peer.facts(of: try client.relayed(), forKey: forKey, evaluations.evaluate)
            XCTAssertEqual((facts as? CallerRecord)?.caller?.pid, client.pid, "each judged as itself")
        }
        XCTAssertEqual(evaluations.count, 2)
    }

    /// A client judged ahead that runs another program before it signs is judged again: the
    /// judging ahead vouches for the program it read, and nothing after an exec.
    func testAClientThatExecsAfterItsJudgingAheadIsJudgedAgain() throws {
        let evaluations = Evaluations()
        let peer = BrokerPeer(uid: 0, pid: getpid())
        let client = try Client()
        let ahead = peer.facts(of: try client.relayed(), forKey: false, evaluations.evaluate)
        XCTAssertTrue(ahead.summary.contains("sh"), ahead.summary)
        XCTAssertFalse(ahead.summary.contains("sleep"), ahead.summary)
        try client.exec()
        let signing = peer.facts(of: try client.relayed(), evaluations.evaluate)
        XCTAssertEqual(evaluations.count, 2)
        XCTAssertTrue(signing.summary.contains("/usr/bin/sleep"), signing.summary)
        XCTAssertEqual(signing.entry, .executable("/usr/bin/sleep"))
    }

    func testTheRelayedProcessIsJudgedAndNamedWithItsDeputy() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let store = try scratch.create(password: "pw")
        var listed = generic("key")
        listed.attributes[AccessList.attribute] = .string("exe:/usr/bin/ssh")
        _ = try store.add(listed)
        let stmt = try store.db.statement("SELECT rowid, class, lockclass, metadata, secret FROM items ORDER BY rowid DESC LIMIT 1")
        XCTAssertTrue(try stmt.step())
        var r = ByteReader(stmt.blob(4))
        let request = ItemKeyRequest(
            keychain: store.keybag.uuid, rowID: stmt.int(0), itemClass: ItemClass(code: stmt.int(1))!, lockClass: LockClass(rawValue: stmt.int(2))!,
            metadata: stmt.blob(3), wrappedKey: try r.blob())
        var fields: [String: Bytes] = [:]
        for (name, value) in store.keybag.fields { fields[name] = value }
        let keybag = CustodyKeybag(uuid: store.keybag.uuid, fields: fields, path: store.path)

        func broker(deputies: [String], peer: BrokerPeer) throws -> BrokerService {
            var state = BrokerState()
            state.log.toSyslog = false
            let agent = self.agent, ssh = self.ssh
            // The peer's own handle is the deputy's; any other, the relayed process's.
            let service = BrokerService(
                decision: AccessDecision(deputies: deputies), evaluate: { handle, _ in handle === peer.handle ? agent : ssh }, state: state)
            _ = try service.handle(.unlock(keybag, password: Array("pw".utf8)), from: peer)
            return service
        }
        func relayed(_ peer: BrokerPeer, _ marks: RelayMarks) throws -> BrokerPeer {
            peer.relayed = try XCTUnwrap(RelayedProcess(pidfd: try ownPidfd(), marks: marks))
            return peer
        }
        let unwrap = BrokerRequest.unwrap(request, interaction: .allowed, answer: .none, password: [])

        // The agent itself is not on the list; the ssh it relays is, and gets the key silently.
        let peer = BrokerPeer(uid: 1000, pid: getpid())
        var service = try broker(deputies: ["/usr/bin/keychain-ssh-agent"], peer: peer)
        guard case .question = try service.handle(unwrap, from: peer) else { return XCTFail("the agent as itself is asked") }
        guard case .key = try service.handle(unwrap, from: try relayed(peer, [.relayedCaller])) else { return XCTFail("ssh is on the list") }
        let entry = try XCTUnwrap(service.state.log.entries(of: 1000, since: 0).last)
        XCTAssertEqual(entry.decision, "trusted")
        XCTAssertEqual(entry.caller, "ssh (/usr/bin/ssh) ← bash, through keychain-ssh-agent (/usr/bin/keychain-ssh-agent)")

        // whoAmI relayed: the served program, as an item it stores is to trust it.
        guard case .caller(let relayedCaller) = try service.handle(.whoAmI, from: try relayed(peer, [.relayedCaller])) else {
            return XCTFail("whoAmI answers")
        }
        XCTAssertEqual(relayedCaller.entry, "exe:/usr/bin/ssh")
        peer.relayed = nil
        guard case .caller(let itself) = try service.handle(.whoAmI, from: peer) else { return XCTFail("whoAmI answers") }
        XCTAssertEqual(itself.entry, "exe:/usr/bin/keychain-ssh-agent")

        // confirmEach: asked although listed, and "always" writes no entry.
        guard case .question(let text) = try service.handle(unwrap, from: try relayed(peer, [.relayedCaller, .confirmEach])) else {
            return XCTFail("a -c key asks")
        }
        XCTAssertTrue(text.hasPrefix("ssh (/usr/bin/ssh) ← bash, through keychain-ssh-agent"), text)
        let always = BrokerRequest.unwrap(request, interaction: .allowed, answer: .always, password: Array("pw".utf8))
        guard case .key(_, let written) = try service.handle(always, from: try relayed(peer, [.relayedCaller, .confirmEach])) else {
            return XCTFail()
        }
        XCTAssertEqual(written, "")

        // A program that is no deputy passing a pidfd: refused, and logged.
        let other = BrokerPeer(uid: 1000, pid: getpid())
        service = try broker(deputies: ["/usr/bin/keychain-secret-service"], peer: other)
        XCTAssertThrowsError(try service.handle(unwrap, from: try relayed(other, [.relayedCaller]))) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .param)
        }
        XCTAssertEqual(service.state.log.entries(of: 1000, since: 0).last?.decision, "refused: relayed a caller, not a deputy")
        XCTAssertThrowsError(try service.handle(.whoAmI, from: try relayed(other, [.relayedCaller])), "nor may it borrow a name through whoAmI")
    }
}
