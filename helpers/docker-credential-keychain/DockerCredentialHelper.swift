import CredentialHelperSupport
import KeychainCore

/// The docker-credential-helpers protocol over internet-password items stored as the macOS
/// helper stores them: label "Docker Credentials", protocol from the scheme, server, port, path
/// as given, account = username, secret = the password or identity token.
struct DockerCredentialHelper {
    static let name = "docker-credential-keychain"
    static let label = DockerCredential.label

    /// An error docker shows as it is: one line on stdout, exit status 1.
    struct Failure: Error {
        let message: String
        static let notFound = Failure(message: "credentials not found in native keychain")
        static let missingServerURL = Failure(message: "no credentials server URL")
        static let missingUsername = Failure(message: "no credentials username")
    }

    let store: () throws -> KeychainStore

    /// `store`: JSON {"ServerURL","Username","Secret"}; field names match case-insensitively
    /// and the last occurrence wins, as Go's decoder does. Replaces the item for that URL.
    func store(_ input: Bytes) throws {
        let value: JSONValue
        do {
            value = try JSON.parse(Self.joinedLines(input))
        } catch let error as JSONError {
            throw Failure(message: error.description)
        }
        guard case .object(let pairs) = value else {
            throw Failure(message: "json: cannot unmarshal \(value.kind) into Go value of type credentials.Credentials")
        }
        var fields: [String: String] = [:]
        for field in ["ServerURL", "Username", "Secret"] {
            for (key, v) in pairs where key.lowercased() == field.lowercased() {
                switch v {
                case .string(let s): fields[field] = s
                case .null: continue
                default:
                    throw Failure(message: "json: cannot unmarshal \(v.kind) into Go struct field Credentials.\(field) of type string")
                }
            }
        }
        guard let serverURL = fields["ServerURL"], !serverURL.isEmpty else { throw Failure.missingServerURL }
        guard let username = fields["Username"], !username.isEmpty else { throw Failure.missingUsername }
        _ = try Self.parse(serverURL)
        try DockerCredential(serverURL: serverURL, username: username, secret: fields["Secret"] ?? "").save(
            in: store(), access: HelperAccess.list(parents: HelperAccess.dockerParents))
    }

    /// `get`: the bare URL; absent port and path are wildcards, the newest match wins.
    func get(_ input: Bytes) throws -> String {
        let serverURL = try Self.serverURL(input)
        let matches = try find(try Self.parse(serverURL).searchAttributes, includeSecret: true)
        guard let item = matches.max(by: { $0.modificationTime < $1.modificationTime }) else { throw Failure.notFound }
        return JSON.encode([
            ("ServerURL", serverURL), ("Username", item[AttributeKey.account]?.stringValue ?? ""),
            ("Secret", String(decoding: item.secret ?? [], as: UTF8.self))
        ]) + "\n"
    }

    /// `erase`: removes every match; nothing to remove is success (skopeo's logout needs that).
    func erase(_ input: Bytes) throws {
        let url = try Self.parse(try Self.serverURL(input))
        do {
            var query = Query(itemClass: .internetPassword, attributes: url.searchAttributes)
            query.synchronizable = .any
            try store().delete(query)
        } catch let error as KeychainError where error.code == .itemNotFound {}
    }

    /// `list`: URL -> username of the items labelled "Docker Credentials", keys sorted as Go does.
    func list() throws -> String {
        var entries: [String: String] = [:]
        for item in try find([AttributeKey.label: .string(Self.label)], includeSecret: false) {
            let key: String
            if let sent = item[AttributeKey.comment]?.stringValue, !sent.isEmpty {
                key = sent
            } else {
                let scheme = item[AttributeKey.protocol]?.stringValue == "http" ? "http" : "https"
                let port = item[AttributeKey.port]?.intValue.map { Int($0) }
                key =
                    RegistryURL(
                        scheme: scheme, host: HostAndPort(server: item[AttributeKey.server]?.stringValue ?? "", port: port),
                        path: item[AttributeKey.path]?.stringValue ?? ""
                    ).text
            }
            entries[key] = item[AttributeKey.account]?.stringValue ?? ""
        }
        return JSON.encode(entries.keys.sorted().map { ($0, entries[$0]!) }) + "\n"
    }

    private func find(_ attributes: [String: AttributeValue], includeSecret: Bool) throws -> [Item] {
        do {
            // Synchronizable ones too: a credential stored on another machine comes in so.
            var query = Query(itemClass: .internetPassword, attributes: attributes)
            query.synchronizable = .any
            return try store().find(query, limit: nil, includeSecret: includeSecret)
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }

    // MARK: Input

    /// Go's bufio.Scanner joins the lines without their newlines before anything is parsed.
    static func joinedLines(_ input: Bytes) -> Bytes {
        input.split(separator: 10, omittingEmptySubsequences: false).flatMap { line in
            line.last == 13 ? Array(line.dropLast()) : Array(line)
        }
    }

    static func serverURL(_ input: Bytes) throws -> String {
        let text = String(decoding: joinedLines(input), as: UTF8.self)
        let trimmed = text.drop(while: { $0.isWhitespace }).reversed().drop(while: { $0.isWhitespace }).reversed()
        guard !trimmed.isEmpty else { throw Failure.missingServerURL }
        return String(trimmed)
    }

    static func parse(_ serverURL: String) throws -> RegistryURL {
        do {
            return try RegistryURL(parsing: serverURL)
        } catch let error as RegistryURL.Invalid {
            throw Failure(message: error.description)
        }
    }
}
