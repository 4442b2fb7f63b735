import KeychainCore
import KeychainProcess
internal import CLinux
import Glibc

/// One conversation with a pinentry program (GnuPG's passphrase dialog: pinentry-gnome3 or -qt on
/// a desktop, -curses or -tty on a terminal) over the Assuan protocol on its stdin and stdout:
/// the one every asker uses, PinentryPrompt (an application password, waiting for the answer),
/// PinentryAccessPrompter (a yes or no to an access question) and the Secret Service's prompts
/// (whose loop polls `fd` among its other clients, so a dialog left open never holds anyone up).
/// Whoever waits calls `readable()` when `fd` has something.
package final class PinentryConversation {
    package enum Event {
        /// The person gave a passphrase, possibly empty (the caller wipes it).
        case passphrase(Bytes)
        /// The person said yes to CONFIRM.
        case confirmed
        /// The person dismissed the dialog (pinentry answered GETPIN with an error, or CONFIRM
        /// with cancelled or not confirmed).
        case cancelled
        /// The program failed, closed, or spoke no Assuan.
        case failed
    }

    /// Readable when pinentry has said something.
    package let fd: Int32
    private let input: Int32
    private let child: ChildProcess
    private var buffer = Bytes()
    private var queue: [String] = []
    private var awaiting = true  // the greeting comes first
    private var lastSent: String?
    private var data = Bytes()
    private var finished = false

    /// Starts `program` (a name without a slash is looked for in PATH, as a shell would) with the
    /// caller's environment, where pinentry finds its display or terminal (DISPLAY, GPG_TTY);
    /// `errors` is the descriptor its stderr becomes (-1: /dev/null).
    package init(program: String, errors: Int32 = -1) throws {
        let path = Self.locate(program)
        // pinentry-gnome3's dialog is whoever owns gcr's prompter name: nobody else is shown a
        // question or given a password (review 55).
        if let reason = SystemPrompter.refusal(forPinentry: path) { throw SystemPrompter.Refused(reason: reason) }
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&toChild) == 0 else { throw KeychainError(.interactionNotAllowed, "cannot run \(path)") }
        guard clinux_pipe_cloexec(&fromChild) == 0 else {
            close(toChild[0]); close(toChild[1])
            throw KeychainError(.interactionNotAllowed, "cannot run \(path)")
        }
        defer { close(toChild[0]); close(fromChild[1]) }
        do {
            child = try ChildProcess.start(path, [], stdio: (toChild[0], fromChild[1], errors), environment: nil)
        } catch {
            close(toChild[1]); close(fromChild[0])
            throw error
        }
        input = toChild[1]
        fd = fromChild[0]
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { stop() }

    /// Asks for one passphrase: `error` is shown above the field after a wrong try, `repeatPrompt`
    /// asks for it twice (a new password). Options an old pinentry does not know are passed over.
    /// `ok` and `cancel` name the buttons (a pinentry keeps the last ones it was given).
    package func ask(
        title: String? = nil, description: String, prompt: String, error: String? = nil, repeatPrompt: String? = nil, ok: String? = nil,
        cancel: String? = nil
    ) {
        if let title { queue.append("SETTITLE " + Assuan.escape(title)) }
        queue += ["SETDESC " + Assuan.escape(description), "SETPROMPT " + Assuan.escape(prompt)]
        if let error { queue.append("SETERROR " + Assuan.escape(error)) }
        if let repeatPrompt { queue.append("SETREPEAT " + Assuan.escape(repeatPrompt)) }
        if let ok { queue.append("SETOK " + Assuan.escape(ok)) }
        if let cancel { queue.append("SETCANCEL " + Assuan.escape(cancel)) }
        queue.append("GETPIN")
        if !awaiting { sendNext() }
    }

    /// Asks a yes or no (CONFIRM): `description` is the question, `ok` and `cancel` the buttons,
    /// and `notOK` a third where the pinentry has one (curses, Qt; GNOME's shows two): its press
    /// is a `.cancelled` with `notConfirmed` set. `prompt` is GNOME's headline (else "Message").
    package func confirm(title: String, description: String, ok: String, cancel: String, notOK: String? = nil, prompt: String? = nil) {
        queue += ["SETTITLE " + Assuan.escape(title), "SETDESC " + Assuan.escape(description)]
        if let prompt { queue.append("SETPROMPT " + Assuan.escape(prompt)) }
        queue += ["SETOK " + Assuan.escape(ok), "SETCANCEL " + Assuan.escape(cancel)]
        if let notOK { queue.append("SETNOTOK " + Assuan.escape(notOK)) }
        queue.append("CONFIRM")
        if !awaiting { sendNext() }
    }

    /// The last CONFIRM was answered with the third button (GPG_ERR_NOT_CONFIRMED), not cancel.
    package private(set) var notConfirmed = false

    /// Reads what is there; the conversation's outcome once GETPIN or CONFIRM has been answered
    /// (or the program has failed), else nil.
    package func readable() -> Event? {
        guard !finished else { return .failed }
        var chunk = Bytes(repeating: 0, count: 4096)
        defer { chunk.wipe() }
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n > 0 {
                buffer += chunk[0..<n]
                // A pinentry line is at most 1,000 bytes; anything longer is not one.
                if buffer.count > 65536 { return fail() }
                continue
            }
            if n == 0 { return fail() }
            if errno == EAGAIN || errno == EWOULDBLOCK { break }
            if errno != EINTR { return fail() }
        }
        while let newline = buffer.firstIndex(of: 10) {
            var line = Array(buffer[..<newline])
            buffer.removeSubrange(...newline)
            defer { line.wipe() }
            if let event = handle(line) { return event }
        }
        return nil
    }

    /// Waits up to `deadline` (CLOCK_MONOTONIC seconds, as `SystemClock.monotonic()`) for the outcome;
    /// nil when none came in time.
    package func wait(until deadline: Double) -> Event? {
        while true {
            let left = Int32(max(0, min((deadline - SystemClock.monotonic()) * 1000, Double(Int32.max))))
            guard left > 0 else { return nil }
            var pollfd = Glibc.pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pollfd, 1, left)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            if let event = readable() { return event }
        }
    }

    private func handle(_ line: Bytes) -> Event? {
        if line.starts(with: Array("D ".utf8)) {
            data += Assuan.unescape(Array(line.dropFirst(2)))
            return nil
        }
        let isOK = line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8))
        let isError = line.starts(with: Array("ERR".utf8))
        guard isOK || isError else { return nil }  // status (S) and comment (#) lines
        let command = lastSent
        awaiting = false
        if command == "GETPIN" {
            defer { data.wipe(); data = [] }
            return isOK ? .passphrase(data) : .cancelled
        }
        if command == "CONFIRM" {
            if isOK { return .confirmed }
            // Only the person's no is a no; any other error (no display, no terminal) is a
            // pinentry that could not ask, so that the next way of asking may.
            notConfirmed = Self.errorCode(line) == 114
            return Self.isRefusal(line) ? .cancelled : fail()
        }
        // The greeting answers no command: an error there is no pinentry. A description refused
        // (too long a line) would leave the dialog without the words that say what it asks.
        if isError, command == nil || command?.hasPrefix("SETDESC ") == true { return fail() }
        sendNext()
        return nil
    }

    /// "ERR N ...": GnuPG's error N, whose low 16 bits are the code: GPG_ERR_CANCELED (99) for
    /// the cancel button or a closed window, GPG_ERR_NOT_CONFIRMED (114) for a "no".
    static func isRefusal(_ line: Bytes) -> Bool {
        errorCode(line).map { [99, 114].contains($0) } ?? false
    }

    static func errorCode(_ line: Bytes) -> UInt32? {
        let fields = line.split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let error = UInt32(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return error & 0xFFFF
    }

    private func sendNext() {
        guard !queue.isEmpty else { return }
        let command = queue.removeFirst()
        lastSent = command
        awaiting = true
        let bytes = Array((command + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }

    private func fail() -> Event {
        stop()
        return .failed
    }

    /// Ends the program and reaps it; what was read is wiped.
    package func stop() {
        guard !finished else { return }
        finished = true
        data.wipe()
        buffer.wipe()
        close(input)
        close(fd)
        child.stop()
    }

    /// `program` as a path: a name without a slash is looked for in PATH, then in /usr/bin.
    static func locate(_ program: String) -> String {
        guard !program.contains("/") else { return program }
        let path = getenv("PATH").map { String(cString: $0) } ?? ""
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = directory + "/" + program
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return "/usr/bin/" + program
    }
}
