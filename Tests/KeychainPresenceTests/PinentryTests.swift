@testable import KeychainCore
@testable import KeychainPresence
import Glibc
import XCTest

/// PinentryPrompt over the engine's one pinentry conversation, answered by a scripted pinentry.
final class PinentryTests: XCTestCase {
    /// A private folder for the scripted pinentry and its log.
    private var directory: String!
    /// Scripted pinentries made so far in this test, each with a name of its own.
    private var made = 0

    override func setUp() {
        var template = Array("/tmp/keychain-pinentry-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }
    override func tearDown() { _ = system("rm -rf '\(directory!)'") }

    /// A pinentry that greets with `greeting`, logs every command and answers GETPIN and CONFIRM
    /// with `answer` (and SETDESC with `describe`).
    private func pinentry(greeting: String = "OK Pleased to meet you", answer: String, describe: String = "OK") throws -> (program: String, log: String) {
        made += 1
        let program = directory + "/pinentry\(made)", log = directory + "/pinentry\(made).log"
        let script = """
            #!/bin/sh
            echo '\(greeting)'
            while IFS= read -r line; do
                printf '%s\\n' "$line" >> '\(log)'
                case "$line" in
                    GETPIN|CONFIRM) printf '%s\\n' '\(answer)' ;;
                    SETDESC*) echo '\(describe)' ;;
                    SETREPEAT*) echo 'ERR 536871187 Unknown command' ;;
                    *) echo OK ;;
                esac
            done
            """
        XCTAssertTrue(writeScratchFile(script, to: program, mode: 0o700))
        return (program, log)
    }

    func testAnAnswerIsThePassphrase() throws {
        let (program, log) = try pinentry(answer: "D s%25cret\nOK")
        var pin = try PinentryPrompt(program: program, timeout: 10).ask(description: "why\nnow", prompt: "Password:")
        XCTAssertEqual(String(decoding: pin, as: UTF8.self), "s%cret")
        pin.wipe()
        XCTAssertEqual(readScratchFile(log), "SETDESC why%0Anow\nSETPROMPT Password:\nGETPIN\n")
    }

    func testCancelAndEmptyAreCancelled() throws {
        for answer in ["ERR 83886179 Operation cancelled <Pinentry>", "OK"] {
            let (program, _) = try pinentry(answer: answer)
            XCTAssertThrowsError(try PinentryPrompt(program: program, timeout: 10).ask(description: "d", prompt: "p"), answer) {
                XCTAssertEqual(($0 as? KeychainError)?.code, .userCanceled, answer)
            }
        }
    }

    func testNoPinentryOrNoAssuanIsInteractionNotAllowed() throws {
        let (program, _) = try pinentry(greeting: "ERR 1 no", answer: "OK")
        for program in [directory + "/none", program] {
            XCTAssertThrowsError(try PinentryPrompt(program: program, timeout: 10).ask(description: "d", prompt: "p")) {
                XCTAssertEqual(($0 as? KeychainError)?.code, .interactionNotAllowed, program)
            }
        }
    }

    /// The conversation goes on past an option an old pinentry does not know.
    func testAnUnknownOptionDoesNotEndTheConversation() throws {
        let (program, _) = try pinentry(answer: "D new\nOK")
        let conversation = try PinentryConversation(program: program)
        defer { conversation.stop() }
        conversation.ask(title: "t", description: "d", prompt: "p", error: "wrong", repeatPrompt: "again")
        guard case .passphrase(let pin)? = conversation.wait(until: SystemClock.monotonic() + 10) else { return XCTFail("no passphrase") }
        XCTAssertEqual(pin, Array("new".utf8))
    }
}

extension PinentryTests {
    var question: AccessQuestion {
        AccessQuestion(
            asker: .init(executable: "/usr/bin/ssh", parents: ["/usr/bin/bash"]), target: .sshKey(comment: "me\u{1B}[2K%", fingerprint: "SHA256:f"),
            destination: .init(host: "host2", forwardedThrough: ["host1"]))
    }

    /// CONFIRM carries the question's text, title and buttons; OK is an allow.
    func testAnAccessQuestionIsConfirmedWithItsText() throws {
        let (program, log) = try pinentry(answer: "OK")
        XCTAssertEqual(PinentryAccessPrompter(program: program, timeout: 10).ask(question), .allowed)
        XCTAssertEqual(
            readScratchFile(log),
            "SETTITLE Use of an SSH key\n"
                + "SETDESC /usr/bin/ssh wants to use your SSH key \"me\\x1B[2K%25\" (SHA256:f) to log in to host2 from host1 "
                + "(your agent is forwarded there).%0AStarted by: /usr/bin/bash.\n"
                + "SETOK Allow\nSETCANCEL Deny\nCONFIRM\n")
    }

    /// The person's cancel or no is a denial; any other error is a pinentry that could not ask
    /// (no display, no terminal), and so is none at all, or a description it refused.
    func testDeniedAndUnavailable() throws {
        for answer in ["ERR 83886179 Operation cancelled <Pinentry>", "ERR 83886194 Not confirmed <Pinentry>"] {
            let (program, _) = try pinentry(answer: answer)
            XCTAssertEqual(PinentryAccessPrompter(program: program, timeout: 10).ask(question), .denied, answer)
        }
        let (noTerminal, _) = try pinentry(answer: "ERR 83918950 Inappropriate ioctl for device <Pinentry>")
        let (refusesDescription, _) = try pinentry(answer: "OK", describe: "ERR 536870981 Line too long")
        for program in [noTerminal, refusesDescription, directory + "/none"] {
            guard case .unavailable = PinentryAccessPrompter(program: program, timeout: 10).ask(question) else { return XCTFail(program) }
        }
    }

    /// Prompters in order: the next is asked only when one could not ask; a denial is final.
    func testPromptersInOrder() throws {
        let (allows, _) = try pinentry(answer: "OK")
        let (denies, _) = try pinentry(answer: "ERR 83886179 Operation cancelled <Pinentry>")
        let missing = PinentryAccessPrompter(program: directory + "/none", timeout: 10)
        XCTAssertEqual(AccessPrompters([missing, PinentryAccessPrompter(program: allows, timeout: 10)]).ask(question), .allowed)
        XCTAssertEqual(
            AccessPrompters([PinentryAccessPrompter(program: denies, timeout: 10), PinentryAccessPrompter(program: allows, timeout: 10)]).ask(question),
            .denied)
        guard case .unavailable = AccessPrompters([missing]).ask(question) else { return XCTFail("asked nobody") }
        guard case .unavailable = AccessPrompters([]).ask(question) else { return XCTFail("asked nobody") }
    }
}

/// Small file helpers without Foundation.
private func writeScratchFile(_ text: String, to path: String, mode: mode_t) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    return bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count
}

private func readScratchFile(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var out: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 4096)
    while case let n = Glibc.read(fd, &chunk, chunk.count), n > 0 { out += chunk[0..<n] }
    return String(decoding: out, as: UTF8.self)
}
