import Glibc
import KeychainBroker
import XCTest

final class BrokerHardeningTests: XCTestCase {
    /// In a child (the filter cannot be taken off again), which then runs python3 under it (a
    /// seccomp filter outlives exec; ptrace(2) is variadic, so Swift cannot call it): attaching to
    /// the parent and reading its memory fail with EPERM, although the child is root.
    func testTracingIsDeniedOnceHardened() throws {
        let python = "/usr/bin/python3"
        guard access(python, X_OK) == 0 else { throw XCTSkip("no \(python)") }
        let script = """
            import ctypes, os, sys
            libc = ctypes.CDLL(None, use_errno=True)
            parent = os.getppid()
            if libc.ptrace(16, parent, None, None) != -1 or ctypes.get_errno() != 1: sys.exit(11)
            class iovec(ctypes.Structure): _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
            buf = ctypes.create_string_buffer(1)
            local = iovec(ctypes.cast(buf, ctypes.c_void_p), 1); remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 1)
            if libc.process_vm_readv(parent, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) != -1 or ctypes.get_errno() != 1: sys.exit(12)
            status = open("/proc/self/status").read()
            if "NoNewPrivs:\\t1" not in status or "Seccomp:\\t2" not in status: sys.exit(13)
            """
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(python), strdup("-c"), strdup(script), nil]
        defer { argv.forEach { free($0) } }
        let pid = fork()
        XCTAssertGreaterThanOrEqual(pid, 0)
        if pid == 0 {
            guard BrokerHardening.apply() == nil else { _exit(10) }
            execv(python, argv)
            _exit(14)
        }
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        XCTAssertEqual(status, 0, "the child's exit code (status >> 8) says which check failed, 10 to 14")
    }
}
