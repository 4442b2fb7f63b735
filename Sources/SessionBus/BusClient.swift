import CSDBus
import Glibc
import KeychainCore
import KeychainPeers

/// An error a peer answered with (or the bus, for a peer that is gone).
package struct BusCallError: Error, CustomStringConvertible {
    package let name: String
    package let message: String

    package var description: String { message.isEmpty ? name : "\(message) (\(name))" }

    /// The peer has no such object (gnome-keyring answers UnknownMethod for one it never made).
    package var isNoSuchObject: Bool {
        [
            "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject",
            "org.freedesktop.DBus.Error.UnknownMethod"
        ].contains(name)
    }
}

/// A reply, unreferenced when it goes.
package final class BusReply {
    package let message: OpaquePointer

    package init(_ message: OpaquePointer) { self.message = message }

    deinit { sd_bus_message_unref(message) }

    package var reader: MessageReader { MessageReader(message: message) }
}

/// The session bus as a client sees it, one call at a time: what `import`, `export`, `enable`,
/// `disable` and `status` need of the bus daemon and of another Secret Service provider.
package final class BusClient {
    package let bus: OpaquePointer

    package init() throws {
        var bus: OpaquePointer?
        let rc = sd_bus_open_user(&bus)
        guard rc >= 0, let bus else {
            throw ServiceError.failed("cannot connect to the session bus: \(String(cString: strerror(-rc)))")
        }
        self.bus = bus
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// Calls `member`; the reply, or the peer's error thrown as BusCallError. `timeout` in seconds
    /// (0: sd-bus's default, 25 s).
    @discardableResult
    package func call(
        _ destination: String, _ path: String, _ interface: String, _ member: String, timeout: Double = 0,
        _ body: (MessageWriter) throws -> Void = { _ in }
    ) throws -> BusReply {
        var message: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &message, destination, path, interface, member) >= 0, let message else {
            throw ServiceError.failed("cannot make a call to \(destination)")
        }
        defer { sd_bus_message_unref(message) }
        // Calls may carry secrets: sd-bus then wipes their memory when it frees them.
        _ = sd_bus_message_sensitive(message)
        try body(MessageWriter(message: message))
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let rc = sd_bus_call(bus, message, UInt64(timeout * 1_000_000), &error, &reply)
        guard rc >= 0, let reply else {
            let name = error.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed"
            let text = error.message.map { String(cString: $0) } ?? String(cString: strerror(-rc))
            throw BusCallError(name: name, message: text)
        }
        _ = sd_bus_message_sensitive(reply)
        return BusReply(reply)
    }

    /// One property, read by `read` from inside its variant.
    package func property<T>(
        _ destination: String, _ path: String, _ interface: String, _ name: String,
        _ read: (MessageReader, String) throws -> T
    ) throws -> T {
        let reply = try call(destination, path, "org.freedesktop.DBus.Properties", "Get") { w in
            try w.string(interface)
            try w.string(name)
        }
        let reader = reply.reader
        let signature = try reader.variantSignature()
        _ = try reader.enter(BusType.variant, signature)
        return try read(reader, signature)
    }

    // MARK: The bus daemon

    package static let daemon = "org.freedesktop.DBus"
    package static let daemonPath = "/org/freedesktop/DBus"

    /// The unique name owning `name`, or nil when nobody does.
    package func owner(of name: String) -> String? {
        guard let reply = try? call(Self.daemon, Self.daemonPath, Self.daemon, "GetNameOwner", { try $0.string(name) }) else { return nil }
        return try? reply.reader.string()
    }

    /// Who a connection is, as the bus daemon says (GetConnectionUnixUser, ...ProcessID).
    package struct Peer {
        package var uniqueName: String
        package var uid: uid_t
        package var pid: pid_t
        /// The process's program name (`ProcFile.programName`).
        package var command: String
        /// /proc/PID/exe, when it can be read.
        package var executable: String?

        /// gnome-keyring-daemon (its comm is cut to gnome-keyring-d).
        package var isGnomeKeyring: Bool { command.hasPrefix("gnome-keyring-d") || executable?.hasSuffix("/gnome-keyring-daemon") == true }
        /// This program (another instance, or one with another HOME).
        package var isKeychainService: Bool {
            command.hasPrefix("keychain-secret") || executable?.hasSuffix("/keychain-secret-service") == true
        }

        package var shown: String { "\(command) (pid \(pid))" }
    }

    package func peer(_ name: String) -> Peer? {
        guard let unique = name.hasPrefix(":") ? name : owner(of: name) else { return nil }
        func number(_ member: String) -> UInt32? {
            guard let reply = try? call(Self.daemon, Self.daemonPath, Self.daemon, member, { try $0.string(unique) }) else { return nil }
            var value: UInt32 = 0
            return sd_bus_message_read_basic(reply.message, CChar(UInt8(ascii: "u")), &value) > 0 ? value : nil
        }
        guard let uid = number("GetConnectionUnixUser"), let pid = number("GetConnectionUnixProcessID") else { return nil }
        let executable = ProcFile.link("/proc/\(pid)/exe")
        return Peer(uniqueName: unique, uid: uid_t(uid), pid: pid_t(pid), command: ProcFile.programName(pid_t(pid)) ?? "?", executable: executable)
    }

    /// The names the bus can start (its activation files).
    package func activatableNames() -> Set<String> {
        guard let reply = try? call(Self.daemon, Self.daemonPath, Self.daemon, "ListActivatableNames") else { return [] }
        return Set((try? reply.reader.strings()) ?? [])
    }

    /// Asks the bus daemon to read its configuration and service folders again (a new activation
    /// file in ~/.local/share/dbus-1/services).
    package func reloadConfig() {
        _ = try? call(Self.daemon, Self.daemonPath, Self.daemon, "ReloadConfig")
    }

    /// Starts `name` by D-Bus activation (whichever activation file the bus finds first).
    package func activate(_ name: String) throws {
        try call(Self.daemon, Self.daemonPath, Self.daemon, "StartServiceByName", timeout: 30) { w in
            try w.string(name)
            var flags: UInt32 = 0
            try w.verify(sd_bus_message_append_basic(w.message, CChar(UInt8(ascii: "u")), &flags))
        }
    }

    /// Waits until `done` says so or `seconds` pass, checking every 50 ms and serving the bus
    /// (signals) in between.
    package func wait(seconds: Double, until done: () -> Bool) -> Bool {
        let deadline = SystemClock.monotonic() + seconds
        while !done() {
            let left = deadline - SystemClock.monotonic()
            if left <= 0 { return false }
            serve(for: min(left, 0.05))
        }
        return true
    }

    /// Processes what the bus has, then waits for more at most `seconds`.
    package func serve(for seconds: Double) {
        while sd_bus_process(bus, nil) > 0 {}
        _ = sd_bus_wait(bus, UInt64(max(seconds, 0) * 1_000_000))
        while sd_bus_process(bus, nil) > 0 {}
    }

    // MARK: Prompts of another provider

    /// The outcome of a Secret Service prompt: dismissed, or the result variant's object paths.
    package final class PromptOutcome {
        package var done = false
        package var dismissed = true
        package var paths: [String] = []
    }

    /// Runs another provider's prompt (its own dialog) and waits for Completed, at most `timeout`
    /// seconds (then Dismiss): the result's object paths (Unlock's `ao`, CreateCollection's `o`),
    /// or nil when it was dismissed or gave no answer.
    package func runPrompt(_ destination: String, _ prompt: String, timeout: Double) throws -> [String]? {
        let outcome = PromptOutcome()
        var slot: OpaquePointer?
        let rc = sd_bus_match_signal(
            bus, &slot, nil, prompt, "org.freedesktop.Secret.Prompt", "Completed",
            { message, userdata, _ in
                let outcome = Unmanaged<PromptOutcome>.fromOpaque(userdata!).takeUnretainedValue()
                let reader = MessageReader(message: message!)
                outcome.dismissed = (try? reader.bool()) ?? true
                if let signature = try? reader.variantSignature(), (try? reader.enter(BusType.variant, signature)) != nil {
                    if signature == "ao" {
                        outcome.paths = (try? reader.objectPaths()) ?? []
                    } else if signature == "o", let path = try? reader.objectPath() {
                        outcome.paths = [path]
                    }
                }
                outcome.done = true
                return 0
            }, Unmanaged.passUnretained(outcome).toOpaque())
        guard rc >= 0 else { throw ServiceError.failed("cannot watch the prompt: \(String(cString: strerror(-rc)))") }
        defer { sd_bus_slot_unref(slot) }
        try call(destination, prompt, "org.freedesktop.Secret.Prompt", "Prompt") { try $0.string("") }
        if !wait(seconds: timeout, until: { outcome.done }) {
            _ = try? call(destination, prompt, "org.freedesktop.Secret.Prompt", "Dismiss")
            return nil
        }
        return outcome.dismissed ? nil : outcome.paths
    }
}

extension MessageReader {
    package func uint64() throws -> UInt64 {
        var value: UInt64 = 0
        let rc = sd_bus_message_read_basic(message, BusType.uint64, &value)
        guard rc > 0 else { throw ServiceError.invalidArgs("cannot read a number") }
        return value
    }
}

extension MessageWriter {
    package func verify(_ rc: Int32) throws {
        if rc < 0 { throw ServiceError.failed("cannot build a call: \(String(cString: strerror(-rc)))") }
    }
}

/// Small reads of /proc and of the user's files.
package enum ProcFile {
    /// A file's bytes (at most `limit`); nil when it cannot be read.
    package static func read(_ path: String, limit: Int = 1 << 20) -> Bytes? { ProcFiles.read(path, limit: limit + 1) }

    /// What a person knows a process by: its executable's file name, else its argv[0]'s (a
    /// process of another user hides /proc/PID/exe), else its comm, which the kernel cuts to 15
    /// characters ("keychain-secret" for keychain-secret-service).
    package static func programName(_ pid: pid_t) -> String? {
        func base(_ path: Substring) -> String? {
            let name = path.split(separator: "/").last.map(String.init)?.replacingSuffix(" (deleted)")
            return name?.isEmpty == false ? name : nil
        }
        if let exe = link("/proc/\(pid)/exe"), let name = base(Substring(exe)) { return name }
        if let cmdline = read("/proc/\(pid)/cmdline", limit: 65536), let first = cmdline.split(separator: 0, omittingEmptySubsequences: false).first,
            let name = base(Substring(decoding: first, as: UTF8.self))
        {
            return name
        }
        return read("/proc/\(pid)/comm").map { String(decoding: $0, as: UTF8.self) }?.split(separator: "\n").first.map(String.init)
    }

    package static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
