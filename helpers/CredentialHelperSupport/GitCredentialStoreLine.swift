import KeychainCore

/// One line of git's credential-store file (`~/.git-credentials`, `$XDG_CONFIG_HOME/git/credentials`):
/// `protocol://user:password@host[:port][/path]`, parts percent-encoded, read as git's
/// credential_from_url_gently reads it. credential-store uses a line only when it has a username
/// and a password; so does the import.
package struct GitCredentialStoreLine: Equatable, Sendable {
    package var credential: GitCredential
    package var password: String

    package enum Problem: Error, Equatable, CustomStringConvertible {
        case notAURL
        case newline(String)
        case noUsernameOrPassword

        package var description: String {
            switch self {
            case .notAURL: return "not a credential URL (protocol://user:password@host); git ignores it too"
            case .newline(let part): return "its \(part) holds a newline; git ignores it too"
            case .noUsernameOrPassword: return "no username or password in it; git's credential-store ignores it too"
            }
        }
    }

    package init(parsing line: String) throws {
        guard let schemeEnd = Self.firstIndex(of: "://", in: line), schemeEnd != line.startIndex else { throw Problem.notAURL }
        let scheme = String(line[..<schemeEnd])
        let rest = line[line.index(schemeEnd, offsetBy: 3)...]
        // The host ends at the first '/', '?' or '#'; the user part at the first '@' before it.
        let ends: Set<Character> = ["/", "?", "#"]
        let slash = rest.firstIndex(where: { (c: Character) -> Bool in ends.contains(c) }) ?? rest.endIndex
        let at = rest.firstIndex(of: "@")
        let colon = rest.firstIndex(of: ":")
        var username: String?
        var password: String?
        var hostStart = rest.startIndex
        if let at, at < slash {
            if let colon, colon < at {
                username = Self.decode(rest[..<colon])
                password = Self.decode(rest[rest.index(after: colon)..<at])
            } else {
                username = Self.decode(rest[..<at])
            }
            hostStart = rest.index(after: at)
        }
        let host = Self.decode(rest[hostStart..<slash])
        // Leading and trailing slashes of the path are trimmed, as git does.
        var pathPart = rest[slash...]
        while pathPart.first == "/" { pathPart = pathPart.dropFirst() }
        var path: String?
        if !pathPart.isEmpty {
            var decoded = Self.decode(pathPart)
            while decoded.count > 1, decoded.last == "/" { decoded.removeLast() }
            path = decoded
        }
        for (name, value) in [("username", username), ("password", password), ("protocol", scheme), ("host", host), ("path", path)] {
            if let value, value.contains("\n") { throw Problem.newline(name) }
        }
        guard let username, let password else { throw Problem.noUsernameOrPassword }
        credential = GitCredential(scheme: scheme, host: host, path: path, username: username)
        self.password = password
    }

    private static func firstIndex(of needle: String, in text: String) -> String.Index? {
        var i = text.startIndex
        while i < text.endIndex {
            if text[i...].hasPrefix(needle) { return i }
            i = text.index(after: i)
        }
        return nil
    }

    /// git's url_decode_mem: %XX decoded (either case of hex digit), anything else kept as it is,
    /// '+' included. Decoded bytes that are not UTF-8 are repaired, as git's protocol is text here.
    static func decode(_ text: Substring) -> String {
        let bytes = Array(text.utf8)
        var out = Bytes()
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }
}
