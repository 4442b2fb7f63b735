@testable import KeychainCore
import XCTest

/// The text a person reads before a key or an item is used: it names who asks, what and where,
/// and nothing another program chose can rewrite it.
final class AccessQuestionTests: XCTestCase {
    let key = AccessQuestion.Target.sshKey(comment: "alice@laptop", fingerprint: "SHA256:abc")
    let ssh = AccessQuestion.Asker(executable: "/usr/bin/ssh", parents: ["/usr/bin/bash", "/usr/libexec/gnome-terminal-server"])

    func testTheUsersOwnSSH() {
        let question = AccessQuestion(asker: ssh, target: key, destination: .init(host: "github.com"))
        XCTAssertEqual(
            question.text,
            "/usr/bin/ssh wants to use your SSH key \"alice@laptop\" (SHA256:abc) to log in to github.com.\n"
                + "Started by: /usr/bin/bash, /usr/libexec/gnome-terminal-server.")
        XCTAssertEqual(question.title, "Use of an SSH key")
    }

    /// Three requests the old polkit dialog showed alike: each text differs, and says what differs.
    func testTheUsersSSHAnUnknownProgramAndAForwardedHostDiffer() {
        let own = AccessQuestion(asker: ssh, target: key, destination: .init(host: "host1"))
        let unknown = AccessQuestion(asker: .init(executable: "/tmp/x/ssh-add", parents: ["/usr/bin/python3.11"]), target: key)
        let forwarded = AccessQuestion(asker: ssh, target: key, destination: .init(host: "host2", forwardedThrough: ["host1"]))
        XCTAssertEqual(Set([own.text, unknown.text, forwarded.text]).count, 3)
        XCTAssertTrue(unknown.text.hasPrefix("/tmp/x/ssh-add wants to use your SSH key \"alice@laptop\" (SHA256:abc)."), unknown.text)
        XCTAssertTrue(forwarded.text.contains("to log in to host2 from host1 (your agent is forwarded there)."), forwarded.text)
        let onHost = AccessQuestion(asker: ssh, target: key, destination: .init(host: nil, forwardedThrough: ["host1", "host2"]))
        XCTAssertTrue(onHost.text.contains(" for a program on host1, then host2 (your agent is forwarded there)."), onHost.text)
        let unverified = AccessQuestion(asker: ssh, target: key, destination: .unverifiedHost)
        XCTAssertTrue(unverified.text.contains(" on a connection whose host did not prove its key."), unverified.text)
        let unnamed = AccessQuestion(asker: .init(executable: nil), target: key)
        XCTAssertTrue(unnamed.text.hasPrefix("A program the system would not name wants to use"), unnamed.text)
    }

    /// A comment could clear the line and write a friendlier one, turn the text around, or close
    /// its quotes and append a host: every such character is shown escaped.
    func testControlAndDirectionCharactersAreEscaped() {
        let hostile = "work\u{1B}[2K\r/usr/bin/ssh\n\u{202E}evil\u{9B}\"x\\ \u{7F}\tend"
        let question = AccessQuestion(asker: .init(executable: "/tmp/a\nb"), target: .sshKey(comment: hostile, fingerprint: "SHA256:f"))
        XCTAssertEqual(
            question.text,
            "/tmp/a\\x0Ab wants to use your SSH key \"work\\x1B[2K\\x0D/usr/bin/ssh\\x0A\\u{202E}evil\\x9B\\\"x\\\\ \\x7F\\x09end\" (SHA256:f).")
        XCTAssertFalse(question.text.unicodeScalars.contains { $0.properties.generalCategory == .control })
    }

    /// A long name cannot push the rest out of sight: it is cut in the middle, so both where a
    /// path starts and how it ends stay visible, and the text stays within one pinentry line.
    func testLongNamesAreCutInTheMiddle() {
        let path = "/tmp/" + String(repeating: "a", count: 2000) + "/usr/bin/ssh"
        let question = AccessQuestion(
            asker: .init(executable: path, parents: Array(repeating: path, count: 8)),
            target: .sshKey(comment: String(repeating: "c", count: 5000), fingerprint: "SHA256:f"),
            destination: .init(host: String(repeating: "h", count: 5000), forwardedThrough: [String(repeating: "f", count: 5000)]))
        XCTAssertTrue(question.text.hasPrefix("/tmp/aaa"))
        XCTAssertTrue(question.text.contains("aaa...aaa"))
        XCTAssertTrue(question.text.contains("aaa/usr/bin/ssh wants to use"))
        XCTAssertTrue(question.text.hasSuffix(", ...."), question.text)
        XCTAssertLessThan(question.text.utf8.count, 900)
        // Characters of four bytes count as four.
        let wide = AccessQuestion(asker: .init(executable: String(repeating: "\u{1F600}", count: 500)), target: key)
        XCTAssertLessThan(wide.text.utf8.count, 300)
        // Sixteen forwarded hops: the first and the last two.
        let hops = (1...16).map { "h\($0)" }
        let far = AccessQuestion(asker: ssh, target: key, destination: .init(host: "end", forwardedThrough: hops))
        XCTAssertTrue(far.text.contains(" to log in to end from h1, then ..., then h15, then h16 (your"), far.text)
        // An escape is never cut in half.
        let escapes = AccessQuestion.shown(String(repeating: "\u{1B}", count: 100), limit: 20)
        XCTAssertEqual(escapes, "\\x1B\\x1B...\\x1B\\x1B")
    }

    /// A host named by its key's fingerprint is shown whole.
    func testAHostKeyFitsWhole() {
        let host = "the host with key SHA256:3nPplMpoCyBmHf0Wk9lRZNC29npGLmQto40CDnOD1TO38n4eNbaIdM"
        let question = AccessQuestion(asker: ssh, target: key, destination: .init(host: host, forwardedThrough: [host]))
        XCTAssertTrue(question.text.contains("to log in to \(host) from \(host) (your"), question.text)
    }

    func testAnItem() {
        let question = AccessQuestion(asker: ssh, target: .item(label: "GitHub", server: "github.com", account: "alice"))
        XCTAssertTrue(question.text.hasPrefix("/usr/bin/ssh wants to use the keychain item \"GitHub\" (account \"alice\" on github.com)."), question.text)
        XCTAssertEqual(question.title, "Use of a keychain item")
    }
}
