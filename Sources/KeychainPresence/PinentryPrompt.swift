import KeychainCore
import Glibc

/// One passphrase asked through pinentry (a `PinentryConversation`), waiting a bounded time: an
/// item's application password when the caller's LAContext carries none, as Apple's systems
/// prompt for it.
package struct PinentryPrompt: Sendable {
    /// KEYCHAIN_PINENTRY, else Debian's `pinentry` alternative.
    package var program: String
    /// KEYCHAIN_PRESENCE_TIMEOUT, as for polkit (default 120 s).
    package var timeout: Double

    package init(program: String? = nil, timeout: Double? = nil) {
        let chosen = program ?? getenv("KEYCHAIN_PINENTRY").map { String(cString: $0) } ?? "pinentry"
        self.program = chosen.contains("/") ? chosen : "/usr/bin/" + chosen
        self.timeout = timeout ?? PolkitAuthorizer().timeout
    }

    /// The passphrase (the caller wipes it). Cancelled: errSecUserCanceled; no pinentry, or no
    /// answer in time: errSecInteractionNotAllowed.
    package func ask(description: String, prompt: String) throws -> Bytes {
        let conversation: PinentryConversation
        do {
            conversation = try PinentryConversation(program: program)
        } catch let refused as SystemPrompter.Refused {
            throw KeychainError.presence(.interactionNotAllowed, "no application password: \(refused)")
        } catch {
            throw KeychainError.presence(.interactionNotAllowed, "no application password: cannot run \(program)")
        }
        defer { conversation.stop() }
        conversation.ask(description: description, prompt: prompt)
        switch conversation.wait(until: SystemClock.monotonic() + timeout) {
        case .passphrase(var pin) where pin.isEmpty:
            pin.wipe()
            throw KeychainError.presence(.userCanceled, "the application password was not given")
        case .passphrase(let pin):
            return pin
        case .cancelled:
            throw KeychainError.presence(.userCanceled, "the application password was not given")
        case .failed, .confirmed, nil:
            throw KeychainError.presence(.interactionNotAllowed, "no application password: \(program) gave no answer")
        }
    }
}
