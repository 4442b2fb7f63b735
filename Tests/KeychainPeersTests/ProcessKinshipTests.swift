import CLinux
import Glibc
import XCTest

@testable import KeychainPeers

/// Review 55: the processes a shared answer may go to, against real processes: the asker itself,
/// its descendants and its siblings; not its parent, not a sibling's child, not a process pinned
/// by its pid alone, not one whose asker is gone.
final class ProcessKinshipTests: XCTestCase {
    func handle(_ pid: pid_t) -> CallerHandle {
        let pidfd = clinux_pidfd_open(pid)
        defer { if pidfd >= 0 { close(pidfd) } }
        return CallerHandle(pid: pid, pidfd: pidfd)
    }

    /// The child `shell` started, found through the kernel's list of its children.
    func child(of shell: ChildProcess) throws -> pid_t {
        for _ in 0..<6000 {
            if let bytes = ProcFiles.read("/proc/\(shell.pid)/task/\(shell.pid)/children", limit: 4096),
                let first = String(decoding: bytes, as: UTF8.self).split(separator: " ").first.flatMap({ pid_t($0) }),
                ProcessLineage.executable(of: first) == "/usr/bin/sleep"
            {
                return first
            }
            usleep(10_000)
        }
        throw POSIXError(ETIMEDOUT)
    }

    func testTheAskersTreeOnly() throws {
        let asker = try ChildProcess(["/usr/bin/sleep", "1000"])
        let sibling = try ChildProcess(["/usr/bin/sleep", "1000"])
        let shell = try ChildProcess(["/bin/sh", "-c", "/usr/bin/sleep 1000 & wait"])
        try asker.waitForExec(of: "/usr/bin/sleep")
        try sibling.waitForExec(of: "/usr/bin/sleep")
        let nephew = try child(of: shell)
        defer { kill(nephew, SIGKILL) }

        let askerHandle = handle(asker.pid)
        XCTAssertTrue(handle(asker.pid).isKin(of: askerHandle), "the asker itself")
        XCTAssertTrue(handle(sibling.pid).isKin(of: askerHandle), "a child of the same parent")
        XCTAssertTrue(handle(nephew).isKin(of: handle(shell.pid)), "a descendant")
        XCTAssertFalse(handle(nephew).isKin(of: askerHandle), "a sibling's child")
        XCTAssertFalse(handle(getpid()).isKin(of: askerHandle), "the asker's parent")
        XCTAssertFalse(CallerHandle(pid: sibling.pid, pidfd: nil).isKin(of: askerHandle), "a process found by its pid alone")
        asker.reap()
        XCTAssertFalse(handle(sibling.pid).isKin(of: askerHandle), "the asker is gone")
    }
}
