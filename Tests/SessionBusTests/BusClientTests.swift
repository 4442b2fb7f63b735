import Glibc
import XCTest

@testable import SessionBus

/// What the subcommands read of /proc and of a peer, and the text cuts their files need.
final class BusClientTests: XCTestCase {
    func testProgramNameOfThisProcess() throws {
        let exe = try XCTUnwrap(ProcFile.link("/proc/self/exe"))
        XCTAssertEqual(ProcFile.programName(getpid()), String(exe.split(separator: "/").last!))
        XCTAssertNil(ProcFile.link("/proc/self/no-such-link"))
        XCTAssertNil(ProcFile.read("/no/such/file"))
        // Longer than the limit is no answer, never a cut one.
        let comm = try XCTUnwrap(ProcFile.read("/proc/self/comm"))
        XCTAssertEqual(ProcFile.read("/proc/self/comm", limit: comm.count)?.count, comm.count)
        XCTAssertNil(ProcFile.read("/proc/self/comm", limit: comm.count - 1))
    }

    func testPeersAreKnownByCommandOrExecutable() {
        func peer(_ command: String, _ executable: String? = nil) -> BusClient.Peer {
            BusClient.Peer(uniqueName: ":1.5", uid: 1000, pid: 42, command: command, executable: executable)
        }
        XCTAssertTrue(peer("gnome-keyring-d").isGnomeKeyring)
        XCTAssertTrue(peer("x", "/usr/bin/gnome-keyring-daemon").isGnomeKeyring)
        XCTAssertFalse(peer("keepassxc").isGnomeKeyring)
        XCTAssertTrue(peer("keychain-secret").isKeychainService)
        XCTAssertTrue(peer("other", "/usr/bin/keychain-secret-service").isKeychainService)
        XCTAssertFalse(peer("kwalletd5", "/usr/bin/kwalletd5").isKeychainService)
        XCTAssertEqual(peer("kwalletd5").shown, "kwalletd5 (pid 42)")
    }

    func testTextCuts() {
        XCTAssertEqual(" \tkey = value\r".trimmingSpaces, "key = value")
        XCTAssertEqual("   ".trimmingSpaces, "")
        XCTAssertEqual("login.keychain-db".replacingSuffix(".keychain-db"), "login")
        XCTAssertEqual("login".replacingSuffix(".keychain-db"), "login")
        XCTAssertEqual("gnome-keyring-daemon (deleted)".replacingSuffix(" (deleted)"), "gnome-keyring-daemon")
    }
}
