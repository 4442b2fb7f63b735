import ArgumentParser
import CredentialHelperSupport
import Glibc
import KeychainBroker
import KeychainCore

/// `security access-log`: what keychain-broker logged of this user's item keys. The user cannot
/// read the broker's files, so the lines come through the broker (its accessLog call).
struct AccessLogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "access-log",
        abstract: "Show which programs the keychain broker gave an item's secret to, or refused, and why.")

    @Option(name: .customLong("since"), help: "Leave out lines before this time: seconds since 1970, or YYYY-MM-DD[THH:MM:SS] (UTC).")
    var since: String?
    @Flag(name: .customLong("json"), help: "One JSON object per line.") var json = false

    func validate() throws {
        if let since, AccessLogTime.parse(since) == nil {
            throw ValidationError("--since takes seconds since 1970 or YYYY-MM-DD[THH:MM:SS] (UTC), not \(since)")
        }
    }

    func run() throws {
        guard let broker = BrokerSetup.installed else {
            // Not Failure's hint (create a keychain): what is missing here is the broker.
            Terminal.error(
                "security: access-log: no keychain broker keeps this user's keychains (no /run/keychain-broker/socket); "
                    + "only keychain-broker(8) logs access (errSecNotAvailable)")
            throw ExitCode(Int32(UInt8(truncatingIfNeeded: KeychainError.Code.notAvailable.rawValue)))
        }
        try perform("access-log") {
            for entry in try broker.accessLog(since: since.flatMap(AccessLogTime.parse) ?? 0) {
                Terminal.out(json ? AccessLogFormat.json(entry) : AccessLogFormat.line(entry))
            }
        }
    }
}

/// Times as `--since` takes them and the log shows them: UTC, so that a line reads the same on
/// every machine and in the journal's UTC view.
enum AccessLogTime {
    /// Seconds since 1970, or `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM:SS` (a trailing Z allowed).
    static func parse(_ text: String) -> UInt64? {
        if !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber) { return UInt64(text) }
        var body = Substring(text)
        if body.hasSuffix("Z") { body = body.dropLast() }
        let parts = body.split(separator: "T", omittingEmptySubsequences: false)
        guard parts.count <= 2, let date = fields(parts[0], separator: "-", counts: [4, 2, 2]) else { return nil }
        let clock = parts.count == 2 ? fields(parts[1], separator: ":", counts: [2, 2, 2]) : [0, 0, 0]
        guard let clock, (1...12).contains(date[1]), (1...31).contains(date[2]), clock[0] < 24, clock[1] < 60, clock[2] < 61
        else { return nil }
        var broken = tm()
        broken.tm_year = Int32(date[0] - 1900)
        broken.tm_mon = Int32(date[1] - 1)
        broken.tm_mday = Int32(date[2])
        broken.tm_hour = Int32(clock[0])
        broken.tm_min = Int32(clock[1])
        broken.tm_sec = Int32(clock[2])
        let seconds = timegm(&broken)
        return seconds < 0 ? 0 : UInt64(seconds)
    }

    /// Decimal fields of exactly the given widths between separators.
    private static func fields(_ text: Substring, separator: Character, counts: [Int]) -> [Int]? {
        let pieces = text.split(separator: separator, omittingEmptySubsequences: false)
        guard pieces.count == counts.count else { return nil }
        var values: [Int] = []
        for (piece, count) in zip(pieces, counts) {
            guard piece.count == count, piece.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(piece) else { return nil }
            values.append(value)
        }
        return values
    }

    static func shown(_ seconds: UInt64) -> String {
        var time = time_t(clamping: seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

/// One log entry as a line or as JSON.
enum AccessLogFormat {
    /// `TIME DECISION: PROGRAM (PATH) ← PARENTS; CLASS "LABEL" (SERVICE, account ACCOUNT) in
    /// KEYCHAIN`. Labels and names are any bytes: escaped, so that one cannot forge another line.
    static func line(_ entry: AccessLogEntry) -> String {
        var line = "\(AccessLogTime.shown(entry.time)) \(escaped(entry.decision)): \(entry.caller.isEmpty ? "-" : escaped(entry.caller))"
        if !entry.itemClass.isEmpty || !entry.label.isEmpty {
            line += "; \(escaped(entry.itemClass)) \(quoted(entry.label)) (\(escaped(entry.service)), account \(escaped(entry.account)))"
        }
        return line + " in \(escaped(entry.keychain))"
    }

    static func json(_ entry: AccessLogEntry) -> String {
        let fields: [(String, String)] = [
            ("keychain", entry.keychain), ("class", entry.itemClass), ("label", entry.label), ("service", entry.service),
            ("account", entry.account), ("program", entry.caller), ("chain", entry.chain), ("decision", entry.decision)
        ]
        let text = fields.map { "\"\($0.0)\":\(quoted($0.1))" }.joined(separator: ",")
        return "{\"time\":\(entry.time),\"date\":\"\(AccessLogTime.shown(entry.time))\",\"uid\":\(entry.uid),\(text)}"
    }

    /// A JSON string: the log's texts come from metadata and program paths, any bytes. Escaped as
    /// JSON, and also where a terminal would obey the text rather than show it (C1 controls, the
    /// bidirectional embeddings, overrides and isolates), as the JSON is read on terminals too.
    static func quoted(_ text: String) -> String { "\"" + escaped(text) + "\"" }

    /// The same escapes for the plain lines.
    static func escaped(_ text: String) -> String { JSON.escaped(text, alsoEscaping: obeyedByTerminals) }

    private static func obeyedByTerminals(_ scalar: Unicode.Scalar) -> Bool {
        (0x7F...0x9F).contains(scalar.value) || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
    }
}
