import Glibc
import KeychainCore
import KeychainPresence
import XCTest

/// The program that stands in for the person when the broker asks (KEYCHAIN_ACCESS_ANSWERER).
final class AccessAnswererTests: XCTestCase {
    var directory = ""

    override func setUp() {
        var template = Array("/tmp/keychain-answerer-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    func program(_ body: String) -> String {
        let path = directory + "/answer"
        let text = "#!/bin/sh\n" + body + "\n"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o755)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        return path
    }

    func testTheProgramReadsTheQuestionAndAnswers() throws {
        let answerer = ProgramAccessAnswerer(path: program("cat > \(directory)/question\nprintf 'always\\nthe password\\n'"))
        XCTAssertEqual(try answerer.answer("May git read it?"), .always(password: Array("the password".utf8)))
        let question = try String(decoding: XCTUnwrap(PlainFiles.read(directory + "/question")), as: UTF8.self)
        XCTAssertEqual(question, "May git read it?\n")
        XCTAssertEqual(try ProgramAccessAnswerer(path: program("printf 'once\\npw\\n'")).answer("?"), .once(password: Array("pw".utf8)))
        XCTAssertEqual(try ProgramAccessAnswerer(path: program("echo deny")).answer("?"), .deny)
        // Nothing, or nonsense, is a refusal, never an allowance.
        XCTAssertEqual(try ProgramAccessAnswerer(path: program("exit 0")).answer("?"), .deny)
        XCTAssertEqual(try ProgramAccessAnswerer(path: program("echo yes")).answer("?"), .deny)
    }

    func testAMissingProgramAsksNobody() throws {
        XCTAssertNil(try ProgramAccessAnswerer(path: directory + "/none").answer("?"))
    }

    /// Only an absolute path to a program of root's, in folders nobody else may write to: the
    /// environment is the user's to set, and its answerer would be handed the password.
    func testOnlyARootProgramIsTakenFromTheEnvironment() {
        setenv("KEYCHAIN_ACCESS_ANSWERER", "answer", 1)
        defer { unsetenv("KEYCHAIN_ACCESS_ANSWERER") }
        XCTAssertNil(ProgramAccessAnswerer.fromEnvironment())
        setenv("KEYCHAIN_ACCESS_ANSWERER", "/usr/bin/no-such-answerer", 1)
        XCTAssertNil(ProgramAccessAnswerer.fromEnvironment())
        setenv("KEYCHAIN_ACCESS_ANSWERER", "/usr/bin/true", 1)
        XCTAssertEqual(ProgramAccessAnswerer.fromEnvironment()?.path, "/usr/bin/true")
        // One in a folder every user may write to (the scratch folder under /tmp) is refused.
        setenv("KEYCHAIN_ACCESS_ANSWERER", program("echo deny"), 1)
        XCTAssertNil(ProgramAccessAnswerer.fromEnvironment())
    }

    func testTheChainTakesTheFirstThatCanAsk() throws {
        let chain = AccessAnswererChain([ProgramAccessAnswerer(path: directory + "/none"), ProgramAccessAnswerer(path: program("echo deny"))])
        XCTAssertEqual(try chain.answer("?"), .deny)
        XCTAssertNil(try AccessAnswererChain([]).answer("?"))
    }
}
