import CLinux
import Glibc
@testable import KeychainBroker
import KeychainCore
import KeychainPeers
import XCTest

/// Review 56 (found on the SSH speed-up): a client judged ahead (as it connects to the agent) that maps a file of the user's
/// executable afterwards, before it signs, keeps its judging: stillSame sees an exec or a trace,
/// not a library loaded since. Before the change the judging was at the signature's unwrap.
final class LoadedAfterJudgingTests: XCTestCase {
    func testAClientThatLoadsAUsersLibraryAfterItsJudgingAheadIsJudgedAgain() throws {
        let python = "/usr/bin/python3"
        try XCTSkipUnless(access(python, X_OK) == 0, "no /usr/bin/python3")
        var template = Array("/tmp/keychain-loaded-XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer { _ = system("rm -rf '\(directory)'") }
        chmod(directory, 0o755)
        let library = directory + "/plugin.so", ready = directory + "/ready"
        XCTAssertEqual(system("head -c 4096 /dev/zero > '\(library)' && chown 1000:1000 '\(library)'"), 0)
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(clinux_pipe_cloexec(&fds), 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        // Stands for a program on the key's list that loads a module later (ssh's GSSAPI
        // mechanism from GSS_MECH_CONFIG, a Kerberos plugin from KRB5_CONFIG).
        let script = """
            import sys, mmap, time
            sys.stdin.readline()
            f = open('\(library)', 'rb')
            m = mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC)
            open('\(ready)', 'w').close()
            time.sleep(1000)
            """
        let words: [String] = [python, "-I", "-c", script]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        XCTAssertEqual(posix_spawn(&child, python, &actions, nil, argv, nil), 0)
        close(fds[0])
        defer {
            kill(child, SIGKILL)
            while waitpid(child, nil, 0) < 0 && errno == EINTR {}
            close(fds[1])
        }
        usleep(700_000)  // python started, blocked reading its stdin

        // python3 is not an interpreter for this test: it stands for a compiled program.
        let evaluate: CallerEvaluator = { handle, uid in CallerRecord(CallerTrust.evaluate(handle, uid: uid, interpreters: [])) }
        func relayed() throws -> RelayedProcess { try XCTUnwrap(RelayedProcess(pidfd: clinux_pidfd_open(child), marks: [.relayedCaller])) }
        let peer = BrokerPeer(uid: 1000, pid: getpid())
        let ahead = peer.facts(of: try relayed(), forKey: false, evaluate)  // the agent's relayed whoAmI as it accepts
        try XCTSkipUnless(ahead.canMatchSilently, "the client is not trusted to begin with: \(ahead.summary) \(ahead.warnings)")

        XCTAssertEqual(write(fds[1], "go\n", 3), 3)
        for _ in 0..<500 where access(ready, F_OK) != 0 { usleep(10_000) }
        XCTAssertEqual(access(ready, F_OK), 0)

        let fresh = CallerTrust.evaluate(CallerHandle(pid: child, pidfd: nil), uid: 1000, interpreters: [])
        XCTAssertFalse(fresh.canMatchSilently, "a judging now sees the user's file: \(fresh.warnings)")
        let signing = peer.facts(of: try relayed(), evaluate)  // the signature's unwrap
        XCTAssertFalse(signing.canMatchSilently, "judged as the program it was at connect: \(signing.summary)")
    }
}
