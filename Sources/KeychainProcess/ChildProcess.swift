import KeychainCore
internal import CLinux
import Glibc

/// A helper program run for a bounded time: polkit's pkcheck and pkttyagent, fprintd-list. Started
/// by absolute path with a fixed environment, so neither PATH nor the caller's variables choose it.
package struct ChildProcess {
    package let pid: pid_t

    /// Starts `path` with `arguments`; `stdio` are the descriptors its 0, 1 and 2 become (-1:
    /// /dev/null), `keep` descriptors it inherits under the same numbers; every other descriptor
    /// above the highest kept one is closed in the child, inherited ones included (the engine
    /// opens its own with O_CLOEXEC besides).
    /// `environment` nil passes the caller's whole environment (for a program the user chose, such
    /// as their pinentry); by default only what the polkit and fprintd clients need.
    package static func start(
        _ path: String, _ arguments: [String], stdio: (Int32, Int32, Int32) = (-1, -1, -1),
        keep: [Int32] = [], environment: [String]? = ChildProcess.minimalEnvironment()
    ) throws -> ChildProcess {
        guard access(path, X_OK) == 0 else {
            throw KeychainError(.interactionNotAllowed, "\(path) is not installed")
        }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { if null >= 0 { close(null) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, source) in [stdio.0, stdio.1, stdio.2].enumerated() {
            posix_spawn_file_actions_adddup2(&actions, source >= 0 ? source : null, Int32(target))
        }
        for fd in keep {
            // dup2 onto itself does not clear FD_CLOEXEC; a round trip through a spare number does.
            posix_spawn_file_actions_adddup2(&actions, fd, 100)
            posix_spawn_file_actions_adddup2(&actions, 100, fd)
            posix_spawn_file_actions_addclose(&actions, 100)
        }
        // What this process inherited without close-on-exec (a pipe its own parent left open) is
        // not the child's either: everything above stdio and the kept descriptors is closed.
        _ = clinux_spawn_closefrom(&actions, max(3, (keep.max() ?? 2) + 1))
        // A child of its own process group, so that a terminal's Ctrl-C reaches it through us only.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        sigaddset(&defaults, SIGINT)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var envp = (environment ?? []).map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc =
            environment == nil
            ? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
            : posix_spawn(&pid, path, &actions, &attributes, argv, &envp)
        guard rc == 0 else {
            throw KeychainError(.interactionNotAllowed, "cannot start \(path): \(String(cString: strerror(rc)))")
        }
        return ChildProcess(pid: pid)
    }

    /// LC_ALL=C keeps the helpers' messages and parsing stable; XDG_RUNTIME_DIR and the session
    /// bus's address let them reach the caller's session. Never DBUS_SYSTEM_BUS_ADDRESS: polkit
    /// and fprintd live on the system bus at its well-known socket, and a bus the caller names
    /// could answer pkcheck with a grant of its own.
    package static func minimalEnvironment() -> [String] {
        let passed = ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "TERM"]
        return ["PATH=/usr/bin:/bin", "LC_ALL=C"] + passed.compactMap { name in getenv(name).map { "\(name)=\(String(cString: $0))" } }
    }

    /// Its exit status, or nil if it was still running at `deadline` (CLOCK_MONOTONIC seconds).
    package func wait(until deadline: Double) -> Int32? {
        switch ChildExit.wait(for: pid, until: deadline) {
        case .running: return nil
        case .lost: return -1
        case let exit: return exit.code
        }
    }

    /// Ends it (SIGTERM, then SIGKILL after half a second) and reaps it, waiting a bounded time.
    package func stop() {
        kill(pid, SIGTERM)
        _ = ChildExit.wait(for: pid, until: SystemClock.monotonic() + 0.5, killingAtDeadline: true)
    }

    /// Runs `path` to completion within `seconds`, returning its status and what it printed
    /// (at most 64 KiB); nil when it could not start or ran out of time (then it is stopped).
    package static func output(_ path: String, _ arguments: [String], seconds: Double) -> (Int32, String)? {
        var fds: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&fds) == 0 else { return nil }
        defer { close(fds[0]) }
        guard let child = try? start(path, arguments, stdio: (-1, fds[1], fds[1])) else {
            close(fds[1])
            return nil
        }
        close(fds[1])
        let deadline = SystemClock.monotonic() + seconds
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var pollfd = Glibc.pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        while collected.count < 65536 {
            let left = Int32(max(0, (deadline - SystemClock.monotonic()) * 1000))
            guard left > 0, poll(&pollfd, 1, left) > 0 else { break }
            let n = read(fds[0], &buffer, buffer.count)
            if n <= 0 { break }
            collected += buffer[0..<n]
        }
        guard let status = child.wait(until: max(deadline, SystemClock.monotonic() + 0.1)) else {
            child.stop()
            return nil
        }
        return (status, String(decoding: collected, as: UTF8.self))
    }
}
