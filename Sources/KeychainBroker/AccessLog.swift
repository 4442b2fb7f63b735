import Glibc
import KeychainCore

/// Every key given out or refused: to syslog (LOG_AUTHPRIV, read by the journal where there is
/// one) and to a bounded ring per uid that `accessLog` returns to that uid (the user cannot read
/// the broker's files) and the broker's state keeps across a restart.
package struct AccessLog: Sendable {
    package static let perUid = 256
    package static let maximumUids = 4096
    package private(set) var rings: [UInt32: [AccessLogEntry]] = [:]
    /// Off in unit tests, where syslog would fill the machine's journal.
    package var toSyslog: Bool

    package init(toSyslog: Bool = true) { self.toSyslog = toSyslog }

    package mutating func record(_ entry: AccessLogEntry) {
        if toSyslog {
            let line =
                "uid=\(entry.uid) keychain=\(entry.keychain) class=\(entry.itemClass) label=\(entry.label) "
                + "service=\(entry.service) account=\(entry.account) caller=\(entry.caller) chain=\(entry.chain) decision=\(entry.decision)"
            let cleaned = String(line.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? " " : Character($0) })
            cleaned.withCString { text in withVaList([text]) { vsyslog(LOG_AUTHPRIV | LOG_NOTICE, "%s", $0) } }
        }
        if rings[entry.uid] == nil, rings.count >= Self.maximumUids, let oldest = rings.min(by: { ($0.value.last?.time ?? 0) < ($1.value.last?.time ?? 0) }) {
            rings[oldest.key] = nil
        }
        var ring = rings[entry.uid] ?? []
        ring.append(entry)
        if ring.count > Self.perUid { ring.removeFirst(ring.count - Self.perUid) }
        rings[entry.uid] = ring
    }

    package func entries(of uid: UInt32, since: UInt64) -> [AccessLogEntry] {
        (rings[uid] ?? []).filter { $0.time >= since }
    }

    package mutating func restore(_ entries: [AccessLogEntry]) {
        for entry in entries {
            var ring = rings[entry.uid] ?? []
            ring.append(entry)
            if ring.count > Self.perUid { ring.removeFirst() }
            rings[entry.uid] = ring
        }
    }

    package var all: [AccessLogEntry] { rings.keys.sorted().flatMap { rings[$0] ?? [] } }
}
