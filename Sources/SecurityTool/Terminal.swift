import Glibc
import KeychainCore

/// Prompts and output. Passwords are read from the terminal without echo, or from standard
/// input when that is not a terminal, so scripts never need to put a secret in argv.
enum Terminal {
    static func error(_ line: String) {
        fputs(line + "\n", stderr)
    }

    static func out(_ line: String, terminator: String = "\n") {
        fputs(line + terminator, stdout)
    }

    static func write(_ bytes: Bytes) {
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, stdout) }
    }

    static func writeAtOnce(_ text: String) {
        fflush(stdout)
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(1, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes = bytes.dropFirst(n)
        }
    }

    /// A passphrase as text (PKCS#12 passphrases are strings).
    static func readSecretText(prompt: String, confirm: String? = nil) throws -> String {
        var bytes = try readSecret(prompt: prompt, confirm: confirm)
        defer { bytes.wipe() }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw KeychainError(.param, "the passphrase is not UTF-8 text") }
        return text
    }

    /// A secret from the terminal (no echo), or the first line of standard input in a pipe.
    static func readSecret(prompt: String, confirm: String? = nil) throws -> Bytes {
        if isatty(0) == 0 {
            return try readLine(from: stdin)
        }
        guard let tty = fopen("/dev/tty", "r+") else { throw KeychainError(.interactionNotAllowed, "no terminal to ask for the password") }
        defer { fclose(tty) }
        // Unbuffered, so that no stdio buffer keeps a copy of what was typed.
        setvbuf(tty, nil, _IONBF, 0)
        var first = try ask(prompt, tty)
        if let confirm {
            var second = try ask(confirm, tty)
            defer { second.wipe() }
            guard first == second else {
                first.wipe()
                throw KeychainError(.param, "the passwords do not match")
            }
        }
        return first
    }

    /// One line of commands for `security -i`, or nil at the end of the input.
    static func readCommandLine() -> Bytes? {
        try? readLine(from: stdin)
    }

    private static func ask(_ prompt: String, _ tty: UnsafeMutablePointer<FILE>) throws -> Bytes {
        fputs(prompt, tty)
        fflush(tty)
        let fd = fileno(tty)
        var saved = termios()
        let hasTermios = tcgetattr(fd, &saved) == 0
        if hasTermios {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            EchoGuard.arm(fd: fd, restoring: saved)
            tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if hasTermios {
                tcsetattr(fd, TCSAFLUSH, &saved)
                EchoGuard.disarm()
            }
            fputs("\n", tty)
        }
        return try readLine(from: tty)
    }

    private static func readLine(from file: UnsafeMutablePointer<FILE>) throws -> Bytes {
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        let n = getline(&line, &capacity, file)
        defer {
            if let line {
                memset(line, 0, capacity)
                free(line)
            }
        }
        guard n >= 0, let line else { throw KeychainError(.param, "no password given") }
        var bytes = Array(UnsafeRawBufferPointer(start: line, count: n))
        while let last = bytes.last, last == 10 || last == 13 { bytes.removeLast() }
        return bytes
    }
}

/// While echo is off, a signal that ends the process (Ctrl-C, SIGTERM, a closed terminal) would
/// leave the user's terminal without echo. These handlers put the terminal back first, then let
/// the signal do what it would have done.
private enum EchoGuard {
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    nonisolated(unsafe) static var fd: Int32 = -1
    nonisolated(unsafe) static var saved = termios()
    nonisolated(unsafe) static var previous: [Int32: sigaction] = [:]

    static func arm(fd: Int32, restoring terminal: termios) {
        saved = terminal
        self.fd = fd
        for signal in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                // Only async-signal-safe calls here: tcsetattr, write, signal, raise.
                if EchoGuard.fd >= 0 {
                    tcsetattr(EchoGuard.fd, TCSANOW, &EchoGuard.saved)
                    _ = Glibc.write(EchoGuard.fd, "\n", 1)
                }
                Glibc.signal(number, SIG_DFL)
                raise(number)
            }
            sigemptyset(&action.sa_mask)
            var old = sigaction()
            sigaction(signal, &action, &old)
            previous[signal] = old
        }
    }

    static func disarm() {
        for (signal, var old) in previous { sigaction(signal, &old, nil) }
        previous = [:]
        fd = -1
    }
}
