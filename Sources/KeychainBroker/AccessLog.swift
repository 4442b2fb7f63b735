import Glibc
import KeychainCore

/// Every key given out or refused: to syslog (LOG_AUTHPRIV, read by the journal where there is
/// one) and to a bounded ring per uid that `accessLog` returns to that uid (the user cannot read
/// the broker's files) and the broker's state keeps across a restart.
package struct AccessLog: Sendable {
    package static let perUid = 256
    package static let maximumUids = 4096
    private var rings: [UInt32: [AccessLogEntry]] = [:]
    /// Off in unit tests, where syslog would fill the machine's journal.
    package var toSyslog: Bool
    /// Lines recorded and not yet given to syslog: the listener writes them after the reply has
    /// gone (`flushSyslog`), so that the client does not wait for the journal's socket.
    private var unsent: [[UInt8]] = []

    package init(toSyslog: Bool = true) { self.toSyslog = toSyslog }

    package mutating func record(_ entry: AccessLogEntry) {
        if toSyslog {
            let line =
                "uid=\(entry.uid) keychain=\(entry.keychain) class=\(entry.itemClass) label=\(entry.label) "
                + "service=\(entry.service) account=\(entry.account) caller=\(entry.caller) chain=\(entry.chain) decision=\(entry.decision)"
            // Control characters become spaces: in UTF-8 they are single bytes, never part of a
            // longer character, so the bytes are cleaned as they are (every read logs a line).
            var bytes = Array(line.utf8)
            for index in bytes.indices where bytes[index] < 0x20 || bytes[index] == 0x7f { bytes[index] = 0x20 }
            bytes.append(0)
            unsent.append(bytes)
        }
        if rings[entry.uid] == nil, rings.count >= Self.maximumUids, let oldest = rings.min(by: { ($0.value.last?.time ?? 0) < ($1.value.last?.time ?? 0) }) {
            rings[oldest.key] = nil
        }
        append(entry)
    }

    /// Gives syslog the lines recorded since the last call. Where nothing listens on /dev/log (a
    /// container, a test's broker) they are dropped here: syslog(3) would otherwise make and
    /// connect a socket for every line, and fail. The ring keeps them either way.
    package mutating func flushSyslog() {
        guard !unsent.isEmpty else { return }
        defer { unsent = [] }
        var st = stat()
        guard lstat("/dev/log", &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { return }
        for bytes in unsent {
            bytes.withUnsafeBufferPointer { text in
                text.baseAddress!.withMemoryRebound(to: CChar.self, capacity: text.count) { line in
                    withVaList([line]) { vsyslog(LOG_AUTHPRIV | LOG_NOTICE, "%s", $0) }
                }
            }
        }
    }

    /// Appends in place. A ring taken out of the dictionary, appended to and put back was copied
    /// whole on every read (its 256 entries' strings retained and released: half the broker's
    /// time per read); here it grows to twice its size and then drops the older half at once.
    private mutating func append(_ entry: AccessLogEntry) {
        if rings[entry.uid] == nil {
            var ring: [AccessLogEntry] = []
            ring.reserveCapacity(2 * Self.perUid)
            rings[entry.uid] = ring
        }
        rings[entry.uid, default: []].append(entry)
        if rings[entry.uid, default: []].count >= 2 * Self.perUid { rings[entry.uid, default: []].removeFirst(Self.perUid) }
    }

    /// The uid's newest `perUid` entries, oldest first.
    private func ring(of uid: UInt32) -> ArraySlice<AccessLogEntry> { (rings[uid] ?? []).suffix(Self.perUid) }

    package func entries(of uid: UInt32, since: UInt64) -> [AccessLogEntry] {
        ring(of: uid).filter { $0.time >= since }
    }

    package mutating func restore(_ entries: [AccessLogEntry]) {
        for entry in entries { append(entry) }
    }

    /// Where a uid's ring keeps its entries (tests: recording must not copy it).
    package func storageAddress(of uid: UInt32) -> UnsafeRawPointer? {
        rings[uid]?.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    package var all: [AccessLogEntry] { rings.keys.sorted().flatMap { ring(of: $0) } }
}
