import CPAM
import Glibc

/// SSH_AUTH_SOCK for a login that systemd's user manager does not set it for (a console or ssh
/// login: environment generators reach the user's services and graphical session only), naming
/// the keychain's agent, for a user who chose it. The rule: never over an SSH_AUTH_SOCK already
/// in the PAM environment; set it when the agent's socket exists and is the user's (an agent
/// started with --user-socket, or one systemd already listens for), or when the user enabled
/// its socket unit (systemd starts it on the first connection). Anyone else keeps their agent.
/// Never for sshd: it copies the PAM environment over the socket of a forwarded agent (session.c
/// sets SSH_AUTH_SOCK, then copies pam_getenvlist), so ours would hide `ssh -A`'s; and a remote
/// login's user expects the agent they brought, or none, as with ssh-agent.
enum SSHAgentEnvironment {
    static let unit = "keychain-ssh-agent.socket"

    static func socket(runtimeDirectory: String) -> String { runtimeDirectory + "/keychain/ssh-agent.socket" }

    /// `unitEnabled`: what `unitEnabled(home:)` answered in open_session's worker.
    static func set(_ pam: PAMHandle, for account: AsUser.Account, unitEnabled: Bool) {
        guard pam_getenv(pam.raw, "SSH_AUTH_SOCK") == nil, pam.service != "sshd" else { return }
        let runtime = pam_getenv(pam.raw, "XDG_RUNTIME_DIR").map { String(cString: $0) } ?? "/run/user/\(account.uid)"
        let path = socket(runtimeDirectory: runtime)
        guard unitEnabled || isUsersSocket(path, uid: account.uid) else { return }
        if pam_putenv(pam.raw, "SSH_AUTH_SOCK=\(path)") == PAM_SUCCESS {
            pam.debug("open_session: SSH_AUTH_SOCK=\(path)")
        } else {
            pam.log(LOG_WARNING, "open_session: could not set SSH_AUTH_SOCK")
        }
    }

    /// The runtime folder is the system's (tmpfs under /run), read here as root.
    private static func isUsersSocket(_ path: String, uid: uid_t) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK && info.st_uid == uid
    }

    /// As `systemctl --user enable` leaves it: the user's wants link, or the machine's without the
    /// user's mask. Called in open_session's worker, as the user: the home may be a network or
    /// FUSE mount root cannot read, or one that never answers (the worker's time limit bounds that).
    static func unitEnabled(home: String) -> Bool {
        let config = home + "/.config/systemd/user"
        var info = stat()
        if lstat("\(config)/sockets.target.wants/\(unit)", &info) == 0 { return true }
        guard lstat("/etc/systemd/user/sockets.target.wants/\(unit)", &info) == 0 else { return false }
        var target = [CChar](repeating: 0, count: 64)
        return !(readlink("\(config)/\(unit)", &target, target.count - 1) > 0 && String(cString: target) == "/dev/null")
    }
}
