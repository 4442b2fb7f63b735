import Glibc
import KeychainCore
import PAMKeychainShim

/// Runs work in a child process with the user's identity, so the keychain file and the kernel
/// keyring are touched only as the user, never as root following paths the user controls.
/// The parent waits at most `timeout` seconds; a hung child is killed, and the login goes on.
enum AsUser {
    enum Outcome: Int32 {
        case done = 0
        case noKeychain = 10
        case wrongPassword = 11
        case locked = 12
        case failed = 13
        case cannotBecomeUser = 14
        case resetPending = 15
        case notEnrolled = 16
        case bootStateChanged = 17
        /// Created at this login and sealed to the TPM.
        case createdSealed = 18
        /// Created at this login; sealing it to the TPM failed, so its password alone protects it.
        case createdUnsealed = 19
        /// Created at this login, not asked to be sealed.
        case created = 20
        /// Nothing to do: no session to refresh, already unlocked, or a session that was not the last.
        case unchanged = 21
        case timedOut = 100
        case cannotFork = 101
    }

    struct Account {
        var uid: uid_t
        var gid: gid_t
        var home: String
        var name: String

        init?(name: String) {
            var pw = passwd()
            var result: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: 16384)
            guard getpwnam_r(name, &pw, &buffer, buffer.count, &result) == 0, result != nil, let dir = pw.pw_dir else { return nil }
            uid = pw.pw_uid
            gid = pw.pw_gid
            home = String(cString: dir)
            self.name = name
        }

        /// The login keychain, where `security create-keychain` puts it by default.
        var loginKeychain: String { home + "/.local/share/keychains/login.keychain-db" }
    }

    static func run(_ account: Account, timeout: Double = 20, _ work: () -> Outcome) -> Outcome {
        runReplying(account, timeout: timeout) { _ in work() }.outcome
    }

    /// Like `run`, and `work` may hand the parent a few bytes (at most `replyLimit`) through `reply`.
    /// The child is a fork of the application without exec: before anything else it closes every
    /// descriptor the application had open above stderr (an application may hold /etc/shadow)
    /// and clears its environment, then drops to the user. A child stopped at the time limit
    /// comes back as `.timedOut` with what it wrote before.
    static func runReplying(
        _ account: Account, timeout: Double = 20,
        _ work: (_ reply: ([UInt8]) -> Void) -> Outcome
    ) -> (outcome: Outcome, reply: [UInt8]) {
        var fds: [Int32] = [-1, -1]
        let piped = pam_keychain_pipe(&fds) == 0
        let pid = fork()
        if pid < 0 {
            if piped { close(fds[0]); close(fds[1]) }
            return (.cannotFork, [])
        }
        if pid == 0 {
            ProcessHardening.becomeUndumpable()
            guard pam_keychain_isolate_worker(piped ? fds[1] : -1) == 0, become(account) else { _exit(Outcome.cannotBecomeUser.rawValue) }
            let outcome = work { bytes in
                guard piped, bytes.count <= replyLimit else { return }
                _ = bytes.withUnsafeBytes { write(replyDescriptor, $0.baseAddress, $0.count) }
            }
            _exit(outcome.rawValue)
        }
        if piped { close(fds[1]) }
        defer { if piped { close(fds[0]) } }
        let outcome: Outcome
        // Killed at the deadline, and waited for a bounded time more: a worker stuck in the
        // kernel (a FUSE mount of the user's that never answers) must not hold the login.
        switch ChildExit.wait(for: pid, until: SystemClock.monotonic() + timeout, killingAtDeadline: true) {
        case .running:
            outcome = .timedOut
        case .exited(let status) where status & 0x7f == 0:
            outcome = Outcome(rawValue: (status >> 8) & 0xff) ?? .failed
        case .exited, .lost:
            outcome = .failed
        }
        // The child wrote less than a pipe holds. Not blocking all the same: a descendant of the
        // child's (or a process of the user's) may still hold the write end.
        var reply = [UInt8](repeating: 0, count: replyLimit)
        if piped { _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK) }
        let n = piped ? read(fds[0], &reply, reply.count) : 0
        return (outcome, n > 0 ? Array(reply.prefix(n)) : [])
    }

    static let replyLimit = 4096
    /// Where `pam_keychain_isolate_worker` puts the reply pipe in the child.
    private static let replyDescriptor: Int32 = 3

    /// Drops to the user for good (real, effective and saved ids).
    private static func become(_ account: Account) -> Bool {
        if geteuid() == 0 {
            guard initgroups(account.name, account.gid) == 0 || setgroups(1, [account.gid]) == 0,
                // As root, setgid and setuid set the real, effective and saved ids alike.
                setgid(account.gid) == 0,
                setuid(account.uid) == 0
            else { return false }
        }
        // No way back to root: a child that could regain it must not touch the user's files.
        guard getuid() == account.uid, geteuid() == account.uid, account.uid == 0 || setuid(0) != 0 else { return false }
        // The environment was cleared; the engine needs only HOME (the default keychain folder).
        setenv("HOME", account.home, 1)
        ProcessHardening.becomeUndumpable()
        return true
    }
}
