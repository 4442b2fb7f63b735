/// `host`, `host:port`, `[v6]`, `[v6]:port` as git and docker write them.
package struct HostAndPort: Equatable, Sendable {
    package var server: String
    package var port: Int?

    package init(server: String, port: Int?) {
        self.server = server
        self.port = port
    }

    package init(parsing text: String) {
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            server = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            port = rest.hasPrefix(":") ? Self.port(rest.dropFirst()) : nil
            if port == nil, !rest.isEmpty { server = text }
            return
        }
        if let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon, let p = Self.port(text[text.index(after: colon)...]) {
            server = String(text[..<colon])
            port = p
        } else {
            server = text
            port = nil
        }
    }

    private static func port(_ digits: Substring) -> Int? {
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let p = Int(digits), p <= 65535 else { return nil }
        return p
    }

    /// The form git and docker expect back: brackets around IPv6 addresses, the port when set.
    package var text: String {
        let host = server.contains(":") ? "[\(server)]" : server
        guard let port, port != 0 else { return host }
        return "\(host):\(port)"
    }
}
