import Glibc
@testable import KeychainBroker
import KeychainCore
import KeychainTestSupport
import XCTest

/// The question names a program by its desktop name, from the broker's applications folders.
final class DesktopNamesTests: XCTestCase {
    var folder = ""

    override func setUp() {
        var template = Array("/tmp/keychain-desktop-XXXXXX".utf8CString)
        folder = String(cString: mkdtemp(&template)!)
    }

    override func tearDown() { _ = system("rm -rf '\(folder)'") }

    func write(_ name: String, _ text: String) {
        XCTAssertNoThrow(try PlainFiles.write(folder + "/" + name, Array(text.utf8)))
    }

    func testExecOrTryExecNamesTheExecutable() {
        write("a.desktop", "[Desktop Entry]\nName=True Things\nName[fr]=Vrai\nExec=env LANG=C true %U\n")
        write("b.desktop", "[Desktop Action new]\nName=Not this\nExec=/usr/bin/false\n[Desktop Entry]\nName=False\nTryExec=/bin/false\nExec=sh -c x\n")
        write("c.desktop", "[Desktop Entry]\nName=Gone\nHidden=true\nExec=/usr/bin/sleep\n")
        write("d.txt", "[Desktop Entry]\nName=Not a desktop file\nExec=/usr/bin/yes\n")
        var names = DesktopNames(folders: [folder])
        let truePath = String(cString: realpath("/usr/bin/true", nil)), falsePath = String(cString: realpath("/usr/bin/false", nil))
        XCTAssertEqual(names.name(of: truePath), "True Things")
        XCTAssertEqual(names.name(of: falsePath), "False")
        XCTAssertNil(names.name(of: String(cString: realpath("/usr/bin/sleep", nil))))
        XCTAssertNil(names.name(of: String(cString: realpath("/usr/bin/yes", nil))))
        // A file added later is read.
        usleep(20_000)
        write("e.desktop", "[Desktop Entry]\nName=Sleeper\nExec=\"/usr/bin/sleep\" 1\n")
        XCTAssertEqual(names.name(of: String(cString: realpath("/usr/bin/sleep", nil))), "Sleeper")
    }

    /// A launcher, or a program several entries name differently, gets no name of theirs.
    func testALauncherIsNotNamedAfterWhatItRuns() {
        write("a.desktop", "[Desktop Entry]\nName=Script\nExec=sh -c 'run me'\n")
        write("b.desktop", "[Desktop Entry]\nName=One\nExec=/usr/bin/true one\n")
        write("c.desktop", "[Desktop Entry]\nName=Other\nExec=/usr/bin/true other\n")
        write("d.desktop", "[Desktop Entry]\nName=Same\nExec=/usr/bin/false a\n")
        write("e.desktop", "[Desktop Entry]\nName=Same\nExec=/usr/bin/false b\n")
        var names = DesktopNames(folders: [folder])
        XCTAssertNil(names.name(of: String(cString: realpath("/bin/sh", nil))))
        XCTAssertNil(names.name(of: String(cString: realpath("/usr/bin/true", nil))))
        XCTAssertEqual(names.name(of: String(cString: realpath("/usr/bin/false", nil))), "Same")
    }

    func testExecWordsQuotesAndEnv() {
        XCTAssertEqual(DesktopNames.program(ofExec: "\"/opt/My App/app\" %U"), "/opt/My App/app")
        XCTAssertEqual(DesktopNames.program(ofExec: "env -u X A=1 B=2 firefox --new-window"), "firefox")
        XCTAssertNil(DesktopNames.program(ofExec: ""))
    }

    func testANameCannotWriteLinesOfTheQuestion() {
        XCTAssertEqual(DesktopNames.parse("[Desktop Entry]\nName=A\u{202E}B\u{1B}[2K\n").name, "A\\u{202e}B\\u{1b}[2K")
    }
}

extension CustodyTests {
    /// The question names the program (desktop name, path, parents) and the item.
    func testTheQuestionNamesTheProgramByItsDesktopName() throws {
        _ = try store.add(generic("bob", service: "mail.example", secret: "hidden"))
        let (request, _) = try lastRow()
        let truePath = String(cString: realpath("/usr/bin/true", nil))
        let caller = CallerRecord(entry: .executable(truePath), canMatchSilently: true, summary: "true (\(truePath)) ← bash")
        let broker = service(caller)
        var template = Array("/tmp/keychain-desktop-XXXXXX".utf8CString)
        let folder = String(cString: mkdtemp(&template)!)
        defer { _ = system("rm -rf '\(folder)'") }
        try PlainFiles.write(folder + "/t.desktop", Array("[Desktop Entry]\nName=Truth Teller\nExec=true\n".utf8))
        broker.desktopNames = DesktopNames(folders: [folder])
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        guard case .question(let text) = try broker.handle(.unwrap(request, interaction: .allowed, answer: .none, password: []), from: me) else {
            return XCTFail("not asked")
        }
        XCTAssertTrue(text.hasPrefix("\"Truth Teller\", that is true (\(truePath)) ← bash, wants to read \""), text)
        XCTAssertTrue(text.contains("(mail.example, account bob)"), text)
    }
}
