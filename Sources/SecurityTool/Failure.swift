import ArgumentParser
import KeychainCore

/// Turns engine errors into one line on stderr and macOS's exit status (the OSStatus's low byte).
enum Failure {
    static func report(_ error: Error, context: String? = nil) -> ExitCode {
        guard let error = error as? KeychainError else {
            Terminal.error("security: \(error)")
            return .failure
        }
        print(error, context: context)
        return ExitCode(Int32(UInt8(truncatingIfNeeded: error.status)))
    }

    /// One line on stderr: "security: CONTEXT: what went wrong; what to do (errSecName)".
    static func print(_ error: KeychainError, context: String? = nil) {
        var line = "security: "
        if let context { line += context + ": " }
        line += error.description
        // A file given to import that is not a certificate is not a damaged keychain.
        if let hint = error.concernsPresence ? presenceHint(for: error.code) : hint(for: error.code),
            !(context == "import" && error.code == .decode)
        {
            line += "; " + hint
        }
        line += " (\(KeychainError.name(for: error.status)))"
        Terminal.error(line)
    }

    static func presenceHint(for code: KeychainError.Code) -> String? {
        code == .interactionNotAllowed
            ? "the item asks for you: run this where a polkit agent can ask (a desktop session or a terminal)"
            : nil
    }

    static func hint(for code: KeychainError.Code) -> String? {
        switch code {
        case .interactionNotAllowed: return Remedy.unlock
        case .authFailed: return "check the password"
        case .noSuchKeychain, .notAvailable: return Remedy.create
        case .decode: return "the keychain file is damaged; restore it from a backup (`security import`)"
        default: return nil
        }
    }
}

/// Runs a command body, reporting engine errors the same way everywhere.
func perform(_ context: String? = nil, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as KeychainError {
        throw Failure.report(error, context: context)
    }
}
