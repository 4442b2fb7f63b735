import KeychainCore

/// docker's `config.json` (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`) as far as
/// its logins go: the inline `auths` ({"https://index.docker.io/v1/": {"auth": base64(user:pass)}}
/// or {"identitytoken": ...}) read as docker's CLI reads them, and the file rewritten as docker
/// leaves it after a login through a credential store: `credsStore` set, each registry kept in
/// `auths` with its secrets removed. Everything else in the file stays as it was, in its order.
package struct DockerConfig {
    package var root: [(String, JSONValue)]

    package struct Problem: Error, CustomStringConvertible {
        package let description: String
    }

    /// A registry's inline login, or why it cannot be read.
    package struct Entry {
        package var serverURL: String
        package var credential: DockerCredential?
        package var problem: String?
    }

    package init(parsing bytes: Bytes) throws {
        let value: JSONValue
        do {
            value = try JSON.parse(bytes)
        } catch let error as JSONError {
            throw Problem(description: "config.json is not JSON (\(error.description))")
        }
        guard case .object(let pairs) = value else { throw Problem(description: "config.json is not a JSON object") }
        root = pairs
    }

    package var credsStore: String? {
        guard case .string(let name)? = member("credsStore", of: root) else { return nil }
        return name
    }

    /// Every registry of `auths` that holds a secret: its credential as docker's native stores
    /// keep it (an identity token under the username "<token>"), or why it cannot be read.
    package var inlineEntries: [Entry] {
        guard case .object(let auths)? = member("auths", of: root) else { return [] }
        var entries: [Entry] = []
        for (serverURL, value) in auths {
            guard case .object(let fields) = value else {
                entries.append(Entry(serverURL: serverURL, problem: "its entry is not a JSON object"))
                continue
            }
            func text(_ key: String) -> String? {
                if case .string(let s)? = member(key, of: fields), !s.isEmpty { return s }
                return nil
            }
            if let token = text("identitytoken") {
                entries.append(
                    Entry(serverURL: serverURL, credential: DockerCredential(serverURL: serverURL, username: DockerCredential.tokenUsername, secret: token)))
                continue
            }
            var username = text("username")
            var password = text("password") ?? ""
            if let auth = text("auth") {
                // docker/cli's decodeAuth: base64 of "user:password", the user not empty.
                guard let decoded = Base64.decode(auth), let colon = decoded.firstIndex(of: UInt8(ascii: ":")), colon > 0 else {
                    entries.append(Entry(serverURL: serverURL, problem: "its auth is not base64 of user:password (docker: invalid auth configuration file)"))
                    continue
                }
                username = String(decoding: decoded[..<colon], as: UTF8.self)
                var rest = decoded[(colon + 1)...]
                while rest.last == 0 { rest = rest.dropLast() }
                while rest.first == 0 { rest = rest.dropFirst() }
                password = String(decoding: rest, as: UTF8.self)
            }
            guard let username else {
                if text("password") != nil {
                    entries.append(Entry(serverURL: serverURL, problem: "it has a password but no username"))
                }
                continue
            }
            entries.append(Entry(serverURL: serverURL, credential: DockerCredential(serverURL: serverURL, username: username, secret: password)))
        }
        return entries
    }

    /// The keys of a registry's entry that hold its login; a credential store keeps them instead.
    package static let secretKeys: Set<String> = ["auth", "identitytoken", "username", "password"]

    /// The file with `credsStore` set to `store` and the secrets of `moved` registries removed
    /// from `auths` (their entries stay, as docker keeps them), in docker's layout: JSON indented
    /// with tabs, as Go's MarshalIndent writes it.
    package func migrated(to store: String, moved: Set<String>) -> Bytes {
        var out = root
        if let index = out.firstIndex(where: { $0.0 == "auths" }), case .object(let auths) = out[index].1 {
            out[index].1 = .object(
                auths.map { serverURL, value in
                    guard moved.contains(serverURL), case .object(let fields) = value else { return (serverURL, value) }
                    return (serverURL, .object(fields.filter { !Self.secretKeys.contains($0.0) }))
                })
        }
        if let index = out.firstIndex(where: { $0.0 == "credsStore" }) {
            out[index].1 = .string(store)
        } else {
            out.append(("credsStore", .string(store)))
        }
        return Array((JSON.encodeIndented(.object(out)) + "\n").utf8)
    }

    /// Go's decoder takes the last of repeated keys.
    private func member(_ key: String, of pairs: [(String, JSONValue)]) -> JSONValue? {
        pairs.last { $0.0 == key }?.1
    }
}

/// Standard base64 as Go's base64.StdEncoding decodes it: padding required, CR and LF ignored,
/// anything else outside the alphabet refused.
package enum Base64 {
    package static func decode(_ text: String) -> Bytes? {
        var values: [UInt8] = []
        var padding = 0
        for byte in text.utf8 where byte != 10 && byte != 13 {
            if byte == UInt8(ascii: "=") {
                padding += 1
                continue
            }
            guard padding == 0, let value = value(byte) else { return nil }
            values.append(value)
        }
        guard (values.count + padding) % 4 == 0, padding <= 2, padding == 0 || values.count % 4 == 4 - padding else { return nil }
        var out = Bytes()
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i + 1 < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            let a = chunk[i], b = chunk[i + 1]
            out.append(a << 2 | b >> 4)
            if chunk.count > 2 { out.append(b << 4 | chunk[i + 2] >> 2) }
            if chunk.count > 3 { out.append(chunk[i + 2] << 6 | chunk[i + 3]) }
            i += 4
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 65...90: return c - 65
        case 97...122: return c - 71
        case 48...57: return c + 4
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }

    package static func encode(_ bytes: Bytes) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out = Bytes()
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = bytes[i], b1 = n > 1 ? bytes[i + 1] : 0, b2 = n > 2 ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(n > 1 ? alphabet[Int((b1 & 15) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(n > 2 ? alphabet[Int(b2 & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
