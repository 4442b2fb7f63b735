@testable import KeychainCore
@testable import KeychainPresence
import Glibc
import XCTest

/// PinentryPrompt over the engine's one pinentry conversation, answered by a scripted pinentry.
final class PinentryTests: XCTestCase {
    /// A private folder for the scripted pinentry and its log.
    private var directory: String!

    override func setUp() {
        var template = Array("/tmp/keychain-pinentry-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }
    override func tearDown() { _ = system("rm -rf '\(directory!)'") }

    /// A pinentry that greets with `greeting`, logs every command and answers GETPIN with `answer`.
    private func pinentry(greeting: String = "OK Pleased to meet you", answer: String) throws -> (program: String, log: String) {
        let program = directory + "/pinentry", log = directory + "/pinentry.log"
        let script = """
            #!/bin/sh
            echo '\(greeting)'
            while IFS= read -r line; do
                printf '%s\\n' "$line" >> '\(log)'
                case "$line" in
                    GETPIN) printf '%s\\n' '\(answer)' ;;
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
