import CSDBus
import KeychainCore

/// The errors the Secret Service API names, and the D-Bus standard ones it uses for bad calls.
package enum ServiceError: Error {
    case isLocked(String)
    case noSession(String)
    case noSuchObject(String)
    case invalidArgs(String)
    case accessDenied(String)
    case limitsExceeded(String)
    case notSupported(String)
    case failed(String)

    package var name: String {
        switch self {
        case .isLocked: return "org.freedesktop.Secret.Error.IsLocked"
        case .noSession: return "org.freedesktop.Secret.Error.NoSession"
        case .noSuchObject: return "org.freedesktop.Secret.Error.NoSuchObject"
        case .invalidArgs: return "org.freedesktop.DBus.Error.InvalidArgs"
        case .accessDenied: return "org.freedesktop.DBus.Error.AccessDenied"
        case .limitsExceeded: return "org.freedesktop.DBus.Error.LimitsExceeded"
        case .notSupported: return "org.freedesktop.DBus.Error.NotSupported"
        case .failed: return "org.freedesktop.DBus.Error.Failed"
        }
    }

    package var message: String {
        switch self {
        case .isLocked(let m), .noSession(let m), .noSuchObject(let m), .invalidArgs(let m), .accessDenied(let m),
            .limitsExceeded(let m), .notSupported(let m), .failed(let m):
            return m
        }
    }

    /// The engine's errors as the Secret Service reports them.
    package init(_ error: Error) {
        if let error = error as? ServiceError {
            self = error
            return
        }
        guard let error = error as? KeychainError else {
            self = .failed("\(error)")
            return
        }
        // An item that asks for the user is no locked collection: IsLocked would send libsecret
        // to Unlock, be told all is unlocked, and go round again.
        if error.concernsPresence {
            self = .accessDenied(error.description)
            return
        }
        switch error.code {
        case .interactionNotAllowed: self = .isLocked("the collection is locked")
        case .itemNotFound: self = .noSuchObject("no such item")
        case .param: self = .invalidArgs(error.description)
        case .authFailed: self = .accessDenied(error.description)
        case .allocate: self = .limitsExceeded(error.description)
        default: self = .failed("\(error.description) (\(KeychainError.name(for: error.status)))")
        }
    }

    /// Fills `error` for sd-bus, which sends it as the reply; returns the negative errno it wants.
    package func set(_ error: UnsafeMutablePointer<sd_bus_error>) -> Int32 {
        sd_bus_error_set(error, name, message)
    }
}
