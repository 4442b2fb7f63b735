import Glibc
import KeychainCore

/// One conversation with a pinentry program (GnuPG's password dialog: pinentry-gnome3 or -qt on a
/// desktop, -curses or -tty on a terminal) over the Assuan protocol on its stdin and stdout. The
/// service's loop polls `fd` and hands each readable moment to `readable()`, so a dialog left open
/// never holds up other clients.
final class Pinentry {
    enum Event {
        /// The person gave a passphrase (the caller wipes it).
        case passphrase(Bytes)
        /// Cancelled, closed, or the program failed.
        case cancelled
    }

    let fd: Int32
    private let input: Int32
    private let pid: pid_t
    private var buffer = Bytes()
    private var queue: [String] = []
    private var awaiting = true  // the greeting comes first
    private var data = Bytes()
    private var finished = false

    /// Starts `program`; nil (and one log line) when it cannot be run.
    init?(program: String) {
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0 else { return nil }
        guard pipe(&fromChild) == 0 else {
            close(toChild[0]); close(toChild[1])
            return nil
        }
        // The service is single-threaded: nothing can fork between pipe() and these.
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        var child: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(program), nil]
        defer { for p in argv { free(p) } }
        let rc = posix_spawnp(&child, program, &actions, nil, argv, environ)
        close(toChild[0])
        close(fromChild[1])
        guard rc == 0 else {
            close(toChild[1]); close(fromChild[0])
            SecretService.log("cannot run the pinentry program \(program): \(String(cString: strerror(rc))); the prompt is dismissed")
            return nil
        }
        pid = child
        input = toChild[1]
        fd = fromChild[0]
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { stop() }

    /// Asks for one passphrase: `error` is shown above the field after a wrong try.
    func ask(title: String, description: String, prompt: String, error: String? = nil, repeatPrompt: String? = nil) {
        queue += ["SETTITLE " + Assuan.escape(title), "SETDESC " + Assuan.escape(description), "SETPROMPT " + Assuan.escape(prompt)]
        if let error { queue.append("SETERROR " + Assuan.escape(error)) }
        if let repeatPrompt { queue.append("SETREPEAT " + Assuan.escape(repeatPrompt)) }
        queue.append("GETPIN")
        if !awaiting { sendNext() }
    }

    /// Reads what is there; returns the conversation's outcome once GETPIN has been answered.
    func readable() -> Event? {
        var chunk = Bytes(repeating: 0, count: 4096)
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
        defer { chunk.wipe() }
        while let newline = buffer.firstIndex(of: 10) {
            var line = Array(buffer[..<newline])
            buffer.removeSubrange(...newline)
            defer { line.wipe() }
            if let event = handle(line) { return event }
        }
        return nil
    }

    private func handle(_ line: Bytes) -> Event? {
        if line.starts(with: Array("D ".utf8)) {
            data += Assuan.unescape(Array(line.dropFirst(2)))
            return nil
        }
        let isOK = line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8))
        let isError = line.starts(with: Array("ERR".utf8))
        guard isOK || isError else { return nil }  // status (S) and comment (#) lines
        // The greeting answers no command.
        let command = lastSent ?? ""
        awaiting = false
        if command == "GETPIN" {
            defer { data.wipe(); data = [] }
            return isOK ? .passphrase(data) : .cancelled
        }
        // Unknown options (SETREPEAT on an old pinentry) do not stop the conversation.
        if isError, command.isEmpty { return fail() }
        sendNext()
        return nil
    }

    private var lastSent: String?

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
        return .cancelled
    }

    /// Ends the program and reaps it.
    func stop() {
        guard !finished else { return }
        finished = true
        data.wipe()
        buffer.wipe()
        close(input)
        close(fd)
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    }
}
