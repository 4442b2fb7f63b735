import CLinux
import Glibc
import XCTest

@testable import KeychainPeers

/// The broker's reading of who asks, against real processes: a user's (uid 65534, through
/// setpriv) unless a case needs root's. Root makes the files of each case its owner and modes
/// (`make check` runs the unit tests without root: these are skipped there, run by `make test`).
final class CallerTrustTests: XCTestCase {
    override func setUpWithError() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root: files owned by another user, setpriv")
    }

    /// Parents named only, then inspected when asked: the same chain and entries as a whole
    /// evaluation, and nothing once the process is gone.
    func testParentsNamedNowAndInspectedLater() throws {
        let child = try ChildProcess(["/usr/bin/sleep", "1000"], nobody: true)
        try child.waitForExec(of: "/usr/bin/sleep")
        let handle = CallerHandle(pid: child.pid, pidfd: child.pidfd)
        let whole = CallerTrust.evaluate(handle, uid: 65534)
        let named = CallerTrust.evaluate(handle, uid: 65534, inspectingParents: false)
        XCTAssertEqual(named.chain, whole.chain)
        XCTAssertEqual(named.parentEntries, [])
        XCTAssertEqual(named.entry, whole.entry)
        let inspected = try XCTUnwrap(CallerTrust.inspectParents(of: named, handle: handle))
        XCTAssertEqual(inspected.chain, whole.chain)
        XCTAssertEqual(inspected.entries, whole.parentEntries)
        child.reap()
        XCTAssertNil(CallerTrust.inspectParents(of: named, handle: handle))
    }

    func testRootsProgramMatchesSilently() throws {
        let child = try ChildProcess(["/usr/bin/sleep", "1000"], nobody: true)
        try child.waitForExec(of: "/usr/bin/sleep")
        let caller = child.evaluate()
        XCTAssertEqual(caller.entry, "exe:/usr/bin/sleep")
        XCTAssertEqual(caller.executable, "/usr/bin/sleep")
        XCTAssertEqual(caller.warnings, [])
        XCTAssertTrue(caller.canMatchSilently)
        XCTAssertEqual(caller.pid, child.pid)
        XCTAssertEqual(caller.startTime, ProcessIdentity.startTime(of: child.pid))
        // Its parent is this test process.
        XCTAssertEqual(caller.chain.first, "\(ProcessLineage.executable(of: getpid()) ?? "?") (pid \(getpid()))")
        XCTAssertEqual(caller.chain.count, caller.parentEntries.count)
        XCTAssertLessThanOrEqual(caller.chain.count, CallerTrust.chainLimit)
        XCTAssertTrue(caller.summary.hasPrefix("sleep (/usr/bin/sleep) ← "), caller.summary)

        // Found by its pid alone, it may be a later holder of the pid: never silent.
        let looked = child.evaluate(pinned: false)
        XCTAssertEqual(looked.entry, "exe:/usr/bin/sleep")
        XCTAssertEqual(looked.warnings, [.unidentified])
        XCTAssertFalse(looked.canMatchSilently)
    }

    /// Root's own program, copied where the user (or anyone) can replace it, names nothing.
    func testProgramInAWritableDirectoryIsUnidentified() throws {
        let scratch = try ScratchDirectory()
        let open = scratch.directory("open", mode: 0o777)
        let users = scratch.directory("users", owner: 65534)
        let rooted = scratch.directory("rooted")
        try scratch.copy("/usr/bin/sleep", to: open + "/sleep")
        try scratch.copy("/usr/bin/sleep", to: users + "/sleep")
        try scratch.copy("/usr/bin/sleep", to: rooted + "/sleep")
        try scratch.copy("/usr/bin/sleep", to: rooted + "/users-sleep", owner: 65534)
        try scratch.copy("/usr/bin/sleep", to: rooted + "/open-sleep", mode: 0o777)

        for directory in [open, users] {
            let child = try ChildProcess([directory + "/sleep", "1000"], nobody: true)
            try child.waitForExec(of: directory + "/sleep")
            let caller = child.evaluate()
            XCTAssertNil(caller.entry, directory)
            XCTAssertEqual(caller.warnings, [.userWritable], directory)
            XCTAssertFalse(caller.canMatchSilently)
            XCTAssertEqual(caller.summary.prefix(6), "sleep ")
        }
        let owned = try ChildProcess([rooted + "/users-sleep", "1000"], nobody: true)
        try owned.waitForExec(of: rooted + "/users-sleep")
        XCTAssertEqual(owned.evaluate().warnings, [.notRootOwned, .userWritable])
        XCTAssertNil(owned.evaluate().entry)

        // Another user's program is not root's, though not this user's to change.
        try scratch.copy("/usr/bin/sleep", to: rooted + "/others-sleep", owner: 65533)
        let others = try ChildProcess([rooted + "/others-sleep", "1000"], nobody: true)
        try others.waitForExec(of: rooted + "/others-sleep")
        XCTAssertEqual(others.evaluate().warnings, [.notRootOwned])
        XCTAssertNil(others.evaluate().entry)

        let writable = try ChildProcess([rooted + "/open-sleep", "1000"], nobody: true)
        try writable.waitForExec(of: rooted + "/open-sleep")
        XCTAssertEqual(writable.evaluate().warnings, [.userWritable])

        // The same copy where only root writes is root's program.
        let fine = try ChildProcess([rooted + "/sleep", "1000"], nobody: true)
        try fine.waitForExec(of: rooted + "/sleep")
        XCTAssertEqual(fine.evaluate().entry, "exe:" + rooted + "/sleep")
        XCTAssertTrue(fine.evaluate().canMatchSilently)
    }

    func testDeletedProgram() throws {
        let scratch = try ScratchDirectory()
        let rooted = scratch.directory("rooted")
        try scratch.copy("/usr/bin/sleep", to: rooted + "/sleep")
        let child = try ChildProcess([rooted + "/sleep", "1000"], nobody: true)
        try child.waitForExec(of: rooted + "/sleep")
        XCTAssertTrue(child.evaluate().canMatchSilently)
        unlink(rooted + "/sleep")
        let caller = child.evaluate()
        XCTAssertNil(caller.entry)
        XCTAssertEqual(caller.executable, rooted + "/sleep (deleted)")
        XCTAssertEqual(caller.warnings, [.deleted])
    }

    /// PTRACE_TRACEME makes this test process the tracer of root's own sleep.
    func testTracedProgram() throws {
        let scratch = try ScratchDirectory()
        let traceme = scratch.path + "/traceme"
        let source = """
            #include <sys/ptrace.h>
            #include <unistd.h>
            int main(int argc, char **argv) { (void)argc; ptrace(PTRACE_TRACEME, 0, 0, 0); execv(argv[1], argv + 1); return 127; }
            """
        try XCTSkipUnless(scratch.compile(source, to: traceme), "no gcc")
        let child = try ChildProcess([traceme, "/usr/bin/sleep", "1000"])
        try child.waitForExec(of: "/usr/bin/sleep")
        let caller = child.evaluate(uid: 0)
        XCTAssertEqual(caller.entry, "exe:/usr/bin/sleep")
        XCTAssertEqual(caller.warnings, [.traced])
        XCTAssertFalse(caller.canMatchSilently)
    }

    /// LD_PRELOAD of a user's library is seen in maps (the broker cannot read environ).
    func testPreloadedLibrary() throws {
        let scratch = try ScratchDirectory()
        let users = scratch.directory("users", owner: 65534)
        let rooted = scratch.directory("rooted")
        let source = "int keychain_peers_test_preloaded(void) { return 1; }\n"
        try XCTSkipUnless(scratch.compile(source, to: users + "/pre.so", flags: ["-shared", "-fPIC"]), "no gcc")
        chown(users + "/pre.so", 65534, 65534)
        try scratch.copy(users + "/pre.so", to: rooted + "/pre.so")

        let child = try ChildProcess(["/usr/bin/sleep", "1000"], environment: ["LD_PRELOAD=" + users + "/pre.so"], nobody: true)
        try child.waitForExec(of: "/usr/bin/sleep")
        let caller = child.evaluate()
        XCTAssertEqual(caller.entry, "exe:/usr/bin/sleep")
        XCTAssertEqual(caller.warnings, [.preloaded])
        XCTAssertFalse(caller.canMatchSilently)

        // Root's library where only root writes is part of root's program.
        let rootsOwn = try ChildProcess(["/usr/bin/sleep", "1000"], environment: ["LD_PRELOAD=" + rooted + "/pre.so"], nobody: true)
        try rootsOwn.waitForExec(of: "/usr/bin/sleep")
        XCTAssertEqual(rootsOwn.evaluate().warnings, [])
    }

    func testInterpreter() throws {
        let python = "/usr/bin/python3"
        try XCTSkipUnless(access(python, X_OK) == 0, "no python3")
        let child = try ChildProcess([python, "-c", "import time; time.sleep(1000)"], nobody: true)
        var real = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        XCTAssertNotNil(realpath(python, &real))
        let path = String(cString: real)
        try child.waitForExec(of: path)
        let caller = child.evaluate()
        XCTAssertEqual(caller.entry, "exe:" + path)
        XCTAssertEqual(caller.warnings, [.interpreter])
        XCTAssertFalse(caller.canMatchSilently)
        let name = String(path.split(separator: "/").last ?? "")
        XCTAssertTrue(caller.summary.hasPrefix("\(name) (\(path): interpreter) ← "), caller.summary)
    }

    /// In its own mount namespace, root's sleep bind-mounted over /usr/bin/true reads back as
    /// /usr/bin/true: root's file, but not the one that path names here.
    func testBindMountedProgramIsNotWhatItsPathNames() throws {
        let probe = ScratchDirectory.run(["/usr/bin/unshare", "-rm", "/bin/true"])
        try XCTSkipUnless(probe == 0, "unshare -rm does not work here")
        let child = try ChildProcess([
            "/usr/bin/unshare", "-rm", "/bin/sh", "-c", "mount --bind /usr/bin/sleep /usr/bin/true && exec /usr/bin/true 1000"
        ])
        try child.waitForExec(of: "/usr/bin/true")
        var info = stat()
        XCTAssertEqual(stat("/proc/\(child.pid)/exe", &info), 0)
        var sleep = stat()
        XCTAssertEqual(stat("/usr/bin/sleep", &sleep), 0)
        XCTAssertEqual(info.st_ino, sleep.st_ino, "the child runs sleep under true's name")
        let caller = child.evaluate(uid: 0)
        XCTAssertNil(caller.entry)
        XCTAssertEqual(caller.executable, "/usr/bin/true")
        XCTAssertEqual(caller.warnings, [.unidentified])
    }

    func testStillSameUntilExec() throws {
        let child = try ChildProcess(["/bin/sh", "-c", "read line; exec /usr/bin/sleep 1000"], nobody: true, withInput: true)
        var real = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        XCTAssertNotNil(realpath("/bin/sh", &real))
        try child.waitForExec(of: String(cString: real))
        let handle = CallerHandle(pid: child.pid, pidfd: child.pidfd)
        let caller = CallerTrust.evaluate(handle, uid: 65534)
        XCTAssertEqual(caller.warnings, [.interpreter])
        XCTAssertTrue(CallerTrust.stillSame(caller, handle: handle))
        XCTAssertTrue(CallerTrust.stillSame(caller, handle: handle))

        XCTAssertEqual(write(child.input, "go\n", 3), 3)
        try child.waitForExec(of: "/usr/bin/sleep")
        XCTAssertFalse(CallerTrust.stillSame(caller, handle: handle))
        // A fresh evaluation is of the new program, and holds until it exits.
        let again = CallerHandle(pid: child.pid, pidfd: child.pidfd)
        let sleeping = CallerTrust.evaluate(again, uid: 65534)
        XCTAssertEqual(sleeping.entry, "exe:/usr/bin/sleep")
        XCTAssertTrue(CallerTrust.stillSame(sleeping, handle: again))
        XCTAssertFalse(CallerTrust.stillSame(sleeping, handle: handle))
        child.reap()
        XCTAssertFalse(CallerTrust.stillSame(sleeping, handle: again))
    }

    /// The same live process, with the connection's pidfd or without, until it is gone: the
    /// handle's status descriptor then reads nothing, and no later holder of the pid is taken
    /// for it.
    func testStillSameUntilTheProcessIsGone() throws {
        let child = try ChildProcess(["/usr/bin/sleep", "1000"])
        try child.waitForExec(of: "/usr/bin/sleep")
        let pinned = CallerHandle(pid: child.pid, pidfd: child.pidfd)
        let bare = CallerHandle(pid: child.pid, pidfd: nil)
        XCTAssertEqual(pinned.tracer, 0)
        XCTAssertTrue(CallerTrust.stillSame(CallerTrust.evaluate(pinned, uid: 0), handle: pinned))
        let caller = CallerTrust.evaluate(bare, uid: 0)
        XCTAssertTrue(CallerTrust.stillSame(caller, handle: bare))
        XCTAssertNil(CallerHandle(pid: child.pid, pidfd: -1).tracer, "a pidfd that pins nothing")
        child.reap()
        XCTAssertNil(bare.tracer, "the status of a reaped process reads nothing")
        XCTAssertFalse(CallerTrust.stillSame(caller, handle: bare))
    }

    /// A tracer that attaches after the evaluation (any process of the same uid may, where Yama
    /// is off) can make the process ask for whatever it is trusted for: it is not the same caller.
    func testNotSameOnceTraced() throws {
        let scratch = try ScratchDirectory()
        let seize = scratch.path + "/seize"
        let source = """
            #include <stdlib.h>
            #include <sys/ptrace.h>
            #include <unistd.h>
            int main(int argc, char **argv) { (void)argc; if (ptrace(PTRACE_SEIZE, atoi(argv[1]), 0, 0) != 0) return 1; pause(); return 0; }
            """
        try XCTSkipUnless(scratch.compile(source, to: seize), "no gcc")
        let child = try ChildProcess(["/usr/bin/sleep", "1000"])
        try child.waitForExec(of: "/usr/bin/sleep")
        let handle = CallerHandle(pid: child.pid, pidfd: child.pidfd)
        let caller = CallerTrust.evaluate(handle, uid: 0)
        XCTAssertEqual(caller.warnings, [])
        XCTAssertTrue(CallerTrust.stillSame(caller, handle: handle))

        let tracer = try ChildProcess([seize, "\(child.pid)"])
        for _ in 0..<6000 where ProcessStatus.read(of: child.pid)?.tracer == 0 { usleep(10_000) }
        XCTAssertEqual(ProcessStatus.read(of: child.pid)?.tracer, tracer.pid)
        XCTAssertFalse(CallerTrust.stillSame(caller, handle: handle))
        let again = CallerTrust.evaluate(handle, uid: 0)
        XCTAssertEqual(again.warnings, [.traced])
        // Evaluated traced, it stays what it was evaluated as.
        XCTAssertTrue(CallerTrust.stillSame(again, handle: handle))
        tracer.reap()
        child.reap()
    }

    /// A process gone before it is read is unidentified, never a crash.
    func testExitedProcessIsUnidentified() throws {
        let child = try ChildProcess(["/bin/true"])
        child.waitForExit()
        let caller = child.evaluate(uid: 0)
        XCTAssertEqual(caller.warnings, [.unidentified])
        XCTAssertNil(caller.entry)
        XCTAssertFalse(caller.canMatchSilently)
        XCTAssertEqual(CallerTrust.evaluate(pid: -1, pidfd: nil, uid: 0).warnings, [.unidentified])
        XCTAssertEqual(CallerTrust.evaluate(pid: getpid(), pidfd: -1, uid: 0).warnings, [.unidentified])
        // A pidfd of another process than the pid named.
        let other = try ChildProcess(["/usr/bin/sleep", "1000"])
        XCTAssertEqual(CallerTrust.evaluate(pid: getpid(), pidfd: other.pidfd, uid: 0).warnings, [.unidentified])
    }
}

/// Flatpak's programs, in a deployment made for the test under /var/lib/flatpak (removed after).
final class CallerTrustFlatpakTests: XCTestCase {
    static let id = "org.example.KeychainPeersTest"
    static let files = "/var/lib/flatpak/app/\(id)/x86_64/stable/0123abcd/files"
    static let runtimeFiles = "/var/lib/flatpak/runtime/org.example.KeychainPeersPlatform/x86_64/1/4567ef/files"
    private var made: [String] = []

    override func setUpWithError() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root: a deployment under /var/lib/flatpak")
        for (files, top) in [(Self.files, "/var/lib/flatpak/app/\(Self.id)"), (Self.runtimeFiles, "/var/lib/flatpak/runtime/org.example.KeychainPeersPlatform")]
        {
            try XCTSkipIf(access(top, F_OK) == 0, "\(top) exists: not this test's")
            made.append(top)
            XCTAssertEqual(ScratchDirectory.run(["/bin/mkdir", "-p", "-m", "0755", files + "/bin"]), 0)
            XCTAssertEqual(ScratchDirectory.run(["/bin/cp", "/usr/bin/sleep", files + "/bin/sleep"]), 0)
        }
    }

    override func tearDown() {
        for top in made { _ = ScratchDirectory.run(["/bin/rm", "-rf", top]) }
        for empty in ["/var/lib/flatpak/app", "/var/lib/flatpak/runtime", "/var/lib/flatpak"] { rmdir(empty) }
    }

    /// Outside a sandbox its path is the deployment's own.
    func testAppProgramNamesItsApp() throws {
        let child = try ChildProcess([Self.files + "/bin/sleep", "1000"], nobody: true)
        try child.waitForExec(of: Self.files + "/bin/sleep")
        let caller = child.evaluate()
        XCTAssertEqual(caller.entry, "flatpak:" + Self.id)
        XCTAssertEqual(caller.warnings, [])
    }

    /// A runtime's programs are every app's, and anyone may run one with a forged /.flatpak-info.
    func testRuntimeProgramNamesNoApp() throws {
        let child = try ChildProcess([Self.runtimeFiles + "/bin/sleep", "1000"], nobody: true)
        try child.waitForExec(of: Self.runtimeFiles + "/bin/sleep")
        let caller = child.evaluate()
        XCTAssertNil(caller.entry)
        XCTAssertEqual(caller.warnings, [.unidentified])
    }

    /// In a sandbox as Flatpak makes one (the deployment at /app, a /.flatpak-info at its root,
    /// pivot_root'ed; the old root stays under /old, as umount would need a /proc), the program's path is /app/bin/sleep: found through the info's app-path,
    /// and believed only when that is the very inode. A sandbox whose /app is other files claims
    /// the app in vain.
    func testSandboxedAppIsFoundThroughItsDeployment() throws {
        let probe = ScratchDirectory.run(["/usr/bin/unshare", "-rm", "/bin/true"])
        try XCTSkipUnless(probe == 0, "unshare -rm does not work here")
        let scratch = try ScratchDirectory()
        let other = scratch.directory("other")
        scratch.directory("other/bin")
        try scratch.copy("/usr/bin/sleep", to: other + "/bin/sleep")

        for (app, expected) in [(Self.files, "flatpak:" + Self.id), (other, nil)] {
            let root = scratch.directory("root-\(expected == nil ? "lie" : "app")")
            let info = "[Application]\\nname=\(Self.id)\\n\\n[Instance]\\napp-path=\(Self.files)\\n"
            let script = """
                set -e
                mount -t tmpfs tmpfs "$1"
                mkdir "$1/usr" "$1/app" "$1/proc" "$1/old"
                ln -s usr/lib "$1/lib"; ln -s usr/lib64 "$1/lib64"; ln -s usr/bin "$1/bin"
                mount --rbind /usr "$1/usr"
                mount --bind "$2" "$1/app"
                printf '\(info)' > "$1/.flatpak-info"
                cd "$1"
                pivot_root . old
                cd /
                exec /app/bin/sleep 1000
                """
            let child = try ChildProcess(["/usr/bin/unshare", "-rm", "/bin/sh", "-c", script, "sh", root, app])
            try child.waitForExec(of: "/app/bin/sleep")
            let caller = child.evaluate(uid: 0)
            XCTAssertEqual(caller.entry, expected, app)
            XCTAssertEqual(caller.warnings, expected == nil ? [.unidentified] : [], app)
            XCTAssertEqual(caller.executable, "/app/bin/sleep")
        }
    }
}
