import Glibc
import KeychainCore
import KeychainPresence
import SecretServiceItems
import SessionBus

/// A prompt's pinentry: the engine's `PinentryConversation` (the one Assuan conversation both the
/// service and SecItem's application-password prompt use), in the terms the prompts speak. The
/// service's loop polls `fd` and hands each readable moment to `readable()`, so a dialog left open
/// never holds up other clients.
final class Pinentry {
    enum Event {
        /// The person gave a passphrase (the caller wipes it).
        case passphrase(Bytes)
        /// Cancelled, closed, or the program failed.
        case cancelled
    }

    private let conversation: PinentryConversation
    var fd: Int32 { conversation.fd }

    /// Starts `program` (its errors go to the service's own stderr); nil (and one log line) when
    /// it cannot be run.
    init?(program: String) {
        do {
            conversation = try PinentryConversation(program: program, errors: STDERR_FILENO)
        } catch let refused as SystemPrompter.Refused {
            SecretService.log("\(refused); the prompt is dismissed")
            return nil
        } catch {
            SecretService.log("cannot run the pinentry program \(program): \(error); the prompt is dismissed")
            return nil
        }
    }

    /// Asks for one passphrase: `error` is shown above the field after a wrong try.
    func ask(title: String, description: String, prompt: String, error: String? = nil, repeatPrompt: String? = nil) {
        conversation.ask(title: title, description: description, prompt: prompt, error: error, repeatPrompt: repeatPrompt)
    }

    /// Reads what is there; returns the conversation's outcome once GETPIN has been answered.
    func readable() -> Event? {
        switch conversation.readable() {
        case .passphrase(let passphrase): return .passphrase(passphrase)
        case .cancelled, .confirmed, .failed: return .cancelled
        case nil: return nil
        }
    }

    /// Ends the program and reaps it.
    func stop() { conversation.stop() }
}
