import CredentialHelperSupport
import Glibc
import KeychainCore

/// One message of git's credential helper protocol (git-credential(1)): `key=value` lines up to a
/// blank line or the end of input. Keys ending in `[]` may repeat; unknown keys are kept unread.
struct CredentialMessage {
    private(set) var values: [String: String] = [:]
    private(set) var lists: [String: [String]] = [:]

    /// Reads one request from standard input, at most BoundedInput.requestLimit bytes.
    static func readStandardInput() throws -> CredentialMessage {
        var input = try BoundedInput.read { bytes, newFrom in
            // Complete at the first blank line: "\n" first, or "\n\n" (or "\n\r\n") anywhere new.
            if bytes.first == 10 { return true }
            var i = max(newFrom, 1)
            while i < bytes.count {
                if bytes[i] == 10, bytes[i - 1] == 10 || (bytes[i - 1] == 13 && i >= 2 && bytes[i - 2] == 10) { return true }
                i += 1
            }
            return false
        }
        defer { input.wipe() }
        return parse(input)
    }

    /// `key=value` lines up to a blank line or the end of the bytes.
    static func parse(_ input: Bytes) -> CredentialMessage {
        var message = CredentialMessage()
        for rawLine in input.split(separator: 10, omittingEmptySubsequences: false) {
            var bytes = rawLine[...]
            while let last = bytes.last, last == 10 || last == 13 { bytes = bytes.dropLast() }
            if bytes.isEmpty { break }
            guard let eq = bytes.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let key = String(decoding: bytes[..<eq], as: UTF8.self)
            let value = String(decoding: bytes[(eq + 1)...], as: UTF8.self)
            if key.hasSuffix("[]") {
                // An empty value resets the list, as git does.
                if value.isEmpty { message.lists[key] = [] } else { message.lists[key, default: []].append(value) }
            } else {
                message.values[key] = value
            }
        }
        return message
    }

    subscript(key: String) -> String? {
        get { values[key] }
        set { values[key] = newValue }
    }

    func list(_ key: String) -> [String] { lists[key + "[]"] ?? [] }

    func has(capability: String) -> Bool { list("capability").contains(capability) }

    func flag(_ key: String) -> Bool {
        guard let v = values[key]?.lowercased() else { return false }
        return v == "1" || v == "true" || v == "yes" || v == "on"
    }
}

/// Writes an answer: lines whose values contain no newline or NUL (git would reject them).
struct CredentialAnswer {
    private var lines: [String] = []

    mutating func add(_ key: String, _ value: String?) {
        guard let value, !value.contains("\n"), !value.contains("\0") else { return }
        lines.append("\(key)=\(value)")
    }

    func write() {
        guard !lines.isEmpty else { return }
        fputs(lines.joined(separator: "\n") + "\n", stdout)
    }
}
