import KeychainCore

/// What git keeps in an item's secret: the password (or, with authtype, the credential) on the
/// first line, then `key=value` lines for the extras — the layout git's own libsecret and
/// osxkeychain helpers use, so `security find-internet-password -w` still starts with the password.
package struct StoredSecret: Equatable {
    package static let extraKeys = ["password_expiry_utc", "oauth_refresh_token", "authtype"]

    package var password: String
    package var extras: [String: String] = [:]

    package init(password: String, extras: [String: String] = [:]) {
        self.password = password
        self.extras = extras
    }

    package init(_ bytes: Bytes) {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        password = lines.isEmpty ? "" : String(lines.removeFirst())
        for line in lines {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<eq])
            if Self.extraKeys.contains(key) { extras[key] = String(line[line.index(after: eq)...]) }
        }
    }

    package var bytes: Bytes {
        var text = password
        for key in Self.extraKeys {
            if let value = extras[key], !value.isEmpty { text += "\n\(key)=\(value)" }
        }
        return Array(text.utf8)
    }

    package var authtype: String? { extras["authtype"] }

    /// Expired passwords are not handed out (git would only fail with them).
    package func isExpired(at now: Double) -> Bool {
        guard let expiry = extras["password_expiry_utc"], let seconds = Double(expiry) else { return false }
        return seconds <= now
    }
}
