import Glibc
import KeychainCore
import SecretServiceBus
import SecretServiceItems
import SessionBus

/// Other programs `enable` and `disable` run: systemctl, gnome-keyring-daemon, this program.
enum Spawn {
    /// Runs `argv` (argv[0] looked for in PATH) with stdin from /dev/null, stdout and stderr
    /// captured, for at most `seconds` (then killed): its exit status and output, or nil when it
    /// could not be started. Programs that daemonize (gnome-keyring-daemon --start) close what
    /// they inherited in the process that stays, so the output ends when the first one exits.
    static func run(_ argv: [String], seconds: Double = 30) -> (status: Int32, output: String)? {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        guard let pid = start(argv, stdout: fds[1], setsid: false) else {
            close(fds[0]); close(fds[1])
            return nil
        }
        close(fds[1])
        defer { close(fds[0]) }
        let deadline = SystemClock.monotonic() + seconds
        var output = Bytes()
        var buffer = Bytes(repeating: 0, count: 4096)
        while output.count < 1 << 20 {
            let left = Int32(max(0, (deadline - SystemClock.monotonic()) * 1000))
            var poller = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, left)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { break }
            let n = read(fds[0], &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            output += buffer[..<n]
        }
        let exit = ChildExit.wait(for: pid, until: deadline, killingAtDeadline: true)
        if exit == .running { return (124, String(decoding: output, as: UTF8.self)) }
        return (exit.code ?? 1, String(decoding: output, as: UTF8.self))
    }

    /// Starts `argv` in a session of its own, its output to /dev/null, without waiting for it
    /// (a service that outlives this command).
    static func detached(_ argv: [String]) -> pid_t? {
        start(argv, stdout: -1, setsid: true)
    }

    private static func start(_ argv: [String], stdout: Int32, setsid: Bool) -> pid_t? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if stdout >= 0 {
            posix_spawn_file_actions_adddup2(&actions, stdout, 1)
            posix_spawn_file_actions_adddup2(&actions, stdout, 2)
            posix_spawn_file_actions_addclose(&actions, stdout)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26), which the Glibc module leaves out (_GNU_SOURCE).
        if setsid { posix_spawnattr_setflags(&attributes, 0x80) }
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, argv[0], &actions, &attributes, &cArguments, environ)
        return rc == 0 ? pid : nil
    }
}
