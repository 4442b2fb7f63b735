import Glibc
import KeychainCore

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
        let pid = fork()
        if pid < 0 { return .cannotFork }
        if pid == 0 {
            guard become(account) else { _exit(Outcome.cannotBecomeUser.rawValue) }
            _exit(work().rawValue)
        }
        var status: Int32 = 0
        var waited = 0.0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if waited >= timeout {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                return .timedOut
            }
            usleep(10_000)
            waited += 0.01
        }
        let exited = status & 0x7f == 0
        return exited ? Outcome(rawValue: (status >> 8) & 0xff) ?? .failed : .failed
    }

    /// Drops to the user for good (real, effective and saved ids), with a clean environment.
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
        for name in ["KEYCHAIN_PATH", "XDG_DATA_HOME", "XDG_CONFIG_HOME"] { unsetenv(name) }
        setenv("HOME", account.home, 1)
        ProcessHardening.becomeUndumpable()
        return true
    }
}
