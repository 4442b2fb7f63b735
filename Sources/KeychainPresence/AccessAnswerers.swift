internal import CLinux
import Glibc
import KeychainCore
import KeychainPeers
import KeychainProcess

/// The person's answers to the broker's questions (`AccessAnswerer`), the first that can ask:
/// the program that KEYCHAIN_ACCESS_ANSWERER names (the tests' stand-in), the desktop portal's
/// access dialog, gcr's prompter, pinentry, the terminal; else nobody
/// (errSecInteractionNotAllowed).
package enum AccessAnswerers {
    package static func standard() -> any AccessAnswerer {
        var chain: [any AccessAnswerer] = []
        if let program = ProgramAccessAnswerer.fromEnvironment() { chain.append(program) }
        chain += Self.dialogs()
        chain.append(TerminalAccessAnswerer())
        return AccessAnswererChain(chain)
    }

    /// The desktop's access dialog (the portal's, its password through the pinentry after it),
    /// gcr's prompter, pinentry: those that can be used here, in that order.
    static func dialogs(environment: (String) -> String? = Self.environment) -> [any AccessAnswerer] {
        var chain: [any AccessAnswerer] = []
        let desktop = Self.desktop(environment: environment)
        let pinentry = Self.pinentry(environment: environment)
        if let password = desktop ?? pinentry, let portal = Self.portal(password: password, environment: environment) { chain.append(portal) }
        if let desktop { chain.append(desktop) }
        // Debian's `pinentry` is often pinentry-gnome3 itself: a dialog left unanswered is not
        // shown a second time.
        if let pinentry, desktop.map({ !sameFile($0.program, pinentry.program) }) ?? true { chain.append(pinentry) }
        return chain
    }

    /// The desktop portal's access dialog, in a graphical session whose desktop has a portal
    /// backend for it; the keychain's password is then asked through `password`.
    static func portal(password: PinentryAccessAnswerer, environment: (String) -> String?) -> PortalAccessAnswerer? {
        guard isGraphical(environment), let dialog = PortalAccessDialog.forDesktop(environment: environment, timeout: password.timeout) else { return nil }
        return PortalAccessAnswerer(dialog: dialog, password: password)
    }

    /// GNOME's keyring dialog: gcr's system prompter (gcr-prompter) through pinentry-gnome3, only
    /// in a graphical session with a session bus. It asks the whole question where the desktop
    /// names no portal backend with an access dialog (`portal`), and the password after one.
    /// gcr-prompter is reached through pinentry-gnome3 rather than directly: the tools are
    /// linked statically, Debian has no static sd-bus or GLib, and the prompter's password comes
    /// back under gcr's Diffie-Hellman secret exchange, which pinentry-gnome3 already speaks.
    static func desktop(environment: (String) -> String? = Self.environment) -> PinentryAccessAnswerer? {
        // pinentry-gnome3 looks for the bus in DBUS_SESSION_BUS_ADDRESS only (else it falls back
        // to curses), not at $XDG_RUNTIME_DIR/bus.
        guard isGraphical(environment), let bus = environment("DBUS_SESSION_BUS_ADDRESS"), !bus.isEmpty, access(gcrPinentry, X_OK) == 0 else { return nil }
        // The dialog is whoever owns gcr's prompter name on that bus: checked at each step.
        return PinentryAccessAnswerer(program: gcrPinentry, asksAlwaysApart: true, prompter: SystemPrompter(address: bus))
    }

    static let gcrPinentry = "/usr/bin/pinentry-gnome3"

    /// A graphical session: a display, X11's or Wayland's.
    static func isGraphical(_ environment: (String) -> String?) -> Bool {
        [environment("DISPLAY"), environment("WAYLAND_DISPLAY")].contains { !($0 ?? "").isEmpty }
    }

    /// KEYCHAIN_PINENTRY when it names root's program in root's folders (the environment is the
    /// user's to set, and a program of the user's would be handed the password), else Debian's
    /// `pinentry` alternative; nil when there is none.
    static func pinentry(environment: (String) -> String? = Self.environment) -> PinentryAccessAnswerer? {
        // The file itself, links followed once here (/usr/bin/pinentry is an alternative's link):
        // what was checked is what runs.
        for named in [environment("KEYCHAIN_PINENTRY"), "/usr/bin/pinentry"].compactMap({ $0 }) where named.hasPrefix("/") {
            guard let resolved = realpath(named, nil) else { continue }
            defer { free(resolved) }
            let path = String(cString: resolved)
            guard ProgramAccessAnswerer.isRootsProgram(path) else { continue }
            // Debian's `pinentry` may be pinentry-gnome3: with a session bus, gcr's prompter.
            return PinentryAccessAnswerer(program: path, prompter: SystemPrompter.guarding(pinentry: path, environment: environment))
        }
        return nil
    }

    static func sameFile(_ a: String, _ b: String) -> Bool {
        var first = stat(), second = stat()
        return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    static func environment(_ name: String) -> String? { clinux_secure_getenv(name).map { String(cString: $0) } }

    /// A daemon's (the SSH agent's): the tests' program, else the desktop's dialog or pinentry,
    /// which show the whole question where the daemon has no terminal of its own.
    package static func daemon() -> any AccessAnswerer {
        var chain: [any AccessAnswerer] = []
        if let program = ProgramAccessAnswerer.fromEnvironment() { chain.append(program) }
        chain += Self.dialogs()
        return AccessAnswererChain(chain)
    }

    /// "deny" | "once" | "always" and, but for deny, the password: what both answerers read.
    static func grant(choice: String, password: () throws -> Bytes) rethrows -> AccessGrant? {
        switch choice.lowercased() {
        case "deny", "d", "n", "no": return .deny
        case "once", "o": return .once(password: try password())
        case "always", "a": return .always(password: try password())
        default: return .deny
        }
    }
}

/// The first answerer that can ask does; nil when none can.
package struct AccessAnswererChain: AccessAnswerer {
    package var answerers: [any AccessAnswerer]

    package init(_ answerers: [any AccessAnswerer]) { self.answerers = answerers }

    package func answer(_ question: String) throws -> AccessGrant? {
        for answerer in answerers {
            if let grant = try answerer.answer(question) { return grant }
        }
        return nil
    }
}

/// A program that is given the question on its standard input and prints its choice on one line
/// and the password on the next. By absolute path only, with a minimal environment.
package struct ProgramAccessAnswerer: AccessAnswerer {
    package var path: String
    package var seconds: Double = 300

    package init(path: String) { self.path = path }

    /// Only a program of root's, in folders the user cannot write to: the environment is the
    /// user's to set (a shell's startup file), and an answerer of the user's own would be shown
    /// the question and handed the password meant for the broker (the attacker's review).
    package static func fromEnvironment() -> ProgramAccessAnswerer? {
        guard let value = clinux_secure_getenv("KEYCHAIN_ACCESS_ANSWERER").map({ String(cString: $0) }), value.hasPrefix("/"),
            isRootsProgram(value)
        else {
            return nil
        }
        return ProgramAccessAnswerer(path: value)
    }

    /// A regular file of root's that neither this user nor its groups could have changed, nor
    /// any folder above it.
    static func isRootsProgram(_ path: String) -> Bool {
        var groups = [gid_t](repeating: 0, count: Int(max(getgroups(0, nil), 0)))
        groups = Array(groups.prefix(Int(max(getgroups(Int32(groups.count), &groups), 0)))) + [getgid()]
        let writer = FileWriter(uid: getuid(), groups: groups)
        guard case .file(let facts) = FileTrust.resolve(path, for: writer), facts.isRegularFile, FileTrust.isRootsOwn(facts) else {
            return false
        }
        return true
    }

    package func answer(_ question: String) throws -> AccessGrant? {
        // The question goes in through a socket, not a pipe: a program that exits without
        // reading it must not kill this process with SIGPIPE (send's MSG_NOSIGNAL).
        var input: [Int32] = [0, 0], output: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &input) == 0 else { return nil }
        guard clinux_pipe_cloexec(&output) == 0 else {
            close(input[0])
            close(input[1])
            return nil
        }
        let child: ChildProcess
        do {
            child = try ChildProcess.start(path, [], stdio: (input[0], output[1], -1))
        } catch {
            for fd in input + output { close(fd) }
            return nil
        }
        close(input[0])
        close(output[1])
        let text = Array((question + "\n").utf8)
        _ = text.withUnsafeBytes { send(input[1], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(input[1])
        var collected: Bytes = []
        defer { collected.wipe() }
        var buffer = Bytes(repeating: 0, count: 1024)
        defer { buffer.wipe() }
        let deadline = SystemClock.monotonic() + seconds
        var descriptor = pollfd(fd: output[0], events: Int16(POLLIN), revents: 0)
        while collected.count < 4096 {
            let left = Int32(max(0, (deadline - SystemClock.monotonic()) * 1000))
            guard left > 0, poll(&descriptor, 1, left) > 0 else { break }
            let n = read(output[0], &buffer, buffer.count)
            if n <= 0 { break }
            collected += buffer[0..<n]
        }
        close(output[0])
        if child.wait(until: SystemClock.monotonic() + 1) == nil { child.stop() }
        let lines = collected.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = lines.first else { return .deny }
        return AccessAnswerers.grant(choice: String(decoding: first, as: UTF8.self).trimmingSpaces) {
            guard lines.count > 1 else { return [] }
            return Array(lines[1].prefix { $0 != UInt8(ascii: "\n") })
        }
    }
}

/// The controlling terminal, as pkttyagent asks: the question, d/o/a, then the keychain's
/// password without echo. Nil without a terminal.
package struct TerminalAccessAnswerer: AccessAnswerer {
    package init() {}

    package func answer(_ question: String) throws -> AccessGrant? {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // The question's text comes from item metadata: control characters are shown, not obeyed.
        let shown = question.split(separator: "\n", omittingEmptySubsequences: false).map { TerminalText.escaped(String($0)) }
        write(fd, shown.joined(separator: "\n") + "\n[d]eny, allow [o]nce, [a]lways allow? ")
        var choice = readLine(fd)
        defer { choice.wipe() }
        return AccessAnswerers.grant(choice: String(decoding: choice, as: UTF8.self).trimmingSpaces) {
            write(fd, "Keychain password: ")
            var saved = termios()
            let hasTermios = tcgetattr(fd, &saved) == 0
            if hasTermios {
                var quiet = saved
                quiet.c_lflag &= ~tcflag_t(ECHO)
                tcsetattr(fd, TCSAFLUSH, &quiet)
            }
            defer {
                if hasTermios { tcsetattr(fd, TCSAFLUSH, &saved) }
                write(fd, "\n")
            }
            return readLine(fd)
        }
    }

    private func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    private func readLine(_ fd: Int32) -> Bytes {
        var line: Bytes = []
        var byte: UInt8 = 0
        while line.count < 4096, read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        return line
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(self.drop { $0 == " " || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\r" }.reversed())
    }
}
