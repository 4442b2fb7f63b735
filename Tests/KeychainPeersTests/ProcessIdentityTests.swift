import CLinux
import Glibc
import XCTest

@testable import KeychainPeers

final class ProcessIdentityTests: XCTestCase {
    func testOwnProcessIsReadThroughItsPidfd() throws {
        let process = try XCTUnwrap(PinnedProcess(pid: getpid()))
        XCTAssertEqual(process.pid, getpid())
        XCTAssertTrue(process.isAlive)
        let identity = try XCTUnwrap(ProcessIdentity.read(process, provenance: .pidLookup))
        XCTAssertEqual(identity.pid, getpid())
        XCTAssertEqual(identity.startTime, ProcessIdentity.startTime(of: getpid()))
        XCTAssertLessThanOrEqual(identity.startTime, ProcessIdentity.ticksSinceBoot())
        var info = stat()
        XCTAssertEqual(stat("/proc/self/exe", &info), 0)
        XCTAssertEqual(identity.executable?.inode, UInt64(info.st_ino))
        XCTAssertEqual(identity.executable?.device, UInt64(info.st_dev))
        XCTAssertEqual(identity.sandbox, .none)
    }

    /// A pidfd outlives its process's pid: once the process is reaped, nothing is read through it,
    /// whoever is given the pid next.
    func testReapedProcessLendsNothing() throws {
        var child: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&child, "/bin/true", nil, nil, argv, environ), 0)
        let pidfd = clinux_pidfd_open(child)
        XCTAssertGreaterThanOrEqual(pidfd, 0)
        let copy = fcntl(pidfd, F_DUPFD_CLOEXEC, 3)
        let process = try XCTUnwrap(PinnedProcess(adopting: pidfd))
        var status: Int32 = 0
        XCTAssertEqual(waitpid(child, &status, 0), child)
        XCTAssertFalse(process.isAlive)
        XCTAssertNil(ProcessIdentity.read(process, provenance: .connectingProcess))
        // As the bus hands over a connecting process that is gone: fdinfo says -1.
        XCTAssertNil(PinnedProcess(adopting: copy))
        XCTAssertNil(PinnedProcess(pid: child))
    }

    func testSandboxIDs() {
        XCTAssertEqual(SandboxIDs.flatpakAppID(Array("[Application]\nname=org.example.App\n".utf8)), "org.example.App")
        XCTAssertNil(SandboxIDs.flatpakAppID(Array("[Application]\nruntime=x\n".utf8)))
        XCTAssertNil(SandboxIDs.flatpakAppID(Array("[Application]\nname=../../x y\n".utf8)))
        XCTAssertNil(SandboxIDs.flatpakAppID(Array("[Instance]\nname=org.example.App\n".utf8)))
        XCTAssertEqual(SandboxIDs.appArmorAppID("snap.firefox.firefox (enforce)"), "snap.firefox")
        XCTAssertNil(SandboxIDs.appArmorAppID("unconfined"))
        XCTAssertEqual(SandboxIDs.cgroupAppID("0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.chromium.chromium-1.scope\n"), "snap.chromium")
        XCTAssertEqual(SandboxIDs.cgroupAppID("0::/user.slice/user@1000.service/app.slice/app-flatpak-org.example.App-12345.scope\n"), "org.example.App")
        XCTAssertNil(SandboxIDs.cgroupAppID("0::/user.slice/user@1000.service/app.slice/app-gnome-firefox-1.scope\n"))
    }
}
