/// What asking the person gave.
package enum PresenceAnswer: Equatable, Sendable {
    case granted
    /// Authentication failed (a wrong password, a finger not recognised, the agent gone).
    case denied
    /// The person dismissed the request.
    case canceled
    /// Nobody could be asked (no agent, no polkit, no answer in time); the reason, for people.
    case unavailable(String)

    /// The call's outcome: nothing for a grant, else Apple's status for the case.
    func check() throws {
        switch self {
        case .granted: return
        case .denied: throw KeychainError.presence(.authFailed, "user presence: authentication failed")
        case .canceled: throw KeychainError.presence(.userCanceled, "user presence: the request was dismissed")
        case .unavailable(let why): throw KeychainError.presence(.interactionNotAllowed, "user presence: \(why)")
        }
    }
}

/// Whoever confirms that the user is at the machine: polkit, which the front ends install
/// (`KeychainStore.defaultPresenceAuthorizer`, KeychainPresence); tests give their own. Front ends such as
/// LocalAuthentication know only this seam, never what stands behind it.
package protocol PresenceAuthorizer: Sendable {
    /// Asks, and waits a bounded time. `reason` is the caller's kSecUseOperationPrompt.
    func authorize(reason: String?) -> PresenceAnswer
    /// Whether biometry is set up for the user (fprintd has a finger enrolled).
    func fingersEnrolled() -> Bool
    /// Why nobody can be asked here at all (what asks is not installed), for people; nil when
    /// asking is possible.
    func unavailability() -> String?
    /// Why biometry cannot be set up here at all (no fingerprint service), for people; nil when
    /// it can be (whether a finger is enrolled is `fingersEnrolled()`).
    func biometryUnavailability() -> String?
}

extension PresenceAuthorizer {
    /// An authorizer that says nothing of its availability can always be asked.
    package func unavailability() -> String? { nil }
    package func biometryUnavailability() -> String? { nil }
}

/// The engine's own default: no program to ask was installed, so nobody can be asked.
package struct NobodyToAsk: PresenceAuthorizer {
    static let why = "this program has no way to ask for the user's presence"
    package init() {}
    package func authorize(reason: String?) -> PresenceAnswer { .unavailable(Self.why) }
    package func fingersEnrolled() -> Bool { false }
    package func unavailability() -> String? { Self.why }
    package func biometryUnavailability() -> String? { Self.why }
}
