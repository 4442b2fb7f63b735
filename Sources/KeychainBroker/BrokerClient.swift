import Glibc
import KeychainCore

/// One connection to the broker per process, made on first use. Before anything is sent, the
/// peer must be a system user other than this process's own: a socket the environment names
/// could be the attacker's, which would collect passwords.
package final class BrokerConnection: @unchecked Sendable {
    package let path: String
    private let mutex = Mutex()
    private var fd: Int32 = -1
    /// Who connected: the broker takes the uid at connect(2) for every request on the connection,
    /// so a child (the PAM module's worker, become the user) or a process that changed its uid
    /// connects anew rather than speak as the process that first connected.
    private var connectedAs: (pid: pid_t, uid: uid_t, euid: uid_t)?
    /// The socket's inode, to tell it from whatever a forked child's descriptor number holds now.
    private var socketInode: (device: UInt64, inode: UInt64)?
    /// Replies owed for requests sent ahead (`sendAhead`): read and dropped before the next
    /// exchange's request goes out.
    private var owed = 0
    /// Requests sent ahead at most while their replies are unread.
    static let aheadLimit = 8
    /// Moves on with every notice read (`BrokerWire.notice`) and every connection made or
    /// closed: a state given at one value holds while it stays there and nothing waits unread.
    private var changes: UInt64 = 0

    /// Seconds any wait on the broker may take (connect, send, reply), or unbounded: the PAM
    /// module's, which must never hold a login up.
    package let timeout: Double?

    package init(path: String = BrokerPaths.socket, timeout: Double? = nil) {
        self.path = path
        self.timeout = timeout
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Sends `request` and returns the reply; one reconnect when the broker went away (a restart).
    /// `onBehalfOf`: root's requests for a user.
    package func exchange(_ request: BrokerRequest, onBehalfOf uid: UInt32? = nil) throws -> BrokerReply {
        try exchangeMarked(request, onBehalfOf: uid).reply
    }

    /// `exchange`, with the mark of the changes read up to its reply, for `isUnchanged(since:)`.
    package func exchangeMarked(_ request: BrokerRequest, onBehalfOf uid: UInt32? = nil) throws -> (reply: BrokerReply, mark: UInt64) {
        let relay = request.op.carriesRelay ? BrokerRelay.current : nil
        let message = request.encoded(onBehalfOf: uid, relay: relay?.marks ?? [])
        guard message.count <= BrokerWire.maximumMessage else { throw KeychainError.param("request too long for the broker") }
        return try mutex.withLock {
            var retried = false
            while true {
                do {
                    try connectIfNeeded()
                    while owed > 0 {
                        var dropped = try receiveReply()
                        dropped.wipe()
                        owed -= 1
                    }
                    if let relay {
                        try BrokerSocket.send(fd, message, passing: relay.pidfd)
                    } else {
                        try BrokerSocket.send(fd, message)
                    }
                    return (try BrokerReply.decode(try receiveReply(), for: request.op), changes)
                } catch let error as SocketError where error.isReset && !retried {
                    disconnect()
                    retried = true
                } catch let error as SocketError {
                    disconnect()
                    throw KeychainError(.notAvailable, "the keychain broker at \(path): \(String(cString: strerror(error.errno)))")
                }
            }
        }
    }

    /// The next reply, the notices before it read (and counted) on the way.
    private func receiveReply() throws -> Bytes {
        while true {
            guard let message = try BrokerSocket.receive(fd) else { throw SocketError(errno: ECONNRESET) }
            guard message != BrokerWire.notice else {
                changes &+= 1
                continue
            }
            return message
        }
    }

    /// Whether the broker's keys for this uid are as they were at `mark` (an exchange's): the
    /// same connection, no notice read since and none waiting. A closed connection (the broker
    /// restarted, and holds nothing) reads as a change. No syscall but a poll(2) of no time: a
    /// read can then skip its `state` call.
    /// A reply owed (`sendAhead`) that has come is read and dropped here, and one still to come
    /// is no change: the broker sends a notice the moment a change is made, so a notice not
    /// waiting was not sent. The SSH agent's relayed whoAmI, sent as a client connects, may still
    /// be being answered when that client's signature reads its key.
    package func isUnchanged(since mark: UInt64) -> Bool {
        mutex.withLock {
            guard fd >= 0, changes == mark, let owner = connectedAs, owner == (getpid(), getuid(), geteuid()) else { return false }
            while true {
                var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&waiting, 1, 0) != 0 else { return true }
                // A hang-up, an error or a notice is a change, and so is anything unread but an owed reply.
                guard owed > 0, waiting.revents == Int16(POLLIN), var message = try? BrokerSocket.receive(fd) else { return false }
                guard message != BrokerWire.notice else {
                    changes &+= 1
                    return false
                }
                message.wipe()
                owed -= 1
            }
        }
    }

    /// Sends `request` without waiting for its reply, which the next exchange reads and drops:
    /// a helper introduces itself at start (`whoAmI`), so that the broker reads who it is while
    /// the helper reads git's request and opens the keychain, not after. Failures are left for
    /// the next exchange to meet. `relaying`: a deputy's client (its pidfd, borrowed), for whom
    /// the request is relayed (`RelayMarks.relayedCaller`).
    package func sendAhead(_ request: BrokerRequest, relaying pidfd: Int32? = nil) {
        let message = request.encoded(relay: pidfd == nil ? [] : [.relayedCaller])
        guard message.count <= BrokerWire.maximumMessage else { return }
        mutex.withLock {
            // Only an aid to speed: past a few unread, the next exchange judges anyway.
            guard owed < Self.aheadLimit else { return }
            do {
                try connectIfNeeded()
                if let pidfd {
                    try BrokerSocket.send(fd, message, passing: pidfd)
                } else {
                    try BrokerSocket.send(fd, message)
                }
                owed += 1
            } catch {
                disconnect()
            }
        }
    }

    /// A connection of this process as it is now: one made before a fork or a change of uid
    /// speaks for who made it, and is made again.
    private func connectIfNeeded() throws {
        if fd >= 0, let owner = connectedAs, owner != (getpid(), getuid(), geteuid()) {
            // A forked child (the PAM module's worker) may have closed every inherited descriptor
            // and opened others since: the number is closed only while it is still the socket,
            // never a file of the child's (its keychain's database).
            if inode(of: fd).map({ $0 == socketInode ?? (0, 0) }) != true { fd = -1 }
            disconnect()
        }
        if fd < 0 {
            fd = try Self.connectChecked(path, timeout: timeout)
            connectedAs = (getpid(), getuid(), geteuid())
            socketInode = inode(of: fd)
            changes &+= 1
        }
    }

    private func inode(of fd: Int32) -> (device: UInt64, inode: UInt64)? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    private func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
        owed = 0
        changes &+= 1
    }

    /// Connects and checks who answers: not this uid, and a system uid (below UID_MIN).
    static func connectChecked(_ path: String, timeout: Double? = nil) throws -> Int32 {
        let fd = try BrokerSocket.connect(to: path, timeout: timeout)
        guard let peer = BrokerSocket.peer(of: fd) else {
            close(fd)
            throw KeychainError(.notAvailable, "cannot tell who serves \(path)")
        }
        if let reason = refusal(brokerUid: peer.uid, ownUid: getuid(), uidMin: BrokerSocket.uidMin) {
            close(fd)
            throw KeychainError(.notAvailable, "\(path) \(reason): not talking to it")
        }
        return fd
    }

    /// Why a broker running as `brokerUid` is not trusted, or nil.
    package static func refusal(brokerUid: UInt32, ownUid: UInt32, uidMin: UInt32) -> String? {
        if brokerUid == ownUid { return "is served by this user's own uid \(brokerUid), not the broker's" }
        if brokerUid >= uidMin { return "is served by uid \(brokerUid), an ordinary user, not the broker's system user" }
        return nil
    }
}

/// The engine's `KeyCustodian` over the broker. Asking the person, when the broker says so, goes
/// through `answerer` (KeychainPresence's chain: the tests' program, the terminal).
package final class BrokerCustodian: KeyCustodian, @unchecked Sendable {
    private let exchange: @Sendable (BrokerRequest) throws -> BrokerReply
    package let answerer: (any AccessAnswerer)?
    /// How many times a wrong password is asked again before the read is refused.
    static let attempts = 3
    /// How long a read waits while another process asks the person the same question (the
    /// broker's `SharedQuestions.questionTimeout`), and how often it looks again.
    static let waitLimit: Double = 130
    static let waitStep: UInt32 = 250_000

    package convenience init(connection: BrokerConnection = BrokerConnection(), answerer: (any AccessAnswerer)?) {
        self.init(exchange: { try connection.exchange($0) }, answerer: answerer)
        self.connection = connection
    }

    /// The connection under `exchange`, where it is a socket's.
    private var connection: BrokerConnection?

    /// Tells the broker who this process is before the first request that needs it: see
    /// `BrokerConnection.sendAhead`.
    package func introduce() { connection?.sendAhead(.whoAmI) }

    /// Has the broker judge a deputy's client (`pidfd`, borrowed) now, without waiting: the SSH
    /// agent's, as a client connects to list the keys and sign. The broker keeps what it
    /// read of that process (`BrokerPeer.facts(of:)`), so the unwrap of its signature finds it
    /// judged while it runs the same program; the reading overlaps the client's own exchange.
    package func judgeAhead(relaying pidfd: Int32) { connection?.sendAhead(.whoAmI, relaying: pidfd) }

    /// A login session of `uid` opened or closed (or only counted): the count after it. Root's
    /// (the PAM module, before its worker becomes the user).
    package func session(_ event: SessionEvent, for uid: UInt32, keychain path: String) throws -> UInt32 {
        guard let connection else { throw KeychainError(.notAvailable, "no broker connection") }
        let reply = try connection.exchange(.session(event, path: path), onBehalfOf: uid)
        if case .failure(let error) = reply { throw error }
        guard case .sessions(let count) = reply else { throw KeychainError.decode("unexpected reply from the broker") }
        return count
    }

    /// Over any exchange of messages (tests: the service in this process).
    package init(exchange: @escaping @Sendable (BrokerRequest) throws -> BrokerReply, answerer: (any AccessAnswerer)?) {
        self.exchange = exchange
        self.answerer = answerer
    }

    private func call(_ request: BrokerRequest) throws -> BrokerReply {
        let reply = try exchange(request)
        if case .failure(let error) = reply { throw error }
        if case .stale = reply { throw CustodyGenerationChanged() }
        return reply
    }

    private func done(_ request: BrokerRequest) throws {
        guard case .done = try call(request) else { throw KeychainError.decode("unexpected reply from the broker") }
    }

    private func bytes(_ request: BrokerRequest) throws -> Bytes {
        guard case .bytes(let bytes) = try call(request) else { throw KeychainError.decode("unexpected reply from the broker") }
        return bytes
    }

    package func keeps(_ keybag: CustodyKeybag) -> Bool {
        // A keychain sealed to a TPM (keybag version 3) stays in the kernel keyring this version.
        keybag.fields["version"] != Bytes([0, 0, 0, 0, 0, 0, 0, 3])
    }

    package func state(of keybag: CustodyKeybag) throws -> CustodyState {
        guard let connection else {
            guard case .state(let state) = try call(.state(keybag)) else { throw KeychainError.decode("unexpected reply from the broker") }
            return state
        }
        let (reply, mark) = try connection.exchangeMarked(.state(keybag))
        if case .failure(let error) = reply { throw error }
        guard case .state(var state) = reply else { throw KeychainError.decode("unexpected reply from the broker") }
        state.mark = mark
        return state
    }

    package func isUnchanged(since mark: UInt64) -> Bool { connection?.isUnchanged(since: mark) ?? false }

    package func create(password: Bytes, scrypt: ScryptParameters, path: String) throws -> [String: Bytes] {
        guard case .fields(let fields) = try call(.create(path: path, password: password, scrypt: scrypt)) else {
            throw KeychainError.decode("unexpected reply from the broker")
        }
        return fields
    }

    package func beginRotation(_ keybag: CustodyKeybag, password: Bytes, newPassword: Bytes?, scrypt: ScryptParameters) throws -> CustodyRotation {
        guard case .rotation(let rotation) = try call(.rotateBegin(keybag, password: password, newPassword: newPassword, scrypt: scrypt)) else {
            throw KeychainError.decode("unexpected reply from the broker")
        }
        return rotation
    }

    package func rotate(_ rows: [Row], keychain: Bytes) throws -> [Row] {
        guard case .rows(let resealed) = try call(.rotateRows(keychain: keychain, rows: rows)) else {
            throw KeychainError.decode("unexpected reply from the broker")
        }
        return resealed
    }

    package func commitRotation(_ keybag: CustodyKeybag) throws { try done(.rotateCommit(keybag)) }

    @discardableResult
    package func unlock(_ keybag: CustodyKeybag, password: Bytes) throws -> Bool {
        guard case .unlocked(let first) = try call(.unlock(keybag, password: password)) else {
            throw KeychainError.decode("unexpected reply from the broker")
        }
        return first
    }

    package func verify(_ keybag: CustodyKeybag, password: Bytes) throws { try done(.verify(keybag, password: password)) }

    package func lock(_ keybag: CustodyKeybag) throws { try done(.lock(keybag)) }

    /// Every WhenUnlocked key of this uid.
    package func lockAll() throws { try done(.lockAll) }

    package func changePassword(_ keybag: CustodyKeybag, from old: Bytes, to new: Bytes, scrypt: ScryptParameters) throws -> [String: Bytes] {
        guard case .fields(let fields) = try call(.changePassword(keybag, old: old, new: new, scrypt: scrypt)) else {
            throw KeychainError.decode("unexpected reply from the broker")
        }
        return fields
    }

    package func settingsMAC(_ keybag: CustodyKeybag, settings: Bytes, password: Bytes?) throws -> Bytes {
        try bytes(.settingsMAC(keybag, settings: settings, password: password))
    }

    package func wrap(_ itemKey: Bytes, for request: ItemKeyRequest) throws -> Bytes { try bytes(.wrap(request, itemKey: itemKey)) }

    package func unwrap(_ request: ItemKeyRequest, interaction: CustodyInteraction) throws -> UnwrappedItemKey {
        var answer = WireAnswer.none
        var password: Bytes = []
        defer { password.wipe() }
        var wrongPasswords = 0
        let waitUntil = SystemClock.monotonic() + Self.waitLimit
        while true {
            let reply = try call(.unwrap(request, interaction: interaction, answer: answer, password: password))
            switch reply {
            case .key(let key, let entry):
                return UnwrappedItemKey(key: key, alwaysAllow: entry.isEmpty ? nil : AccessList(text: entry))
            case .wait:
                // Another process of this program is asking the person about this item: its
                // answer is shared, so no second dialog.
                guard SystemClock.monotonic() < waitUntil else {
                    throw KeychainError.presence(.interactionNotAllowed, "another process asked the same question, and no answer came")
                }
                usleep(Self.waitStep)
            case .question(let text):
                if answer != .none { wrongPasswords += 1 }
                // The refusals below are the client's; the broker is told, so that its log has them.
                guard wrongPasswords < Self.attempts else {
                    _ = try? call(.unwrap(request, interaction: interaction, answer: .deny, password: []))
                    throw KeychainError.presence(.authFailed, "wrong keychain password, \(Self.attempts) times")
                }
                let note = BrokerRelay.current.map { "\n" + $0.note } ?? ""
                guard interaction == .allowed, let answerer, let grant = try answerer.answer(text + note) else {
                    _ = try? call(.unwrap(request, interaction: .notAllowed, answer: .none, password: []))
                    throw KeychainError.presence(.interactionNotAllowed, "the item's list does not name this program, and nobody can be asked here")
                }
                password.wipe()
                switch grant {
                case .deny:
                    answer = .deny
                    password = []
                case .once(let given):
                    answer = .once
                    password = given
                case .always(let given):
                    answer = .always
                    password = given
                }
            default: throw KeychainError.decode("unexpected reply from the broker")
            }
        }
    }

    package func checkBinding(_ request: ItemKeyRequest) throws { try done(.checkBinding(request)) }

    /// Who the broker sees this process as.
    package func whoAmI() throws -> CallerDescription {
        guard case .caller(let caller) = try call(.whoAmI) else { throw KeychainError.decode("unexpected reply from the broker") }
        return caller
    }

    /// The broker's log of this uid's item keys given out or refused, from `since` (seconds since
    /// the epoch).
    package func accessLog(since: UInt64) throws -> [AccessLogEntry] {
        guard case .log(let entries) = try call(.accessLog(since: since)) else { throw KeychainError.decode("unexpected reply from the broker") }
        return entries
    }

    /// Forgets the keychain pinned at `path`, proven with that keychain's password.
    package func forget(path: String, password: Bytes) throws { try done(.forget(path: path, password: password)) }
}

/// What a front end calls at start: the broker's custodian, where there is a broker.
package enum BrokerSetup {
    nonisolated(unsafe) package private(set) static var installed: BrokerCustodian?

    /// The custodian of this process: the broker the environment names (`KEYCHAIN_BROKER_SOCKET`,
    /// tests), else the system's where its socket exists; nil on a machine without a broker,
    /// where the kernel keyring keeps the keys as before. Once a broker is named or installed
    /// nothing falls back to the kernel keyring: a process of the user that sets the environment
    /// (a shell's startup file) could otherwise have the next unlock put the keys where it reads
    /// them. A broker that does not answer, or answers as the wrong user, fails every call.
    package static func custodian(answerer: (any AccessAnswerer)?, timeout: Double? = nil) -> BrokerCustodian? {
        if let value = getenv("KEYCHAIN_BROKER_SOCKET"), value.pointee != 0 {
            return BrokerCustodian(connection: BrokerConnection(path: String(cString: value), timeout: timeout), answerer: answerer)
        }
        var st = stat()
        guard lstat(BrokerPaths.socket, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return BrokerCustodian(connection: BrokerConnection(path: BrokerPaths.socket, timeout: timeout), answerer: answerer)
    }

    /// Installs the custodian for this process into the engine's seam (`KeychainStore.custodian`):
    /// each front end calls it at start, beside the presence and TPM setups.
    /// `timeout`: see `BrokerConnection.timeout`.
    package static func install(answerer: (any AccessAnswerer)?, timeout: Double? = nil) {
        installed = custodian(answerer: answerer, timeout: timeout)
        KeychainStore.custodian = installed
    }

    /// `install`, then the process introduced to the broker at once (`BrokerCustodian.introduce`):
    /// for the credential helpers, each run of which reads one secret. Not for every front end:
    /// a `security` command that reads no secret would have the broker read who it is for
    /// nothing, and the PAM module's connection would be another process's after its fork.
    package static func installIntroduced(answerer: (any AccessAnswerer)?) {
        install(answerer: answerer)
        installed?.introduce()
    }
}
