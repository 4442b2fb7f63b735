import CLinux
import CSDBus
import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus
import class KeychainPeers.PinnedProcess
import struct KeychainPeers.ProcessIdentity

/// The interfaces of the spec.
package enum Interface {
    static let service = "org.freedesktop.Secret.Service"
    package static let collection = "org.freedesktop.Secret.Collection"
    static let item = "org.freedesktop.Secret.Item"
    static let session = "org.freedesktop.Secret.Session"
    static let prompt = "org.freedesktop.Secret.Prompt"
}

/// The provider: owns org.freedesktop.secrets on the session bus and answers the Secret Service
/// API from the keychains, in one thread (sd_bus_process in a poll loop that also serves the
/// pinentry programs of open prompts).
package final class SecretService {
    package static let busName = "org.freedesktop.secrets"
    /// Sessions one client may hold at once; beyond this, LimitsExceeded rather than unbounded memory.
    static let sessionsPerClient = 4096
    /// Prompts one client may hold at once (each may become a pinentry process with two
    /// descriptors in this one): beyond this, LimitsExceeded.
    static let promptsPerClient = 8
    /// Prompts one sandboxed app may hold at once, over all its connections.
    static let promptsPerApp = 1
    /// Pinentry processes running at once, for all clients together; one per client at the most,
    /// the rest wait their turn.
    static let pinentriesAtOnce = 4

    package let bus: OpaquePointer
    package let collections = CollectionRegistry()
    var sessions: [String: Session] = [:]
    package var prompts: [String: Prompt] = [:]
    /// Who each connection is, told once per unique name (never reused while the bus runs), and
    /// the process that connected, pinned while the connection lasts.
    private var callers: [String: (caller: Caller, identity: ProcessIdentity?)] = [:]
    /// Whether each connection's process holds it alone, as far as can be told (`identity`):
    /// its exec stamp then, or nil when it could not be told; looked at once per unique name.
    private var soleHolders: [String: ConnectionHolders.ExecStamp?] = [:]
    /// When each connection appeared on the bus, as far as this service saw (clock ticks since
    /// boot); one older than the service appeared before it started.
    private var appeared: [String: UInt64] = [:]
    private let started = ProcessIdentity.ticksSinceBoot()
    /// Whether the bus's way of naming clients was logged yet (once a run).
    private var toldHowClientsAreKnown = false
    let pinentryProgram: String
    private var counter: UInt64 = 0
    private var running = true
    private var lastLockCheck = 0.0
    /// CreateItem calls waiting for their shared commit (PendingStores.swift), and since when.
    var pendingStores: [PendingStore] = []
    var firstPendingStore = 0.0
    /// Whether the signals of committed stores are being sent (`currentCaller`).
    var announcingStores = false
    /// KWallet's API (`--kwallet`), on this connection and loop.
    package var kwallet: (any CompanionAPI)?
    /// The names this service holds: it ends when it has none left.
    private var ownedNames: Set<String> = []

    package init(bus: OpaquePointer, pinentryProgram: String) {
        self.bus = bus
        self.pinentryProgram = pinentryProgram
    }

    func nextID(_ prefix: String) -> String {
        counter += 1
        return prefix + String(counter)
    }

    package static func log(_ line: String) {
        fputs("keychain-secret-service: \(line)\n", stderr)
    }

    // MARK: Start-up

    /// Registers the objects, takes the names and serves until every name is lost or the bus goes.
    package func run(replace: Bool) throws -> Int32 {
        var handlers = csdbus_handlers(
            method: { message, userdata, error in SecretService.from(userdata).handle(message!, error!) },
            get: { path, interface, property, reply, userdata, error in
                SecretService.from(userdata).get(String(cString: path!), String(cString: interface!), String(cString: property!), reply!, error!)
            },
            set: { path, interface, property, value, userdata, error in
                SecretService.from(userdata).set(String(cString: path!), String(cString: interface!), String(cString: property!), value!, error!)
            },
            find: { path, interface, userdata in
                SecretService.from(userdata).exists(String(cString: path!), String(cString: interface!)) ? 1 : 0
            },
            enumerate: { path, userdata in SecretService.from(userdata).children(String(cString: path!)) })
        let me = Unmanaged.passUnretained(self).toOpaque()
        var rc = csdbus_register(bus, &handlers, me)
        guard rc >= 0 else { throw ServiceError.failed("cannot register the objects: \(String(cString: strerror(-rc)))") }
        rc = sd_bus_match_signal(
            bus, nil, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "NameOwnerChanged",
            { message, userdata, _ in
                SecretService.from(userdata).nameOwnerChanged(message!)
                return 0
            }, me)
        guard rc >= 0 else { throw ServiceError.failed("cannot watch clients: \(String(cString: strerror(-rc)))") }
        rc = sd_bus_match_signal(
            bus, nil, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "NameLost",
            { message, userdata, _ in
                SecretService.from(userdata).nameLost(message!)
                return 0
            }, me)
        guard rc >= 0 else { throw ServiceError.failed("cannot watch the name: \(String(cString: strerror(-rc)))") }
        // Before sd-bus dispatches any call (a method, a property, introspection, the portal):
        // what waits is committed first (PendingStores.swift).
        rc = sd_bus_add_filter(
            bus, nil,
            { message, userdata, _ in
                SecretService.from(userdata).beforeDispatch(message!)
                return 0
            }, me)
        guard rc >= 0 else { throw ServiceError.failed("cannot filter calls: \(String(cString: strerror(-rc)))") }

        if replace {
            for name in [Self.busName] + (kwallet?.busNames ?? []) where stopOtherService(owning: name) { break }
        }
        if kwallet != nil {
            // Not given up to another kwalletd: a KDE program's handles are this service's. Taken
            // before the Secret Service's name, which is what a starter (systemd, enable) waits
            // for: by then these are taken too, and nobody starts a second service for them.
            for name in kwallet?.busNames ?? [] {
                rc = sd_bus_request_name(bus, name, 0)
                if rc == -EEXIST {
                    SecretService.log("\(name) is already provided by \(currentOwner(name))")
                    continue
                }
                guard rc >= 0 else { throw ServiceError.failed("cannot own \(name): \(String(cString: strerror(-rc)))") }
                ownedNames.insert(name)
            }
        }
        // Not given up to whoever asks (no ALLOW_REPLACEMENT): the owner of the name receives
        // every secret clients store, so a process of the user must at least kill this one to
        // take it, which nothing here can prevent.
        rc = sd_bus_request_name(bus, Self.busName, replace ? UInt64(SD_BUS_NAME_REPLACE_EXISTING) : 0)
        if rc == -EEXIST {
            let next = NameHolder(owning: Self.busName, on: bus).nextStep(replace: replace)
            // With KWallet's API, KDE's programs are still served: the other provider keeps the
            // Secret Service.
            let instead = kwallet == nil ? "" : "; serving org.kde.kwalletd5 and org.kde.kwalletd6 alone"
            SecretService.log("\(Self.busName) is already provided by \(currentOwner(Self.busName)); \(next)\(instead)")
            if ownedNames.isEmpty { return 1 }
        } else {
            guard rc >= 0 else { throw ServiceError.failed("cannot own \(Self.busName): \(String(cString: strerror(-rc)))") }
            ownedNames.insert(Self.busName)
        }
        for collection in collections.all { collection.announcedLocked = collection.isLocked }
        return loop()
    }

    /// `--replace` against another keychain-secret-service of the user, which does not let the
    /// name go either: asked to end (SIGTERM, its waiting stores made first), as `disable` does.
    /// True once it left the bus; false when `name`'s owner is another program, or another user's.
    private func stopOtherService(owning name: String) -> Bool {
        var creds: OpaquePointer?
        let mask = UInt64(SD_BUS_CREDS_PID | SD_BUS_CREDS_EUID | SD_BUS_CREDS_UNIQUE_NAME | SD_BUS_CREDS_AUGMENT)
        guard sd_bus_get_name_creds(bus, name, mask, &creds) >= 0, let creds else { return false }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        var uid: uid_t = 0
        var unique: UnsafePointer<CChar>?
        guard sd_bus_creds_get_pid(creds, &pid) >= 0, sd_bus_creds_get_euid(creds, &uid) >= 0, uid == getuid(),
            sd_bus_creds_get_unique_name(creds, &unique) >= 0, let unique, let process = PinnedProcess(pid: pid)
        else { return false }
        // The pinned process is the owner's only while the bus still names its pid for that
        // connection; an upgraded executable is the same program, deleted.
        func program(_ path: String?) -> String? { path.map { $0.hasSuffix(" (deleted)") ? String($0.dropLast(10)) : $0 } }
        guard let own = program(ProcFile.link("/proc/self/exe")), program(ProcFile.link("/proc/\(pid)/exe")) == own,
            BusPeer.credentials(of: String(cString: unique), on: bus)?.pid == pid
        else { return false }
        let connection = String(cString: unique)
        SecretService.log("\(name) is provided by \(currentOwner(name)); asking it to end (--replace)")
        guard clinux_pidfd_send_signal(process.pidfd, SIGTERM) == 0 else { return false }
        // Its names are free once its connection is gone; a client's call may start the unit's
        // service meanwhile, and then that one keeps them (said when they are asked for).
        for _ in 0..<100 where BusPeer.credentials(of: connection, on: bus) != nil { usleep(100_000) }
        return true
    }

    /// Who owns the name now: its program's name and pid, for the one line that says so.
    private func currentOwner(_ name: String) -> String {
        var creds: OpaquePointer?
        guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_PID | SD_BUS_CREDS_AUGMENT), &creds) >= 0, let creds else {
            return "another program"
        }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0 else { return "another program" }
        return "\(ProcFile.programName(pid) ?? "another program") (pid \(pid))"
    }

    private func loop() -> Int32 {
        // SIGTERM, SIGINT and SIGHUP (main.swift) leave through the same door as the bus going.
        // Stores still waiting are made before the service ends, answered or not.
        defer { storePending() }
        while running && clinux_termination_requested() == 0 {
            let rc = sd_bus_process(bus, nil)
            if rc < 0 {
                // The bus going away (the session ending) is the normal way for the service to end.
                if rc == -ECONNRESET || rc == -ENOTCONN { return 0 }
                SecretService.log("the bus connection failed: \(String(cString: strerror(-rc)))")
                return 1
            }
            if rc > 0 {
                if storesAreDue { storePending() }
                continue
            }
            // Nothing more to read: the stores that came together are committed and answered.
            if !pendingStores.isEmpty {
                storePending()
                continue
            }
            var fds = [pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0)]
            let conversations = prompts.values.compactMap { prompt in prompt.pinentry.map { (prompt, $0) } }
            for (_, pinentry) in conversations { fds.append(pollfd(fd: pinentry.fd, events: Int16(POLLIN), revents: 0)) }
            var timeout: UInt64 = 0
            var wait: Int32 = 2000
            if sd_bus_get_timeout(bus, &timeout) > 0, timeout != UInt64.max {
                // sd-bus's deadline is in microseconds of CLOCK_MONOTONIC.
                let nowUs = UInt64(SystemClock.monotonic() * 1_000_000)
                wait = timeout <= nowUs ? 0 : Int32(min(UInt64(wait), (timeout - nowUs + 999) / 1000))
            }
            if poll(&fds, nfds_t(fds.count), wait) < 0, errno != EINTR { return 1 }
            for (index, (prompt, _)) in conversations.enumerated() where fds[index + 1].revents != 0 {
                prompt.pinentryReadable(self)
            }
            // A second between looks is soon enough to notice a lock and keeps a busy client's
            // calls from each paying for a folder scan and the kernel reads.
            let now = SystemClock.monotonic()
            if now - lastLockCheck >= 1 {
                lastLockCheck = now
                noticeLockChanges()
            }
        }
        return 0
    }

    /// `security lock-keychain` and the PAM module change the lock state behind the service's
    /// back; each turn of the loop compares and announces.
    func noticeLockChanges() {
        kwallet?.noticeLocks()
        for collection in collections.all {
            let locked = collection.isLocked
            if collection.announcedLocked != locked {
                collection.announcedLocked = locked
                emitPropertiesChanged(collection.path, Interface.collection, ["Locked"])
            }
        }
    }

    private func nameOwnerChanged(_ message: OpaquePointer) {
        let reader = MessageReader(message: message)
        guard let name = try? reader.string(), let oldOwner = try? reader.string(), let newOwner = try? reader.string(),
            name.hasPrefix(":")
        else { return }
        if oldOwner.isEmpty && !newOwner.isEmpty {
            appeared[name] = ProcessIdentity.ticksSinceBoot()
            return
        }
        guard newOwner.isEmpty else { return }
        appeared[name] = nil
        // The client left the bus: its sessions and their keys go with it.
        for (id, session) in sessions where session.owner == name {
            session.close()
            sessions[id] = nil
        }
        for (id, prompt) in prompts where prompt.owner == name {
            prompt.cancel()
            prompts[id] = nil
        }
        callers[name] = nil
        soleHolders[name] = nil
        kwallet?.connectionLeft(name)
        startWaitingPrompts()
    }

    /// The caller behind a connection, told on its first call.
    package func caller(_ sender: String) -> Caller {
        if let known = callers[sender] { return known.caller }
        var identity: ProcessIdentity?
        var label: String?
        if sender.hasPrefix(":"), let credentials = BusPeer.credentials(of: sender, on: bus) {
            identity = BusPeer.identity(of: credentials, appeared: appeared[sender] ?? started)
            // A pid, not a pidfd, from the bus: the process pinned by it is the connection's only
            // if the bus still names that pid for this name once it is pinned (else the client
            // left and another process took its pid, which the broker would judge in its place).
            if let found = identity, found.provenance == .pidLookup, BusPeer.credentials(of: sender, on: bus)?.pid != found.pid {
                identity = nil
            }
            label = credentials.securityLabel
            if !toldHowClientsAreKnown {
                toldHowClientsAreKnown = true
                SecretService.log(
                    credentials.busGivesProcessFD
                        ? "the bus names each client's process by a pidfd (ProcessFD)"
                        : "the bus gives no ProcessFD (dbus before 1.15.8): each client's process is found by its pid")
            }
        }
        let caller = Caller(identity: identity, securityLabel: label)
        callers[sender] = (caller, identity)
        return caller
    }

    /// The process that made a connection, pinned, when it can be taken for the one sending on it
    /// (for the access decisions over the call and the broker's question): it holds its bus
    /// connection alone (ConnectionHolders, looked at on the first call that needs it), and has
    /// exec'd no other program since. A process that connected and forked, then exec'd a program
    /// an item trusts, would otherwise lend that program's name to its child.
    func identity(_ sender: String) -> ProcessIdentity? {
        _ = caller(sender)
        guard let identity = callers[sender]?.identity else { return nil }
        let stamp: ConnectionHolders.ExecStamp?
        if let checked = soleHolders[sender] {
            stamp = checked
        } else {
            stamp = ConnectionHolders.soleHolder(identity.process, busConnection: sd_bus_get_fd(bus))
            soleHolders[sender] = .some(stamp)
            if stamp == nil {
                SecretService.log(
                    "\(sender): its connecting process (pid \(identity.pid)) does not hold the connection alone: the program that asks cannot be told"
                )
            }
        }
        guard let stamp, ConnectionHolders.ExecStamp(of: identity.process) == stamp else { return nil }
        return identity
    }

    /// The caller of the message being handled, for the property and introspection callbacks,
    /// which sd-bus gives no message. Without one (a PropertiesChanged this service emits), the
    /// unconfined view.
    var currentCaller: Caller {
        guard let message = sd_bus_get_current_message(bus), let sender = sd_bus_message_get_sender(message) else { return .unconfined }
        // The signals of stores committed while another call is handled (PendingStores.swift)
        // are the broadcast's: that caller's view (a sandboxed app's) would leave them unsent.
        guard !announcingStores else { return .unconfined }
        return caller(String(cString: sender))
    }

    private func nameLost(_ message: OpaquePointer) {
        guard let name = try? MessageReader(message: message).string(), ownedNames.remove(name) != nil else { return }
        guard ownedNames.isEmpty else {
            SecretService.log("\(name) was taken over; still serving \(ownedNames.sorted().joined(separator: ", "))")
            return
        }
        SecretService.log("\(name) was taken over; exiting")
        running = false
    }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> SecretService {
        Unmanaged<SecretService>.fromOpaque(userdata!).takeUnretainedValue()
    }

    // MARK: Calls

    private func handle(_ message: OpaquePointer, _ busError: UnsafeMutablePointer<sd_bus_error>) -> Int32 {
        let path = String(cString: sd_bus_message_get_path(message))
        let interface = String(cString: sd_bus_message_get_interface(message))
        let member = String(cString: sd_bus_message_get_member(message))
        let sender = sd_bus_message_get_sender(message).map { String(cString: $0) } ?? ""
        let call = Call(message: message, path: path, sender: sender, caller: caller(sender))
        // Calls and replies may carry secrets: sd-bus then wipes their memory when it frees them.
        _ = sd_bus_message_sensitive(message)
        do {
            if call.caller == .unidentified { throw ServiceError.accessDenied("this sandboxed client could not be identified") }
            switch interface {
            case Interface.service: try serviceMethod(member, call)
            case Interface.collection: try collectionMethod(member, call)
            case Interface.item: try itemMethod(member, call)
            case Interface.session: try sessionMethod(member, call)
            case Interface.prompt: try promptMethod(member, call)
            default: throw ServiceError.notSupported("unknown interface \(interface)")
            }
            return 1
        } catch {
            return ServiceError(error).set(busError)
        }
    }

    /// Which interfaces a path has, by its shape alone: a call on a collection, item, session or
    /// prompt that does not exist then reaches the handler, which answers with the spec's
    /// NoSuchObject (or NoSession) rather than sd-bus's UnknownObject, as clients such as
    /// SecretStorage and libsecret expect of a deleted item.
    func exists(_ path: String, _ interface: String) -> Bool {
        func elements(after prefix: String) -> Int? {
            guard path.hasPrefix(prefix) else { return nil }
            let parts = path.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
            return parts.contains(where: \.isEmpty) ? nil : parts.count
        }
        let depth = elements(after: ObjectPaths.collections) ?? elements(after: ObjectPaths.aliases)
        switch interface {
        case Interface.collection: return depth == 1
        case Interface.item: return depth == 2
        case Interface.session: return elements(after: ObjectPaths.sessions) == 1
        case Interface.prompt: return elements(after: ObjectPaths.prompts) == 1
        default: return false
        }
    }

    /// The objects directly below `path`, for introspection.
    private func children(_ path: String) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        var paths: [String] = []
        let prefix = path + "/"
        if prefix == ObjectPaths.collections {
            paths = collections.all.map(\.path)
        } else if prefix == ObjectPaths.aliases {
            paths = collections.all.flatMap { collections.aliasNames(of: $0) }.map { ObjectPaths.aliases + ObjectPaths.element(for: $0) }
        } else if prefix == ObjectPaths.sessions {
            paths = sessions.keys.sorted().map { ObjectPaths.sessions + $0 }
        } else if prefix == ObjectPaths.prompts {
            paths = prompts.keys.sorted().map { ObjectPaths.prompts + $0 }
        } else if let (collection, row) = collections.resolve(path), row == nil, currentCaller != .unidentified {
            paths = ((try? collection.store().secretItemRows(owner: currentCaller.owner)) ?? []).map { path + "/" + String($0) }
        }
        guard
            let list = malloc(MemoryLayout<UnsafeMutablePointer<CChar>?>.stride * (paths.count + 1))?
                .bindMemory(to: UnsafeMutablePointer<CChar>?.self, capacity: paths.count + 1)
        else { return nil }
        for (index, path) in paths.enumerated() { list[index] = strdup(path) }
        list[paths.count] = nil
        return list
    }

    // MARK: Replies and signals

    package func reply(_ call: Call, _ body: (MessageWriter) throws -> Void = { _ in }) throws {
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(call.message, &reply) >= 0, let reply else { throw ServiceError.failed("out of memory") }
        defer { sd_bus_message_unref(reply) }
        _ = sd_bus_message_sensitive(reply)
        try body(MessageWriter(message: reply))
        guard sd_bus_send(nil, reply, nil) >= 0 else { throw ServiceError.failed("cannot send the reply") }
    }

    /// Answers `call` with `error`, for a call answered after its handler returned.
    func replyError(_ call: Call, _ error: any Error) {
        var busError = sd_bus_error()
        defer { sd_bus_error_free(&busError) }
        _ = ServiceError(error).set(&busError)
        _ = sd_bus_reply_method_error(call.message, &busError)
    }

    /// A signal to every listener, or to the one connection `destination` only.
    package func emit(_ path: String, _ interface: String, _ member: String, to destination: String? = nil, _ body: (MessageWriter) throws -> Void) {
        var signal: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &signal, path, interface, member) >= 0, let signal else { return }
        defer { sd_bus_message_unref(signal) }
        if let destination, sd_bus_message_set_destination(signal, destination) < 0 { return }
        guard (try? body(MessageWriter(message: signal))) != nil else { return }
        _ = sd_bus_send(bus, signal, nil)
    }

    package func emitPropertiesChanged(_ path: String, _ interface: String, _ names: [String]) {
        var pointers = names.map { strdup($0) } + [nil]
        defer { for p in pointers { free(p) } }
        _ = sd_bus_emit_properties_changed_strv(bus, path, interface, &pointers)
    }

    // MARK: Sessions

    func session(_ path: String, for call: Call) throws -> Session {
        guard path.hasPrefix(ObjectPaths.sessions), let session = sessions[String(path.dropFirst(ObjectPaths.sessions.count))],
            session.owner == call.sender
        else { throw ServiceError.noSession("no session \(path) for this client") }
        return session
    }

    private func sessionMethod(_ member: String, _ call: Call) throws {
        guard member == "Close" else { throw ServiceError.notSupported("unknown method \(member)") }
        let session = try session(call.path, for: call)
        session.close()
        sessions[session.id] = nil
        try reply(call)
    }
}

/// One method call: its message, the object it was made on, and who made it.
package struct Call {
    package let message: OpaquePointer
    let path: String
    package let sender: String
    package let caller: Caller

    package init(message: OpaquePointer, path: String, sender: String, caller: Caller) {
        (self.message, self.path, self.sender, self.caller) = (message, path, sender, caller)
    }

    /// The owner whose items this call may see (nil: every item).
    package var owner: String? { caller.owner }

    /// Refuses what only an unconfined program may do: choosing aliases, making, deleting and
    /// locking the user's keychains.
    func requireUnconfined(_ what: String) throws {
        if caller.isConfined { throw ServiceError.accessDenied("a sandboxed app cannot \(what)") }
    }

    package var reader: MessageReader { MessageReader(message: message) }
}
