import Glibc
import KeychainCore

/// What survives a restart of the broker: the keys it holds, the pins and the access log, sealed
/// (AES-GCM) under a 32-byte key in the broker uid's persistent kernel keyring, in a file of its
/// state folder. Both go at reboot (/run, the keyring), as AfterFirstUnlock requires. Where the
/// kernel keyring is not available (a container's seccomp), nothing is kept: a restart locks.
/// The pins also go to a folder that outlives a reboot (`BrokerStateStore.pinsDirectory`): a pin
/// that a reboot forgot would make every boot a first use again.
package struct BrokerState {
    package var custody: [CustodyID: Custody] = [:]
    package var pins: [UInt32: [String: Pin]] = [:]
    package var log = AccessLog()
    /// Login sessions open per uid and login keychain, as the PAM module reported them.
    package var sessions: [UInt32: [String: UInt32]] = [:]

    package init() {}

    /// Keychain paths pinned per uid, at most: the pins file stays small (a pin is a keybag, under
    /// 1 KiB) whatever a user's processes ask.
    package static let maximumPinsPerUser = 256
    static let pinsMagic = "keychain-broker-pins-v1"

    /// The pins alone, as the pins folder keeps them (not sealed: nothing in them is secret from
    /// the user, whose keychain files hold the same keybags; only the broker may write them).
    static func encoded(pins: [UInt32: [String: Pin]]) -> Bytes {
        var w = ByteWriter(capacity: 4096)
        w.string(pinsMagic)
        let all = pins.flatMap { uid, byPath in byPath.map { (uid, $0.key, $0.value) } }.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
        w.u32(UInt32(all.count))
        for (uid, path, pin) in all {
            w.u32(uid)
            w.string(path)
            w.blob(pin.uuid)
            w.fields(pin.fields)
        }
        return w.bytes
    }

    static func decodePins(_ bytes: Bytes) throws -> [UInt32: [String: Pin]] {
        var r = ByteReader(bytes)
        guard try r.string() == pinsMagic else { throw KeychainError.decode("not the broker's pins") }
        var pins: [UInt32: [String: Pin]] = [:]
        for _ in 0..<Int(try r.u32()) {
            let uid = try r.u32(), path = try r.string()
            pins[uid, default: [:]][path] = Pin(uuid: try r.blob(), fields: try r.fields())
        }
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in the broker's pins") }
        return pins
    }

    static let magic = "keychain-broker-state-v1"

    package func encoded() -> Bytes {
        var w = ByteWriter(capacity: 4096)
        w.string(Self.magic)
        w.u32(UInt32(custody.count))
        for held in custody.values {
            w.u32(held.uid)
            w.blob(held.uuid)
            w.string(held.path)
            w.fields(held.fields)
            w.blob(held.a ?? [])
            w.blob(held.c ?? [])
            w.u64(held.lastUse)
        }
        let allPins = pins.flatMap { uid, byPath in byPath.map { (uid, $0.key, $0.value) } }
        w.u32(UInt32(allPins.count))
        for (uid, path, pin) in allPins {
            w.u32(uid)
            w.string(path)
            w.blob(pin.uuid)
            w.fields(pin.fields)
        }
        let entries = log.all
        w.u32(UInt32(entries.count))
        for entry in entries { entry.write(to: &w) }
        // Last, so that a state saved before sessions were counted here still reads (as none).
        let counts = sessions.flatMap { uid, byPath in byPath.map { (uid, $0.key, $0.value) } }.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
        w.u32(UInt32(counts.count))
        for (uid, path, count) in counts {
            w.u32(uid)
            w.string(path)
            w.u32(count)
        }
        return w.bytes
    }

    package static func decode(_ bytes: Bytes, toSyslog: Bool) throws -> BrokerState {
        var r = ByteReader(bytes)
        guard try r.string() == magic else { throw KeychainError.decode("not the broker's state") }
        var state = BrokerState()
        state.log.toSyslog = toSyslog
        for _ in 0..<Int(try r.u32()) {
            let uid = try r.u32(), uuid = try r.blob(), path = try r.string(), fields = try r.fields()
            let a = try r.blob(), c = try r.blob(), lastUse = try r.u64()
            state.custody[CustodyID(uid: uid, uuid: uuid)] = Custody(
                uid: uid, uuid: uuid, path: path, fields: fields, a: a.isEmpty ? nil : a, c: c.isEmpty ? nil : c, lastUse: lastUse)
        }
        for _ in 0..<Int(try r.u32()) {
            let uid = try r.u32(), path = try r.string()
            state.pins[uid, default: [:]][path] = Pin(uuid: try r.blob(), fields: try r.fields())
        }
        var entries: [AccessLogEntry] = []
        for _ in 0..<Int(try r.u32()) { entries.append(try AccessLogEntry.read(from: &r)) }
        state.log.restore(entries)
        if !r.isAtEnd {
            for _ in 0..<Int(try r.u32()) {
                let uid = try r.u32(), path = try r.string()
                state.sessions[uid, default: [:]][path] = try r.u32()
            }
        }
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in the broker's state") }
        return state
    }
}

/// Where the state is kept: `directory`/state, sealed under the key `keyName` in the persistent
/// keyring of the uid the broker runs as.
package struct BrokerStateStore: Sendable {
    package var directory: String
    package var keyName: String
    /// Where the pins outlive a reboot (`--pins`, /var/lib/keychain-broker); nil: in the state
    /// only, until reboot.
    package var pinsDirectory: String?

    package init(directory: String, keyName: String = "keychain-broker:state", pinsDirectory: String? = nil) {
        self.directory = directory
        self.keyName = keyName
        self.pinsDirectory = pinsDirectory
    }

    /// The pins file is read whole; more than this is not the broker's.
    static let maximumPinsFile = 16 << 20

    /// Writes the pins whole or not at all (0600, renamed over the old file).
    package func savePins(_ pins: [UInt32: [String: Pin]]) throws {
        guard let pinsDirectory else { return }
        try PlainFiles.replace(pinsDirectory + "/pins", with: BrokerState.encoded(pins: pins), mode: 0o600)
    }

    /// The pins kept across reboots; nil when there is no file yet (the first start, or a broker
    /// that kept its pins in the state only: those are then taken over).
    package func loadPins() throws -> [UInt32: [String: Pin]]? {
        guard let pinsDirectory else { return nil }
        let file = pinsDirectory + "/pins"
        guard access(file, F_OK) == 0 else { return nil }
        var st = stat()
        guard stat(file, &st) == 0, st.st_size <= Self.maximumPinsFile, let bytes = PlainFiles.read(file) else {
            throw KeychainError(.io, "cannot read \(file)")
        }
        return try BrokerState.decodePins(bytes)
    }

    var file: String { directory + "/state" }
    static let aad = Array("keychain-broker-state".utf8)

    /// The state key, made on first use. Asking for the persistent keyring also renews its
    /// expiry (persistent-keyring(7)), which the main loop relies on.
    func key(creating: Bool) throws -> Bytes? {
        if let key = KernelKeyring.read(keyName), key.count == Crypto.keyLength { return key }
        guard creating else { return nil }
        let key = try Crypto.random(Crypto.keyLength)
        try KernelKeyring.store(key, description: keyName)
        return key
    }

    package func renew() { _ = try? KernelKeyring.persistent() }

    package func save(_ state: BrokerState) throws {
        guard var key = try key(creating: true) else { return }
        defer { key.wipe() }
        var plain = state.encoded()
        defer { plain.wipe() }
        let sealed = try Crypto.seal(plain, key: key, aad: Self.aad)
        let temporary = file + ".new"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = sealed.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == sealed.count, synced, rename(temporary, file) == 0 else {
            unlink(temporary)
            throw KeychainError(.io, "cannot write \(file)")
        }
    }

    /// The state of the last run, or nil when there is none (first start since boot, no key).
    package func load(toSyslog: Bool = true) throws -> BrokerState? {
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        var sealed: Bytes = []
        var buffer = Bytes(repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            sealed += buffer[0..<n]
            if sealed.count > 64 << 20 { break }
        }
        close(fd)
        guard var key = try key(creating: false) else { return nil }
        defer { key.wipe() }
        var plain = try Crypto.open(sealed, key: key, aad: Self.aad)
        defer { plain.wipe() }
        return try BrokerState.decode(plain, toSyslog: toSyslog)
    }

    /// Forgets the state key (tests).
    package func removeKey() { KernelKeyring.remove(keyName) }
}
