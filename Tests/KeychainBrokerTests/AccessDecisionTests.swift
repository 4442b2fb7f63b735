import KeychainBroker
import KeychainCore
import XCTest

/// Every rule of BROKER-SPEC's decision, with callers made up (no process is looked at).
final class AccessDecisionTests: XCTestCase {
    let decision = AccessDecision(ownPrograms: ["/usr/bin/security", "/usr/bin/git-credential-keychain"])

    func caller(
        _ entry: AccessList.Entry?, silent: Bool = true, interpreter: Bool = false, parents: [AccessList.Entry] = []
    ) -> CallerRecord {
        CallerRecord(entry: entry, canMatchSilently: silent, isInterpreter: interpreter, parentEntries: parents, summary: "test")
    }

    func list(_ text: String) -> AccessList { AccessList(text: text) }

    func testAnyAllowsEveryone() {
        XCTAssertEqual(decision.decide(list: list("any"), caller: caller(nil, silent: false)), .trusted)
        XCTAssertEqual(decision.decide(list: list("exe:/usr/bin/x\nany"), caller: caller(.executable("/tmp/evil"), silent: false)), .trusted)
    }

    func testAnExecutableEntryMatchesOnlyWhenTheCallerCanMatchSilently() {
        XCTAssertEqual(decision.decide(list: list("exe:/usr/bin/git"), caller: caller(.executable("/usr/bin/git"))), .trusted)
        XCTAssertEqual(decision.decide(list: list("exe:/usr/bin/git"), caller: caller(.executable("/usr/bin/git"), silent: false)), .ask)
        XCTAssertEqual(decision.decide(list: list("exe:/usr/bin/git"), caller: caller(.executable("/usr/bin/gitk"))), .ask)
        XCTAssertEqual(decision.decide(list: list(""), caller: caller(.executable("/usr/bin/git"))), .ask)
    }

    func testAnUnidentifiedCallerIsAsked() {
        XCTAssertEqual(decision.decide(list: list("exe:/usr/bin/git"), caller: caller(nil)), .ask)
        XCTAssertEqual(decision.decide(list: nil, caller: caller(nil)), .ask)
    }

    func testExecutableUnderParentsMatchesTheNearestParentPastShells() {
        let entry = list("exe:/usr/bin/git-credential-keychain</usr/bin/git,/usr/bin/docker")
        let helper = AccessList.Entry.executable("/usr/bin/git-credential-keychain")
        XCTAssertEqual(decision.decide(list: entry, caller: caller(helper, parents: [.executable("/usr/bin/git")])), .trusted)
        XCTAssertEqual(
            decision.decide(
                list: entry, caller: caller(helper, parents: [.interpreter("/usr/bin/dash"), .executable("/bin/bash"), .executable("/usr/bin/git")])),
            .trusted)
        XCTAssertEqual(decision.decide(list: entry, caller: caller(helper, parents: [.executable("/usr/bin/python3.11"), .executable("/usr/bin/git")])), .ask)
        XCTAssertEqual(decision.decide(list: entry, caller: caller(helper, parents: [])), .ask)
        XCTAssertEqual(decision.decide(list: entry, caller: caller(helper, parents: [.executable("/usr/bin/git")]).with(silent: false)), .ask)
    }

    func testInterpretersMatchOnlyAnInterpreterEntry() {
        let python = caller(.interpreter("/usr/bin/python3"), interpreter: true)
        XCTAssertEqual(decision.decide(list: list("exe:/usr/bin/python3"), caller: python), .ask)
        XCTAssertEqual(decision.decide(list: list("interpreter:/usr/bin/python3"), caller: python), .trusted)
        XCTAssertEqual(decision.decide(list: list("interpreter:/usr/bin/python3"), caller: python.with(silent: false)), .ask)
        XCTAssertEqual(decision.decide(list: list("interpreter:/usr/bin/perl"), caller: python), .ask)
        // An interpreter entry does not name a program that is not one.
        XCTAssertEqual(decision.decide(list: list("interpreter:/usr/bin/git"), caller: caller(.executable("/usr/bin/git"))), .ask)
        // The keychain's own partitions do not cover an interpreter either.
        XCTAssertEqual(decision.decide(list: list("apple:"), caller: caller(.interpreter("/usr/bin/security"), interpreter: true)), .ask)
    }

    func testSandboxIdsMatchTheirOwnKind() {
        XCTAssertEqual(decision.decide(list: list("flatpak:org.gnome.Foo"), caller: caller(.flatpak("org.gnome.Foo"))), .trusted)
        XCTAssertEqual(decision.decide(list: list("flatpak:org.gnome.Foo"), caller: caller(.flatpak("org.gnome.Bar"))), .ask)
        XCTAssertEqual(decision.decide(list: list("snap:foo"), caller: caller(.snap("foo"))), .trusted)
        XCTAssertEqual(decision.decide(list: list("snap:foo"), caller: caller(.flatpak("foo"))), .ask)
    }

    func testPartitionsNameTheKeychainsOwnPrograms() {
        let security = caller(.executable("/usr/bin/security")), helper = caller(.executable("/usr/bin/git-credential-keychain"))
        XCTAssertEqual(decision.decide(list: list("apple-tool:"), caller: security), .trusted)
        XCTAssertEqual(decision.decide(list: list("apple-tool:"), caller: helper), .ask)
        XCTAssertEqual(decision.decide(list: list("apple:"), caller: helper), .trusted)
        XCTAssertEqual(decision.decide(list: list("apple:"), caller: caller(.executable("/usr/local/bin/security"))), .ask)
        XCTAssertEqual(decision.decide(list: list("teamid:ABC"), caller: security), .ask)
    }

    func testLegacyItemsTrustTheFrontEndTheirShapeNames() {
        let decision = AccessDecision()
        func implied(_ cls: ItemClass, _ attributes: [String: AttributeValue]) -> AccessList {
            decision.impliedList(itemClass: cls, attributes: attributes)
        }
        let service = caller(.executable("/usr/bin/keychain-secret-service")), agent = caller(.executable("/usr/bin/keychain-ssh-agent"))
        let secretServiceItem = implied(.genericPassword, [AttributeKey.freeFormAttributes: .data([1])])
        XCTAssertEqual(decision.decide(list: secretServiceItem, caller: service), .trusted)
        XCTAssertEqual(decision.decide(list: secretServiceItem, caller: caller(.executable("/usr/bin/security"))), .ask)
        let sshKey = implied(.key, [AttributeKey.keyType: .int(OpenSSHKeyItem.keyType)])
        XCTAssertEqual(decision.decide(list: sshKey, caller: agent), .trusted)
        XCTAssertEqual(decision.decide(list: sshKey, caller: service), .ask)
        // The clients the agent relays: ssh and ssh-keygen (git's signing), no other.
        XCTAssertEqual(decision.decide(list: sshKey, caller: caller(.executable("/usr/bin/ssh"))), .trusted)
        XCTAssertEqual(decision.decide(list: sshKey, caller: caller(.executable("/usr/bin/ssh-keygen"))), .trusted)
        XCTAssertEqual(decision.decide(list: sshKey, caller: caller(.executable("/usr/bin/ssh-add"))), .ask)
        let internet = implied(.internetPassword, [:])
        var helper = caller(.executable("/usr/bin/git-credential-keychain"))
        helper.parentEntries = [.executable("/usr/lib/git-core/git-remote-https")]
        XCTAssertEqual(decision.decide(list: internet, caller: helper), .trusted)
        helper.parentEntries = [.interpreter("/usr/bin/python3")]
        XCTAssertEqual(decision.decide(list: internet, caller: helper), .ask)
        // A generic password of unknown origin: every program is asked once, the keychain's own too.
        let generic = implied(.genericPassword, [:])
        XCTAssertEqual(generic.entries, [])
        XCTAssertEqual(decision.decide(list: generic, caller: caller(.executable("/usr/bin/security"))), .ask)
    }

    func testAppleNamesNoDaemonThatServesOthers() {
        let decision = AccessDecision()
        XCTAssertEqual(decision.decide(list: list("apple:"), caller: caller(.executable("/usr/bin/keychain-secret-service"))), .ask)
        XCTAssertEqual(decision.decide(list: list("apple:"), caller: caller(.executable("/usr/bin/keychain-ssh-agent"))), .ask)
    }

    func testTheDefaultOwnProgramsCoverBothPrefixes() {
        let programs = Set(AccessDecision.defaultOwnPrograms)
        for name in ["security", "git-credential-keychain", "docker-credential-keychain", "keychain-secret-service", "keychain-ssh-agent"] {
            XCTAssertTrue(programs.contains("/usr/bin/" + name) && programs.contains("/usr/local/bin/" + name), name)
        }
    }
}

extension CallerRecord {
    func with(silent: Bool) -> CallerRecord {
        var copy = self
        copy.canMatchSilently = silent
        return copy
    }
}
