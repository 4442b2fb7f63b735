/// A registry address as docker-credential-helpers' registryurl.Parse reads it: no scheme means
/// https; only http and https are allowed; the query is dropped; the path is kept as given.
import KeychainCore

package struct RegistryURL: Equatable, Sendable {
    package var scheme: String
    package var host: HostAndPort
    package var path: String

    package struct Invalid: Error, Equatable, CustomStringConvertible {
        package let description: String
    }

    package init(scheme: String, host: HostAndPort, path: String) {
        self.scheme = scheme
        self.host = host
        self.path = path
    }

    package init(parsing text: String) throws {
        var rest = Substring(text)
        var scheme = ""
        if let separator = Self.firstIndex(of: "://", in: rest) {
            let candidate = rest[..<separator]
            guard let first = candidate.first, first.isASCII, first.isLetter,
                candidate.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
            else { throw Invalid(description: "first path segment in URL cannot contain colon") }
            scheme = candidate.lowercased()
            rest = rest[rest.index(separator, offsetBy: 3)...]
        } else if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
        } else {
            // registryurl.Parse puts "//" in front of a bare host, so it is never taken for a path.
        }
        guard scheme.isEmpty || scheme == "http" || scheme == "https" else {
            throw Invalid(description: "unsupported scheme: \(scheme)")
        }
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<slash]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let parsed = HostAndPort(parsing: String(authority))
        // A colon left in an unbracketed host means a port that is not a number.
        if !authority.hasPrefix("["), parsed.port == nil, let colon = authority.lastIndex(of: ":"), authority.firstIndex(of: ":") == colon {
            let tail = authority[colon...]
            if tail.count > 1 || authority.isEmpty { throw Invalid(description: "invalid port \"\(tail)\" after host") }
        }
        let server = parsed.server.hasSuffix(":") ? String(parsed.server.dropLast()) : parsed.server
        guard !server.isEmpty else { throw Invalid(description: "no hostname in URL") }
        self.scheme = scheme.isEmpty ? "https" : scheme
        self.host = HostAndPort(server: server, port: parsed.port)
        self.path = String(rest[slash...])
    }

    private static func firstIndex(of needle: String, in text: Substring) -> Substring.Index? {
        var i = text.startIndex
        while i < text.endIndex {
            if text[i...].hasPrefix(needle) { return i }
            i = text.index(after: i)
        }
        return nil
    }

    /// The URL rebuilt from its parts, for items that did not record what docker sent.
    package var text: String { "\(scheme)://\(host.text)\(path)" }
}

extension RegistryURL {
    /// What a lookup asks for: http and https never match each other; a port or path the URL
    /// leaves out matches any.
    package var searchAttributes: [String: AttributeValue] {
        var attributes: [String: AttributeValue] = [
            AttributeKey.server: .string(host.server), AttributeKey.protocol: .string(ProtocolCodes.code(forScheme: scheme))
        ]
        if let port = host.port { attributes[AttributeKey.port] = .int(Int64(port)) }
        if !path.isEmpty { attributes[AttributeKey.path] = .string(path) }
        return attributes
    }

    /// The one item a URL names when storing: an absent port is 0 and an absent path "".
    package var exactAttributes: [String: AttributeValue] {
        var attributes = searchAttributes
        attributes[AttributeKey.port] = .int(Int64(host.port ?? 0))
        attributes[AttributeKey.path] = .string(path)
        return attributes
    }
}
