import KeychainCore
import KeychainProcess
internal import CLinux
import Glibc

/// User presence through polkit: the calling process is the subject of the project's action
/// (`auth_self`), so the session's authentication agent (GNOME's or KDE's dialog, or pkttyagent on a
/// terminal) authenticates the user through polkit's PAM stack, password or finger.
///
/// pkcheck asks, rather than a D-Bus client of our own, because the tools are linked statically and
/// sd-bus has no static library; pkcheck's exit status tells apart every answer polkit gives.
/// Polkit lets only root or the action's owner pass details, so the agent shows the action's own
/// message; the operation prompt is printed on the terminal when the tool starts a text agent.
package struct PolkitAuthorizer: PresenceAuthorizer {
    /// The action `polkit/org.keychain-linux.user-presence.policy` declares.
    package static let actionID = "org.keychain-linux.user-presence"
    static let pkcheck = "/usr/bin/pkcheck"
    static let pkttyagent = "/usr/bin/pkttyagent"
    static let fprintdList = "/usr/bin/fprintd-list"

    /// How long to wait for the person (KEYCHAIN_PRESENCE_TIMEOUT seconds, 1-600; default 120).
    package var timeout: Double
    /// Start pkttyagent on the controlling terminal when no other agent serves this process, as
    /// pkexec does: `security` on an SSH terminal asks there.
    package var terminalAgent: Bool

    package init(terminalAgent: Bool = false, timeout: Double? = nil) {
        self.terminalAgent = terminalAgent
        // Finite only: "nan" and "inf" parse as numbers, and a NaN passes min and max unchanged.
        let fromEnvironment = getenv("KEYCHAIN_PRESENCE_TIMEOUT").flatMap { Double(String(cString: $0)) }.flatMap { $0.isFinite ? $0 : nil }
        self.timeout = min(max(timeout ?? fromEnvironment ?? 120, 1), 600)
    }

    package func authorize(reason: String?) -> PresenceAnswer {
        guard let subject = Self.subject() else { return .unavailable("cannot describe this process to polkit") }
        let deadline = SystemClock.monotonic() + timeout
        var answer = check(subject, until: deadline)
        // As pkexec does: only when no agent serves us (no desktop session, an SSH terminal), one on
        // the controlling terminal, then ask again.
        if terminalAgent, answer == .unavailable(Self.noAgent), let agent = startTextAgent(subject: subject, reason: reason) {
            defer { agent.stop() }
            answer = check(subject, until: deadline)
        }
        return answer
    }

    static let noAgent = "no polkit authentication agent serves this process"

    private func check(_ subject: String, until deadline: Double) -> PresenceAnswer {
        let pkcheck: ChildProcess
        do {
            pkcheck = try ChildProcess.start(
                Self.pkcheck,
                [
                    "--action-id", Self.actionID, "--process", subject,
                    "--allow-user-interaction"
                ])
        } catch {
            return .unavailable("polkit is not available (\(Self.pkcheck))")
        }
        guard let status = pkcheck.wait(until: deadline) else {
            pkcheck.stop()
            return .unavailable("no answer within \(Int(timeout)) s")
        }
        switch status {
        case 0: return .granted
        case 1: return .denied
        case 2: return .unavailable(Self.noAgent)
        case 3: return .canceled
        default: return .unavailable("polkit could not be asked (pkcheck exit \(status))")
        }
    }

    /// The subject as pkcheck takes it, `pid,start-time,uid`: the start time keeps a recycled pid
    /// from standing in for this process.
    static func subject() -> String? {
        let fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[0..<n], as: UTF8.self)
        // Fields after the command name (which may hold spaces and parentheses): state is field 3,
        // starttime field 22.
        guard let paren = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: paren)...].split(separator: " ")
        guard fields.count > 19, let start = UInt64(fields[19]) else { return nil }
        return "\(getpid()),\(start),\(getuid())"
    }

    /// pkttyagent for this process on the controlling terminal, registered (or given up) before
    /// pkcheck asks again. (`--fallback` would leave a desktop agent in charge, but polkit never
    /// picks a fallback agent for a process subject; asking first does the same.)
    private func startTextAgent(subject: String, reason: String?) -> ChildProcess? {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { return nil }
        defer { close(tty) }
        if let reason, !reason.isEmpty {
            let line = Self.terminalLine(reason)
            _ = line.withCString { write(tty, $0, strlen($0)) }
        }
        var fds: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&fds) == 0 else { return nil }
        defer { close(fds[0]) }
        let agent = try? ChildProcess.start(
            Self.pkttyagent, ["--process", subject, "--notify-fd", "\(fds[1])"],
            stdio: (tty, tty, tty), keep: [fds[1]])
        close(fds[1])
        // pkttyagent closes the descriptor once registered; it exits at once if it cannot be.
        var pollfd = Glibc.pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        _ = poll(&pollfd, 1, 5000)
        return agent
    }

    /// The reason as one line for the terminal. It names things others chose (an SSH key's
    /// comment, a program's path), so no control character passes as one: an escape sequence
    /// could rewrite the line the person reads before answering.
    static func terminalLine(_ reason: String) -> String { TerminalText.escaped(reason) + "\n" }

    package func unavailability() -> String? {
        access(Self.pkcheck, X_OK) == 0 ? nil : "polkit (\(Self.pkcheck)) is not installed"
    }

    package func biometryUnavailability() -> String? {
        access(Self.fprintdList, X_OK) == 0 ? nil : "fprintd (\(Self.fprintdList)) is not installed"
    }

    package func fingersEnrolled() -> Bool {
        guard let user = getpwuid(getuid())?.pointee.pw_name.map({ String(cString: $0) }),
            let (status, output) = ChildProcess.output(Self.fprintdList, [user], seconds: 5), status == 0
        else {
            return false
        }
        return Self.hasEnrolledFinger(fprintdListOutput: output)
    }

    /// fprintd-list prints, per device, "Fingerprints for user U on D (press):" followed by
    /// " - #0: right-index-finger" lines, or "User U has no fingers enrolled for D.".
    static func hasEnrolledFinger(fprintdListOutput output: String) -> Bool {
        output.split(separator: "\n").contains { line in
            let trimmed = line.drop { $0 == " " }
            return trimmed.hasPrefix("- #") && trimmed.contains(":")
        }
    }
}
