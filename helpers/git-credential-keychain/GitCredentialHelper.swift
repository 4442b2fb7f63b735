import CredentialHelperSupport
import KeychainCore

/// get, store and erase over internet-password items: protocol -> kSecAttrProtocol,
/// host[:port] -> server and port, path -> kSecAttrPath, username -> kSecAttrAccount.
struct GitCredentialHelper {
    static let name = "git-credential-keychain"
    let request: CredentialMessage

    /// Attributes the request names; what it leaves out matches anything.
    var searchAttributes: [String: AttributeValue]? {
        guard let host = request["host"], !host.isEmpty else { return nil }
        let parsed = HostAndPort(parsing: host)
        var attributes: [String: AttributeValue] = [AttributeKey.server: .string(parsed.server)]
        if let port = parsed.port { attributes[AttributeKey.port] = .int(Int64(port)) }
        if let scheme = request["protocol"], !scheme.isEmpty { attributes[AttributeKey.protocol] = .string(ProtocolCodes.code(forScheme: scheme)) }
        if let path = request["path"], !path.isEmpty { attributes[AttributeKey.path] = .string(path) }
        if let user = request["username"], !user.isEmpty { attributes[AttributeKey.account] = .string(user) }
        return attributes
    }

    private func matches(in store: KeychainStore) throws -> [Item] {
        guard let attributes = searchAttributes else { return [] }
        do {
            return try store.find(Query(itemClass: .internetPassword, attributes: attributes), limit: nil, includeSecret: true)
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }

    func get(_ store: KeychainStore) throws {
        let now = SystemClock.now()
        let authtypeCapable = request.has(capability: "authtype")
        let usable = try matches(in: store)
            .map { ($0, StoredSecret($0.secret ?? [])) }
            .filter { !$0.1.isExpired(at: now) && ($0.1.authtype == nil || authtypeCapable) }
        guard let (item, secret) = usable.max(by: { $0.0.modificationTime < $1.0.modificationTime }) else { return }
        var answer = CredentialAnswer()
        let account = item[AttributeKey.account]?.stringValue ?? ""
        if let authtype = secret.authtype {
            answer.add("capability[]", "authtype")
            answer.add("authtype", authtype)
            answer.add("credential", secret.password)
            if !account.isEmpty { answer.add("username", account) }
        } else {
            answer.add("username", account)
            answer.add("password", secret.password)
        }
        answer.add("password_expiry_utc", secret.extras["password_expiry_utc"])
        answer.add("oauth_refresh_token", secret.extras["oauth_refresh_token"])
        answer.write()
    }

    func store(_ store: KeychainStore) throws {
        // An ephemeral credential is only good for a moment; git asks helpers not to keep it.
        guard !request.flag("ephemeral"), var attributes = searchAttributes, request["protocol"] != nil else { return }
        var secret: StoredSecret
        if request.has(capability: "authtype"), let authtype = request["authtype"], let credential = request["credential"] {
            secret = StoredSecret(password: credential, extras: ["authtype": authtype])
        } else {
            guard let user = request["username"], let password = request["password"] else { return }
            attributes[AttributeKey.account] = .string(user)
            secret = StoredSecret(password: password)
        }
        secret.extras["password_expiry_utc"] = request["password_expiry_utc"]
        secret.extras["oauth_refresh_token"] = request["oauth_refresh_token"]

        let label = (request["protocol"].map { "\($0)://" } ?? "") + (request["host"] ?? "") + " (git)"
        var item = Item(itemClass: .internetPassword, attributes: attributes, secret: secret.bytes)
        item[AttributeKey.label] = .string(label)
        try store.addOrUpdate(item)
    }

    /// Removes every match; when git gives the password that failed, only items holding it.
    func erase(_ store: KeychainStore) throws {
        let password = request["password"]
        let doomed = try matches(in: store).filter { item in
            guard let password else { return true }
            return StoredSecret(item.secret ?? []).password == password
        }
        guard !doomed.isEmpty else { return }
        var query = Query(itemClass: .internetPassword)
        query.rows = doomed.map(\.rowID)
        query.synchronizable = .any
        try store.delete(query)
    }
}
