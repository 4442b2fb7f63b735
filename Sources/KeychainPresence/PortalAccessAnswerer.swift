import Glibc
import KeychainCore

/// The broker's question in the desktop's own access dialog (`PortalAccessDialog`: Allow, Deny,
/// and "Always allow" ticked or not), then the keychain's password through pinentry (gcr's
/// prompter on GNOME, checked as ever; pinentry-qt on KDE): the portal's dialog has no password
/// field, and the broker takes no grant without the password, so a click alone, which on X11 any
/// client of the display can make, allows nothing.
package final class PortalAccessAnswerer: AccessAnswerer, @unchecked Sendable {
    package let dialog: PortalAccessDialog
    package let password: PinentryAccessAnswerer
    private let mutex = Mutex()
    /// The person's choice for the question last asked: after a wrong password the broker asks
    /// again, and only the password is asked again, not the whole dialog.
    private var chosen: (question: String, always: Bool)?

    package init(dialog: PortalAccessDialog, password: PinentryAccessAnswerer) {
        self.dialog = dialog
        self.password = password
    }

    static let wrongPassword = "Wrong password."

    package func answer(_ question: String) throws -> AccessGrant? {
        let wrong = question.hasPrefix(Self.wrongPassword)
        let asked = wrong ? String(question.dropFirst(Self.wrongPassword.count).drop(while: { $0 == "\n" })) : question
        let lines = asked.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let first = lines.first ?? asked
        var always: Bool
        if wrong, let kept = mutex.withLock({ chosen?.question == asked ? chosen?.always : nil }) {
            always = kept
        } else {
            // The broker's lines after the first say that the password is asked.
            let body = lines.dropFirst().filter { !$0.isEmpty }.joined(separator: "\n")
            switch dialog.ask(title: "Allow access to a keychain item?", subtitle: first, body: body) {
            case nil: return nil
            case .denied?: return .deny
            case .allowed(let choice)?: always = choice
            }
            mutex.withLock { chosen = (asked, always) }
        }
        return password.password(for: first, always: always, wrong: wrong)
    }
}
