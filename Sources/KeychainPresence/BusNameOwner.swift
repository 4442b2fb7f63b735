internal import CLinux
import Glibc
import KeychainCore
import KeychainPeers

/// Who owns a well-known name on the session bus, judged as the broker judges a caller: the
/// bus's pidfd for the connection where it gives one (dbus 1.15.8, dbus-broker 34), else the
/// process with the pid the bus names that had started when the name was seen owned (Debian 12's
/// dbus 1.14; see `ProcessIdentity.Provenance.pidLookup` for what that leaves open); its
/// executable root's, in root's folders, not traced, mapping only root's files, not an
/// interpreter. Any process of the user may own a name first, or once it has killed its owner (a
/// process of the same user): what is shown to a name's owner goes only to root's program for it.
extension BusDaemonConnection {
    /// Nil when `name`'s owner runs a program whose entry ("exe:/usr/libexec/gcr-prompter")
    /// `accepted` takes, the bus having started the name's service first if nobody owned it;
    /// otherwise why not, in one line. `program` names what was expected, for that line.
    func refusal(of name: String, unless accepted: (String) -> Bool, named program: String) -> String? {
        if case .refused(let reason) = checkedOwner(of: name, unless: accepted, named: program) { return reason }
        return nil
    }

    enum Checked {
        /// The owner's unique name: calls go to it, not to the well-known name, which may
        /// change hands after the check.
        case owner(String)
        case refused(String)
    }

    /// `refusal(of:unless:named:)`, with the owner's unique name when it is accepted.
    func checkedOwner(of name: String, unless accepted: (String) -> Bool, named program: String) -> Checked {
        do {
            var owner = try self.owner(of: name)
            if owner == nil {
                // Nobody yet: the bus starts its service file's program, the same as a first call
                // would; then its owner is checked like any other.
                var body = BusWriter()
                body.string(name)
                body.uint32(0)
                let started = try call("StartServiceByName", signature: "su", body: body.bytes)
                started.descriptors.forEach { close($0) }
                if let error = started.error { return .refused("nobody owns \(name) and the bus cannot start it (\(error))") }
                owner = try self.owner(of: name)
            }
            guard let owner else { return .refused("nobody owns \(name)") }
            let seen = ProcessIdentity.ticksSinceBoot()
            guard let credentials = try credentials(of: owner) else { return .refused("the bus would not say who \(owner) is") }
            defer { if let pidfd = credentials.pidfd { close(pidfd) } }
            guard credentials.uid == getuid() else { return .refused("\(name) is owned by uid \(credentials.uid), not this user") }
            // The handle pins the connection's own process (ProcessFD), or by pid one that had
            // started when the name was seen owned; any other is `unidentified`.
            let handle = CallerHandle(pid: credentials.pid, pidfd: credentials.pidfd, startedBy: credentials.pidfd == nil ? seen : nil)
            let caller = CallerTrust.evaluate(handle, uid: getuid(), inspectingParents: false)
            // The name did not move while its owner was read.
            guard try self.owner(of: name) == owner else { return .refused("\(name) changed hands while it was checked") }
            guard caller.canMatchSilently, let entry = caller.entry, accepted(entry) else {
                let warnings = caller.warnings.isEmpty ? "" : ": " + caller.warnings.map(\.rawValue).joined(separator: ", ")
                return .refused("\(name) is owned by \(caller.executable ?? "an unknown program") (pid \(caller.pid)\(warnings)), not \(program)")
            }
            return .owner(owner)
        } catch {
            return .refused("the session bus did not say who owns \(name)")
        }
    }

    /// The unique name owning `name`; nil when nobody does.
    func owner(of name: String) throws -> String? {
        var body = BusWriter()
        body.string(name)
        var reply = try call("GetNameOwner", signature: "s", body: body.bytes)
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
    func credentials(of unique: String) throws -> Credentials? {
        var body = BusWriter()
        body.string(unique)
        var reply = try call("GetConnectionCredentials", signature: "s", body: body.bytes)
        var unused = reply.descriptors
        defer { unused.forEach { close($0) } }
        guard reply.error == nil, reply.signature == "a{sv}" else { return nil }
        var pid: UInt32?, uid: UInt32?, index: UInt32?
        try reply.reader.array(alignment: 8) { entry in
            let key = try entry.string()
            let type = try entry.signature()
            switch (key, type) {
            case ("ProcessID", "u"): pid = try entry.uint32()
            case ("UnixUserID", "u"): uid = try entry.uint32()
            case ("ProcessFD", "h"): index = try entry.uint32()
            default:
                guard try BusReader.completeType(type[...]).count == type.count else { throw BusReader.Malformed.message }
                try entry.skip(type[...])
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
