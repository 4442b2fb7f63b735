import Glibc
import KeychainCore

/// The desktop's own access dialog: xdg-desktop-portal's org.freedesktop.impl.portal.Access
/// (AccessDialog: a title, a subtitle, a body, grant and deny buttons, and "Always allow" as a
/// choice), served by the portal backend the desktop names for it (Debian 12's GNOME: -gtk 1.14;
/// 13's: -gnome 48, whose .portal file lists Access; KDE: -kde, whose dialog needs Plasma's QML). The front end, xdg-desktop-portal, offers no Access interface of its own:
/// it calls the backend for its own portals (the camera's, the location's), so the keychain calls
/// the backend the same way, on the user's session bus.
///
/// The backend's name is whoever owns it, like gcr's prompter's: its owner must be root's
/// xdg-desktop-portal-* program (`BusDaemonConnection.refusal(of:unless:named:)`), else the
/// dialog is not used. The dialog carries no password: the answer it gives is only the person's
/// choice, and the keychain's password is asked next (`PortalAccessAnswerer`).
package struct PortalAccessDialog: Sendable {
    package enum Answer: Equatable {
        case allowed(always: Bool)
        case denied
    }

    /// The session bus.
    package var address: String
    /// The backend's bus name (org.freedesktop.impl.portal.desktop.gtk).
    package var name: String
    /// How long the person has to answer.
    package var timeout: Double
    /// For finding and checking the backend, starting it included.
    static let setupSeconds: Double = 30

    package init(address: String, name: String, timeout: Double) {
        self.address = address
        self.name = name
        self.timeout = timeout
    }

    static let interface = "org.freedesktop.impl.portal.Access"
    static let objectPath = "/org/freedesktop/portal/desktop"

    /// The dialog for the desktop `environment` names (XDG_CURRENT_DESKTOP), on its session bus;
    /// nil when the desktop's portal configuration names no backend with an access dialog.
    package static func forDesktop(
        environment: (String) -> String? = AccessAnswerers.environment, portals: String = "/usr/share/xdg-desktop-portal", timeout: Double
    ) -> PortalAccessDialog? {
        guard let bus = environment("DBUS_SESSION_BUS_ADDRESS"), !bus.isEmpty, let desktops = environment("XDG_CURRENT_DESKTOP") else {
            return nil
        }
        let names = PortalBackends(directory: portals).serving(interface, for: desktops.split(separator: ":").map(String.init))
        return names.first.map { PortalAccessDialog(address: bus, name: $0, timeout: timeout) }
    }

    /// Whose program may serve the dialog: root's xdg-desktop-portal-* (CallerTrust has found the
    /// file root's, in root's folders).
    static func isPortalBackend(_ entry: String) -> Bool {
        guard entry.hasPrefix("exe:/usr/") else { return false }
        return entry.split(separator: "/").last?.hasPrefix("xdg-desktop-portal-") == true
    }

    /// Shows the dialog and waits for the person. nil when it could not be shown (no backend, one
    /// that is not root's, a bus error) or was not answered in time: the next answerer may ask.
    package func ask(title: String, subtitle: String, body: String) -> Answer? {
        let connection: BusDaemonConnection
        do {
            connection = try BusDaemonConnection(address: address, deadline: SystemClock.monotonic() + Self.setupSeconds)
        } catch {
            return nil
        }
        let backend: String
        switch connection.checkedOwner(of: name, unless: Self.isPortalBackend, named: "the desktop portal's backend") {
        case .owner(let unique): backend = unique
        case .refused(let reason):
            fputs("keychain: the desktop portal's access dialog is not used: \(reason)\n", stderr)
            return nil
        }
        // The call goes to the connection that was checked, not to the name, which may change
        // hands; the backend exports a Request at this path while the dialog shows, which Close
        // ends.
        let handle = Self.objectPath + "/request/" + Self.pathElement(connection.uniqueName) + "/keychain" + String(Self.token(), radix: 16)
        connection.deadline = SystemClock.monotonic() + timeout
        do {
            var reply = try connection.call(
                destination: backend, path: Self.objectPath, interface: Self.interface, member: "AccessDialog", signature: "osssssa{sv}",
                body: Self.arguments(handle: handle, title: title, subtitle: subtitle, body: body))
            reply.descriptors.forEach { close($0) }
            guard reply.error == nil, reply.signature == "ua{sv}" else { return nil }
            return try Self.answer(&reply.reader)
        } catch BusDaemonConnection.Failure.timedOut {
            // Not left on the screen for an answer nobody waits for.
            connection.deadline = SystemClock.monotonic() + 5
            _ = try? connection.call(
                destination: name, path: handle, interface: "org.freedesktop.impl.portal.Request", member: "Close", signature: "", body: [])
            return nil
        } catch {
            return nil
        }
    }

    /// AccessDialog's arguments: the request's handle, no app id (the asker is no sandboxed
    /// app: the text names it), no parent window, the texts, and the options.
    static func arguments(handle: String, title: String, subtitle: String, body: String) -> [UInt8] {
        var writer = BusWriter()
        writer.string(handle)  // an object path is marshalled as a string is
        for text in ["", "", title, subtitle, body] { writer.string(text) }
        writer.array(alignment: 8) { options in
            for (key, label) in [("grant_label", "Allow"), ("deny_label", "Deny")] {
                options.structure()
                options.string(key)
                options.variant("s") { $0.string(label) }
            }
            // One choice with no options: a check box, unticked.
            options.structure()
            options.string("choices")
            options.variant("a(ssa(ss)s)") { value in
                value.array(alignment: 8) { choices in
                    choices.structure()
                    choices.string("always")
                    choices.string("Always allow")
                    choices.array(alignment: 8) { _ in }
                    choices.string("false")
                }
            }
        }
        return writer.bytes
    }

    /// The reply (ua{sv}): response 0 is the grant, with the check box's state in "choices";
    /// anything else (1: the person cancelled; 2: the dialog ended otherwise) is a refusal. The
    /// spec gives "choices" as a(ss); xdg-desktop-portal-gtk 1.14 sends a{sv} of strings: both
    /// are read, and a{ss}.
    static func answer(_ reader: inout BusReader) throws -> Answer {
        let response = try reader.uint32()
        var always = false
        try reader.array(alignment: 8) { entry in
            let key = try entry.string()
            let type = try entry.signature()
            guard key == "choices", ["a(ss)", "a{ss}", "a{sv}"].contains(type) else {
                guard try BusReader.completeType(type[...]).count == type.count else { throw BusReader.Malformed.message }
                try entry.skip(type[...])
                return
            }
            try entry.array(alignment: 8) { choice in
                let id = try choice.string()
                var value: String?
                if type == "a{sv}" {
                    let inner = try choice.signature()
                    if inner == "s" { value = try choice.string() } else { try choice.skip(inner[...]) }
                } else {
                    value = try choice.string()
                }
                if id == "always" { always = value == "true" }
            }
        }
        return response == 0 ? .allowed(always: always) : .denied
    }

    /// ":1.42" as an object path's element: "1_42".
    static func pathElement(_ unique: String) -> String {
        String(unique.drop(while: { $0 == ":" }).map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }

    static func token() -> UInt64 { UInt64.random(in: 0...UInt64.max) }
}
