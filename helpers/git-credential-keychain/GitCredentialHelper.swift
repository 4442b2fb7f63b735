import CredentialHelperSupport
import KeychainCore

/// get, store and erase over internet-password items: protocol -> kSecAttrProtocol,
/// host[:port] -> server and port, path -> kSecAttrPath, username -> kSecAttrAccount.
struct GitCredentialHelper {
    static let name = "git-credential-keychain"
    let request: CredentialMessage

    /// The credential the request names, mapped as `security import-secrets` maps git's files.
    var credential: GitCredential {
        GitCredential(scheme: request["protocol"], host: request["host"], path: request["path"], username: request["username"])
    }

    /// Attributes the request names; what it leaves out matches anything.
    var searchAttributes: [String: AttributeValue]? { credential.searchAttributes }

    private func matches(in store: KeychainStore) throws -> [Item] {
        guard let attributes = searchAttributes else { return [] }
        do {
            // Synchronizable ones too: a credential stored on another machine comes in so.
            var query = Query(itemClass: .internetPassword, attributes: attributes)
            query.synchronizable = .any
            return try store.find(query, limit: nil, includeSecret: true)
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
        guard !request.flag("ephemeral"), request["protocol"] != nil else { return }
        var secret: StoredSecret
        var account: String?
        if request.has(capability: "authtype"), let authtype = request["authtype"], let token = request["credential"] {
            secret = StoredSecret(password: token, extras: ["authtype": authtype])
        } else {
            guard let user = request["username"], let password = request["password"] else { return }
            account = user
            secret = StoredSecret(password: password)
        }
        secret.extras["password_expiry_utc"] = request["password_expiry_utc"]
        secret.extras["oauth_refresh_token"] = request["oauth_refresh_token"]
        guard let item = credential.item(account: account, secret: secret) else { return }
        try GitCredential.save(item, in: store, access: HelperAccess.list(parents: HelperAccess.gitParents))
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
