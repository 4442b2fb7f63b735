import Glibc
import KeychainCore
import KeychainPeers

/// Who would show pinentry-gnome3's dialog: whoever owns gcr's prompter name on the session bus,
/// which any process of the user may own first (gcr-prompter is started on demand and exits when
/// idle) or once it has killed gcr-prompter, a process of the same user. Told
/// apart before each of the dialog's steps, so that the broker's question and the keychain's
/// password go only to root's prompter program, running as itself (review 55).
///
/// The owner is read as the broker reads a caller (`CallerTrust`): the bus's pidfd for the
/// connection where it gives one (dbus 1.15.8, dbus-broker 34), else the process with the pid the
/// bus names that had started when the name was seen owned (Debian 12's dbus 1.14; see
/// `ProcessIdentity.Provenance.pidLookup` for what that leaves open); its executable root's, in
/// root's folders, not traced, mapping only root's files, not an interpreter.
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
        do {
            var owner = try self.owner(on: connection)
            if owner == nil {
                // Nobody yet: the bus starts its service file's program (gcr-prompter), the same
                // as pinentry-gnome3's first call would; then its owner is checked like any other.
                var body = BusWriter()
                body.string(Self.name)
                body.uint32(0)
                let started = try connection.call("StartServiceByName", signature: "su", body: body.bytes)
                started.descriptors.forEach { close($0) }
                if let error = started.error { return "nobody owns \(Self.name) and the bus cannot start it (\(error))" }
                owner = try self.owner(on: connection)
            }
            guard let owner else { return "nobody owns \(Self.name)" }
            let seen = ProcessIdentity.ticksSinceBoot()
            guard let credentials = try credentials(of: owner, on: connection) else { return "the bus would not say who \(owner) is" }
            defer { if let pidfd = credentials.pidfd { close(pidfd) } }
            guard credentials.uid == getuid() else { return "\(Self.name) is owned by uid \(credentials.uid), not this user" }
            // The handle pins the connection's own process (ProcessFD), or by pid one that had
            // started when the name was seen owned; any other is `unidentified`.
            let handle = CallerHandle(pid: credentials.pid, pidfd: credentials.pidfd, startedBy: credentials.pidfd == nil ? seen : nil)
            let caller = CallerTrust.evaluate(handle, uid: getuid(), inspectingParents: false)
            // The name did not move while its owner was read.
            guard try self.owner(on: connection) == owner else { return "\(Self.name) changed hands while it was checked" }
            guard caller.canMatchSilently, let entry = caller.entry, Self.programs.contains(entry) else {
                let warnings = caller.warnings.isEmpty ? "" : ": " + caller.warnings.map(\.rawValue).joined(separator: ", ")
                return "\(Self.name) is owned by \(caller.executable ?? "an unknown program") (pid \(caller.pid)\(warnings)), not gcr's prompter"
            }
            return nil
        } catch {
            return "the session bus did not say who owns \(Self.name)"
        }
    }

    /// The unique name owning `name`; nil when nobody does.
    private func owner(on connection: BusDaemonConnection) throws -> String? {
        var body = BusWriter()
        body.string(Self.name)
        var reply = try connection.call("GetNameOwner", signature: "s", body: body.bytes)
        reply.descriptors.forEach { close($0) }
        guard reply.error == nil else { return nil }
        guard reply.signature == "s" else { throw BusReader.Malformed.message }
        return try reply.reader.string()
    }

    struct Credentials {
        var pid: Int32
        var uid: UInt32
        /// ProcessFD's pidfd, ours to close.
        var pidfd: Int32?
    }

    /// GetConnectionCredentials of `unique`: nil without a pid and a uid, or when the bus named a
    /// ProcessFD that did not come (the connection's process is then not known).
    private func credentials(of unique: String, on connection: BusDaemonConnection) throws -> Credentials? {
        var body = BusWriter()
        body.string(unique)
        var reply = try connection.call("GetConnectionCredentials", signature: "s", body: body.bytes)
        var unused = reply.descriptors
        defer { unused.forEach { close($0) } }
        guard reply.error == nil, reply.signature == "a{sv}" else { return nil }
        var pid: UInt32?, uid: UInt32?, index: UInt32?
        let length = Int(try reply.reader.uint32())
        try reply.reader.align(8)
        let end = reply.reader.offset + length
        guard end <= reply.reader.bytes.count else { throw BusReader.Malformed.message }
        while reply.reader.offset < end {
            try reply.reader.align(8)
            let key = try reply.reader.string()
            let type = try reply.reader.signature()
            switch (key, type) {
            case ("ProcessID", "u"): pid = try reply.reader.uint32()
            case ("UnixUserID", "u"): uid = try reply.reader.uint32()
            case ("ProcessFD", "h"): index = try reply.reader.uint32()
            default:
                guard try BusReader.completeType(type[...]).count == type.count else { throw BusReader.Malformed.message }
                try reply.reader.skip(type[...])
            }
        }
        guard let pid, let uid else { return nil }
        var credentials = Credentials(pid: Int32(bitPattern: pid), uid: uid)
        if let index {
            guard Int(index) < unused.count else { return nil }
            credentials.pidfd = unused.remove(at: Int(index))
        }
        return credentials
    }
}
