import KeychainCore

/// A git credential as git-credential-keychain keeps it: an internet password whose protocol,
/// server, port, path and account are git's protocol, host[:port], path and username, labelled
/// "PROTOCOL://HOST (git)", its secret a StoredSecret. The helper and `security import-secrets`
/// (which brings in git's credential-store files) both store through this one mapping, so the
/// helper finds what the import stored.
package struct GitCredential: Equatable, Sendable {
    /// git's `protocol` (nil: not given; given empty, it still names the label as git sent it).
    package var scheme: String?
    package var host: String?
    package var path: String?
    package var username: String?

    package init(scheme: String?, host: String?, path: String? = nil, username: String? = nil) {
        self.scheme = scheme
        self.host = host
        self.path = path
        self.username = username
    }

    /// The attributes a request names; what it leaves out (or gives empty) matches anything.
    /// nil without a host: git-credential-keychain keeps nothing it could not look up by host.
    package var searchAttributes: [String: AttributeValue]? {
        guard let host, !host.isEmpty else { return nil }
        let parsed = HostAndPort(parsing: host)
        var attributes: [String: AttributeValue] = ["srvr": .string(parsed.server)]
        if let port = parsed.port { attributes["port"] = .int(Int64(port)) }
        if let scheme, !scheme.isEmpty { attributes["ptcl"] = .string(ProtocolCodes.code(forScheme: scheme)) }
        if let path, !path.isEmpty { attributes["path"] = .string(path) }
        if let username, !username.isEmpty { attributes["acct"] = .string(username) }
        return attributes
    }

    package var label: String { (scheme.map { "\($0)://" } ?? "") + (host ?? "") + " (git)" }

    /// The item `store` keeps: nil when git's protocol or host is missing (the helper then stores
    /// nothing). `account` is the username of a password credential (set even when empty); an
    /// authtype credential has one only when git named a user.
    package func item(account: String?, secret: StoredSecret) -> Item? {
        guard scheme != nil, var attributes = searchAttributes else { return nil }
        if let account { attributes["acct"] = .string(account) }
        var item = Item(itemClass: .internetPassword, attributes: attributes, secret: secret.bytes)
        item["labl"] = .string(label)
        return item
    }

    /// git-credential-keychain's `store`: the same credential (Apple's uniqueness: account,
    /// server, protocol, port, path...) is updated in place, else added.
    /// Synchronizable when the keychain says so (`security sync default on`); the credential
    /// stored before, synchronizable or not, is the one updated.
    /// `syncsNewItems`: the keychain's sync default when the caller already read it (an import).
    /// `access`: the list a new item gets (the helper's own, HelperAccess); the credential stored
    /// before keeps the list it has.
    package static func save(_ item: Item, in store: KeychainStore, syncsNewItems: Bool? = nil, access: AccessList? = nil) throws {
        var query = Query(identifying: item)
        query.synchronizable = .any
        var item = item
        if let access { item[AccessList.attribute] = .string(access.text) }
        try store.addOrUpdate(store.withSyncDefault(item, known: syncsNewItems), matching: query, keepingOld: [AccessList.attribute])
    }

    /// The items that are the same credential as `item` (what `save` would update), with secrets;
    /// items that would ask for the user's presence are left out, never asked for.
    package static func existing(_ item: Item, in store: KeychainStore) throws -> [Item] {
        do {
            var query = Query(identifying: item)
            query.synchronizable = .any
            return try store.find(query, limit: nil, includeSecret: true, presence: PresenceOptions(interaction: .skip))
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }
}
