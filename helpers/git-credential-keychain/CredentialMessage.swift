import Glibc

/// One message of git's credential helper protocol (git-credential(1)): `key=value` lines up to a
/// blank line or the end of input. Keys ending in `[]` may repeat; unknown keys are kept unread.
struct CredentialMessage {
    private(set) var values: [String: String] = [:]
    private(set) var lists: [String: [String]] = [:]

    static func read(from file: UnsafeMutablePointer<FILE>) -> CredentialMessage {
        var message = CredentialMessage()
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while true {
            let n = getline(&line, &capacity, file)
            guard n >= 0, let line else { break }
            var bytes = UnsafeRawBufferPointer(start: line, count: n)[...]
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
