import Glibc
import KeychainCore
import KeychainPeers

/// The broker's answers: custody of class keys per (uid, keychain), the decisions on item keys,
/// the pins, the access log. Single-threaded: the main loop hands it one request at a time (a
/// password's scrypt, about 0.2 s, holds the others up that long; stage 1 accepts that).
package final class BrokerService {
    package private(set) var state: BrokerState
    package var decision: AccessDecision
    private let evaluate: CallerEvaluator
    private let store: BrokerStateStore?
    private var limiter = PasswordRateLimit()
    /// Callers refused too often are not asked again for a while (QuestionLimit.swift).
    var questions = QuestionLimit()
    /// One question at a time per program and item, its answer shared (SharedQuestions.swift).
    var sharedQuestions = SharedQuestions()
    /// The programs' desktop names, for the question (DesktopNames.swift).
    var desktopNames = DesktopNames()
    /// Wall-clock seconds (tests move it).
    package var clock: () -> UInt64
    /// Keys or pins changed: saved before the reply goes out, so a restart right after keeps them.
    private var dirty = false
    /// Pins changed: written to the pins folder as well (which outlives a reboot) with that save.
    private var pinsChanged = false
    /// Rotations begun and not committed: the old and the new class keys, in memory only (a
    /// restart in between fails the commit, and the client's transaction rolls back).
    private var rotations: [CustodyID: PendingRotation] = [:]
    /// Only the log grew: saved within a few seconds (`persistIfChanged(includingLog:)`), not on
    /// every read, each of which adds an entry.
    package private(set) var hasUnsavedLog = false
    /// The generation of the keys held per keychain (`CustodyState.generation`), moved on by
    /// every change of them (`keysChanged`). Keychains never held here share `unheld`. Both are
    /// drawn at random at start, so that a client's generation from before a restart never
    /// matches one after it.
    private var generations: [CustodyID: UInt64] = [:]
    private var lastGeneration = UInt64.random(in: 1...(UInt64.max >> 1))
    /// The uids whose keys changed since the listener last told their connections
    /// (`BrokerWire.notice`, `takeChangedUids`).
    private var changedUids: Set<UInt32> = []
    private let unheld = UInt64.random(in: (UInt64.max >> 1)...UInt64.max)

    package init(
        decision: AccessDecision = AccessDecision(), evaluate: @escaping CallerEvaluator = CallerRecord.evaluate,
        store: BrokerStateStore? = nil, state: BrokerState = BrokerState(),
        clock: @escaping () -> UInt64 = { UInt64(SystemClock.now()) }
    ) {
        self.decision = decision
        self.evaluate = evaluate
        self.store = store
        self.state = state
        self.clock = clock
    }

    /// One message in, one out; every failure becomes a reply.
    package func handle(_ message: Bytes, from peer: BrokerPeer) -> Bytes {
        let reply: BrokerReply
        do {
            let (request, uid) = try BrokerRequest.decode(message)
            reply = try handle(request, onBehalfOf: uid, from: peer)
        } catch let error as KeychainError {
            reply = .failure(error)
        } catch {
            reply = .failure(KeychainError(.param, "\(error)"))
        }
        persistIfChanged()
        return reply.encoded()
    }

    package func handle(_ request: BrokerRequest, onBehalfOf named: UInt32? = nil, from peer: BrokerPeer) throws -> BrokerReply {
        if named != nil, peer.uid != 0 { throw KeychainError.param("only root may ask for another uid") }
        let uid = named ?? peer.uid
        sweepIfDue()
        switch request {
        case .wrap(let item, _), .unwrap(let item, _, _, _), .checkBinding(let item):
            // Read with a state that no longer holds: the client asks for it again.
            if item.generation != 0, item.generation != generation(CustodyID(uid: uid, uuid: item.keychain)) { return .stale }
        default: break
        }
        switch request {
        case .state(let keybag): return .state(try custodyState(keybag, uid: uid))
        case .unlock(let keybag, let password):
            return .unlocked(first: try unlock(keybag, password: password, uid: uid))
        case .create(let path, let password, let scrypt):
            return .fields(try create(path: path, password: password, scrypt: scrypt, uid: uid))
        case .rotateBegin(let keybag, let password, let newPassword, let scrypt):
            return .rotation(try beginRotation(keybag, password: password, newPassword: newPassword, scrypt: scrypt, uid: uid))
        case .rotateRows(let keychain, let rows):
            return .rows(try rotate(rows, keychain: keychain, uid: uid))
        case .rotateCommit(let keybag):
            try commitRotation(keybag, uid: uid)
            return .done
        case .verify(let keybag, let password):
            var keys = try open(try parse(keybag), password: password, uid: uid)
            keys.wipe()
            return .done
        case .lock(let keybag):
            let id = CustodyID(uid: uid, uuid: keybag.uuid)
            if state.custody[id]?.a != nil {
                state.custody[id]?.lock()
                keysChanged(id)
                dirty = true
            }
            return .done
        case .lockAll:
            lockAll(uid: uid)
            return .done
        case .changePassword(let keybag, let old, let new, let scrypt):
            return .fields(try changePassword(keybag, old: old, new: new, scrypt: scrypt, uid: uid))
        case .settingsMAC(let keybag, let settings, let password):
            return .bytes(try settingsMAC(keybag, settings: settings, password: password, uid: uid))
        case .wrap(let request, let itemKey): return .bytes(try wrap(itemKey, for: request, uid: uid))
        case .unwrap(let request, let interaction, let answer, let password):
            return try unwrap(request, interaction: interaction, answer: answer, password: password, uid: uid, peer: peer)
        case .checkBinding(let request):
            var opened = try openRow(request, uid: uid)
            opened.key.wipe()
            return .done
        case .whoAmI:
            // Relayed: the client a deputy serves, as an unwrap for it would be judged.
            let facts = try callerFacts(of: peer, evaluate, uid: uid, keychain: "", forKey: false)
            return .caller(CallerDescription(summary: facts.summary, entry: facts.entry?.text ?? "", warnings: facts.warnings))
        case .accessLog(let since): return .log(state.log.entries(of: uid, since: since))
        case .forget(let path, let password):
            try forget(path: path, password: password, uid: uid, byRoot: peer.uid == 0)
            return .done
        case .session(let event, let path):
            guard peer.uid == 0, named != nil else { throw KeychainError.param("sessions are counted by root's PAM module, for a user") }
            return .sessions(try countSession(event, uid: uid, path: path))
        }
    }

    /// Most sessions counted per uid: a count the PAM module never brought down (a crashed
    /// login) stops here rather than wrap.
    static let maximumSessions: UInt32 = 1 << 16

    /// The uid's sessions after `event`. Only counted: the PAM module's worker locks the login
    /// keychain when the last one closes, as the keychain's settings say.
    func countSession(_ event: SessionEvent, uid: UInt32, path: String) throws -> UInt32 {
        guard path.hasPrefix("/") else { throw KeychainError.param("a keychain's path is absolute") }
        let now = state.sessions[uid]?[path] ?? 0
        let after: UInt32
        switch event {
        case .opened: after = min(now + 1, Self.maximumSessions)
        case .closed: after = now > 0 ? now - 1 : 0
        case .count: return now
        }
        // Bounded as the pins are: a count per login keychain the module has named for the uid.
        if after > 0, state.sessions[uid]?[path] == nil, state.sessions[uid, default: [:]].count >= BrokerState.maximumPinsPerUser {
            throw KeychainError.param("too many login keychains counted for this user")
        }
        state.sessions[uid, default: [:]][path] = after == 0 ? nil : after
        if state.sessions[uid]?.isEmpty == true { state.sessions[uid] = nil }
        dirty = true
        return after
    }

    // MARK: Custody

    /// The keybag a client sent, parsed and checked here; one this version does not keep is
    /// refused with what to do instead.
    func parse(_ keybag: CustodyKeybag) throws -> Keybag {
        let bag = try Keybag(fields: keybag.fields)
        guard Crypto.equal(bag.uuid, keybag.uuid) else { throw KeychainError.decode("the keybag's uuid does not match its fields") }
        if bag.version < 2 {
            throw KeychainError(
                .invalidKeychain,
                "this keychain's format is too old for the broker: unlock it once with the password where no broker runs (an earlier version, or a machine without keychain-broker) to upgrade it"
            )
        }
        if bag.binding != nil { throw KeychainError(.notAvailable, "a keychain sealed to a TPM is not kept by the broker in this version") }
        return bag
    }

    /// What `password` opens, counted against the uid's wrong passwords.
    func open(_ bag: Keybag, password: Bytes, uid: UInt32) throws -> OpenedKeys {
        let now = Double(clock())
        guard limiter.allows(uid, now: now) else {
            throw KeychainError(.authFailed, "too many wrong passwords: wait a minute")
        }
        do {
            return try bag.open(password: password)
        } catch let error as KeychainError where error.code == .authFailed {
            limiter.failed(uid, now: now)
            throw error
        }
    }

    /// True for the keychain's first unlock here (no pin at its path yet): logged, with the advice.
    @discardableResult
    func unlock(_ keybag: CustodyKeybag, password: Bytes, uid: UInt32) throws -> Bool {
        let bag = try parse(keybag)
        if let pin = state.pins[uid]?[keybag.path], !Crypto.equal(pin.uuid, bag.uuid) {
            record(uid: uid, keychain: keybag.path, caller: "", chain: "", decision: "refused: not the keychain first unlocked at this path")
            throw KeychainError(
                .authFailed,
                "\(keybag.path) is not the keychain the broker first unlocked there: forget the old one with its password (`security forget-keychain`) if you replaced it yourself"
            )
        }
        try requireRoomForPin(uid: uid, path: keybag.path)
        var keys = try open(bag, password: password, uid: uid)
        defer { keys.wipe() }
        let id = CustodyID(uid: uid, uuid: bag.uuid)
        state.custody[id]?.wipe()
        state.custody[id] = Custody(
            uid: uid, uuid: bag.uuid, path: keybag.path, fields: keybag.fields, a: Array(keys.a), c: Array(keys.c), lastUse: clock())
        keysChanged(id)
        let first = state.pins[uid]?[keybag.path] == nil
        if first {
            pin(uid: uid, path: keybag.path, Pin(uuid: bag.uuid, fields: keybag.fields))
            note(
                uid: uid, keychain: keybag.path,
                "first unlock in the broker: its class keys were readable by the user's processes before; run `security set-keychain-password --rotate-keys`"
            )
        }
        dirty = true
        return first
    }

    /// A new keychain's keybag, its class keys drawn here and kept unlocked, its path pinned to
    /// it: the client writes the fields into the new file and never holds a class key. A path
    /// already pinned is refused as an unlock of another keychain there would be: making a new
    /// keychain must not be a way around the pin.
    func create(path: String, password: Bytes, scrypt: ScryptParameters, uid: UInt32) throws -> [String: Bytes] {
        guard path.hasPrefix("/") else { throw KeychainError.param("a keychain's path is absolute") }
        if state.pins[uid]?[path] != nil {
            record(uid: uid, keychain: path, caller: "", chain: "", decision: "refused: a new keychain at a pinned path")
            throw KeychainError(
                .duplicateKeychain,
                "the broker already keeps another keychain at \(path): forget it with its password (`security forget-keychain`) before making a new one there"
            )
        }
        try requireRoomForPin(uid: uid, path: path)
        let (bag, a, c) = try Keybag.make(password: password, scrypt: scrypt)
        let fields = bag.fields
        let id = CustodyID(uid: uid, uuid: bag.uuid)
        state.custody[id] = Custody(uid: uid, uuid: bag.uuid, path: path, fields: fields, a: a, c: c, lastUse: clock())
        keysChanged(id)
        pin(uid: uid, path: path, Pin(uuid: bag.uuid, fields: fields))
        note(uid: uid, keychain: path, "created")
        dirty = true
        return fields
    }

    // MARK: Rotation

    /// New class keys A, C and D for the keychain `password` opens, held aside until the commit;
    /// the new keybag's fields and the new subkeys go back, to index the rows with.
    func beginRotation(
        _ keybag: CustodyKeybag, password: Bytes, newPassword: Bytes?, scrypt: ScryptParameters, uid: UInt32
    ) throws -> CustodyRotation {
        let bag = try parse(keybag)
        if let pin = state.pins[uid]?[keybag.path], !Crypto.equal(pin.uuid, bag.uuid) {
            throw KeychainError(.authFailed, "\(keybag.path) is not the keychain the broker first unlocked there")
        }
        var keys = try open(bag, password: password, uid: uid)
        defer { keys.wipe() }
        let a = try Crypto.random(Crypto.keyLength), c = try Crypto.random(Crypto.keyLength), d = try Crypto.random(Crypto.keyLength)
        let rekeyed = try bag.rekeyed(a: a, c: c, d: d, oldA: keys.a, password: newPassword ?? password, scrypt: scrypt)
        let id = CustodyID(uid: uid, uuid: bag.uuid)
        rotations[id]?.wipe()
        rotations[id] = PendingRotation(
            path: keybag.path, fields: rekeyed.fields,
            old: [.whenUnlocked: Array(keys.a), .afterFirstUnlock: Array(keys.c), .always: bag.keyD],
            new: [.whenUnlocked: a, .afterFirstUnlock: c, .always: d])
        var open: [LockClass: ClientSubkeys] = [:]
        for (lockClass, key) in [(LockClass.whenUnlocked, a), (.afterFirstUnlock, c)] {
            open[lockClass] = ClientSubkeys(metadata: Crypto.deriveKey(key, purpose: "metadata"), index: Crypto.deriveKey(key, purpose: "index"))
        }
        return CustodyRotation(fields: rekeyed.fields, open: open)
    }

    /// Rows sealed again under the rotation's new keys; their secrets stay here.
    func rotate(_ rows: [Row], keychain: Bytes, uid: UInt32) throws -> [Row] {
        guard let pending = rotations[CustodyID(uid: uid, uuid: keychain)] else { throw KeychainError.param("no rotation was begun for this keychain") }
        return try rows.map { row in
            guard let old = pending.old[row.lockClass], let new = pending.new[row.lockClass] else {
                throw KeychainError.param("the broker keeps no key of this class")
            }
            return try KeychainStore.resealRow(row, keychain: keychain, from: old, to: new)
        }
    }

    /// The new keys in place of the old, unlocked, and the pin's keybag the new one.
    func commitRotation(_ keybag: CustodyKeybag, uid: UInt32) throws {
        let id = CustodyID(uid: uid, uuid: keybag.uuid)
        guard var pending = rotations[id], pending.fields == keybag.fields else {
            throw KeychainError.param("no rotation of this keybag was begun")
        }
        rotations[id] = nil
        state.custody[id]?.wipe()
        state.custody[id] = Custody(
            uid: uid, uuid: keybag.uuid, path: pending.path, fields: pending.fields, a: pending.new[.whenUnlocked],
            c: pending.new[.afterFirstUnlock], lastUse: clock())
        keysChanged(id)
        let pins = state.pins[uid] ?? [:]
        if pins[pending.path].map({ Crypto.equal($0.uuid, keybag.uuid) }) ?? (pins.count < BrokerState.maximumPinsPerUser) {
            pin(uid: uid, path: pending.path, Pin(uuid: keybag.uuid, fields: pending.fields))
        }
        pending.wipeOld()
        note(uid: uid, keychain: pending.path, "keys rotated")
        dirty = true
    }

    /// The keybag's settings (`fields` as the client sent them) if their MAC verifies under `a`
    /// and is the last one the broker made for that keychain, which its pin keeps: the MAC has no
    /// counter, so a pair the file once held (settings that locked less, set with the password)
    /// written back after stronger ones would verify as well. Not taken, they read as damaged:
    /// the safe defaults (lock at logout) then apply.
    func verifiedSettings(_ bag: Keybag, fields: [String: Bytes], a: Bytes, uid: UInt32, path: String) -> KeychainSettings? {
        guard let settings = bag.verifiedSettings(a: a) else { return nil }
        let made = withPinnedSettings(fields, uid: uid, path: path, uuid: bag.uuid)[Self.settingsMACField]
        return Crypto.equal(made ?? [], fields[Self.settingsMACField] ?? []) ? settings : nil
    }

    /// `fields` (a keybag's) with the settings and MAC the broker last made for the keychain
    /// pinned at `path`, which its pin keeps, where it made any.
    func withPinnedSettings(_ fields: [String: Bytes], uid: UInt32, path: String, uuid: Bytes) -> [String: Bytes] {
        guard let pin = state.pins[uid]?[path], Crypto.equal(pin.uuid, uuid) else { return fields }
        var fields = fields
        for field in [Self.settingsField, Self.settingsMACField] { fields[field] = pin.fields[field] ?? fields[field] }
        return fields
    }

    /// The keybag field of the settings' MAC, and of the settings.
    static let settingsMACField = "settings.mac"
    static let settingsField = "settings"

    /// A pin kept from now on (and written to the pins folder with the next save).
    func pin(uid: UInt32, path: String, _ pin: Pin) {
        state.pins[uid, default: [:]][path] = pin
        pinsChanged = true
    }

    /// At most `BrokerState.maximumPinsPerUser` paths per uid, so that a user's processes cannot
    /// grow the broker's persistent file without bound. Refusing the next one (rather than
    /// dropping an old pin) keeps every pin a swapped keychain would have to get past.
    func requireRoomForPin(uid: UInt32, path: String) throws {
        let pins = state.pins[uid] ?? [:]
        guard pins[path] == nil, pins.count >= BrokerState.maximumPinsPerUser else { return }
        throw KeychainError(
            .param,
            "the broker keeps \(pins.count) keychains of this user already: forget one it keeps no more (`security forget-keychain`)")
    }

    func custodyState(_ keybag: CustodyKeybag, uid: UInt32) throws -> CustodyState {
        let bag = try parse(keybag)
        let id = CustodyID(uid: uid, uuid: bag.uuid)
        let closed = CustodyState(open: [:], settingsVerified: nil, generation: generation(id))
        guard var held = state.custody[id] else { return closed }
        if let pin = state.pins[uid]?[keybag.path], !Crypto.equal(pin.uuid, bag.uuid) { return closed }
        // Keys of another keybag under the same uuid (rotated since) open nothing of this one.
        let foreignA = held.a.map { !bag.matches($0, .whenUnlocked) } ?? false
        if foreignA { held.lock() }
        guard let c = held.c, bag.matches(c, .afterFirstUnlock) else { return closed }
        held.lastUse = clock()
        state.custody[id] = held
        if foreignA { keysChanged(id) }
        let verified = held.a.map { verifiedSettings(bag, fields: keybag.fields, a: $0, uid: uid, path: keybag.path) != nil }
        return CustodyState(open: held.subkeys, settingsVerified: verified, generation: generation(id))
    }

    func generation(_ id: CustodyID) -> UInt64 { generations[id] ?? unheld }

    /// The keys held for `id` changed: every state read before is stale from now on.
    func keysChanged(_ id: CustodyID) {
        lastGeneration &+= 1
        generations[id] = lastGeneration
        changedUids.insert(id.uid)
    }

    /// The uids whose keys changed since the last call: their clients are to be told.
    package func takeChangedUids() -> Set<UInt32> {
        defer { changedUids = [] }
        return changedUids
    }

    package func lockAll(uid: UInt32) {
        for (id, held) in state.custody where id.uid == uid && held.a != nil {
            state.custody[id]?.lock()
            keysChanged(id)
            dirty = true
        }
    }

    /// The clock's second of the last sweep: a sweep in the same second finds what it found
    /// (a key's last use only moves on), so a request does not verify every held keybag's
    /// settings again, which was a tenth of the broker's time per read.
    private var lastSweep: UInt64?

    func sweepIfDue() {
        if clock() != lastSweep { sweep() }
    }

    /// A client's connection closed: a question it was asking may be asked by another process.
    package func connectionClosed(_ peer: BrokerPeer) { sharedQuestions.connectionClosed(ObjectIdentifier(peer)) }

    /// The access log's lines to syslog, once the reply has gone.
    package func flushLog() { state.log.flushSyslog() }

    /// WhenUnlocked keys idle longer than their keychain's verified timeout are forgotten.
    package func sweep() {
        let now = clock()
        lastSweep = now
        for (id, held) in state.custody where held.a != nil {
            let idle = UInt64(idleTimeout(of: held))
            if idle > 0, now >= held.lastUse + idle {
                state.custody[id]?.lock()
                keysChanged(id)
                dirty = true
            }
        }
    }

    /// The settings in force for a keychain: those the broker last made a MAC for (its pin keeps
    /// them), else those of `fields` (a keybag's), verified under `a`; nil when they do not
    /// verify. A change of settings applies at once, not at the next unlock.
    func settingsInForce(_ fields: [String: Bytes], a: Bytes, uid: UInt32, path: String, uuid: Bytes) -> KeychainSettings? {
        (try? Keybag(fields: withPinnedSettings(fields, uid: uid, path: path, uuid: uuid)))?.verifiedSettings(a: a)
    }

    /// The idle timeout in force for `held` (`settingsInForce`); none where its settings do not
    /// verify (the safe defaults lock at no idle time, as the engine does).
    func idleTimeout(of held: Custody) -> UInt32 {
        guard let a = held.a else { return 0 }
        return settingsInForce(held.fields, a: a, uid: held.uid, path: held.path, uuid: held.uuid)?.idleTimeout ?? 0
    }

    func changePassword(_ keybag: CustodyKeybag, old: Bytes, new: Bytes, scrypt: ScryptParameters, uid: UInt32) throws -> [String: Bytes] {
        var bag = try parse(keybag)
        var keys = try open(bag, password: old, uid: uid)
        defer { keys.wipe() }
        try bag.rewrap(a: keys.a, c: keys.c, password: new, scrypt: scrypt)
        var fields: [String: Bytes] = [:]
        for (name, value) in bag.fields { fields[name] = value }
        let id = CustodyID(uid: uid, uuid: bag.uuid)
        if state.custody[id] != nil { state.custody[id]?.fields = fields }
        if let pin = state.pins[uid]?[keybag.path], Crypto.equal(pin.uuid, bag.uuid) {
            // The settings last made stay the pin's: the file's may be an earlier pair put back.
            self.pin(uid: uid, path: keybag.path, Pin(uuid: bag.uuid, fields: withPinnedSettings(fields, uid: uid, path: keybag.path, uuid: bag.uuid)))
        }
        dirty = true
        return fields
    }

    func settingsMAC(_ keybag: CustodyKeybag, settings: Bytes, password: Bytes?, uid: UInt32) throws -> Bytes {
        let bag = try parse(keybag)
        let parsed = try KeychainSettings(bytes: settings)
        var a: Bytes
        if let password {
            var keys = try open(bag, password: password, uid: uid)
            a = Array(keys.a)
            keys.wipe()
        } else {
            guard let held = state.custody[CustodyID(uid: uid, uuid: bag.uuid)]?.a, bag.matches(held, .whenUnlocked) else {
                throw KeychainError.locked()
            }
            // Review 55: whether the keychain locks at the last logout is its setting, so an
            // unlocked keychain alone (any process of the user) must not turn it off, nor let it
            // stay open longer: that takes the password, as Apple's errSecInteractionNotAllowed
            // says of a change that needs the person and was made without them.
            if parsed.locksLess(than: settingsInForce(keybag.fields, a: held, uid: uid, path: keybag.path, uuid: bag.uuid) ?? .safeDefaults) {
                note(uid: uid, keychain: keybag.path, "refused settings that lock less, sent without the password")
                throw KeychainError(
                    .interactionNotAllowed,
                    "settings that lock the keychain less (no lock at logout, a longer idle timeout or none) need its password")
            }
            a = held
        }
        defer { a.wipe() }
        var key = Keybag.settingsKey(a: a)
        defer { key.wipe() }
        let mac = Keybag.settingsMAC(parsed, uuid: bag.uuid, key: key)
        // The last pair made is the only one taken from now on (`verifiedSettings`).
        if var pin = state.pins[uid]?[keybag.path], Crypto.equal(pin.uuid, bag.uuid) {
            pin.fields[Self.settingsField] = parsed.bytes
            pin.fields[Self.settingsMACField] = mac
            self.pin(uid: uid, path: keybag.path, pin)
            dirty = true
        }
        return mac
    }

    // MARK: Item keys

    /// The held class key of the row's class and the keychain's custody.
    func classKey(_ request: ItemKeyRequest, uid: UInt32) throws -> (key: Bytes, custody: Custody) {
        let id = CustodyID(uid: uid, uuid: request.keychain)
        guard var held = state.custody[id] else { throw KeychainError.locked() }
        guard let key = held.classKey(request.lockClass) else {
            if request.lockClass == .whenUnlocked || request.lockClass == .afterFirstUnlock { throw KeychainError.locked() }
            throw KeychainError.param("the broker keeps no key of this class")
        }
        held.lastUse = clock()
        state.custody[id] = held
        return (key, held)
    }

    func row(_ request: ItemKeyRequest) -> Row {
        Row(
            rowID: request.rowID, itemClass: request.itemClass, lockClass: request.lockClass, space: KeySpace(request.lockClass),
            metadata: request.metadata, secret: [])
    }

    func itemKeyAAD(_ request: ItemKeyRequest, version: Bytes?) -> Bytes {
        KeychainStore.additionalData(
            keychain: request.keychain, rowID: request.rowID, itemClass: request.itemClass, lockClass: request.lockClass,
            field: "item-key", version: version)
    }

    func wrap(_ itemKey: Bytes, for request: ItemKeyRequest, uid: UInt32) throws -> Bytes {
        guard itemKey.count == Crypto.keyLength else { throw KeychainError.param("an item key is 32 bytes") }
        let (classKey, _) = try classKey(request, uid: uid)
        var metadataKey = Crypto.deriveKey(classKey, purpose: "metadata")
        var wrapping = Crypto.deriveKey(classKey, purpose: "item-keys")
        defer { metadataKey.wipe(); wrapping.wipe() }
        var (plain, version) = try KeychainStore.openMetadata(row(request), keychain: request.keychain, key: metadataKey)
        plain.wipe()
        guard let version else { throw KeychainError.decode("a new item's metadata must be row format 2") }
        return try Crypto.seal(itemKey, key: wrapping, aad: itemKeyAAD(request, version: version))
    }

    struct OpenedItem {
        var key: Bytes
        var attributes: [String: AttributeValue]
        var legacy: Bool
        var custody: Custody
    }

    /// The row's metadata, opened with the broker's own metadata key, and its item key.
    func openRow(_ request: ItemKeyRequest, uid: UInt32) throws -> OpenedItem {
        let (classKey, held) = try classKey(request, uid: uid)
        var metadataKey = Crypto.deriveKey(classKey, purpose: "metadata")
        var wrapping = Crypto.deriveKey(classKey, purpose: "item-keys")
        defer { metadataKey.wipe(); wrapping.wipe() }
        var (plain, version) = try KeychainStore.openMetadata(row(request), keychain: request.keychain, key: metadataKey)
        defer { plain.wipe() }
        let key: Bytes
        do {
            key = try Crypto.open(request.wrappedKey, key: wrapping, aad: itemKeyAAD(request, version: version))
        } catch {
            throw KeychainError.decode("the item's key does not open under its metadata")
        }
        return OpenedItem(key: key, attributes: try decodeAttributes(plain), legacy: version == nil, custody: held)
    }

    func unwrap(
        _ request: ItemKeyRequest, interaction: CustodyInteraction, answer: WireAnswer, password: Bytes, uid: UInt32, peer: BrokerPeer
    ) throws -> BrokerReply {
        var opened = try openRow(request, uid: uid)
        var handedOut = false
        defer { if !handedOut { opened.key.wipe() } }
        // Format 1 does not bind the metadata to the secret: anyone holding the metadata subkey
        // (every process of the user) can seal new metadata over an old secret, so neither its
        // list nor the shape a list is implied from is trusted (every caller is asked once).
        let stored = opened.legacy ? nil : opened.attributes[AccessList.attribute]?.stringValue.map { AccessList(text: $0) }
        let list = stored ?? (opened.legacy ? AccessList([]) : decision.impliedList(itemClass: request.itemClass, attributes: opened.attributes))
        let facts = try callerFacts(of: peer, evaluate, uid: uid, keychain: opened.custody.path)
        let item = ItemDescription(request.itemClass, opened.attributes)
        func log(_ decision: String) {
            record(
                uid: uid, keychain: opened.custody.path, item: item, caller: facts.summary, chain: facts.chain.joined(separator: " < "),
                decision: decision)
        }
        if decision.decide(list: list, caller: facts) == .trusted {
            log("trusted")
            handedOut = true
            return .key(opened.key, alwaysEntry: "")
        }
        try limitQuestions(facts, answer: answer, interaction: interaction, uid: uid, log: log)
        let question = questionText(item: item, keychain: opened.custody.path, caller: facts, legacy: stored == nil)
        let asked = SharedQuestions.Key(
            uid: uid, asker: QuestionLimit.key(entry: facts.entry?.text, summary: facts.summary, chain: facts.chain),
            keychain: request.keychain, rowID: request.rowID)
        switch answer {
        case .deny:
            sharedQuestions.answered(asked, allowed: false, by: ObjectIdentifier(peer), now: Double(clock()))
            log("denied")
            throw KeychainError.presence(.authFailed, "access to the item was denied")
        case .once, .always:
            guard let bag = opened.custody.keybag else { throw KeychainError.decode("the held keybag is damaged") }
            do {
                var keys = try open(bag, password: password, uid: uid)
                keys.wipe()
            } catch let error as KeychainError where error.code == .authFailed {
                guard limiter.allows(uid, now: Double(clock())) else {
                    log("denied")
                    throw KeychainError.presence(.authFailed, "too many wrong passwords: wait a minute")
                }
                return .question("Wrong password.\n" + question)
            }
            handedOut = true
            sharedQuestions.answered(asked, allowed: true, by: ObjectIdentifier(peer), now: Double(clock()))
            // An interpreter runs whatever it is given: "always" for it would trust every script.
            guard answer == .always, let entry = facts.entry, !facts.isInterpreter, !facts.confirmsEachUse else {
                log(facts.entry == nil ? "unidentified" : "allowed once")
                return .key(opened.key, alwaysEntry: "")
            }
            log("always allowed")
            // The whole list to write: an item older than lists gets its first, what it was taken
            // to trust and this caller.
            var written = list
            written.add(entry)
            return .key(opened.key, alwaysEntry: written.text)
        case .none:
            guard interaction == .allowed else {
                sharedQuestions.gaveUp(asked, by: ObjectIdentifier(peer))
                log("not allowed")
                throw KeychainError.presence(.interactionNotAllowed, "\(facts.summary) is not on the item's list, and nobody may be asked")
            }
            let process = peer.relayed?.handle ?? peer.handle
            let mayShare = mayShareAnswers(facts)
            let turn = sharedQuestions.turn(asked, by: ObjectIdentifier(peer), process: process, now: Double(clock())) { asker in
                guard mayShare, let asker else { return false }
                return process.isKin(of: asker)
            }
            switch turn {
            case .ask: return .question(question)
            case .wait: return .wait
            case .shared(allowed: true):
                handedOut = true
                log("allowed once (the answer to the same question asked by another process)")
                return .key(opened.key, alwaysEntry: "")
            case .shared(allowed: false):
                log("denied (the answer to the same question asked by another process)")
                throw KeychainError.presence(.authFailed, "access to the item was denied")
            }
        }
    }

    func questionText(item: ItemDescription, keychain: String, caller: any CallerFacts, legacy: Bool) -> String {
        var lines = ["\(asker(caller)) wants to read \"\(item.label)\" (\(item.service), account \(item.account)) in \(keychain)."]
        if legacy { lines.append("The item has no list of trusted programs yet.") }
        if caller.entry == nil || caller.isInterpreter {
            lines.append(
                caller.isInterpreter
                    ? "It is an interpreter, running whatever script it was given: it can be allowed once only."
                    : "The program cannot be identified: it can be allowed once only.")
        }
        lines.append("Allow it with the keychain's password: deny, allow once, or always allow.")
        return lines.joined(separator: "\n")
    }

    // MARK: Pins and the log

    func forget(path: String, password: Bytes, uid: UInt32, byRoot: Bool) throws {
        guard let pin = state.pins[uid]?[path] else { throw KeychainError(.itemNotFound, "no keychain is pinned at \(path)") }
        if !byRoot {
            var keys = try open(try Keybag(fields: pin.fields), password: password, uid: uid)
            keys.wipe()
        }
        state.pins[uid]?[path] = nil
        pinsChanged = true
        let id = CustodyID(uid: uid, uuid: pin.uuid)
        state.custody[id]?.wipe()
        state.custody[id] = nil
        keysChanged(id)
        record(uid: uid, keychain: path, caller: "", chain: "", decision: "pin forgotten")
        dirty = true
    }

    func record(uid: UInt32, keychain: String, item: ItemDescription = ItemDescription(), caller: String, chain: String, decision: String) {
        state.log.record(
            AccessLogEntry(
                time: clock(), uid: uid, keychain: keychain, itemClass: item.itemClass, label: item.label, service: item.service,
                account: item.account, caller: caller, chain: chain, decision: decision))
        hasUnsavedLog = true
    }

    /// Events of custody that are not an item's access (a keychain made, its keys rotated, its
    /// first unlock here): to the broker's standard error, which the journal keeps under systemd,
    /// not into the users' access logs. The last few, for tests.
    package private(set) var notes: [String] = []

    func note(uid: UInt32, keychain: String, _ text: String) {
        let line = String("uid=\(uid) keychain=\(keychain): \(text)".unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? " " : Character($0) })
        notes.append(line)
        if notes.count > 32 { notes.removeFirst() }
        if state.log.toSyslog { fputs("keychain-broker: \(line)\n", stderr) }
    }

    private var reportedSaveFailure = false
    private var reportedPinsFailure = false

    package func persistIfChanged(includingLog: Bool = false) {
        guard dirty || (includingLog && hasUnsavedLog), let store else { return }
        dirty = false
        hasUnsavedLog = false
        // The pins first: they are what must outlive a reboot, and need no keyring.
        if pinsChanged {
            do {
                try store.savePins(state.pins)
                pinsChanged = false
            } catch {
                if !reportedPinsFailure { fputs("keychain-broker: the pins are not kept across a reboot: \(error)\n", stderr) }
                reportedPinsFailure = true
            }
        }
        do {
            try store.save(state)
        } catch {
            if !reportedSaveFailure { fputs("keychain-broker: the state is not kept across a restart: \(error)\n", stderr) }
            reportedSaveFailure = true
        }
    }
}

/// What the question and the log name of an item: from metadata the broker opened itself.
struct ItemDescription {
    var itemClass = ""
    var label = ""
    var service = ""
    var account = ""

    init() {}

    init(_ itemClass: ItemClass, _ attributes: [String: AttributeValue]) {
        self.itemClass = itemClass.rawValue
        // The item maker's text: escaped as a program's path is, so that a line break or a
        // bidirectional override in a label cannot write lines of the question or the log.
        func text(_ name: String) -> String { Caller.displayable(String((attributes[name]?.stringValue ?? "").prefix(200))) }
        label = text(AttributeKey.label)
        service = itemClass == .internetPassword ? text(AttributeKey.server) : text(AttributeKey.service)
        account = text(AttributeKey.account)
    }
}

/// A rotation between its begin and its commit.
struct PendingRotation {
    var path: String
    var fields: [String: Bytes]
    var old: [LockClass: Bytes]
    var new: [LockClass: Bytes]

    mutating func wipeOld() {
        for lockClass in Array(old.keys) { old[lockClass]?.wipe() }
        old = [:]
    }

    mutating func wipe() {
        wipeOld()
        for lockClass in Array(new.keys) { new[lockClass]?.wipe() }
        new = [:]
    }
}
