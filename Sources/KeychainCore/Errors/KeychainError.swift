import Glibc

/// A failure of the engine, carrying the OSStatus code of Apple's Keychain Services that front ends report.
package struct KeychainError: Error, Equatable, CustomStringConvertible {
    package enum Code: Int32, Sendable {
        case unimplemented = -4
        case param = -50
        case allocate = -108
        case userCanceled = -128
        case notAvailable = -25291
        case authFailed = -25293
        case noSuchKeychain = -25294
        case invalidKeychain = -25295
        case duplicateKeychain = -25296
        case duplicateItem = -25299
        case itemNotFound = -25300
        case interactionNotAllowed = -25308
        case decode = -26275
        case io = -36
        /// A keychain sealed to a TPM that is not here (none, another one, tpm2-tss missing).
        case serviceNotAvailable = -67585
        /// The TPM refused an operation or answered something unusable.
        case deviceFailed = -67588
        /// The TPM's dictionary-attack lockout: its quota of wrong passwords is used up for now.
        case quotaExceeded = -67596
    }

    package var code: Code
    /// What went wrong, for people: one line, no secrets.
    package var detail: String
    /// The failure is about asking the person (user presence, an application password), not the
    /// keychain's lock: front ends then say so instead of suggesting `unlock-keychain`.
    package var concernsPresence = false

    package init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    package var status: Int32 { code.rawValue }

    package var description: String {
        detail.isEmpty ? KeychainError.message(for: code.rawValue) : detail
    }

    /// Apple's text for a result code, as SecCopyErrorMessageString gives it: SecBase.h's text, else
    /// the code's name, else strerror for the errno range, else "OSStatus N".
    package static func message(for status: Int32) -> String {
        if let code = ResultCode.byStatus[status] { return code.message ?? code.name }
        if status >= errnoBase && status <= errnoBase + 255 {
            return "UNIX[\(String(cString: strerror(status - errnoBase)))]"
        }
        return "OSStatus \(status)"
    }

    /// Apple's constant names, for messages such as `errSecItemNotFound`.
    package static func name(for status: Int32) -> String {
        ResultCode.byStatus[status]?.name ?? "OSStatus \(status)"
    }

    /// errSecErrnoBase: Apple's codes 100000...100255 stand for errno values.
    private static let errnoBase: Int32 = 100_000

    package static func param(_ detail: String) -> KeychainError { KeychainError(.param, detail) }
    package static func presence(_ code: Code, _ detail: String) -> KeychainError {
        var error = KeychainError(code, detail)
        error.concernsPresence = true
        return error
    }
    package static func decode(_ detail: String) -> KeychainError { KeychainError(.decode, detail) }
    package static func locked(_ detail: String = "keychain is locked") -> KeychainError {
        KeychainError(.interactionNotAllowed, detail)
    }

    /// No keychain where one was looked for, with what to do about it.
    package static func noKeychain(at path: String) -> KeychainError {
        KeychainError(.notAvailable, "no keychain at \(path); \(Remedy.create)")
    }
}

/// What a person can do about a failure, worded once for every front end (`security`, SecKeychain,
/// the credential helpers, the PAM module's log).
package enum Remedy {
    /// For a locked keychain.
    package static let unlock = "run `security unlock-keychain`"
    /// For a keychain that does not exist.
    package static let create = "create one with `security create-keychain`"
}
