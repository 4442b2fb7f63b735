import KeychainCore
import Glibc

/// An `AccessQuestion` asked through pinentry's CONFIRM: its text as the description, Allow and
/// Deny as the buttons. pinentry runs with this process's environment (DISPLAY, WAYLAND_DISPLAY,
/// the session bus), never the asking program's: a program that chose where the dialog appears
/// could answer it itself.
package struct PinentryAccessPrompter: AccessPrompter {
    /// KEYCHAIN_PINENTRY, else Debian's `pinentry` alternative.
    package var program: String
    /// KEYCHAIN_PRESENCE_TIMEOUT, as for polkit (default 120 s).
    package var timeout: Double

    package init(program: String? = nil, timeout: Double? = nil) {
        let prompt = PinentryPrompt(program: program, timeout: timeout)
        self.program = prompt.program
        self.timeout = prompt.timeout
    }

    package func ask(_ question: AccessQuestion) -> AccessAnswer {
        // One Assuan line holds 1,000 bytes; a description cut short could drop what it names.
        guard ("SETDESC " + Assuan.escape(question.text)).utf8.count < 1000 else { return .unavailable("the question is too long for pinentry") }
        let conversation: PinentryConversation
        do {
            conversation = try PinentryConversation(program: program)
        } catch let refused as SystemPrompter.Refused {
            return .unavailable("\(refused)")
        } catch {
            return .unavailable("cannot run \(program)")
        }
        defer { conversation.stop() }
        conversation.confirm(title: question.title, description: question.text, ok: "Allow", cancel: "Deny")
        switch conversation.wait(until: SystemClock.monotonic() + timeout) {
        case .confirmed: return .allowed
        case .cancelled: return .denied
        case nil: return .unavailable("no answer from \(program) within \(Int(timeout)) s")
        case .failed, .passphrase: return .unavailable("\(program) could not ask (no display or terminal?)")
        }
    }
}
