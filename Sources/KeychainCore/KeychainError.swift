/// A failure of the engine, carrying the OSStatus code of Apple's Keychain Services that front ends report.
public struct KeychainError: Error, Equatable, CustomStringConvertible {
    public enum Code: Int32, Sendable {
        case unimplemented = -4
        case param = -50
        case allocate = -108
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
    }

    public var code: Code
    /// What went wrong, for people: one line, no secrets.
    public var detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    public var status: Int32 { code.rawValue }

    public var description: String {
        detail.isEmpty ? KeychainError.message(for: code.rawValue) : detail
    }

    /// Apple's texts for the result codes (SecCopyErrorMessageString).
    public static func message(for status: Int32) -> String {
        switch status {
        case 0: return "No error."
        case -4: return "Function or operation not implemented."
        case -36: return "I/O error."
        case -50: return "One or more parameters passed to a function were not valid."
        case -108: return "Failed to allocate memory."
        case -25291: return "No keychain is available. You may need to restart your computer."
        case -25293: return "The user name or passphrase you entered is not correct."
        case -25294: return "The specified keychain could not be found."
        case -25295: return "The specified keychain is not a valid keychain file."
        case -25296: return "A keychain with the same name already exists."
        case -25299: return "The specified item already exists in the keychain."
        case -25300: return "The specified item could not be found in the keychain."
        case -25308: return "User interaction is not allowed."
        case -26275: return "Unable to decode the provided data."
        default: return "OSStatus \(status)"
        }
    }

    /// Apple's constant names, for messages such as `errSecItemNotFound`.
    public static func name(for status: Int32) -> String {
        switch status {
        case 0: return "errSecSuccess"
        case -4: return "errSecUnimplemented"
        case -36: return "errSecIO"
        case -50: return "errSecParam"
        case -108: return "errSecAllocate"
        case -25291: return "errSecNotAvailable"
        case -25293: return "errSecAuthFailed"
        case -25294: return "errSecNoSuchKeychain"
        case -25295: return "errSecInvalidKeychain"
        case -25296: return "errSecDuplicateKeychain"
        case -25299: return "errSecDuplicateItem"
        case -25300: return "errSecItemNotFound"
        case -25308: return "errSecInteractionNotAllowed"
        case -26275: return "errSecDecode"
        default: return "OSStatus \(status)"
        }
    }

    public static func param(_ detail: String) -> KeychainError { KeychainError(.param, detail) }
    public static func decode(_ detail: String) -> KeychainError { KeychainError(.decode, detail) }
    public static func locked(_ detail: String = "keychain is locked") -> KeychainError {
        KeychainError(.interactionNotAllowed, detail)
    }
}
