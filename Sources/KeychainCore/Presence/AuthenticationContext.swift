import Glibc

/// How a call may reach the person when an item needs one (Apple's kSecUseAuthenticationUI).
package enum PresenceInteraction: Sendable {
    /// Ask (polkit's agent, a prompt for an application password).
    case allow
    /// Never ask: such an item is errSecInteractionNotAllowed.
    case fail
    /// Never ask: such items are left out of the result (searches only).
    case skip
}

/// What a SecItem call brings for items that need a person.
package struct PresenceOptions: Sendable {
    package var interaction: PresenceInteraction
    /// kSecUseOperationPrompt: why the caller asks, shown where the agent can show it.
    package var operationPrompt: String?
    /// kSecUseAuthenticationContext: an LAContext's state, which may already hold the answer.
    package var context: AuthenticationContext?
    /// Asks for an item's application password when the context holds none (`security` reads the
    /// terminal, SecItem asks pinentry); it throws what the person's answer means. nil: such items
    /// are errSecInteractionNotAllowed.
    package var askApplicationPassword: (@Sendable () throws -> Bytes)?
    /// A backup takes application-password secrets as they are stored, sealed: they go into the
    /// backup sealed, and come back so.
    package var keepsSealedSecrets = false

    package init(
        interaction: PresenceInteraction = .allow, operationPrompt: String? = nil,
        context: AuthenticationContext? = nil, askApplicationPassword: (@Sendable () throws -> Bytes)? = nil
    ) {
        self.interaction = interaction
        self.operationPrompt = operationPrompt
        self.context = context
        self.askApplicationPassword = askApplicationPassword
    }
}

/// The state behind an LAContext, shared with the engine: when polkit last granted through it,
/// for how long that stands, the application password set on it, and whether it was invalidated.
package final class AuthenticationContext: @unchecked Sendable {
    private let mutex = Mutex()
    private var grantedAt: Double?
    private var evaluated = false
    private var invalid = false
    private var password: Bytes?
    private var duration: Double = 0

    /// Apple's LATouchIDAuthenticationMaximumAllowableReuseDuration.
    package static let maximumReuseDuration: Double = 300

    package init() {}
    deinit { password?.wipe() }

    /// How long after a grant another use goes on without asking (0 to 300 s).
    package var reuseDuration: Double {
        get { mutex.withLock { duration } }
        set { mutex.withLock { duration = min(max(newValue.isNaN ? 0 : newValue, 0), Self.maximumReuseDuration) } }
    }

    /// kSecUseAuthenticationUI is Fail for calls made with this context (LAContext's interactionNotAllowed).
    package var interactionNotAllowed = false

    package var isInvalidated: Bool { mutex.withLock { invalid } }

    /// LAContext.invalidate(): nothing goes on through it any more.
    package func invalidate() {
        mutex.withLock {
            invalid = true
            grantedAt = nil
            evaluated = false
            password?.wipe()
            password = nil
        }
    }

    /// The application password (LAContext.setCredential(_:type: .applicationPassword)); nil clears it.
    package var applicationPassword: Bytes? {
        get { mutex.withLock { password } }
        set {
            mutex.withLock {
                password?.wipe(); password = newValue
            }
        }
    }

    /// Records a grant: `evaluation` for evaluatePolicy, which (as on Apple's systems) lets every
    /// later SecItem call through this context go on until it is invalidated; a grant asked for by a
    /// SecItem call stands for `reuseDuration` seconds.
    func recordGrant(evaluation: Bool) {
        mutex.withLock {
            grantedAt = SystemClock.monotonic()
            if evaluation { evaluated = true }
        }
    }

    /// Whether a call through this context may go on without asking.
    var holdsGrant: Bool {
        mutex.withLock {
            guard !invalid, let grantedAt else { return false }
            return evaluated || SystemClock.monotonic() - grantedAt <= duration
        }
    }

    /// Whether evaluatePolicy may answer from an earlier grant: within the reuse duration of it.
    package var grantIsRecent: Bool {
        mutex.withLock {
            guard !invalid, let grantedAt, duration > 0 else { return false }
            return SystemClock.monotonic() - grantedAt <= duration
        }
    }

    /// Marks an evaluation that answered from a recent grant.
    package func markEvaluated() { recordGrant(evaluation: true) }
}

/// An object that can stand in kSecUseAuthenticationContext: LocalAuthentication's LAContext.
package protocol AuthenticationContextProviding: AnyObject {
    var authenticationContext: AuthenticationContext { get }
}
