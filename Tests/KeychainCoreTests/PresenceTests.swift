@testable import KeychainCore
@testable import KeychainProcess
import Glibc
import XCTest

/// The engine's parts of user presence: the application-password seal and the helper-program runner.
final class PresenceTests: XCTestCase {
    func testApplicationPasswordSealOpensOnlyWithItsPassword() throws {
        let sealed = try ApplicationPassword.seal(Array("secret".utf8), password: Array("pw".utf8))
        XCTAssertNil(sealed.firstRange(of: Array("secret".utf8)), "not in the clear")
        XCTAssertEqual(try ApplicationPassword.open(sealed, password: Array("pw".utf8)), Array("secret".utf8))
        XCTAssertThrowsError(try ApplicationPassword.open(sealed, password: Array("pW".utf8))) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .authFailed)
        }
        // The cost in the header is authenticated: lowered, the tag breaks (or the header is refused).
        var cheaper = sealed
        cheaper[5] -= 4
        XCTAssertThrowsError(try ApplicationPassword.open(cheaper, password: Array("pw".utf8)))
        var absurd = sealed
        absurd[5] = 40
        XCTAssertThrowsError(try ApplicationPassword.open(absurd, password: Array("pw".utf8))) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .decode, "refused before any derivation")
        }
        XCTAssertThrowsError(try ApplicationPassword.open(Array(sealed.prefix(10)), password: Array("pw".utf8)))
        XCTAssertThrowsError(try ApplicationPassword.seal([1], password: [])) { XCTAssertEqual(($0 as? KeychainError)?.code, .param) }
        XCTAssertThrowsError(try ApplicationPassword.seal([1], password: [0x61, 0])) { XCTAssertEqual(($0 as? KeychainError)?.code, .param) }
    }

    func testChildProcessIsBoundedAndReportsItsStatus() throws {
        let (status, output) = try XCTUnwrap(ChildProcess.output("/bin/sh", ["-c", "echo hi; exit 3"], seconds: 10))
        XCTAssertEqual(status, 3)
        XCTAssertEqual(output, "hi\n")
        XCTAssertNil(ChildProcess.output("/bin/sleep", ["30"], seconds: 0.3), "stopped at the bound")
        XCTAssertThrowsError(try ChildProcess.start("/nonexistent/pkcheck", [])) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .interactionNotAllowed)
        }
    }

    /// A wait ends with the child's status, the signal that killed it as a shell counts it, a
    /// process that is not a child as unknown, and a child still running at the deadline as such.
    func testChildExitTellsHowAWaitEnded() throws {
        let exiting = try ChildProcess.start("/bin/sh", ["-c", "exit 5"])
        XCTAssertEqual(ChildExit.wait(for: exiting.pid, until: SystemClock.monotonic() + 60).code, 5)
        let sleeping = try ChildProcess.start("/bin/sleep", ["30"])
        XCTAssertEqual(ChildExit.wait(for: sleeping.pid, until: SystemClock.monotonic() + 0.2), .running)
        kill(sleeping.pid, SIGKILL)
        XCTAssertEqual(ChildExit.wait(for: sleeping.pid, until: SystemClock.monotonic() + 60).code, 128 + SIGKILL)
        XCTAssertEqual(ChildExit.wait(for: 1, until: SystemClock.monotonic() + 60), .lost, "init is no child of this process")
    }

    /// At the deadline, killed and reaped within a bounded time; a deadline that is not a number
    /// has passed (it used to trap converting the time left to poll's milliseconds).
    func testChildExitKillsAtTheDeadlineAndNeverWaitsUnbounded() throws {
        let sleeping = try ChildProcess.start("/bin/sleep", ["30"])
        let start = SystemClock.monotonic()
        XCTAssertEqual(ChildExit.wait(for: sleeping.pid, until: start + 0.2, killingAtDeadline: true), .running)
        XCTAssertLessThan(SystemClock.monotonic() - start, 0.2 + ChildExit.killGrace + 1)
        XCTAssertEqual(ChildExit.wait(for: sleeping.pid, until: SystemClock.monotonic() + 1), .lost, "killed and reaped already")
        let other = try ChildProcess.start("/bin/sleep", ["30"])
        XCTAssertEqual(ChildExit.wait(for: other.pid, until: .nan), .running)
        XCTAssertEqual(ChildExit.wait(for: other.pid, until: .nan, killingAtDeadline: true), .running)
        XCTAssertEqual(ChildExit.wait(for: other.pid, until: SystemClock.monotonic() + 1), .lost)
    }

    /// A descriptor this process inherited without close-on-exec (a pipe its parent left open, as
    /// a CI runner or sshd may) does not reach the programs it starts, such as keychain-tpm-helper.
    func testChildProcessDoesNotInheritAnOpenDescriptor() throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        defer { fds.forEach { close($0) } }
        let high = dup2(fds[1], 201)
        XCTAssertEqual(high, 201)
        defer { close(201) }
        XCTAssertEqual(fcntl(201, F_GETFD) & FD_CLOEXEC, 0, "the descriptor is inheritable")
        let (status, output) = try XCTUnwrap(ChildProcess.output("/bin/sh", ["-c", "ls /proc/self/fd"], seconds: 10))
        XCTAssertEqual(status, 0)
        let open = output.split(separator: "\n").compactMap { Int32($0) }
        XCTAssertFalse(open.contains(201), "the child holds descriptor 201: \(open)")
        XCTAssertFalse(open.contains(fds[1]), "the child holds descriptor \(fds[1]): \(open)")
    }
}
