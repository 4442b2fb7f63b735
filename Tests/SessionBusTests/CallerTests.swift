import Glibc
import KeychainPeers
import XCTest

@testable import SessionBus

/// Who sent a call, from what the bus and /proc say: the owner an app's items carry, and refusal
/// when the caller cannot be told.
final class CallerTests: XCTestCase {
    func testOwnersAndConfinement() {
        XCTAssertNil(SessionBus.Caller.unconfined.owner)
        XCTAssertFalse(SessionBus.Caller.unconfined.isConfined)
        XCTAssertEqual(SessionBus.Caller.app("org.example.App").owner, "org.example.App")
        XCTAssertTrue(SessionBus.Caller.app("org.example.App").isConfined)
        // Refused everything: confined, and no owner's view either.
        XCTAssertNil(SessionBus.Caller.unidentified.owner)
        XCTAssertTrue(SessionBus.Caller.unidentified.isConfined)
    }

    /// No process known is unidentified; a snap's AppArmor label needs no process.
    func testFromTheBussCredentials() {
        XCTAssertEqual(SessionBus.Caller(identity: nil, securityLabel: nil), .unidentified)
        XCTAssertEqual(SessionBus.Caller(identity: nil, securityLabel: "snap.firefox.firefox (enforce)"), .app("snap.firefox"))
        XCTAssertEqual(SessionBus.Caller(identity: nil, securityLabel: "unconfined"), .unidentified)
        XCTAssertEqual(SessionBus.Caller(identity: nil, securityLabel: "snap.bad/name.app (enforce)"), .unidentified)
    }

    /// This test process itself, found by its pid, as an older bus (no ProcessFD) leaves it.
    func testThisProcessByPid() throws {
        let now = ProcessIdentity.ticksSinceBoot()
        let credentials = BusPeer.Credentials(pid: getpid())
        let identity = try XCTUnwrap(BusPeer.identity(of: credentials, appeared: now))
        XCTAssertEqual(identity.pid, getpid())
        XCTAssertEqual(SessionBus.Caller(identity: identity, securityLabel: nil), .unconfined)
        // A process that started after the connection appeared holds a reused pid: not the client.
        XCTAssertNil(BusPeer.identity(of: credentials, appeared: 0))
        // A bus that names the process by a pidfd, which it no longer holds: not known.
        var reaped = credentials
        reaped.busGivesProcessFD = true
        XCTAssertNil(BusPeer.identity(of: reaped, appeared: now))
    }

    func testAppIDs() {
        XCTAssertTrue(SessionBus.Caller.isAppID("org.example.App"))
        XCTAssertTrue(SessionBus.Caller.isAppID("snap.firefox"))
        XCTAssertFalse(SessionBus.Caller.isAppID(""))
        XCTAssertFalse(SessionBus.Caller.isAppID("../etc"))
        XCTAssertFalse(SessionBus.Caller.isAppID("a b"))
    }
}
