internal import KeychainCore

/// One-line password calls for generic passwords by service and account, after SAMKeychain.
/// They return nil or false on failure; use KeychainQuery to see why.
public enum SAMKeychain {
    public static func password(forService service: String, account: String) -> String? {
        let query = KeychainQuery(service: service, account: account)
        try? query.fetch()
        return query.password
    }

    public static func passwordData(forService service: String, account: String) -> Data? {
        let query = KeychainQuery(service: service, account: account)
        try? query.fetch()
        return query.passwordData
    }

    @discardableResult
    public static func setPassword(_ password: String, forService service: String, account: String) -> Bool {
        let query = KeychainQuery(service: service, account: account)
        query.password = password
        return (try? query.save()) != nil
    }

    @discardableResult
    public static func deletePassword(forService service: String, account: String) -> Bool {
        (try? KeychainQuery(service: service, account: account).deleteItem()) != nil
    }

    /// Attributes of every generic password, or of those of one service.
    public static func accounts(forService service: String? = nil) -> [[String: Any]] {
        (try? KeychainQuery(service: service).fetchAll()) ?? []
    }

    public static func allAccounts() -> [[String: Any]] { accounts(forService: nil) }
}
