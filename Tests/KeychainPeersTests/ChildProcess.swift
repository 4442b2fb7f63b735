import CLinux
import Glibc
import XCTest

@testable import KeychainPeers

/// A program started for a test to be evaluated as a caller: killed and reaped when the test ends.
final class ChildProcess {
    let pid: pid_t
    /// A pidfd, as SO_PEERPIDFD would give the broker.
    let pidfd: Int32
    /// The write end of the child's stdin, when asked for.
    private(set) var input: Int32 = -1
    private var reaped = false

    /// Runs `argv` (the first an absolute path) with `environment` added to none; with `nobody`,
    /// through setpriv as uid and gid 65534 with no groups, so that it is a user's process.
    init(_ argv: [String], environment: [String] = [], nobody: Bool = false, withInput: Bool = false) throws {
        let all = (nobody ? ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] : []) + argv
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var fds: [Int32] = [-1, -1]
        if withInput {
            XCTAssertEqual(clinux_pipe_cloexec(&fds), 0)
            posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        }
        let cArgs: [UnsafeMutablePointer<CChar>?] = all.map { strdup($0) } + [nil]
        let cEnv: [UnsafeMutablePointer<CChar>?] = (["PATH=/usr/sbin:/usr/bin:/sbin:/bin"] + environment).map { strdup($0) } + [nil]
        defer { (cArgs + cEnv).forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, all[0], &actions, nil, cArgs, cEnv)
        if withInput {
            close(fds[0])
            input = fds[1]
        }
        guard status == 0 else { throw POSIXError(status) }
        pid = child
        pidfd = clinux_pidfd_open(child)
    }

    deinit {
        if !reaped { reap() }
        if pidfd >= 0 { close(pidfd) }
        if input >= 0 { close(input) }
    }

    /// Kills the child (if it still runs) and waits for it: its pid may then be anyone's.
    func reap() {
        if !reaped { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        reaped = true
    }

    /// Waits for the child to exit by itself.
    func waitForExit() {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        reaped = true
    }

    /// Waits until the child runs `path` (setpriv and shells exec it). Bounded only so that a
    /// broken test ends: nothing is asserted of how long it took.
    func waitForExec(of path: String) throws {
        for _ in 0..<6000 {
            if ProcessLineage.executable(of: pid) == path {
                Self.waitUntilAsleep(pid)
                return
            }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                reaped = true
                throw POSIXError(ECHILD)
            }
            usleep(10_000)
        }
        throw POSIXError(ETIMEDOUT)
    }

    /// Until `pid` sleeps (its state S in stat): the loader has mapped its libraries by then, so
    /// a judging sees them all and `CallerTrust.stillSame` finds none mapped since. Bounded; a
    /// process that never sleeps (it exits) is waited for no longer.
    static func waitUntilAsleep(_ pid: Int32) {
        for _ in 0..<500 {
            guard let fields = ProcessLineage.statFields(of: pid), let state = fields.first else { return }
            if state == [UInt8(ascii: "S")] { return }
            usleep(10_000)
        }
    }

    func evaluate(uid: UInt32 = 65534, pinned: Bool = true) -> Caller {
        CallerTrust.evaluate(pid: pid, pidfd: pinned ? pidfd : nil, uid: uid)
    }
}

struct POSIXError: Error {
    var code: Int32
    init(_ code: Int32) { self.code = code }
}

/// A directory for a test's files, under /run (root's, mode 0755, not the world-writable /tmp,
/// so that only the directories a test makes decide what is "user-writable"); removed after.
final class ScratchDirectory {
    let path: String

    init() throws {
        var template = Array("/run/keychain-peers-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(errno) }
        path = String(cString: made)
        chmod(path, 0o755)
    }

    deinit { _ = Self.run(["/bin/rm", "-rf", path]) }

    /// Makes `name` (a directory) with `mode` and owner.
    @discardableResult
    func directory(_ name: String, mode: mode_t = 0o755, owner: uid_t = 0) -> String {
        let full = path + "/" + name
        mkdir(full, mode)
        chmod(full, mode)
        chown(full, owner, owner)
        return full
    }

    /// Copies `source` to `destination` with `mode` and owner.
    func copy(_ source: String, to destination: String, mode: mode_t = 0o755, owner: uid_t = 0) throws {
        guard Self.run(["/bin/cp", source, destination]) == 0 else { throw POSIXError(EIO) }
        chmod(destination, mode)
        chown(destination, owner, owner)
    }

    /// Runs a program to its end; its exit status.
    static func run(_ argv: [String]) -> Int32 {
        let cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var child: pid_t = 0
        guard posix_spawn(&child, argv[0], nil, nil, cArgs, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    /// Compiles C `source` with gcc (`flags` such as -shared) to `output`; false without gcc.
    func compile(_ source: String, to output: String, flags: [String] = []) -> Bool {
        let file = path + "/" + "source-\(UInt32.random(in: 0...UInt32.max)).c"
        guard let stream = fopen(file, "w") else { return false }
        fputs(source, stream)
        fclose(stream)
        return access("/usr/bin/gcc", X_OK) == 0 && Self.run(["/usr/bin/gcc"] + flags + ["-o", output, file]) == 0
    }
}
