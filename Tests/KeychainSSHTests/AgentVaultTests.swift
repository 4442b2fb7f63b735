import Foundation
import KeychainCore
import KeychainSSH
import KeychainTestSupport
import XCTest

final class AgentVaultTests: StoreTestCase {
    let recorder = Recorder()

    func makeAgent(_ change: (inout AgentConfiguration) -> Void = { _ in }) -> (Agent, AgentClient) {
        var configuration = AgentConfiguration()
        let recorder = recorder
        configuration.vault = SSHKeyVault(store: store)
        configuration.log = { recorder.lines.append($0) }
        configuration.confirm = { request in
            recorder.requests.append(request)
            return recorder.answer
        }
        change(&configuration)
        let agent = Agent(configuration: configuration)
        return (agent, AgentClient(connection: AgentConnection(agent: agent, peer: AgentPeer(uid: getuid(), pid: 1, executable: "/usr/bin/ssh"))))
    }

    func keyItems() throws -> [Item] {
        do {
            return try store.find(Query(itemClass: .key), limit: nil, includeSecret: true)
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }

    /// With a broker (a relay), a client is judged ahead as it connects (its pidfd passed at
    /// once), so that the broker's judging overlaps the listing before its signature; not while
    /// the keychain holds no key this agent would relay, nor without a relay or a pidfd.
    func testAClientIsJudgedAheadAsItConnectsWhileTheKeychainHoldsKeys() throws {
        final class Judged: @unchecked Sendable { var count = 0 }
        let judged = Judged()
        let (agent, client) = makeAgent {
            $0.relay = { _, body in body() }
            $0.judgeAhead = { _ in judged.count += 1 }
        }
        @discardableResult
        func connect(_ agent: Agent, pinned: Bool = true) -> AgentClient {
            let pidfd = pinned ? PeerPidfd(adopting: open("/dev/null", O_RDONLY | O_CLOEXEC)) : nil
            return AgentClient(connection: AgentConnection(agent: agent, peer: AgentPeer(uid: getuid(), pid: 1, executable: "/usr/bin/ssh", pidfd: pidfd)))
        }
        XCTAssertEqual(judged.count, 0, "makeAgent's client has no pidfd")
        connect(agent)
        XCTAssertEqual(judged.count, 1, "the keychain not read yet: it may hold keys")
        XCTAssertTrue(client.list().isEmpty)
        connect(agent)
        XCTAssertEqual(judged.count, 1, "an empty keychain: no signature can be relayed")
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "laptop"), [6])
        XCTAssertEqual(client.list().count, 1)
        connect(agent)
        connect(agent, pinned: false)
        XCTAssertEqual(judged.count, 2, "a key kept: judged ahead, where the kernel named the client by a pidfd")
        XCTAssertEqual(client.send { $0.u8(19) }, [6])
        connect(agent)
        XCTAssertEqual(judged.count, 2, "every key unloaded from this agent (ssh-add -D)")
        let (plain, _) = makeAgent { $0.judgeAhead = { _ in judged.count += 1 } }
        connect(plain)
        XCTAssertEqual(judged.count, 2, "without a broker's relay, nothing is judged")
    }

    func testKeysAreKeychainItemsAndSurviveARestart() throws {
        let (_, client) = makeAgent()
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "laptop"), [6])
        XCTAssertEqual(client.add(TestKeys.rsa.serialized, comment: "old", constraints: { $0.u8(2) }), [6])
        let items = try keyItems()
        XCTAssertEqual(items.count, 2)
        let item = try XCTUnwrap(items.first { $0[AttributeKey.label] == .string("laptop") })
        XCTAssertEqual(item[AttributeKey.keyClass], .int(KeyClass.private.rawValue))
        XCTAssertEqual(item[AttributeKey.keyType], .int(OpenSSHKeyItem.keyType))
        XCTAssertEqual(item[AttributeKey.keySizeInBits], .int(256))
        XCTAssertEqual(item[AttributeKey.applicationLabel], .data(Crypto.sha256(TestKeys.ed25519.publicBlob)))
        XCTAssertEqual(item.secret, TestKeys.ed25519.serialized)

        // A new agent over the same keychain lists and signs with them, the confirm constraint kept.
        let (_, again) = makeAgent()
        XCTAssertEqual(Set(again.list().map(\.comment)), ["laptop", "old"])
        XCTAssertNotNil(again.sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertEqual(recorder.requests.count, 0)
        recorder.answer = false
        XCTAssertNil(again.sign(TestKeys.rsa.publicBlob, [1]))
        XCTAssertEqual(recorder.requests.map(\.keyComment), ["old"])
    }

    func testLifetimeAndSessionKeysStayInMemory() throws {
        let (_, client) = makeAgent()
        XCTAssertEqual(
            client.add(
                TestKeys.ed25519.serialized,
                constraints: {
                    $0.u8(1); $0.u32(600)
                }), [6])
        let (_, session) = makeAgent { $0.sessionOnly = true }
        XCTAssertEqual(session.add(TestKeys.ecdsa.serialized), [6])
        let (_, timed) = makeAgent { $0.defaultLifetime = 60 }
        XCTAssertEqual(timed.add(TestKeys.rsa.serialized), [6])
        XCTAssertEqual(try keyItems().count, 0)
        XCTAssertEqual(client.list().count, 1)
        XCTAssertEqual(makeAgent().1.list().count, 0)
    }

    func testLockedKeychainListsButDoesNotSign() throws {
        let (_, client) = makeAgent()
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "laptop"), [6])
        store.lock()
        XCTAssertEqual(client.list().map(\.comment), ["laptop"])
        XCTAssertEqual(makeAgent().1.list().map(\.blob), [TestKeys.ed25519.publicBlob], "a new agent too")
        recorder.lines.removeAll()
        XCTAssertNil(client.sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertEqual(recorder.lines.count, 1)
        XCTAssertTrue(recorder.lines[0].contains("laptop") && recorder.lines[0].contains("locked"), recorder.lines[0])
        // Nothing can be added to a locked keychain; the agent says so and answers failure.
        XCTAssertEqual(client.add(TestKeys.ecdsa.serialized), [5])
        try store.unlock(password: Array("pw".utf8))
        XCTAssertNotNil(client.sign(TestKeys.ed25519.publicBlob, [1]))
    }

    /// A key made inside the TPM, as `security create-ssh-key --tpm` keeps it (it never signs here).
    func keepTPMKey(in agent: Agent) throws -> SSHPrivateKey {
        var tpm = ByteWriter()
        tpm.string(SSHPrivateKey.tpmKeyType)
        tpm.blob(Array(TestKeys.host2.publicBlob.suffix(65)))
        tpm.blob([1, 2, 3])
        let tpmKey = try SSHPrivateKey(serialized: tpm.bytes)
        try XCTUnwrap(agent.configuration.vault).save(tpmKey, comment: "tpm", confirm: false, destinations: [])
        return tpmKey
    }

    /// ssh-add -d and -D unload keys from this agent only (OpenSSH's meaning): the keychain keeps
    /// them, TPM keys included, another agent on it lists and signs with them, and this one gets
    /// them back when they are added again or when it restarts.
    func testRemoveUnloadsFromThisAgentOnly() throws {
        let (agent, client) = makeAgent()
        let (_, other) = makeAgent()
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "ed"), [6])
        XCTAssertEqual(client.add(TestKeys.ecdsa.serialized, comment: "ec"), [6])
        XCTAssertEqual(
            client.add(
                TestKeys.rsa.serialized, comment: "rsa",
                constraints: {
                    $0.u8(1); $0.u32(60)
                }), [6])
        let tpmKey = try keepTPMKey(in: agent)
        XCTAssertEqual(client.list().count, 4)

        XCTAssertEqual(client.remove(TestKeys.ed25519.publicBlob), [6])
        XCTAssertEqual(Set(client.list().map(\.comment)), ["ec", "rsa", "tpm"])
        XCTAssertNil(client.sign(TestKeys.ed25519.publicBlob, [1]), "an unloaded key does not sign")
        XCTAssertEqual(client.remove(TestKeys.ed25519.publicBlob), [5], "already unloaded")
        XCTAssertEqual(try keyItems().count, 3, "the keychain keeps it")
        XCTAssertEqual(Set(other.list().map(\.comment)), ["ed", "ec", "tpm"])
        XCTAssertNotNil(other.sign(TestKeys.ed25519.publicBlob, [1]), "another agent still signs")

        XCTAssertEqual(client.send { $0.u8(19) }, [6])
        XCTAssertEqual(client.list().count, 0, "-D unloads every key, the TPM's too")
        XCTAssertNil(client.sign(TestKeys.ecdsa.publicBlob, [1]))
        XCTAssertEqual(client.remove(tpmKey.publicBlob), [5])
        XCTAssertEqual(try keyItems().count, 3)
        XCTAssertEqual(Set(other.list().map(\.comment)), ["ed", "ec", "tpm"])
        XCTAssertNotNil(other.sign(TestKeys.ecdsa.publicBlob, [1]))

        // Added again: back in this agent, without a duplicate.
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "ed"), [6])
        XCTAssertEqual(client.list().map(\.comment), ["ed"])
        XCTAssertNotNil(client.sign(TestKeys.ed25519.publicBlob, [1]))
        XCTAssertEqual(try keyItems().count, 3)
        // Restarted: every kept key, the TPM's too.
        let (_, restarted) = makeAgent()
        XCTAssertEqual(Set(restarted.list().map(\.comment)), ["ed", "ec", "tpm"])
        XCTAssertEqual(restarted.remove(tpmKey.publicBlob), [6])
        XCTAssertEqual(try keyItems().count, 3, "a TPM key, which nothing can make again, stays")
    }

    /// A key with a lifetime over a kept one: -d unloads both, and the kept one does not come
    /// back when the other's lifetime ends.
    func testRemovingAKeyHeldTwiceUnloadsBoth() throws {
        let clock = TestClock()
        let (_, client) = makeAgent { $0.clock = { clock.now } }
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "kept"), [6])
        XCTAssertEqual(
            client.add(
                TestKeys.ed25519.serialized, comment: "timed",
                constraints: {
                    $0.u8(1); $0.u32(60)
                }), [6])
        XCTAssertEqual(client.list().map(\.comment), ["timed"])
        XCTAssertEqual(client.remove(TestKeys.ed25519.publicBlob), [6])
        XCTAssertEqual(client.list().count, 0)
        clock.now += 120
        XCTAssertEqual(client.list().count, 0)
        XCTAssertEqual(try keyItems().count, 1)
    }

    /// A key deleted from the keychain and kept there again (security delete-ssh-key, then
    /// import-ssh-keys) is a new addition: an agent that had unloaded it lists it.
    func testAKeyKeptAgainAfterItsDeletionIsListed() throws {
        let (agent, client) = makeAgent()
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "ed"), [6])
        XCTAssertEqual(client.remove(TestKeys.ed25519.publicBlob), [6])
        let vault = try XCTUnwrap(agent.configuration.vault)
        XCTAssertTrue(try vault.remove(TestKeys.ed25519.publicBlob))
        XCTAssertEqual(client.list().count, 0)
        try vault.save(SSHPrivateKey(serialized: TestKeys.ed25519.serialized), comment: "ed", confirm: false, destinations: [])
        XCTAssertEqual(client.list().map(\.comment), ["ed"])
    }

    /// A host the agent is forwarded to uses the keys; it never writes the keychain's items, and
    /// what it removes is unloaded from this agent only, as any removal is.
    func testAForwardedConnectionNeverChangesTheKeychain() throws {
        let (agent, client) = makeAgent()
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, comment: "laptop"), [6])
        let remote = AgentClient(connection: AgentConnection(agent: agent, peer: client.connection.peer))
        XCTAssertEqual(remote.bind(TestKeys.host1, sessionID: [1], forwarded: true), [6])
        XCTAssertEqual(remote.add(TestKeys.ecdsa.serialized, comment: "remote"), [6])
        XCTAssertEqual(try keyItems().map { $0[AttributeKey.label] }, [.string("laptop")])
        XCTAssertEqual(Set(remote.list().map(\.comment)), ["laptop", "remote"])
        XCTAssertEqual(remote.remove(TestKeys.ed25519.publicBlob), [6])
        XCTAssertEqual(remote.send { $0.u8(19) }, [6])
        XCTAssertEqual(client.list().count, 0)
        XCTAssertEqual(try keyItems().count, 1)
        XCTAssertEqual(makeAgent().1.list().map(\.comment), ["laptop"])
    }

    func testDestinationConstraintsSurviveARestart() throws {
        let (_, client) = makeAgent()
        let constraint = destinationConstraint(from: hop(), to: hop(host: "host1", keys: [(TestKeys.host1.publicBlob, false)]))
        XCTAssertEqual(client.add(TestKeys.ed25519.serialized, constraints: restrictDestination([constraint])), [6])
        let (_, again) = makeAgent()
        XCTAssertEqual(again.bind(TestKeys.host2, sessionID: [1], forwarded: false), [6])
        XCTAssertEqual(again.list().count, 0, "hidden from a connection to another host")
    }
}
