import KeychainCore
/// What one device remembers of its sync group, kept in its own keychain as a hidden
/// AfterFirstUnlockThisDeviceOnly item (so it never syncs, is sealed like every secret, and the
/// timer can run after login): the remote, the last manifest it accepted, the sync keys it has
/// opened, and per record the newest version it accepted. That last part is what refuses a
/// replayed or rolled-back record: the remote can show an old file, never make this device take it.
package struct SyncState: Sendable {
    package struct Entry: Sendable, Equatable {
        package var order: SyncOrder
        package var identity: Bytes
        package var tombstone: Bool
        /// The primary-key attributes, so a tombstone can be written again without the item.
        package var keyAttributes: [String: AttributeValue]
        package var valueDigest: Bytes
        /// The local item's hash when it last matched this version (empty: no local item).
        package var localHash: Bytes
    }

    package var remote: String
    package var group: Bytes
    package var manifest: SyncManifest
    /// Digests of manifests this device accepted, newest last (a join request names one).
    package var manifestDigests: [Bytes]
    package var keys: [UInt32: Bytes]
    /// Every device any accepted manifest listed, removed ones included (what this device has
    /// known; new record versions verify against the current manifest only).
    package var knownDevices: [SyncDevice]
    package var records: [Bytes: Entry]
    /// Conflicts that lost a value, refused records and manifests, newest last (no secrets).
    package var log: [String]
    package var lastExchange: Double
    package var lastResult: String
    /// Waiting for an existing device to approve this one (`security sync join`).
    package var pending: Bool
    /// Marks of the files at the remote's tip refused at ids this device never accepted, or at no
    /// record's name (they stay at the remote, and are reported once, not at every exchange). At
    /// most `maximumRefused`.
    package var refused: [Bytes] = []
    /// The manifests this device accepted, as they were encoded, newest last (the newest 64): put
    /// back at history/ when the remote lost them, so that a device that has not followed the
    /// chain yet still can.
    package var history: [Bytes] = []

    static let maximumLog = 500
    static let maximumRefused = 256

    /// A line for the log, whose parts may come from the remote (file names): control characters,
    /// line and paragraph separators and bidirectional overrides become "?", so that what
    /// `security sync status` prints is one line, with no terminal escape and no forged line.
    mutating func note(_ line: String) {
        log.append(Self.printable(line))
        if log.count > Self.maximumLog { log.removeFirst(log.count - Self.maximumLog) }
    }

    /// `text` with control characters, line and paragraph separators and bidirectional overrides
    /// as "?" (what git printed, in an error, is the remote's words too).
    static func printable(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let v = scalar.value
            let unsafe = v < 0x20 || (0x7F...0x9F).contains(v) || (0x2028...0x202E).contains(v) || (0x2066...0x2069).contains(v)
            scalars.append(unsafe ? "?" : scalar)
        }
        return String(scalars)
    }

    mutating func remember(_ devices: [SyncDevice]) {
        for device in devices where !knownDevices.contains(where: { $0.id == device.id }) { knownDevices.append(device) }
    }

    func encoded() -> Bytes {
        var w = ByteWriter()
        w.u32(1)
        w.string(remote)
        w.blob(group)
        w.blob(manifest.encoded())
        w.u32(UInt32(manifestDigests.count))
        for d in manifestDigests { w.blob(d) }
        w.u32(UInt32(keys.count))
        for (epoch, key) in keys.sorted(by: { $0.key < $1.key }) {
            w.u32(epoch)
            w.blob(key)
        }
        w.u32(UInt32(knownDevices.count))
        for d in knownDevices { d.write(to: &w) }
        w.u32(UInt32(records.count))
        // In id order: the same state encodes to the same bytes, so an unchanged one is seen as such.
        for (id, e) in records.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            w.blob(id)
            w.u64(e.order.stamp.mdat.bitPattern)
            w.u64(e.order.stamp.version)
            w.blob(e.order.stamp.writer)
            w.blob(e.order.digest)
            w.blob(e.identity)
            w.u8(e.tombstone ? 1 : 0)
            w.blob(encodeAttributes(e.keyAttributes))
            w.blob(e.valueDigest)
            w.blob(e.localHash)
        }
        w.u32(UInt32(log.count))
        for line in log { w.string(line) }
        w.u64(lastExchange.bitPattern)
        w.string(lastResult)
        w.u8(pending ? 1 : 0)
        w.u32(UInt32(refused.count))
        for digest in refused { w.blob(digest) }
        w.u32(UInt32(history.count))
        for manifest in history { w.blob(manifest) }
        return w.bytes
    }

    static func decode(_ bytes: Bytes) throws -> SyncState {
        var r = ByteReader(bytes)
        guard try r.u32() == 1 else { throw KeychainError.decode("unknown sync state version") }
        let remote = try r.string()
        let group = try r.blob()
        let manifestBytes = try r.blob()
        let manifest = try SyncManifest.decode(manifestBytes)
        var digests: [Bytes] = []
        for _ in 0..<(try r.u32()) { digests.append(try r.blob()) }
        var keys: [UInt32: Bytes] = [:]
        for _ in 0..<(try r.u32()) {
            let epoch = try r.u32()
            keys[epoch] = try r.blob()
        }
        var devices: [SyncDevice] = []
        for _ in 0..<(try r.u32()) { devices.append(try SyncDevice.read(from: &r)) }
        var records: [Bytes: Entry] = [:]
        for _ in 0..<(try r.u32()) {
            let id = try r.blob()
            let stamp = SyncStamp(mdat: Double(bitPattern: try r.u64()), version: try r.u64(), writer: try r.blob())
            let order = SyncOrder(stamp: stamp, digest: try r.blob())
            records[id] = Entry(
                order: order, identity: try r.blob(), tombstone: try r.u8() == 1, keyAttributes: try decodeAttributes(try r.blob()),
                valueDigest: try r.blob(), localHash: try r.blob())
        }
        var log: [String] = []
        for _ in 0..<(try r.u32()) { log.append(try r.string()) }
        let state = SyncState(
            remote: remote, group: group, manifest: manifest, manifestDigests: digests, keys: keys, knownDevices: devices,
            records: records, log: log, lastExchange: Double(bitPattern: try r.u64()), lastResult: try r.string(), pending: try r.u8() == 1)
        var withRefused = state
        for _ in 0..<(try r.u32()) { withRefused.refused.append(try r.blob()) }
        // States written before the history was kept end here.
        if !r.isAtEnd {
            for _ in 0..<(try r.u32()) { withRefused.history.append(try r.blob()) }
        }
        if withRefused.history.isEmpty { withRefused.history = [manifestBytes] }
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in the sync state") }
        return withRefused
    }
}
