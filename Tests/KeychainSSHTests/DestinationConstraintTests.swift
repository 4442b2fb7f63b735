import Foundation
import KeychainCore
import KeychainSSH
import XCTest

/// `ssh-add -h`: what ssh-agent.c's identity_permitted allows, over direct and forwarded
/// connections.
final class DestinationConstraintTests: XCTestCase {
    let recorder = Recorder()
    var agent: Agent!
    let host1 = TestKeys.host1
    let host2 = TestKeys.host2
    /// Only from here to host1, as alice-something.
    let key = TestKeys.ed25519
    /// From here to host1, and from host1 on to host2.
    let onward = TestKeys.ecdsa
    let s1 = Array(repeating: UInt8(1), count: 32)
    let s2 = Array(repeating: UInt8(2), count: 32)

    override func setUp() {
        var configuration = AgentConfiguration()
        let recorder = recorder
        configuration.log = { recorder.lines.append($0) }
        configuration.confirm = { request in
            recorder.requests.append(request)
            return true
        }
        agent = Agent(configuration: configuration)
        let setup = connection()
        let toHost1 = destinationConstraint(from: hop(), to: hop(user: "alice*", host: "host1", keys: [(host1.publicBlob, false)]))
        let host1ToHost2 = destinationConstraint(
            from: hop(host: "host1", keys: [(host1.publicBlob, false)]), to: hop(host: "host2", keys: [(host2.publicBlob, false)]))
        XCTAssertEqual(setup.add(key.serialized, comment: "key", constraints: restrictDestination([toHost1])), [6])
        XCTAssertEqual(
            setup.add(
                onward.serialized, comment: "onward",
                constraints: { writer in
                    restrictDestination([toHost1, host1ToHost2])(&writer)
                    writer.u8(2)
                }), [6])
    }

    func connection() -> AgentClient {
        AgentClient(connection: AgentConnection(agent: agent, peer: AgentPeer(uid: getuid(), pid: 1, executable: "/usr/bin/ssh")))
    }

    func testLocalUseListsButSignsOnlyBoundUserauth() {
        let local = connection()
        XCTAssertEqual(local.list().map(\.comment), ["key", "onward"])
        XCTAssertNil(local.sign(key.publicBlob, userauthRequest(sessionID: s1, user: "alice", key: key.publicBlob)))
        XCTAssertTrue(recorder.lines.contains { $0.contains("unbound connection") })
    }

    func testDirectConnectionToThePermittedHost() {
        let direct = connection()
        XCTAssertEqual(direct.bind(host1, sessionID: s1, forwarded: false), [6])
        XCTAssertEqual(direct.list().count, 2)
        let request = userauthRequest(sessionID: s1, user: "alice2", key: key.publicBlob)
        let signature = direct.sign(key.publicBlob, request)
        XCTAssertTrue(SSHPublicKey.verify(signature: signature ?? [], of: request, by: key.publicBlob))
        XCTAssertNotNil(direct.sign(key.publicBlob, userauthRequest(sessionID: s1, user: "alice", key: key.publicBlob, hostKey: host1.publicBlob)))
        // Another user, another session, another host key in the request, or data that is no userauth.
        XCTAssertNil(direct.sign(key.publicBlob, userauthRequest(sessionID: s1, user: "bob", key: key.publicBlob)))
        XCTAssertNil(direct.sign(key.publicBlob, userauthRequest(sessionID: s2, user: "alice", key: key.publicBlob)))
        XCTAssertNil(direct.sign(key.publicBlob, userauthRequest(sessionID: s1, user: "alice", key: key.publicBlob, hostKey: host2.publicBlob)))
        XCTAssertNil(direct.sign(key.publicBlob, userauthRequest(sessionID: s1, user: "alice", key: onward.publicBlob)))
        XCTAssertNil(direct.sign(key.publicBlob, Array("SSHSIG anything".utf8)))
        // The person is told the host the constraint named.
        XCTAssertNotNil(direct.sign(onward.publicBlob, userauthRequest(sessionID: s1, user: "alice", key: onward.publicBlob)))
        XCTAssertEqual(recorder.requests.last?.destination, AccessQuestion.Destination(host: "host1"))
    }

    /// A user name in a signature request is the asker's; matching it against a pattern with
    /// several stars must not take time that grows as a power of its length.
    func testAUserPatternMatchesInLinearTime() {
        let setup = connection()
        let pattern = destinationConstraint(from: hop(), to: hop(user: "*a*a*a*b", host: "host1", keys: [(host1.publicBlob, false)]))
        XCTAssertEqual(setup.add(TestKeys.rsa.serialized, comment: "rsa", constraints: restrictDestination([pattern])), [6])
        let direct = connection()
        XCTAssertEqual(direct.bind(host1, sessionID: s1, forwarded: false), [6])
        let started = Date()
        let long = String(repeating: "a", count: 4000)
        XCTAssertNil(direct.sign(TestKeys.rsa.publicBlob, userauthRequest(sessionID: s1, user: long, key: TestKeys.rsa.publicBlob)))
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        XCTAssertNotNil(direct.sign(TestKeys.rsa.publicBlob, userauthRequest(sessionID: s1, user: "xaya-a-b", key: TestKeys.rsa.publicBlob)))
        XCTAssertNil(direct.sign(TestKeys.rsa.publicBlob, userauthRequest(sessionID: s1, user: "aab", key: TestKeys.rsa.publicBlob)))
    }

    func testDirectConnectionToAnotherHost() {
        let direct = connection()
        XCTAssertEqual(direct.bind(host2, sessionID: s2, forwarded: false), [6])
        XCTAssertEqual(direct.list().count, 0)
        XCTAssertNil(direct.sign(key.publicBlob, userauthRequest(sessionID: s2, user: "alice", key: key.publicBlob)))
        XCTAssertEqual(direct.remove(key.publicBlob), [5], "a hidden key cannot be removed")
        XCTAssertEqual(connection().list().count, 2)
    }

    func testForwardedThroughHost1ToHost2() {
        // ssh binds host1 as a forwarding; ssh on host1 then binds host2 through the forwarded agent.
        let forwarded = connection()
        XCTAssertEqual(forwarded.bind(host1, sessionID: s1, forwarded: true), [6])
        XCTAssertEqual(forwarded.list().map(\.comment), ["onward"], "key may reach host1 but not be used beyond it")
        XCTAssertNil(forwarded.sign(onward.publicBlob, userauthRequest(sessionID: s1, user: "alice", key: onward.publicBlob)), "signing on a forwarding hop")
        XCTAssertEqual(forwarded.bind(host2, sessionID: s2, forwarded: false), [6])
        XCTAssertEqual(forwarded.list().map(\.comment), ["onward"])
        XCTAssertNil(forwarded.sign(key.publicBlob, userauthRequest(sessionID: s2, user: "alice", key: key.publicBlob, hostKey: host2.publicBlob)))
        // Past the first hop the request must name the host key it was made for.
        XCTAssertNil(forwarded.sign(onward.publicBlob, userauthRequest(sessionID: s2, user: "alice", key: onward.publicBlob)))
        XCTAssertNotNil(forwarded.sign(onward.publicBlob, userauthRequest(sessionID: s2, user: "alice", key: onward.publicBlob, hostKey: host2.publicBlob)))
        // The peer is the user's own ssh; the question says the request comes through host1.
        XCTAssertEqual(recorder.requests.last?.destination, AccessQuestion.Destination(host: "host2", forwardedThrough: ["host1"]))
        XCTAssertEqual(recorder.requests.last?.asker, AccessQuestion.Asker(executable: "/usr/bin/ssh"))
    }

    func testAFailedBindHidesConstrainedKeys() {
        let failed = connection()
        XCTAssertEqual(failed.bind(host1, sessionID: s1, forwarded: false, signature: try! host2.sign(s1, flags: 0)), [28])
        XCTAssertEqual(failed.list().count, 0)
        XCTAssertEqual(connection().list().count, 2)
    }

    func testHostCertificatesSignedByAListedCA() throws {
        let ca = try OpenSSHTools.generate("ed25519", comment: "ca")
        func hostKey(principals: String) throws -> SSHPrivateKey {
            let plain = try OpenSSHTools.generate("ed25519", comment: "host")
            let certificate = try OpenSSHTools.certify(plain, host: true, principals: principals, ca: ca)
            var serialized = ByteWriter()
            serialized.string("ssh-ed25519-cert-v01@openssh.com")
            serialized.blob(certificate)
            serialized.raw(plain.privateFields)
            return try SSHPrivateKey(serialized: serialized.bytes)
        }
        let viaCA = destinationConstraint(from: hop(), to: hop(host: "build.example", keys: [(ca.publicBlob, true)]))
        let client = connection()
        XCTAssertEqual(client.add(TestKeys.rsa.serialized, comment: "ca-bound", constraints: restrictDestination([viaCA])), [6])
        let good = connection()
        XCTAssertEqual(good.bind(try hostKey(principals: "build.example"), sessionID: s1, forwarded: false), [6])
        XCTAssertEqual(good.list().map(\.comment), ["ca-bound"])
        XCTAssertNotNil(good.sign(TestKeys.rsa.publicBlob, userauthRequest(sessionID: s1, user: "u", key: TestKeys.rsa.publicBlob), flags: 4))
        let wrongName = connection()
        XCTAssertEqual(wrongName.bind(try hostKey(principals: "other.example"), sessionID: s1, forwarded: false), [6])
        XCTAssertEqual(wrongName.list().count, 0)
        // The CA's key listed as a plain host key does not admit its certificates.
        let plainListed = destinationConstraint(from: hop(), to: hop(host: "build.example", keys: [(ca.publicBlob, false)]))
        XCTAssertEqual(client.add(TestKeys.rsa.serialized, comment: "plain", constraints: restrictDestination([plainListed])), [6])
        XCTAssertEqual(good.list().count, 0)
    }
}
