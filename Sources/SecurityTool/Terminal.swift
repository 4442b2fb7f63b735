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
        let first = try ask(prompt, tty)
        if let confirm {
            let second = try ask(confirm, tty)
            guard first == second else { throw KeychainError(.param, "the passwords do not match") }
        }
        return first
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
            tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if hasTermios { tcsetattr(fd, TCSAFLUSH, &saved) }
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
