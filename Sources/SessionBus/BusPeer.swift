import CSDBus
import Glibc
import KeychainPeers

/// Who is behind a bus connection: the process that connected, as the bus daemon recorded it.
///
/// dbus-daemon 1.15.8 and dbus-broker 34 answer GetConnectionCredentials with `ProcessFD`, a pidfd
/// the daemon took from the socket (SO_PEERPIDFD, Linux 6.5) when the client connected: that
/// process, never a later one given its pid. Older buses (Debian 12's dbus 1.14, dbus-broker 33)
/// give only `ProcessID`: the process found at that pid is pinned at once and taken only if it
/// started before the service saw the connection appear (`ProcessIdentity.Provenance.pidLookup`
/// says what that leaves open).
package enum BusPeer {
    /// What GetConnectionCredentials said of one connection.
    package struct Credentials {
        package var pid: pid_t?
        /// The connecting process, when the bus gives its pidfd.
        package var process: PinnedProcess?
        /// Whether the bus sent a ProcessFD at all (one for a process already reaped included).
        package var busGivesProcessFD = false
        /// The LSM label of the connecting process when it connected (SO_PEERSEC).
        package var securityLabel: String?
    }

    /// The connection's process, read through a pidfd; nil when it cannot be told for certain (its
    /// connecting process is gone, or a process that started after the connection appeared, at
    /// `appeared` in clock ticks since boot, holds its pid).
    package static func identity(of credentials: Credentials, appeared: UInt64) -> ProcessIdentity? {
        if credentials.busGivesProcessFD {
            // The connecting process itself; reaped (nil here) means whoever holds the connection
            // now is not known.
            return credentials.process.flatMap { ProcessIdentity.read($0, provenance: .connectingProcess) }
        }
        guard let pid = credentials.pid, let process = PinnedProcess(pid: pid),
            let identity = ProcessIdentity.read(process, provenance: .pidLookup),
            identity.startTime <= appeared
        else { return nil }
        return identity
    }

    /// GetConnectionCredentials for `name`; nil when the bus would not answer (the connection left).
    package static func credentials(of name: String, on bus: OpaquePointer) -> Credentials? {
        var call: OpaquePointer?
        guard
            sd_bus_message_new_method_call(bus, &call, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionCredentials")
                >= 0,
            let call
        else { return nil }
        defer { sd_bus_message_unref(call) }
        guard (try? MessageWriter(message: call).string(name)) != nil else { return nil }
        var reply: OpaquePointer?
        guard sd_bus_call(bus, call, 0, nil, &reply) >= 0, let reply else { return nil }
        defer { sd_bus_message_unref(reply) }
        var credentials = Credentials()
        let reader = MessageReader(message: reply)
        do {
            try reader.properties { key, signature in
                switch (key, signature) {
                case ("ProcessID", "u"):
                    var pid: UInt32 = 0
                    guard sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &pid) > 0 else { return false }
                    credentials.pid = pid_t(bitPattern: pid)
                case ("ProcessFD", "h"):
                    var fd: Int32 = -1
                    guard sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "h")), &fd) > 0 else { return false }
                    credentials.busGivesProcessFD = true
                    // The message owns its descriptor: a copy of our own, kept with the identity.
                    credentials.process = PinnedProcess(adopting: fcntl(fd, F_DUPFD_CLOEXEC, 3))
                case ("LinuxSecurityLabel", "ay"):
                    let label = try reader.bytes()
                    credentials.securityLabel = String(decoding: label.prefix { $0 != 0 }, as: UTF8.self)
                default:
                    return false
                }
                return true
            }
        } catch {
            return nil
        }
        // A pidfd for another pid than the one the bus names is not this connection's process.
        if let process = credentials.process, let pid = credentials.pid, process.pid != pid { credentials.process = nil }
        return credentials
    }
}
