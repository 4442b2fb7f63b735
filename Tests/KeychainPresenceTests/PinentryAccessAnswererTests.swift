import Glibc
import KeychainCore
@testable import KeychainPresence
import XCTest

/// The broker's question through pinentry: three buttons, then the keychain's password.
final class PinentryAccessAnswererTests: XCTestCase {
    var directory = ""
    var made = 0

    override func setUp() {
        var template = Array("/tmp/keychain-pinentry-answer-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    /// A pinentry that logs every command, answers CONFIRM with `confirm` and GETPIN with `pin`.
    func pinentry(confirm: String, pin: String = "ERR 83886179 Operation cancelled <Pinentry>") -> (program: String, log: String) {
        made += 1
        let program = directory + "/pinentry\(made)", log = directory + "/pinentry\(made).log"
        let script = """
            #!/bin/sh
            echo 'OK Pleased to meet you'
            while IFS= read -r line; do
                printf '%s\\n' "$line" >> '\(log)'
                case "$line" in
                    CONFIRM) printf '%s\\n' '\(confirm)' ;;
                    GETPIN) printf '%s\\n' '\(pin)' ;;
                    *) echo OK ;;
                esac
            done

            """
        let fd = open(program, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o700)
        _ = script.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        return (program, log)
    }

    func read(_ path: String) -> String { PlainFiles.read(path).map { String(decoding: $0, as: UTF8.self) } ?? "" }

    func testAllowOnceIsOKAndThePassword() throws {
        let (program, log) = pinentry(confirm: "OK", pin: "D pass%25word\nOK")
        let question = "git (/usr/bin/git) ← bash wants to read \"x\" (svc, account a) in /k.\nAllow it with the keychain's password."
        XCTAssertEqual(try PinentryAccessAnswerer(program: program, timeout: 10).answer(question), .once(password: Array("pass%word".utf8)))
        XCTAssertEqual(
            read(log),
            "SETTITLE Keychain access\nSETDESC git (/usr/bin/git) ← bash wants to read \"x\" (svc, account a) in /k.%0AAllow it with the keychain's password.\n"
                + "SETPROMPT Allow access to a keychain item?\nSETOK Allow once\nSETCANCEL Deny\nSETNOTOK Always allow\nCONFIRM\n"
                + "SETTITLE Keychain access\nSETDESC git (/usr/bin/git) ← bash wants to read \"x\" (svc, account a) in /k.%0AAllow once: the keychain's password.\n"
                + "SETPROMPT Password:\nSETOK Allow once\nSETCANCEL Deny\nGETPIN\n")
    }

    /// The not-OK button (GPG_ERR_NOT_CONFIRMED) is Always allow; cancel (GPG_ERR_CANCELED) Deny.
    func testTheThirdButtonIsAlwaysAndCancelIsDeny() throws {
        let (always, _) = pinentry(confirm: "ERR 83886194 Not confirmed <Pinentry>", pin: "D pw\nOK")
        XCTAssertEqual(try PinentryAccessAnswerer(program: always, timeout: 10).answer("q"), .always(password: Array("pw".utf8)))
        let (deny, log) = pinentry(confirm: "ERR 83886179 Operation cancelled <Pinentry>")
        XCTAssertEqual(try PinentryAccessAnswerer(program: deny, timeout: 10).answer("q"), .deny)
        XCTAssertFalse(read(log).contains("GETPIN"))
        // Allowed, then the password dismissed: no allowance without it.
        let (dismissed, _) = pinentry(confirm: "OK")
        XCTAssertEqual(try PinentryAccessAnswerer(program: dismissed, timeout: 10).answer("q"), .deny)
    }

    /// GNOME's pinentry shows two buttons: Always allow is a second question after Allow, whose
    /// dismissal is the lesser grant.
    func testAlwaysApartIsASecondQuestion() throws {
        let (program, log) = pinentry(confirm: "OK", pin: "D pw\nOK")
        XCTAssertEqual(
            try PinentryAccessAnswerer(program: program, timeout: 10, asksAlwaysApart: true).answer("q wants x.\nAllow it."),
            .always(password: Array("pw".utf8)))
        XCTAssertEqual(
            read(log),
            "SETTITLE Keychain access\nSETDESC q wants x.%0AAllow it.\nSETPROMPT Allow access to a keychain item?\nSETOK Allow\nSETCANCEL Deny\nCONFIRM\n"
                + "SETTITLE Keychain access\nSETDESC q wants x.%0AAllow it from now on, without asking again?\nSETPROMPT Always allow it?\n"
                + "SETOK Always allow\nSETCANCEL Only this time\nCONFIRM\n"
                + "SETTITLE Keychain access\nSETDESC q wants x.%0AAlways allow: the keychain's password.\nSETPROMPT Password:\n"
                + "SETOK Always allow\nSETCANCEL Deny\nGETPIN\n")
        let (deny, denyLog) = pinentry(confirm: "ERR 83886179 Operation cancelled <Pinentry>")
        XCTAssertEqual(try PinentryAccessAnswerer(program: deny, timeout: 10, asksAlwaysApart: true).answer("q"), .deny)
        XCTAssertEqual(read(denyLog).components(separatedBy: "CONFIRM").count, 2)
    }

    /// A pinentry that cannot ask (no display, no terminal), or none at all, or a question too
    /// long for one line: the next answerer asks.
    func testAPinentryThatCannotAskPassesTheQuestionOn() throws {
        let (noTerminal, _) = pinentry(confirm: "ERR 83918950 Inappropriate ioctl for device <Pinentry>")
        XCTAssertNil(try PinentryAccessAnswerer(program: noTerminal, timeout: 10).answer("q"))
        XCTAssertNil(try PinentryAccessAnswerer(program: directory + "/none", timeout: 10).answer("q"))
        let (fine, _) = pinentry(confirm: "OK")
        XCTAssertNil(try PinentryAccessAnswerer(program: fine, timeout: 10).answer(String(repeating: "x", count: 1000)))
        let chain = AccessAnswererChain([
            PinentryAccessAnswerer(program: noTerminal, timeout: 10), ProgramAccessAnswerer(path: "/usr/bin/false")
        ])
        XCTAssertEqual(try chain.answer("q"), .deny)
    }

    /// A wrong password asks again with the pinentry's error line.
    func testTheBrokersWrongPasswordIsShown() throws {
        let (program, log) = pinentry(confirm: "OK", pin: "D pw\nOK")
        _ = try PinentryAccessAnswerer(program: program, timeout: 10).answer("Wrong password.\nq wants to read x.\nAllow it.")
        XCTAssertTrue(
            read(log).contains("SETDESC q wants to read x.%0AAllow once: the keychain's password.\nSETPROMPT Password:\nSETERROR Wrong password.\n"), read(log))
    }

    /// The desktop's dialog only in a graphical session with a session bus.
    func testTheDesktopIsAskedOnlyInAGraphicalSessionWithABus() throws {
        try XCTSkipUnless(access(AccessAnswerers.gcrPinentry, X_OK) == 0, "pinentry-gnome3 is not installed")
        func desktop(_ values: [String: String]) -> PinentryAccessAnswerer? { AccessAnswerers.desktop { values[$0] } }
        XCTAssertNil(desktop(["DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"]))
        XCTAssertNil(desktop(["DISPLAY": ":1"]))
        XCTAssertNil(desktop(["DISPLAY": "", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"]))
        XCTAssertEqual(desktop(["DISPLAY": ":1", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"])?.program, "/usr/bin/pinentry-gnome3")
        XCTAssertEqual(desktop(["WAYLAND_DISPLAY": "wayland-0", "XDG_RUNTIME_DIR": "/run"])?.program, nil)
        XCTAssertEqual(desktop(["WAYLAND_DISPLAY": "wayland-0", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"])?.program, "/usr/bin/pinentry-gnome3")
    }

    /// The chain's order: the desktop, pinentry, the terminal; Debian's `pinentry` is not asked
    /// again when it is the desktop's pinentry-gnome3.
    func testTheChainAsksTheDesktopThenPinentryThenTheTerminal() throws {
        try XCTSkipUnless(access(AccessAnswerers.gcrPinentry, X_OK) == 0, "pinentry-gnome3 is not installed")
        // The chain without the tests' answerer or a portal backend (a desktop in the
        // environment would put the portal's dialog first): whatever the process was given,
        // put back after.
        let cleared = ["KEYCHAIN_ACCESS_ANSWERER", "XDG_CURRENT_DESKTOP"]
        let given = cleared.map { name in getenv(name).map { String(cString: $0) } }
        cleared.forEach { unsetenv($0) }
        setenv("DISPLAY", ":99", 1)
        setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent", 1)
        defer {
            unsetenv("DISPLAY")
            unsetenv("DBUS_SESSION_BUS_ADDRESS")
            for (name, value) in zip(cleared, given) { if let value { setenv(name, value, 1) } }
        }
        let chain = try XCTUnwrap(AccessAnswerers.standard() as? AccessAnswererChain).answerers
        let programs = chain.compactMap { ($0 as? PinentryAccessAnswerer)?.program }
        XCTAssertEqual(programs.first, AccessAnswerers.gcrPinentry)
        if AccessAnswerers.sameFile("/usr/bin/pinentry", AccessAnswerers.gcrPinentry) { XCTAssertEqual(programs.count, 1) }
        XCTAssertTrue(chain.last is TerminalAccessAnswerer)
        XCTAssertEqual((chain.first as? PinentryAccessAnswerer)?.asksAlwaysApart, true, "the chain: \(chain.map { type(of: $0) })")
    }

    /// Debian's `pinentry` is an alternative's link: the file it leads to is checked, and run.
    func testDebiansPinentryIsTheFileItsLinkLeadsTo() throws {
        try XCTSkipUnless(access("/usr/bin/pinentry", X_OK) == 0, "no pinentry")
        let real = String(cString: realpath("/usr/bin/pinentry", nil))
        XCTAssertEqual(AccessAnswerers.pinentry { _ in nil }?.program, real)
    }

    /// KEYCHAIN_PINENTRY only when it names root's program: a pinentry of the user's own would be
    /// handed the password.
    func testOnlyARootPinentryIsTakenFromTheEnvironment() {
        let (mine, _) = pinentry(confirm: "OK")
        XCTAssertNotEqual(AccessAnswerers.pinentry { $0 == "KEYCHAIN_PINENTRY" ? mine : nil }?.program, mine)
        XCTAssertEqual(AccessAnswerers.pinentry { $0 == "KEYCHAIN_PINENTRY" ? "/usr/bin/true" : nil }?.program, "/usr/bin/true")
    }
}
