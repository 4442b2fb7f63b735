import Foundation

public let LAErrorDomain = "com.apple.LocalAuthentication"

/// Apple's LAError: a code of LAErrorDomain, caught as `catch let error as LAError` or matched as
/// `catch LAError.userCancel`.
public struct LAError: Error, CustomNSError, Hashable, Sendable {
    public enum Code: Int, Sendable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case companionNotAvailable = -11
        case biometryNotPaired = -12
        case biometryDisconnected = -13
        case invalidDimensions = -14
        case notInteractive = -1004

        @available(*, deprecated, renamed: "biometryNotAvailable") public static let touchIDNotAvailable = Code.biometryNotAvailable
        @available(*, deprecated, renamed: "biometryNotEnrolled") public static let touchIDNotEnrolled = Code.biometryNotEnrolled
        @available(*, deprecated, renamed: "biometryLockout") public static let touchIDLockout = Code.biometryLockout
        @available(*, deprecated, renamed: "companionNotAvailable") public static let watchNotAvailable = Code.companionNotAvailable
    }

    public let code: Code
    /// What went wrong, for people (NSLocalizedDescriptionKey).
    public let reason: String

    public init(_ code: Code, _ reason: String? = nil) {
        self.code = code
        self.reason = reason ?? Self.defaultReason(code)
    }

    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: reason] }
    public var localizedDescription: String { reason }

    public static let authenticationFailed = Code.authenticationFailed
    public static let userCancel = Code.userCancel
    public static let userFallback = Code.userFallback
    public static let systemCancel = Code.systemCancel
    public static let passcodeNotSet = Code.passcodeNotSet
    public static let biometryNotAvailable = Code.biometryNotAvailable
    public static let biometryNotEnrolled = Code.biometryNotEnrolled
    public static let biometryLockout = Code.biometryLockout
    public static let appCancel = Code.appCancel
    public static let invalidContext = Code.invalidContext
    public static let companionNotAvailable = Code.companionNotAvailable
    public static let notInteractive = Code.notInteractive

    private static func defaultReason(_ code: Code) -> String {
        switch code {
        case .authenticationFailed: return "Authentication failed."
        case .userCancel: return "Canceled by user."
        case .systemCancel: return "Canceled by the system."
        case .passcodeNotSet: return "No way to authenticate the user is set up."
        case .biometryNotAvailable: return "Biometry is not available."
        case .biometryNotEnrolled: return "No finger is enrolled."
        case .invalidContext: return "The context was invalidated."
        case .companionNotAvailable: return "No companion device is available."
        case .notInteractive: return "Nobody could be asked: no authentication agent, or interaction not allowed."
        default: return "LocalAuthentication error \(code.rawValue)."
        }
    }
}

/// `catch LAError.userCancel` (Apple's bridged errors match their codes this way).
public func ~= (code: LAError.Code, error: Error) -> Bool {
    (error as? LAError)?.code == code
}

/// Foundation on Linux has no NSErrorPointer (it has no autorelease pool): the same shape, so
/// `var error: NSError?; context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error)` builds.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?
