import KeychainCore

/// A registry login as docker-credential-keychain keeps it, the way the macOS osxkeychain helper
/// does: an internet password labelled "Docker Credentials" whose protocol, server, port and path
/// come from the server URL, account = username, secret = password or identity token, and the
/// URL docker sent in the comment (so `list` gives back the same key). The helper's `store` and
/// `security import-secrets --docker-config` both store through this one mapping.
package struct DockerCredential: Equatable, Sendable {
    package static let label = "Docker Credentials"
    /// The username docker's native stores give an identity token (docker/cli's tokenUsername).
    package static let tokenUsername = "<token>"

    package var serverURL: String
    package var username: String
    package var secret: String

    package init(serverURL: String, username: String, secret: String) {
        self.serverURL = serverURL
        self.username = username
        self.secret = secret
    }

    /// The item the helper's `store` keeps, and the query of the item it replaces.
    package func item() throws -> (item: Item, replacing: Query) {
        let url = try RegistryURL(parsing: serverURL)
        var item = Item(itemClass: .internetPassword, attributes: url.exactAttributes, secret: Array(secret.utf8))
        item["acct"] = .string(username)
        item["labl"] = .string(Self.label)
        item["icmt"] = .string(serverURL)
        var replacing = Query(itemClass: .internetPassword, attributes: url.exactAttributes)
        replacing.synchronizable = .any
        return (item, replacing)
    }

    /// docker-credential-keychain's `store`: replaces whatever the URL named before.
    /// `access`: the list a new item gets (the helper's own, HelperAccess); the login stored
    /// before keeps the list it has.
    package func save(in store: KeychainStore, access: AccessList? = nil) throws {
        var (item, query) = try item()
        if let access { item[AccessList.attribute] = .string(access.text) }
        try store.addOrUpdate(store.withSyncDefault(item), matching: query, keepingOld: [AccessList.attribute])
    }

    /// The items `save` would replace, with their secrets; items that would ask for the user's
    /// presence are left out, never asked for.
    package func existing(in store: KeychainStore) throws -> [Item] {
        do {
            return try store.find(try item().replacing, limit: nil, includeSecret: true, presence: PresenceOptions(interaction: .skip))
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }
}
