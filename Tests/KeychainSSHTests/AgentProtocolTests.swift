import Foundation
import KeychainCore
import KeychainSSH
import XCTest

final class AgentProtocolTests: XCTestCase {
    let clock = TestClock()
    let recorder = Recorder()

    func makeAgent(_ change: (inout AgentConfiguration) -> Void = { _ in }) -> Agent {
        var configuration = AgentConfiguration()
        let clock = clock
        let recorder = recorder
        configuration.clock = { clock.now }
        configuration.log = { recorder.lines.append($0) }
        configuration.unlockDelay = { recorder.delays.append($0) }
        configuration.confirm = { request in
            recorder.requests.append(request)
            return recorder.answer
        }
        change(&configuration)
        return Agent(configuration: configuration)
    }

    func client(_ agent: Agent, program: String? = "/usr/bin/ssh") -> AgentClient {
        AgentClient(connection: AgentConnection(agent: agent, peer: AgentPeer(uid: getuid(), pid: 1, executable: program)))
    }

    func testAddListSignRemoveEveryKind() throws {
        let client = client(makeAgent())
        for key in TestKeys.all {
            XCTAssertEqual(client.add(key.serialized, comment: key.comment), [6])
        }
        let listed = client.list()
        XCTAssertEqual(listed.map(\.blob), TestKeys.all.map(\.publicBlob))
        XCTAssertEqual(listed.map(\.comment), ["ed", "ec", "rsa"])
        let data = Array("to sign".utf8)
        for key in TestKeys.all {
            for flags in [UInt32(0), 2, 4] {
                let signature = try XCTUnwrap(client.sign(key.publicBlob, data, flags: flags))
                XCTAssertTrue(SSHPublicKey.verify(signature: signature, of: data, by: key.publicBlob))
            }
        }
        // Adding the same key again replaces it (a new comment), not a second entry.
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "renamed"), [6])
        XCTAssertEqual(client.list().map(\.comment), ["renamed", "ec", "rsa"])
        XCTAssertEqual(client.remove(TestKeys.ecdsa.publicBlob), [6])
        XCTAssertEqual(client.remove(TestKeys.ecdsa.publicBlob), [5])
        XCTAssertNil(client.sign(TestKeys.ecdsa.publicBlob, data))
        XCTAssertEqual(client.list().count, 2)
        XCTAssertEqual(client.send { $0.u8(19) }, [6])
        XCTAssertEqual(client.list().count, 0)
        XCTAssertEqual(client.add(TestKeys.rsa.serialized), [6])
        // SSH1's remove-all, which ssh-agent still honours.
        XCTAssertEqual(client.send { $0.u8(9) }, [6])
        XCTAssertEqual(client.list().count, 0)
    }

    func testCertificateIdentity() throws {
        let key = try OpenSSHTools.generate("ecdsa", bits: 256)
        let certificate = try OpenSSHTools.certify(key)
        var serialized = ByteWriter()
        serialized.string("ecdsa-sha2-nistp256-cert-v01@openssh.com")
        serialized.blob(certificate)
        serialized.raw(SSHKeyTests.certificatePrivateFields(of: key, type: "ecdsa"))
        let client = client(makeAgent())
        XCTAssertEqual(client.add(serialized.bytes, comment: "cert"), [6])
        XCTAssertEqual(client.list().map(\.blob), [certificate])
        let signature = try XCTUnwrap(client.sign(certificate, [1, 2, 3]))
        XCTAssertTrue(SSHPublicKey.verify(signature: signature, of: [1, 2, 3], by: key.publicBlob))
    }

    func testLockAndUnlock() {
        let agent = makeAgent()
        let client = client(agent)
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized), [6])
        XCTAssertEqual(client.passphrase(22, ""), [5], "an empty passphrase is not supported")
        XCTAssertEqual(client.passphrase(22, "secret"), [6])
        XCTAssertEqual(client.passphrase(22, "secret"), [5], "already locked")
        XCTAssertEqual(client.list().count, 0)
        XCTAssertNil(client.sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertEqual(client.add(TestKeys.rsa.serialized), [5])
        XCTAssertEqual(client.send { $0.u8(19) }, [5])
        XCTAssertEqual(
            client.send {
                $0.u8(27); $0.string("query")
            }, [5])
        // ssh binds new sessions through a locked agent.
        XCTAssertEqual(client.bind(TestKeys.host1, sessionID: [1], forwarded: true), [6])
        XCTAssertEqual(client.passphrase(23, "wrong"), [5])
        XCTAssertEqual(client.passphrase(23, "wrong again"), [5])
        XCTAssertEqual(recorder.delays, [0.1, 0.2])
        XCTAssertEqual(client.passphrase(23, "secret"), [6])
        XCTAssertEqual(client.list().count, 1)
        XCTAssertNotNil(client.sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertEqual(client.passphrase(23, "secret"), [5], "not locked")
        // The delay starts again after a success.
        XCTAssertEqual(client.passphrase(22, "other"), [6])
        XCTAssertEqual(client.passphrase(23, "x"), [5])
        XCTAssertEqual(recorder.delays.last, 0.1)
    }

    func testLifetimeExpires() {
        let client = client(makeAgent())
        XCTAssertEqual(
            client.add(
                TestKeys.ed25519.serialized,
                constraints: {
                    $0.u8(1); $0.u32(10)
                }), [6])
        XCTAssertEqual(client.add(TestKeys.ecdsa.serialized), [6])
        clock.now += 9
        XCTAssertEqual(client.list().count, 2)
        clock.now += 1
        XCTAssertEqual(client.list().map(\.blob), [TestKeys.ecdsa.publicBlob])
        XCTAssertNil(client.sign(TestKeys.ed25519.publicBlob, [1]))

        let timed = self.client(makeAgent { $0.defaultLifetime = 5 })
        XCTAssertEqual(timed.add(TestKeys.rsa.serialized), [6])
        clock.now += 5
        XCTAssertEqual(timed.list().count, 0)
    }

    /// An approval given to ssh for one destination must not sign for a connection that ssh
    /// forwarded from that host (the same program asks), nor for another host.
    func testRememberedApprovalIsForTheSameRoute() {
        let agent = makeAgent { $0.rememberConfirmation = 60 }
        XCTAssertEqual(client(agent).add(TestKeys.ed25519.serialized, constraints: { $0.u8(2) }), [6])
        var sessionID: UInt8 = 0
        // Signs over a new connection bound along `hops`; the number of prompts so far.
        func sign(over hops: [(SSHPrivateKey, forwarded: Bool)]) -> Int {
            let connection = client(agent)
            for (key, forwarded) in hops {
                sessionID += 1
                XCTAssertEqual(connection.bind(key, sessionID: [sessionID], forwarded: forwarded), [6])
            }
            // ssh's login in the session bound last, or a signature with no host to log in to.
            let key = TestKeys.ed25519.publicBlob
            let data = hops.last?.forwarded == false ? userauthRequest(sessionID: [sessionID], user: "u", key: key) : [1]
            XCTAssertEqual(connection.sign(key, data) != nil, recorder.answer)
            return recorder.requests.count
        }
        XCTAssertEqual(sign(over: [(TestKeys.host1, false)]), 1)
        XCTAssertEqual(sign(over: [(TestKeys.host1, false)]), 1)
        recorder.answer = false
        XCTAssertEqual(sign(over: [(TestKeys.host1, true), (TestKeys.host2, false)]), 2)
        let host1 = "the host with key " + SSHPublicKey.fingerprint(of: TestKeys.host1.publicBlob)
        let host2 = "the host with key " + SSHPublicKey.fingerprint(of: TestKeys.host2.publicBlob)
        XCTAssertEqual(recorder.requests.last?.destination, AccessQuestion.Destination(host: host2, forwardedThrough: [host1]))
        XCTAssertEqual(sign(over: [(TestKeys.host2, false)]), 3)
        XCTAssertEqual(sign(over: []), 4)
        XCTAssertNil(recorder.requests.last?.destination)
        // A program on host1, where the agent is forwarded, signs there.
        XCTAssertEqual(sign(over: [(TestKeys.host1, true)]), 5)
        XCTAssertEqual(recorder.requests.last?.destination, AccessQuestion.Destination(host: nil, forwardedThrough: [host1]))
    }

    /// A session-bind proves only that the client saw a session with that host: a program can
    /// bind its own connection to a host the person trusts, then ask for a signature over
    /// something else (a commit, a login elsewhere). The question names the host logged in to
    /// only for a user authentication in the session bound last, and an approval remembered for
    /// that login does not cover the rest.
    func testTheHostIsNamedOnlyForALoginInTheBoundSession() {
        let agent = makeAgent { $0.rememberConfirmation = 60 }
        let key = TestKeys.ed25519.publicBlob
        XCTAssertEqual(client(agent).add(TestKeys.ed25519.serialized, constraints: { $0.u8(2) }), [6])
        let host1 = "the host with key " + SSHPublicKey.fingerprint(of: TestKeys.host1.publicBlob)
        let host2 = "the host with key " + SSHPublicKey.fingerprint(of: TestKeys.host2.publicBlob)
        let bound = client(agent)
        XCTAssertEqual(bound.bind(TestKeys.host1, sessionID: [7], forwarded: false), [6])
        XCTAssertNotNil(bound.sign(key, userauthRequest(sessionID: [7], user: "u", key: key)))
        XCTAssertEqual(recorder.requests.last?.destination, AccessQuestion.Destination(host: host1))
        XCTAssertEqual(recorder.requests.count, 1)
        let others: [Bytes] = [
            Array("a commit".utf8), userauthRequest(sessionID: [8], user: "u", key: key),
            userauthRequest(sessionID: [7], user: "u", key: key, hostKey: TestKeys.host2.publicBlob)
        ]
        // Asked again, not remembered from the login; then remembered as what it is.
        for data in others {
            XCTAssertNotNil(bound.sign(key, data))
            XCTAssertEqual(recorder.requests.count, 2)
            XCTAssertNil(recorder.requests.last?.destination)
        }
        // Through a forwarded hop: only that the request comes through host1 is known.
        let forwarded = client(agent)
        XCTAssertEqual(forwarded.bind(TestKeys.host1, sessionID: [9], forwarded: true), [6])
        XCTAssertEqual(forwarded.bind(TestKeys.host2, sessionID: [10], forwarded: false), [6])
        XCTAssertNotNil(forwarded.sign(key, Array("a commit".utf8)))
        XCTAssertEqual(recorder.requests.last?.destination, AccessQuestion.Destination(host: nil, forwardedThrough: [host1]))
        XCTAssertNotNil(forwarded.sign(key, userauthRequest(sessionID: [10], user: "u", key: key, hostKey: TestKeys.host2.publicBlob)))
        XCTAssertEqual(recorder.requests.last?.destination, AccessQuestion.Destination(host: host2, forwardedThrough: [host1]))
        XCTAssertEqual(recorder.requests.count, 4)
    }

    /// One question at a time, as gpg-agent shows one pinentry: a program that watches for the
    /// person's expected dialog cannot put its own up beside it, to be allowed in the same
    /// click. Two signatures asked at once: the second question waits for the first answer.
    func testOneQuestionAtATime() throws {
        let overlap = Overlap()
        let agent = makeAgent { $0.confirm = { _ in overlap.ask() } }
        XCTAssertEqual(client(agent).add(TestKeys.ed25519.serialized, constraints: { $0.u8(2) }), [6])
        let group = DispatchGroup()
        for connection in [client(agent), client(agent)] {
            DispatchQueue.global().async(group: group) { XCTAssertNotNil(connection.sign(TestKeys.ed25519.publicBlob, [1])) }
        }
        group.wait()
        XCTAssertEqual(overlap.asked, 2)
        XCTAssertEqual(overlap.most, 1)
    }

    /// A peer whose executable the kernel would not name is asked each time.
    func testNoApprovalIsRememberedForAnUnnamedProgram() {
        let agent = makeAgent { $0.rememberConfirmation = 60 }
        let unnamed = client(agent, program: nil)
        XCTAssertEqual(unnamed.add(TestKeys.ed25519.serialized, constraints: { $0.u8(2) }), [6])
        XCTAssertNotNil(unnamed.sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertNotNil(client(agent, program: nil).sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertEqual(recorder.requests.count, 2)
    }

    func testConfirmRefusedAcceptedAndRemembered() throws {
        let agent = makeAgent { $0.rememberConfirmation = 60 }
        let client = client(agent, program: "/usr/bin/git")
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "work", constraints: { $0.u8(2) }), [6])
        recorder.answer = false
        XCTAssertNil(client.sign(TestKeys.ed25519.publicBlob, [1]))
        let expected = AccessQuestion(
            asker: .init(executable: "/usr/bin/git"), target: .sshKey(comment: "work", fingerprint: SSHPublicKey.fingerprint(of: TestKeys.ed25519.publicBlob)))
        XCTAssertEqual(recorder.requests, [expected])
        recorder.answer = true
        XCTAssertNotNil(client.sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertEqual(recorder.requests.count, 2)
        // Remembered for this program and key, not for another program.
        XCTAssertNotNil(client.sign(TestKeys.ed25519.publicBlob, [2]))
        XCTAssertEqual(recorder.requests.count, 2)
        XCTAssertNotNil(self.client(agent, program: "/usr/bin/ssh").sign(TestKeys.ed25519.publicBlob, [2]))
        XCTAssertEqual(recorder.requests.count, 3)
        clock.now += 61
        XCTAssertNotNil(client.sign(TestKeys.ed25519.publicBlob, [3]))
        XCTAssertEqual(recorder.requests.count, 4)

        // Without rememberConfirmation, every signature asks.
        let asking = self.client(makeAgent())
        XCTAssertEqual(asking.add(TestKeys.ecdsa.serialized, constraints: { $0.u8(2) }), [6])
        XCTAssertNotNil(asking.sign(TestKeys.ecdsa.publicBlob, [1]))
        XCTAssertNotNil(asking.sign(TestKeys.ecdsa.publicBlob, [1]))
        XCTAssertEqual(recorder.requests.count, 6)
        // A session-bind names the host by its key when no destination constraint named it.
        XCTAssertEqual(asking.bind(TestKeys.host1, sessionID: [1], forwarded: false), [6])
        XCTAssertNotNil(asking.sign(TestKeys.ecdsa.publicBlob, userauthRequest(sessionID: [1], user: "u", key: TestKeys.ecdsa.publicBlob)))
        XCTAssertEqual(recorder.requests.last?.host, "the host with key " + SSHPublicKey.fingerprint(of: TestKeys.host1.publicBlob))
        XCTAssertEqual(recorder.requests.count, 7)
        // An unconstrained key never asks.
        XCTAssertEqual(asking.add(TestKeys.rsa.serialized), [6])
        XCTAssertNotNil(asking.sign(TestKeys.rsa.publicBlob, [1]))
        XCTAssertEqual(recorder.requests.count, 7)
    }

    func testExtensions() {
        let client = client(makeAgent())
        var expected = ByteWriter()
        expected.u8(29)
        expected.string("query")
        expected.string("session-bind@openssh.com")
        XCTAssertEqual(
            client.send {
                $0.u8(27); $0.string("query")
            }, expected.bytes)
        XCTAssertEqual(
            client.send {
                $0.u8(27); $0.string("no-such@example.com")
            }, [5])
        XCTAssertEqual(client.send { $0.u8(27) }, [5])
        let sessionID = Array(repeating: UInt8(7), count: 32)
        XCTAssertEqual(client.bind(TestKeys.host1, sessionID: sessionID, forwarded: false, signature: try! TestKeys.host2.sign(sessionID, flags: 0)), [28])
        XCTAssertEqual(client.bind(TestKeys.host1, sessionID: Array(repeating: 1, count: 129), forwarded: false), [28])
        XCTAssertEqual(client.bind(TestKeys.host1, sessionID: sessionID, forwarded: false), [6])
        // A connection bound for authentication takes no further binding.
        XCTAssertEqual(client.bind(TestKeys.host2, sessionID: [1, 2], forwarded: true), [28])
    }

    func testBindingsAreCapped() {
        let client = client(makeAgent())
        for index in 0..<16 { XCTAssertEqual(client.bind(TestKeys.host1, sessionID: [UInt8(index)], forwarded: true), [6]) }
        XCTAssertEqual(client.bind(TestKeys.host1, sessionID: [1], forwarded: true), [6], "already recorded")
        XCTAssertEqual(client.bind(TestKeys.host2, sessionID: [1], forwarded: true), [28], "a session ID under another key")
        XCTAssertEqual(client.bind(TestKeys.host1, sessionID: [99], forwarded: true), [28])
    }

    func testUnsupportedAndHostileMessages() {
        let agent = makeAgent { $0.maximumIdentities = 2 }
        let client = client(agent)
        for type: UInt8 in [0, 1, 2, 3, 7, 8, 20, 21, 24, 26, 30, 100, 255] {
            XCTAssertEqual(
                client.send {
                    $0.u8(type); $0.string("/usr/lib/opensc-pkcs11.so"); $0.string("1234")
                }, [5], "type \(type)")
        }
        XCTAssertNil(client.connection.reply(to: []))
        XCTAssertNil(client.connection.reply(to: [13] + Bytes(repeating: 0, count: 256 * 1024)))
        // Truncated requests of every kind.
        var sign = ByteWriter()
        sign.u8(13)
        sign.blob(TestKeys.ed25519.publicBlob)
        sign.blob([1, 2, 3])
        sign.u32(0)
        for length in 1..<sign.bytes.count { XCTAssertEqual(client.connection.reply(to: Array(sign.bytes[0..<length])), [5]) }
        var add = ByteWriter()
        add.u8(17)
        add.raw(TestKeys.ed25519.serialized)
        add.string("c")
        for length in 1..<add.bytes.count { XCTAssertEqual(client.connection.reply(to: Array(add.bytes[0..<length])), [5]) }
        // Lengths that claim more than is there.
        XCTAssertEqual(client.connection.reply(to: [13, 0xff, 0xff, 0xff, 0xff, 1]), [5])
        XCTAssertEqual(client.connection.reply(to: [17, 0x7f, 0xff, 0xff, 0xff]), [5])
        XCTAssertEqual(client.connection.reply(to: [18, 0, 0, 0, 40, 1]), [5])
        // Constraints: unknown, repeated, not valid here, security-key providers.
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, constraints: { $0.u8(3) }), [5])
        XCTAssertEqual(
            client.add(
                TestKeys.ed25519.serialized,
                constraints: {
                    $0.u8(2); $0.u8(2)
                }), [5])
        XCTAssertEqual(
            client.add(
                TestKeys.ed25519.serialized,
                constraints: {
                    $0.u8(1); $0.u32(1); $0.u8(1); $0.u32(2)
                }), [5])
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, constraints: { $0.u8(1) }), [5])
        for name in ["associated-certs-v00@openssh.com", "sk-provider@openssh.com", "other@example.com"] {
            XCTAssertEqual(
                client.add(
                    TestKeys.ed25519.serialized,
                    constraints: {
                        $0.u8(255); $0.string(name); $0.u8(0); $0.blob([])
                    }), [5], name)
        }
        // Destination constraints that ssh-agent finds inconsistent or incomplete.
        let host = TestKeys.host1.publicBlob
        for bad in [
            destinationConstraint(from: hop(host: "a"), to: hop(host: "b", keys: [(host, false)])),
            destinationConstraint(from: hop(), to: hop(host: "b")),
            destinationConstraint(from: hop(), to: hop(keys: [(host, false)])),
            destinationConstraint(from: hop(user: "u"), to: hop(host: "b", keys: [(host, false)])),
            destinationConstraint(from: hop(), to: hop(user: String(repeating: "u", count: 257), host: "b", keys: [(host, false)])),
            destinationConstraint(from: hop(), to: hop(host: "b", keys: [([0, 0, 0, 1, 0x41], false)]))
        ] {
            XCTAssertEqual(client.add(TestKeys.ed25519.serialized, constraints: restrictDestination([bad])), [5])
        }
        // At most 1024 destination constraints (AGENT_MAX_DEST_CONSTRAINTS).
        let good = destinationConstraint(from: hop(), to: hop(host: "h", keys: [(host, false)]))
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, constraints: restrictDestination(Array(repeating: good, count: 1025))), [5])
        // A TPM key's internal form is not a wire type.
        var tpm = ByteWriter()
        tpm.string(SSHPrivateKey.tpmKeyType)
        tpm.blob(Array(TestKeys.host2.publicBlob.suffix(65)))
        tpm.blob([1])
        XCTAssertEqual(client.add(tpm.bytes), [5])
        XCTAssertEqual(client.list().count, 0, "nothing was added by any of these")
        // The cap on identities; replacing a held key is still allowed.
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized), [6])
        XCTAssertEqual(client.add(TestKeys.ecdsa.serialized), [6])
        XCTAssertEqual(client.add(TestKeys.rsa.serialized), [5])
        XCTAssertEqual(client.add(TestKeys.ecdsa.serialized, comment: "again"), [6])
        // Random bytes after every message type: an answer, never a crash.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let type = UInt8.random(in: 0...30, using: &generator)
            let body = (0..<Int.random(in: 0...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            guard ![9, 19, 22, 23].contains(type) else { continue }
            XCTAssertNotNil(client.connection.reply(to: [type] + body))
        }
        XCTAssertEqual(client.list().count, 2)
    }
}

/// Counts the questions asked at once: each stays open a while, for another to come in beside it.
final class Overlap: @unchecked Sendable {
    private let condition = NSCondition()
    private var inside = 0
    private(set) var most = 0
    private(set) var asked = 0

    func ask() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        inside += 1
        asked += 1
        most = max(most, inside)
        condition.broadcast()
        // Not a timed assertion: one question at a time passes however slow the machine.
        _ = condition.wait(until: Date(timeIntervalSinceNow: 2))
        inside -= 1
        return true
    }
}
