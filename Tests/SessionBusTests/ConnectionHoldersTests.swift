import Glibc
import KeychainPeers
import XCTest

@testable import SessionBus

/// A stand-in bus: a unix socket listening at a path, the "service's" connection to it, and a
/// client's, held by this test process.
final class ConnectionHoldersTests: XCTestCase {
    private var folder = ""
    private var descriptors: [Int32] = []

    override func setUpWithError() throws {
        folder = String(cString: mkdtemp(strdup("/tmp/holders-XXXXXX")))
    }

    override func tearDown() {
        for fd in descriptors { close(fd) }
        unlink(folder + "/bus")
        rmdir(folder)
    }

    /// A child running /bin/sleep: it inherits every descriptor not close-on-exec.
    private func spawnSleeper() throws -> pid_t {
        var child: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer { for arg in argv { free(arg) } }
        XCTAssertEqual(posix_spawn(&child, "/bin/sleep", nil, nil, argv, environ), 0)
        return child
    }

    private func reap(_ child: pid_t) {
        kill(child, SIGKILL)
        var status: Int32 = 0
        waitpid(child, &status, 0)
    }

    private func unixSocket(inherited: Bool = false) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | (inherited ? 0 : Int32(SOCK_CLOEXEC.rawValue)), 0)
        descriptors.append(fd)
        return fd
    }

    private func address() -> (sockaddr_un, socklen_t) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in (folder + "/bus").utf8.enumerated() { raw[index] = byte }
        }
        return (address, socklen_t(MemoryLayout<sockaddr_un>.size))
    }

    /// A listening "bus" and a connection to it: its descriptor.
    private func connect(to listener: Int32, inherited: Bool = false) throws -> Int32 {
        let fd = unixSocket(inherited: inherited)
        var (address, length) = address()
        let rc = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) } }
        XCTAssertEqual(rc, 0)
        let accepted = accept(listener, nil, nil)
        XCTAssertGreaterThanOrEqual(accepted, 0)
        descriptors.append(accepted)
        return fd
    }

    private func listening() throws -> Int32 {
        let listener = unixSocket()
        var (address, length) = address()
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(listener, 8), 0)
        return listener
    }

    /// Held by this process alone: its exec stamp, which stays the same while it execs nothing.
    func testTheOnlyHolder() throws {
        let listener = try listening()
        let service = try connect(to: listener)
        _ = try connect(to: listener)
        let me = try XCTUnwrap(PinnedProcess(pid: getpid()))
        let stamp = try XCTUnwrap(ConnectionHolders.soleHolder(me, busConnection: service))
        XCTAssertEqual(ConnectionHolders.ExecStamp(of: me), stamp)
        // What it costs a new sender: one socket table and a look at the user's processes.
        let rounds = 20
        let started = SystemClockForTests.now()
        for _ in 0..<rounds { _ = ConnectionHolders.soleHolder(me, busConnection: service) }
        print("ConnectionHolders.soleHolder: \((SystemClockForTests.now() - started) / Double(rounds) * 1000) ms a sender")
    }

    /// A bus socket another process holds too (here a child that inherited it): not told.
    func testASharedConnection() throws {
        let listener = try listening()
        let service = try connect(to: listener)
        _ = try connect(to: listener, inherited: true)
        let child = try spawnSleeper()
        defer { reap(child) }
        let me = try XCTUnwrap(PinnedProcess(pid: getpid()))
        XCTAssertNil(ConnectionHolders.soleHolder(me, busConnection: service))
        // The child holds a bus socket too, not alone either; and one with no bus socket at all is
        // not the connection's.
        let sleeper = try XCTUnwrap(PinnedProcess(pid: child))
        XCTAssertNil(ConnectionHolders.soleHolder(sleeper, busConnection: service))
        XCTAssertNotEqual(ConnectionHolders.ExecStamp(of: sleeper), ConnectionHolders.ExecStamp(of: me))
    }

    /// A process holding no socket of that bus (a child that inherited none): not the connection's.
    func testNoBusSocket() throws {
        let listener = try listening()
        let service = try connect(to: listener)
        _ = try connect(to: listener)
        let child = try spawnSleeper()
        defer { reap(child) }
        let sleeper = try XCTUnwrap(PinnedProcess(pid: child))
        XCTAssertNil(ConnectionHolders.soleHolder(sleeper, busConnection: service))
        XCTAssertNotNil(ConnectionHolders.soleHolder(try XCTUnwrap(PinnedProcess(pid: getpid())), busConnection: service))
    }
}

private enum SystemClockForTests {
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
