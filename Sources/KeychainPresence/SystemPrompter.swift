import Glibc
import KeychainCore
import KeychainPeers

/// Who would show pinentry-gnome3's dialog: whoever owns gcr's prompter name on the session bus,
/// which any process of the user may own first (gcr-prompter is started on demand and exits when
/// idle) or once it has killed gcr-prompter, a process of the same user. Told
/// apart before each of the dialog's steps, so that the broker's question and the keychain's
/// password go only to root's prompter program, running as itself (review 55). The owner is
/// judged as the broker judges a caller (`BusDaemonConnection.refusal(of:unless:named:)`).
package struct SystemPrompter: Sendable {
    package static let name = "org.gnome.keyring.SystemPrompter"

    /// gcr's prompter (Debian 12 and 13's `gcr`), which the bus starts; and GNOME Shell, which
    /// takes the name over when it runs (it is the compositor: every key typed into a prompter's
    /// window passes through it anyway).
    package static let programs: Set<String> = ["exe:/usr/libexec/gcr-prompter", "exe:/usr/bin/gnome-shell"]

    /// The session bus pinentry-gnome3 is given (its DBUS_SESSION_BUS_ADDRESS).
    package var address: String
    /// For the queries and the activation of gcr-prompter together.
    package var seconds: Double = 30

    package init(address: String) { self.address = address }

    /// The check for a pinentry `program` that shows its dialog through gcr's prompter: Debian's
    /// pinentry-gnome3 (under any name, `pinentry` the alternative included) with a session bus.
    /// nil for any other pinentry, which draws its own dialog or asks on a terminal.
    package static func guarding(pinentry program: String, environment: (String) -> String? = AccessAnswerers.environment) -> SystemPrompter? {
        guard let bus = environment("DBUS_SESSION_BUS_ADDRESS"), !bus.isEmpty, AccessAnswerers.sameFile(program, AccessAnswerers.gcrPinentry)
        else { return nil }
        return SystemPrompter(address: bus)
    }

    /// Why nothing may be asked through pinentry `program` now (its dialog would go to a prompter
    /// that is not gcr's), or nil: `PinentryConversation` asks it before it starts any pinentry,
    /// whatever it asks for (an access question, a confirmation, a keychain's or an
    /// application's password).
    package static func refusal(forPinentry program: String) -> String? {
        guarding(pinentry: program)?.refusal()
    }

    /// What `PinentryConversation` throws when `refusal(forPinentry:)` gives a reason.
    package struct Refused: Error, CustomStringConvertible {
        package var reason: String
        package var description: String { "the desktop's dialog is not used: \(reason)" }
    }

    /// Nil when the name's owner is one of `programs`, started by the bus first if nobody owns
    /// it; otherwise why the dialog must not be shown, in one line.
    package func refusal() -> String? {
        let connection: BusDaemonConnection
        do {
            connection = try BusDaemonConnection(address: address, deadline: SystemClock.monotonic() + seconds)
        } catch {
            return "the session bus cannot be reached to see who owns \(Self.name)"
        }
        return connection.refusal(of: Self.name, unless: { Self.programs.contains($0) }, named: "gcr's prompter")
    }
}
