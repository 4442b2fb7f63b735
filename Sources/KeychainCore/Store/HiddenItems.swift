import Glibc

/// Small secrets the keychain keeps for itself (sync's device keys and state, the TPM's marks):
/// generic passwords of a reserved access group, ThisDeviceOnly, and carrying an owner no
/// sandboxed app can have (app ids have no spaces), so ordinary queries and the Secret Service's
/// clients do not see them. The names are sync's, the first to keep such items, and stay so:
/// they are in every keychain file that has one.
extension KeychainStore {
    package static let hiddenAccessGroup = "com.keychain.sync"
    package static let hiddenOwner = "keychain sync (engine)"

    private func hiddenQuery(_ account: String) -> Query {
        var query = Query(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string(Self.hiddenAccessGroup), AttributeKey.account: .data(Array(account.utf8)),
                AttributeKey.accessGroup: .string(Self.hiddenAccessGroup)
            ])
        query.includesAppItems = true
        return query
    }

    /// The hidden item's data, nil when there is none.
    package func hiddenSecret(_ account: String) throws -> Bytes? {
        do {
            return try find(hiddenQuery(account), limit: 1, includeSecret: true).first?.secret ?? []
        } catch let error as KeychainError where error.code == .itemNotFound {
            return nil
        }
    }

    package func setHiddenSecret(_ account: String, _ secret: Bytes) throws {
        let item = Item(
            itemClass: .genericPassword,
            attributes: [
                AttributeKey.service: .string(Self.hiddenAccessGroup), AttributeKey.account: .data(Array(account.utf8)),
                AttributeKey.accessGroup: .string(Self.hiddenAccessGroup), AttributeKey.owner: .string(Self.hiddenOwner),
                AttributeKey.label: .string("keychain sync " + account),
                AttributeKey.accessible: .string(Protection.afterFirstUnlockThisDeviceOnly.rawValue)
            ], secret: secret)
        try batch {
            try addOrUpdate(item, matching: hiddenQuery(account))
            // Indexed as an owned item, so that the Secret Service lists it to nobody (a person
            // tidying up unknown entries in a keyring manager would otherwise delete the keys).
            guard let row = try find(hiddenQuery(account)).first?.rowID, let key = try currentKeys().indexKey(.protected) else { return }
            try indexAttributes([:], row: row, key: key, owner: Self.hiddenOwner)
        }
    }

    package func removeHiddenSecret(_ account: String) throws {
        do { try delete(hiddenQuery(account)) } catch let error as KeychainError where error.code == .itemNotFound {}
    }
}
