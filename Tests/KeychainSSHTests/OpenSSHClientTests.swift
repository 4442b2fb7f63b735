import Foundation
import KeychainCore
import KeychainSSH
import XCTest

/// The real ssh-add and ssh-keygen against the agent's state machine, through a test socket:
/// what they send is what the agent must understand.
final class OpenSSHClientTests: XCTestCase {
    let recorder = Recorder()

    func makeHarness() throws -> (Agent, SocketHarness) {
        var configuration = AgentConfiguration()
        let recorder = recorder
        configuration.log = { recorder.lines.append($0) }
        configuration.unlockDelay = { _ in }
        configuration.confirm = { request in
            recorder.requests.append(request)
            return recorder.answer
        }
        let agent = Agent(configuration: configuration)
        return (agent, try SocketHarness(agent: agent))
    }

    func askpass(_ passphrase: String) throws -> [String] {
        let path = OpenSSHTools.scratch + "/askpass-\(UUID().uuidString.prefix(8))"
        try "#!/bin/sh\necho '\(passphrase)'\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return ["SSH_ASKPASS=" + path, "SSH_ASKPASS_REQUIRE=force"]
    }

    func testSSHAddListsSignsAndRemovesEveryKind() throws {
        let (_, harness) = try makeHarness()
        for key in TestKeys.all {
            let added = try harness.run(["/usr/bin/ssh-add", key.path])
            XCTAssertEqual(added.status, 0, added.output)
        }
        let listed = try harness.run(["/usr/bin/ssh-add", "-l"])
        XCTAssertEqual(listed.status, 0)
        for key in TestKeys.all {
            let expected = try OpenSSHTools.run(["/usr/bin/ssh-keygen", "-lf", key.path + ".pub"]).output
            XCTAssertTrue(listed.output.contains(expected.split(separator: " ")[1]), listed.output)
            let test = try harness.run(["/usr/bin/ssh-add", "-T", key.path + ".pub"])
            XCTAssertEqual(test.status, 0, "ssh-add -T \(key.comment): \(test.output)")
            // ssh-keygen -Y sign with only the public key file signs through the agent.
            let message = OpenSSHTools.scratch + "/message-\(UUID().uuidString.prefix(8))"
            try "signed through the agent\n".write(toFile: message, atomically: true, encoding: .utf8)
            let signed = try harness.run(["/usr/bin/ssh-keygen", "-Y", "sign", "-f", key.path + ".pub", "-n", "git", message])
            XCTAssertEqual(signed.status, 0, signed.output)
            let checked = try OpenSSHTools.run(
                ["/usr/bin/ssh-keygen", "-Y", "check-novalidate", "-n", "git", "-s", message + ".sig"],
                input: Array("signed through the agent\n".utf8))
            XCTAssertEqual(checked.status, 0, checked.output)
        }
        let publicLines = try harness.run(["/usr/bin/ssh-add", "-L"]).output
        for key in TestKeys.all { XCTAssertTrue(publicLines.contains(try String(contentsOfFile: key.path + ".pub", encoding: .utf8))) }
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", "-d", TestKeys.ecdsa.path]).status, 0)
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", "-l"]).output.split(separator: "\n").count, 2)
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", "-D"]).status, 0)
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", "-l"]).status, 1, "no identities")
    }

    func testSSHAddCertificateLifetimeConfirmAndDestination() throws {
        let (_, harness) = try makeHarness()
        let key = try OpenSSHTools.generate("ed25519", comment: "with-cert")
        _ = try OpenSSHTools.certify(key)
        let added = try harness.run(["/usr/bin/ssh-add", "-t", "600", "-c", key.path])
        XCTAssertEqual(added.status, 0, added.output)
        let listed = try harness.run(["/usr/bin/ssh-add", "-L"]).output
        XCTAssertTrue(listed.contains("ssh-ed25519-cert-v01@openssh.com "), listed)
        recorder.answer = false
        XCTAssertNotEqual(try harness.run(["/usr/bin/ssh-add", "-T", key.path + ".pub"]).status, 0)
        XCTAssertEqual(recorder.requests.last?.keyComment, "with-cert")
        recorder.answer = true
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", "-T", key.path + ".pub"]).status, 0)

        let knownHosts = OpenSSHTools.scratch + "/known_hosts-\(UUID().uuidString.prefix(8))"
        try ("host1 " + SSHPublicKey.authorizedKeysLine(of: TestKeys.host1.publicBlob, comment: "") + "\n")
            .write(toFile: knownHosts, atomically: true, encoding: .utf8)
        let constrained = try harness.run(["/usr/bin/ssh-add", "-H", knownHosts, "-h", "host1", TestKeys.rsa.path])
        XCTAssertEqual(constrained.status, 0, constrained.output)
        XCTAssertTrue(try harness.run(["/usr/bin/ssh-add", "-l"]).output.contains("(RSA)"))
    }

    func testSSHAddLocksAndUnlocks() throws {
        let (_, harness) = try makeHarness()
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", TestKeys.ed25519.path]).status, 0)
        let lock = try harness.run(["/usr/bin/env"] + (try askpass("sesame")) + ["/usr/bin/ssh-add", "-x"])
        XCTAssertEqual(lock.status, 0, lock.output)
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", "-l"]).status, 1)
        let wrong = try harness.run(["/usr/bin/env"] + (try askpass("wrong")) + ["/usr/bin/ssh-add", "-X"])
        XCTAssertNotEqual(wrong.status, 0)
        let unlock = try harness.run(["/usr/bin/env"] + (try askpass("sesame")) + ["/usr/bin/ssh-add", "-X"])
        XCTAssertEqual(unlock.status, 0, unlock.output)
        XCTAssertEqual(try harness.run(["/usr/bin/ssh-add", "-l"]).status, 0)
    }
}
