import Glibc
import KeychainCore
import KeychainTestSupport
import XCTest

/// Issue 52, findings 6 to 8: what an importer takes from a file others wrote (its name, the names
/// inside it, the file itself) can neither hold the reader, nor drive the terminal, nor choose
/// where a keychain is made.
final class ForeignNameTests: XCTestCase {
    func testControlCharactersAreShownAsText() {
        XCTAssertEqual(TerminalText.escaped("Mail/imap"), "Mail/imap")
        XCTAssertEqual(TerminalText.escaped("cl\u{e9} \u{1F511} \u{20AC}"), "cl\u{e9} \u{1F511} \u{20AC}")
        XCTAssertEqual(TerminalText.escaped("\u{1B}]0;owned\u{07}\u{1B}[2J"), "\\x1B]0;owned\\x07\\x1B[2J")
        XCTAssertEqual(TerminalText.escaped("a\tb\r\nc\u{0}d\u{7F}"), "a\\x09b\\x0D\\x0Ac\\x00d\\x7F")
        // C1 controls (CSI), bidirectional overrides, line and paragraph separators.
        XCTAssertEqual(TerminalText.escaped("\u{9B}2J\u{202E}txt.exe\u{2066}\u{2028}\u{2029}"), "\\x9B2J\\u{202E}txt.exe\\u{2066}\\u{2028}\\u{2029}")
        // The backslash doubled: a name that spells an escape is told from one that holds it.
        XCTAssertEqual(TerminalText.escaped("\\x1B"), "\\\\x1B")
        XCTAssertFalse(
            TerminalText.escaped(String(decoding: Array(0...255).map { UInt8($0) }, as: UTF8.self)).unicodeScalars.contains {
                $0.properties.generalCategory == .control
            })
    }

    /// Characters that show nothing: a name that holds one reads as a name without it ("work" and
    /// "work" with a word joiner), and tag characters carry a whole hidden text.
    func testInvisibleCharactersAreShownAsText() {
        XCTAssertEqual(
            TerminalText.escaped("w\u{200B}o\u{2060}r\u{AD}k\u{FEFF}\u{180E}\u{E0041}\u{200D}"),
            "w\\u{200B}o\\u{2060}r\\xADk\\u{FEFF}\\u{180E}\\u{E0041}\\u{200D}")
    }

    /// Combining marks draw on the character before them: a name's may not reach outside it (the
    /// quote or the word shown before the name), nor pile up into a stack tall enough to draw
    /// over the lines above and below. Text that uses them (é decomposed, Vietnamese, Hebrew
    /// points) keeps them.
    func testCombiningMarksStayOnTheNamesOwnCharacters() {
        XCTAssertEqual(TerminalText.escaped("e\u{301}t\u{1EC7}"), "e\u{301}t\u{1EC7}")
        XCTAssertEqual(TerminalText.escaped("\u{338}work"), "\\u{338}work")
        XCTAssertEqual(
            TerminalText.escaped("a" + String(repeating: "\u{36B}", count: 6) + "b\u{301}"),
            "a" + String(repeating: "\u{36B}", count: 4) + "\\u{36B}\\u{36B}b\u{301}")
    }

    func testANameFromAFileStaysInTheKeychainsFolder() throws {
        let folder = KeychainFile.directory()
        for name in ["work", "Work Wallet", "..keychain", "...", "a..b", "x.keychain", "x.keychain-db", "\u{1B}[2J"] {
            let path = try KeychainFile.resolveBareName(name)
            XCTAssertTrue(path.hasPrefix(folder + "/"), name)
            XCTAssertFalse(path.dropFirst(folder.count + 1).contains("/"), name)
            XCTAssertTrue(path.hasSuffix(".keychain-db"), name)
        }
        for name in ["", ".", "..", "../../evil", "/tmp/x", "a/b", "evil\u{0}", "/tmp/x\u{0}"] {
            XCTAssertThrowsError(try KeychainFile.resolveBareName(name), name) { XCTAssertEqual(($0 as? KeychainError)?.code, .param) }
        }
    }

    func testOnlyARegularFileIsRead() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let fifo = scratch.directory + "/wallet.kwl"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        // Both ends held here, so that this test cannot hang even on a reader that would wait.
        let held = open(fifo, O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(held, 0)
        defer { close(held) }
        XCTAssertThrowsError(try ForeignFile.read(fifo, limit: 1 << 20)) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .io)
            XCTAssertEqual(($0 as? KeychainError)?.detail, "not a regular file (a FIFO); refused unread")
        }
        XCTAssertThrowsError(try ForeignFile.read(scratch.directory, limit: 1 << 20)) {
            XCTAssertEqual(($0 as? KeychainError)?.detail, "not a regular file (a folder); refused unread")
        }
        XCTAssertThrowsError(try ForeignFile.read("/dev/null", limit: 1 << 20)) {
            XCTAssertEqual(($0 as? KeychainError)?.detail, "not a regular file (a device); refused unread")
        }
        let file = scratch.directory + "/salt"
        let fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        _ = Array("0123456789".utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        XCTAssertEqual(try ForeignFile.read(file, limit: 10).bytes, Array("0123456789".utf8))
        XCTAssertThrowsError(try ForeignFile.read(file, limit: 9)) {
            XCTAssertEqual(($0 as? KeychainError)?.detail, "it is larger than 9 bytes; refused unread")
        }
    }
}
