import Glibc
import KeychainCore

/// The broker's question asked through pinentry, for a daemon with no terminal (the SSH agent):
/// the whole text as the dialog's description, where polkit could show only its fixed message,
/// and the keychain's password as the answer. A password allows once; Cancel (or nothing typed)
/// denies; "always" is for `security access` or a terminal, where the choice is typed out.
package struct PinentryAccessAnswerer: AccessAnswerer {
    /// KEYCHAIN_PINENTRY, else Debian's `pinentry` alternative.
    package var program: String
    /// KEYCHAIN_PRESENCE_TIMEOUT, as for polkit (default 120 s).
    package var timeout: Double

    package init(program: String? = nil, timeout: Double? = nil) {
        let prompt = PinentryPrompt(program: program, timeout: timeout)
        self.program = prompt.program
        self.timeout = prompt.timeout
    }

    static let instruction = "Type the keychain's password to allow it once; Cancel denies."

    /// nil (nobody could ask) without a pinentry that answers in time, or for a question longer
    /// than pinentry's one line of 1,000 bytes: a description cut short could drop what it names.
    package func answer(_ question: String) throws -> AccessGrant? {
        let description = question + "\n" + Self.instruction
        guard ("SETDESC " + Assuan.escape(description)).utf8.count < 1000 else { return nil }
        let conversation: PinentryConversation
        do {
            conversation = try PinentryConversation(program: program)
        } catch {
            return nil
        }
        defer { conversation.stop() }
        conversation.ask(title: "Use of a keychain item", description: description, prompt: "Keychain password:")
        switch conversation.wait(until: SystemClock.monotonic() + timeout) {
        case .passphrase(var pin) where pin.isEmpty:
            pin.wipe()
            return .deny
        case .passphrase(let pin): return .once(password: pin)
        case .cancelled: return .deny
        case .failed, .confirmed, nil: return nil
        }
    }
}
