import CLinux
import Glibc

/// One passphrase asked through pinentry (GnuPG's dialog: pinentry-gnome3 or -qt on a desktop,
/// -curses or -tty on a terminal), waiting a bounded time: an item's application password when
/// the caller's LAContext carries none, as Apple's systems prompt for it.
public struct PinentryPrompt: Sendable {
    /// KEYCHAIN_PINENTRY, else Debian's `pinentry` alternative.
    public var program: String
    /// KEYCHAIN_PRESENCE_TIMEOUT, as for polkit (default 120 s).
    public var timeout: Double

    public init(program: String? = nil, timeout: Double? = nil) {
        let chosen = program ?? getenv("KEYCHAIN_PINENTRY").map { String(cString: $0) } ?? "pinentry"
        self.program = chosen.contains("/") ? chosen : "/usr/bin/" + chosen
        self.timeout = timeout ?? PolkitAuthorizer().timeout
    }

    /// The passphrase (the caller wipes it). Cancelled: errSecUserCanceled; no pinentry, or no
    /// answer in time: errSecInteractionNotAllowed.
    public func ask(description: String, prompt: String) throws -> Bytes {
        let unavailable = KeychainError.presence(.interactionNotAllowed, "no application password: \(program) gave no answer")
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&toChild) == 0 else { throw unavailable }
        guard clinux_pipe_cloexec(&fromChild) == 0 else {
            close(toChild[0]); close(toChild[1])
            throw unavailable
        }
        // pinentry finds its display or terminal in the caller's environment (DISPLAY, GPG_TTY).
        let child = try? ChildProcess.start(program, [], stdio: (toChild[0], fromChild[1], -1), environment: nil)
        close(toChild[0])
        close(fromChild[1])
        defer { close(toChild[1]); close(fromChild[0]); child?.stop() }
        guard child != nil else { throw KeychainError.presence(.interactionNotAllowed, "no application password: cannot run \(program)") }
        var conversation = Conversation(input: toChild[1], output: fromChild[0], deadline: ChildProcess.now() + timeout)
        defer { conversation.wipe() }
        guard conversation.expectOK(),
              conversation.command("SETDESC " + Assuan.escape(description)),
              conversation.command("SETPROMPT " + Assuan.escape(prompt)) else { throw unavailable }
        switch conversation.getPin() {
        case .pin(let pin):
            _ = conversation.command("BYE")
            return pin
        case .cancelled: throw KeychainError.presence(.userCanceled, "the application password was not given")
        case .none: throw unavailable
        }
    }

    /// The Assuan exchange, line by line.
    private struct Conversation {
        let input: Int32
        let output: Int32
        let deadline: Double
        var buffer = Bytes()

        mutating func wipe() { buffer.wipe() }

        /// Sends `line` and waits for its OK.
        mutating func command(_ line: String) -> Bool {
            send(line) && expectOK()
        }

        mutating func expectOK() -> Bool {
            while var line = readLine() {
                defer { line.wipe() }
                if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) { return true }
                if line.starts(with: Array("ERR".utf8)) { return false }
            }
            return false
        }

        enum Answer { case pin(Bytes), cancelled, none }

        mutating func getPin() -> Answer {
            guard send("GETPIN") else { return .none }
            var pin = Bytes()
            while var line = readLine() {
                defer { line.wipe() }
                if line.starts(with: Array("D ".utf8)) {
                    pin += Assuan.unescape(Array(line.dropFirst(2)))
                } else if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) {
                    if pin.isEmpty { return .cancelled }
                    return .pin(pin)
                } else if line.starts(with: Array("ERR".utf8)) {
                    pin.wipe()
                    return .cancelled
                }
            }
            pin.wipe()
            return .none
        }

        private func send(_ line: String) -> Bool {
            let bytes = Array((line + "\n").utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }

        /// One line without its newline; nil at the end, past the deadline, or past 64 KiB.
        private mutating func readLine() -> Bytes? {
            var chunk = Bytes(repeating: 0, count: 4096)
            defer { chunk.wipe() }
            while true {
                if let newline = buffer.firstIndex(of: 10) {
                    let line = Array(buffer[..<newline])
                    buffer.removeSubrange(...newline)
                    return line
                }
                guard buffer.count < 65536 else { return nil }
                let left = Int32((deadline - ChildProcess.now()) * 1000)
                var pollfd = Glibc.pollfd(fd: output, events: Int16(POLLIN), revents: 0)
                guard left > 0, poll(&pollfd, 1, left) > 0 else { return nil }
                let n = read(output, &chunk, chunk.count)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return nil }
                buffer += chunk[0..<n]
            }
        }
    }
}
