import Foundation
import KeychainCore
import KeychainPresence
import Security

/// Apple's LAContext over the engine's presence authorizer (`KeychainStore.defaultPresenceAuthorizer`):
/// evaluating a policy asks it to authenticate the user. An evaluated context
/// passed as kSecUseAuthenticationContext lets SecItem calls on items that need the user's presence
/// go on without asking again, until invalidate().
open class LAContext: NSObject, AuthenticationContextProviding, @unchecked Sendable {
    package let authenticationContext = AuthenticationContext()
    /// Who asks: the engine's presence authorizer, unless a test gives another.
    var authorizer: PresenceAuthorizer = {
        PresenceSetup.installPolkit()
        return KeychainStore.defaultPresenceAuthorizer
    }()

    /// Passed to the authorizer as the reason, shown where it can show one.
    open var localizedReason: String = ""
    open var localizedCancelTitle: String?
    open var localizedFallbackTitle: String?
    open private(set) var biometryType: LABiometryType = .none

    /// A grant within this many seconds (at most 300) answers evaluatePolicy and SecItem calls
    /// through this context without asking again.
    open var touchIDAuthenticationAllowableReuseDuration: Double {
        get { authenticationContext.reuseDuration }
        set { authenticationContext.reuseDuration = newValue }
    }

    /// No prompt at all: evaluations fail with notInteractive, SecItem calls as kSecUseAuthenticationUIFail.
    open var interactionNotAllowed: Bool {
        get { authenticationContext.interactionNotAllowed }
        set { authenticationContext.interactionNotAllowed = newValue }
    }

    public override init() { super.init() }

    /// Whether `policy` can be evaluated here; if not, why, in `error`.
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        do {
            try check(policy)
            return true
        } catch let failure as LAError {
            error?.pointee = failure as NSError
            return false
        } catch {
            return false
        }
    }

    private func check(_ policy: LAPolicy) throws {
        if authenticationContext.isInvalidated { throw LAError(.invalidContext) }
        let enrolled = authorizer.fingersEnrolled()
        biometryType = enrolled ? .touchID : .none
        switch policy {
        case .deviceOwnerAuthentication:
            if let why = authorizer.unavailability() { throw LAError(.passcodeNotSet, why) }
        case .deviceOwnerAuthenticationWithBiometrics:
            guard enrolled else {
                if let why = authorizer.biometryUnavailability() { throw LAError(.biometryNotAvailable, why) }
                throw LAError(.biometryNotEnrolled)
            }
        default:
            throw LAError(.companionNotAvailable)
        }
    }

    /// Asks the authorizer on a background thread; `reply` gets the outcome there.
    open func evaluatePolicy(
        _ policy: LAPolicy, localizedReason: String,
        reply: @escaping @Sendable (Bool, Error?) -> Void
    ) {
        let reason = localizedReason
        Thread.detachNewThread { [self] in
            do {
                try evaluate(policy, reason: reason)
                reply(true, nil)
            } catch {
                reply(false, error)
            }
        }
    }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            evaluatePolicy(policy, localizedReason: localizedReason) { ok, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: ok) }
            }
        }
    }

    /// What evaluatePolicy does, on the caller's thread.
    func evaluate(_ policy: LAPolicy, reason: String) throws {
        try check(policy)
        if authenticationContext.grantIsRecent {
            authenticationContext.markEvaluated()
            return
        }
        if interactionNotAllowed { throw LAError(.notInteractive) }
        switch authorizer.authorize(reason: reason.isEmpty ? nil : reason) {
        case .granted: authenticationContext.markEvaluated()
        case .denied: throw LAError(.authenticationFailed)
        case .canceled: throw LAError(.userCancel)
        case .unavailable(let why): throw LAError(.notInteractive, why)
        }
        if authenticationContext.isInvalidated { throw LAError(.invalidContext) }
    }

    /// Evaluates what `accessControl` asks for `operation`: the authorizer for its presence conditions.
    open func evaluateAccessControl(
        _ accessControl: SecAccessControl, operation: LAAccessControlOperation,
        localizedReason: String, reply: @escaping @Sendable (Bool, Error?) -> Void
    ) {
        let conditions = AccessConditions(rawValue: UInt64(accessControl.flags.rawValue))
        guard conditions.asksAuthorizer else { return reply(true, nil) }
        let policy: LAPolicy =
            conditions.isDisjoint(with: .biometry) || conditions.contains(.or)
            ? .deviceOwnerAuthentication : .deviceOwnerAuthenticationWithBiometrics
        evaluatePolicy(policy, localizedReason: localizedReason, reply: reply)
    }

    /// Ends the context: later evaluations fail with invalidContext, SecItem calls through it with
    /// errSecAuthFailed, and its application password is wiped.
    open func invalidate() { authenticationContext.invalidate() }

    /// Sets (nil: clears) the application password SecItem calls through this context use for items
    /// made with kSecAccessControlApplicationPassword.
    @discardableResult
    open func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        guard type == .applicationPassword, !authenticationContext.isInvalidated else { return false }
        authenticationContext.applicationPassword = credential.map { Array($0) }
        return true
    }

    open func isCredentialSet(_ type: LACredentialType) -> Bool {
        type == .applicationPassword && authenticationContext.applicationPassword != nil
    }

    /// Apple's hash of the enrolled fingers' set; nil here (the authorizer exposes none).
    open var evaluatedPolicyDomainState: Data? { nil }
}
