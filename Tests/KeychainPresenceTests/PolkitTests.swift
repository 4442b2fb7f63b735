@testable import KeychainCore
@testable import KeychainPresence
import Glibc
import XCTest

/// Polkit without a polkit: the fprintd output we read, the subject we describe ourselves as, the
/// timeout we take from the environment, and the answer when nothing can be reached.
final class PolkitTests: XCTestCase {
    func testFprintdListOutput() {
        XCTAssertTrue(
            PolkitAuthorizer.hasEnrolledFinger(
                fprintdListOutput: """
                    found 1 devices
                    Device at /net/reactivated/Fprint/Device/0
                    Using device /net/reactivated/Fprint/Device/0
                    Fingerprints for user alice on Synaptics Sensors (press):
                     - #0: right-index-finger
                    """))
        XCTAssertFalse(
            PolkitAuthorizer.hasEnrolledFinger(
                fprintdListOutput: """
                    found 1 devices
                    Device at /net/reactivated/Fprint/Device/0
                    Using device /net/reactivated/Fprint/Device/0
                    User alice has no fingers enrolled for Synaptics Sensors.
                    """))
        XCTAssertFalse(PolkitAuthorizer.hasEnrolledFinger(fprintdListOutput: "No devices available\n"))
        XCTAssertFalse(PolkitAuthorizer.hasEnrolledFinger(fprintdListOutput: ""))
    }

    func testTerminalLineCarriesNoControlCharacters() {
        let reason = "/tmp/x\u{1b}[2K\u{1b}[1A/usr/bin/ssh asks\r\n\u{9b}2J to sign with \u{7f}work (SHA256:abc) for host \u{e9}"
        XCTAssertEqual(
            PolkitAuthorizer.terminalLine(reason),
            "/tmp/x\\x1B[2K\\x1B[1A/usr/bin/ssh asks\\x0D\\x0A\\x9B2J to sign with \\x7Fwork (SHA256:abc) for host \u{e9}\n")
    }

    func testSubjectNamesThisProcessWithItsStartTime() throws {
        let parts = try XCTUnwrap(PolkitAuthorizer.subject()).split(separator: ",")
        XCTAssertEqual(parts.count, 3)
        XCTAssertEqual(parts.first.map(String.init), "\(getpid())")
        XCTAssertGreaterThan(UInt64(parts[1]) ?? 0, 0)
        XCTAssertEqual(parts.last.map(String.init), "\(getuid())")
    }

    func testPresenceTimeoutFromTheEnvironmentMustBeFinite() {
        defer { unsetenv("KEYCHAIN_PRESENCE_TIMEOUT") }
        for text in ["nan", "inf", "-inf"] {
            setenv("KEYCHAIN_PRESENCE_TIMEOUT", text, 1)
            XCTAssertEqual(PolkitAuthorizer().timeout, 120, text)
        }
        setenv("KEYCHAIN_PRESENCE_TIMEOUT", "5", 1)
        XCTAssertEqual(PolkitAuthorizer().timeout, 5)
    }

    /// No polkit to reach (pkcheck missing, or no system bus): errSecInteractionNotAllowed at once.
    func testPolkitUnreachableIsInteractionNotAllowed() {
        let answer = PolkitAuthorizer(timeout: 20).authorize(reason: nil)
        if case .granted = answer { XCTFail("nobody was asked, yet granted") }
        if access("/run/dbus/system_bus_socket", F_OK) != 0 {
            guard case .unavailable = answer else { return XCTFail("\(answer)") }
            XCTAssertThrowsError(try answer.check()) { XCTAssertEqual(($0 as? KeychainError)?.code, .interactionNotAllowed) }
        }
    }

    /// The engine asks nobody by itself; a front end installs polkit, and a program that chose its
    /// own authorizer keeps it.
    func testSetupInstallsPolkitOnlyOverTheEnginesDefault() {
        guard case .unavailable = NobodyToAsk().authorize(reason: nil) else { return XCTFail("the engine's default asked someone") }
        let before = KeychainStore.defaultPresenceAuthorizer
        defer { KeychainStore.defaultPresenceAuthorizer = before }
        PresenceSetup.installPolkit()
        XCTAssertFalse(KeychainStore.defaultPresenceAuthorizer is NobodyToAsk, "nothing installed")
        KeychainStore.defaultPresenceAuthorizer = TestAuthorizer()
        PresenceSetup.installPolkit()
        XCTAssertTrue(KeychainStore.defaultPresenceAuthorizer is TestAuthorizer, "the program's own choice was replaced")
    }
}

private struct TestAuthorizer: PresenceAuthorizer {
    func authorize(reason: String?) -> PresenceAnswer { .granted }
    func fingersEnrolled() -> Bool { false }
}
