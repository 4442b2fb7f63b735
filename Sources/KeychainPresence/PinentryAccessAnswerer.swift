import Glibc
import KeychainCore

/// The broker's question through pinentry, in one conversation: CONFIRM with the question and
/// three buttons (Allow once; Always allow as the not-OK button, where the pinentry shows one:
/// curses and Qt do, GNOME's does not; Deny as cancel), then GETPIN for the keychain's password,
/// which is what makes the answer the person's (the broker checks it).
///
/// pinentry-gnome3 on a desktop is gcr's system prompter (gcr-prompter on the session bus, the
/// dialog GNOME asks for keyring passwords with), its password going over gcr's own secret
/// exchange: so this is also how the question reaches the desktop (`AccessAnswerers.desktop`).
/// It runs with this process's environment (its display, its session bus), never the asking
/// program's.
package struct PinentryAccessAnswerer: AccessAnswerer {
    package var program: String
    /// KEYCHAIN_PRESENCE_TIMEOUT, as for polkit (default 120 s), for each of the two steps.
    package var timeout: Double

    /// Always allow asked as a question of its own after Allow: pinentry-gnome3 shows two buttons
    /// only (it passes SETNOTOK over), so a third would never be seen there.
    package var asksAlwaysApart: Bool

    /// pinentry-gnome3's dialog is whoever owns gcr's prompter name: checked before each step
    /// (each is a prompt of its own there), and nobody else is shown the question or given the
    /// password.
    package var prompter: SystemPrompter?

    package init(program: String, timeout: Double? = nil, asksAlwaysApart: Bool = false, prompter: SystemPrompter? = nil) {
        self.program = program
        self.timeout = PinentryPrompt(program: program, timeout: timeout).timeout
        self.asksAlwaysApart = asksAlwaysApart
        self.prompter = prompter
    }

    package static let title = "Keychain access"

    package func answer(_ question: String) throws -> AccessGrant? {
        // One Assuan line holds 1,000 bytes; a description cut short could drop what it names.
        guard ("SETDESC " + Assuan.escape(question)).utf8.count < 1000 else { return nil }
        guard let conversation = start() else { return nil }
        defer { conversation.stop() }
        conversation.confirm(
            title: Self.title, description: question, ok: asksAlwaysApart ? "Allow" : "Allow once", cancel: "Deny",
            notOK: asksAlwaysApart ? nil : "Always allow", prompt: "Allow access to a keychain item?")
        var always: Bool
        switch conversation.wait(until: SystemClock.monotonic() + timeout) {
        case .confirmed: always = false
        case .cancelled:
            guard conversation.notConfirmed else { return .deny }
            always = true
        case .failed, .passphrase, nil:
            // No display, no terminal, no answer in time: the next answerer may ask.
            return nil
        }
        let first = question.split(separator: "\n").first(where: { !$0.hasPrefix("Wrong password") }).map(String.init) ?? question
        if asksAlwaysApart {
            guard prompterIsGcrs() else { return nil }
            // Closing this one is the lesser grant: once.
            conversation.confirm(
                title: Self.title, description: first + "\nAllow it from now on, without asking again?", ok: "Always allow",
                cancel: "Only this time", prompt: "Always allow it?")
            switch conversation.wait(until: SystemClock.monotonic() + timeout) {
            case .confirmed: always = true
            case .cancelled: always = false
            case .failed, .passphrase, nil: return .deny
            }
        }
        guard prompterIsGcrs() else { return nil }
        return askPassword(in: conversation, question: first, always: always, wrong: question.hasPrefix("Wrong password."))
    }

    /// The password step alone, in a conversation of its own: what follows the desktop portal's
    /// access dialog (`PortalAccessAnswerer`), which has no password field. nil when no pinentry
    /// could be shown.
    package func password(for question: String, always: Bool, wrong: Bool) -> AccessGrant? {
        guard let conversation = start() else { return nil }
        defer { conversation.stop() }
        return askPassword(in: conversation, question: question, always: always, wrong: wrong)
    }

    /// The program started; nil when it cannot be, or must not be: the first step's check is the
    /// conversation's own (`PinentryConversation.init`), said in one line.
    private func start() -> PinentryConversation? {
        do {
            return try PinentryConversation(program: program)
        } catch let refused as SystemPrompter.Refused {
            fputs("keychain: \(refused)\n", stderr)
            return nil
        } catch {
            return nil
        }
    }

    /// GETPIN for the keychain's password, which makes the grant the person's: the broker checks it.
    private func askPassword(in conversation: PinentryConversation, question: String, always: Bool, wrong: Bool) -> AccessGrant? {
        conversation.ask(
            title: Self.title, description: question + "\n" + (always ? "Always allow" : "Allow once") + ": the keychain's password.",
            prompt: "Password:", error: wrong ? "Wrong password." : nil, ok: always ? "Always allow" : "Allow once", cancel: "Deny")
        switch conversation.wait(until: SystemClock.monotonic() + timeout) {
        case .passphrase(let password): return always ? .always(password: password) : .once(password: password)
        default:
            // The person chose, then dismissed the password: no allowance without it.
            return .deny
        }
    }

    /// Whether the next step may be shown: always without a `prompter` to check. Otherwise the
    /// answerer stands aside (the next in the chain asks), saying why on one line.
    private func prompterIsGcrs() -> Bool {
        guard let reason = prompter?.refusal() else { return true }
        fputs("keychain: the desktop's dialog is not used: \(reason)\n", stderr)
        return false
    }
}
