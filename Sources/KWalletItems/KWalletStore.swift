import KeychainCore
import SecretServiceItems

/// What a write of an entry did: imports count these, and an unchanged write touches nothing.
package enum KWalletWrite: Sendable, Equatable {
    case added
    case changed
    case unchanged
}

/// KWallet's folders and entries in a keychain: each entry one Secret Service item (so the Secret
/// Service shows the same secret, as KWallet's own Secret Service does), each folder also a marker
/// item so that an empty folder stays, as in KWallet. `owner` is a sandboxed app's id (nil: an
/// unconfined program), which sees and changes its own entries and folders only, as in the
/// Secret Service.
extension KeychainStore {
    /// Every folder: those with entries and the empty ones, in KWallet's order.
    package func kwalletFolders(owner: String?) throws -> [String] {
        var folders = Set(try kwalletMarkers(nil, owner: owner).compactMap { $0.attributes[KWalletAttributes.folder] })
        for type in KWalletEntryType.allCases {
            let found = try unlockedItems([KWalletAttributes.type: KWalletAttributes.name(of: type)], owner: owner)
            folders.formUnion(found.compactMap { $0.attributes[KWalletAttributes.key] != nil ? $0.attributes[KWalletAttributes.folder] : nil })
        }
        return folders.sorted(by: KWalletAttributes.precedes)
    }

    /// The entries of a folder, by key in KWallet's order.
    package func kwalletEntries(folder: String, owner: String?) throws -> [KWalletEntry] {
        var byKey: [String: KWalletEntry] = [:]
        for item in try unlockedItems([KWalletAttributes.folder: folder], owner: owner) {
            guard let entry = try kwalletEntry(of: item, owner: owner) else { continue }
            byKey[entry.key] = byKey[entry.key] ?? entry
        }
        return byKey.keys.sorted(by: KWalletAttributes.precedes).map { byKey[$0]! }
    }

    /// The keys of a folder's entries, in KWallet's order, from their attributes alone (entryList
    /// reads no secret).
    package func kwalletEntryKeys(folder: String, owner: String?) throws -> [String] {
        let keys = try unlockedItems([KWalletAttributes.folder: folder], owner: owner).compactMap { $0.attributes[KWalletAttributes.key] }
        return Set(keys).sorted(by: KWalletAttributes.precedes)
    }

    package func kwalletEntry(folder: String, key: String, owner: String?) throws -> KWalletEntry? {
        try entryItems(folder: folder, key: key, owner: owner).lazy.compactMap { try self.kwalletEntry(of: $0, owner: owner) }.first
    }

    /// An entry's type, from its attributes alone: hasEntry and entryType read no secret, so that
    /// they never ask the person on a client's behalf (nil: no such entry).
    package func kwalletEntryType(folder: String, key: String, owner: String?) throws -> KWalletEntryType? {
        try entryItems(folder: folder, key: key, owner: owner).first.map { KWalletAttributes.type(named: $0.attributes[KWalletAttributes.type]) }
    }

    /// Whether `owner` surely has no folder `folder`; nil when not even the attribute index can
    /// say. While WhenUnlocked is locked the answer comes from the index alone (its key is
    /// AfterFirstUnlock's, as kwalletd's closed wallet keeps an unencrypted index of hashed names):
    /// no item is read, so nothing asks for the password. Exact, as kwalletd's: an entry or a
    /// marker of the folder, locked or not, means it exists. nil when the keychain has not been
    /// unlocked since boot: then the index's key is gone, and the folder may exist.
    package func kwalletFolderIsAbsent(_ folder: String, owner: String?) throws -> Bool? {
        let state = status
        if state.whenUnlocked { return try !kwalletFolders(owner: owner).contains(folder) }
        guard state.afterFirstUnlock else { return nil }
        for searcher in [KWalletAttributes.folderOwner(owner), owner] {
            let found = try searchSecretItemRows([KWalletAttributes.folder: folder], owner: searcher)
            guard found.unlocked.isEmpty && found.locked.isEmpty else { return false }
        }
        return true
    }

    /// Whether `owner` surely has no entry `key` in `folder`; nil when not even the attribute
    /// index can say (as `kwalletFolderIsAbsent`).
    package func kwalletEntryIsAbsent(folder: String, key: String, owner: String?) throws -> Bool? {
        let state = status
        if state.whenUnlocked { return try kwalletEntryType(folder: folder, key: key, owner: owner) == nil }
        guard state.afterFirstUnlock else { return nil }
        let found = try searchSecretItemRows([KWalletAttributes.folder: folder, KWalletAttributes.key: key], owner: owner)
        return found.unlocked.isEmpty && found.locked.isEmpty
    }

    /// The folder and key of every entry of the unconfined view created no later than `date`
    /// (seconds since 1970), without reading a secret.
    package func kwalletEntryNames(createdBy date: Double) throws -> [(folder: String, key: String)] {
        try unlockedItems([:], owner: nil).compactMap { item in
            guard item.creationDate <= date, let folder = item.attributes[KWalletAttributes.folder], let key = item.attributes[KWalletAttributes.key] else {
                return nil
            }
            return (folder, key)
        }
    }

    /// Stores an entry (its folder made if new); unchanged when it already holds the same type and
    /// bytes, so that a second import changes nothing. `access`: the list a new entry's item gets
    /// (the program that stores it, as the broker names it); nil keeps the store's default.
    @discardableResult
    package func writeKWalletEntry(_ entry: KWalletEntry, owner: String?, access: AccessList? = nil) throws -> KWalletWrite {
        try createKWalletFolder(entry.folder, owner: owner)
        let stored = KWalletAttributes.item(of: entry)
        let label = KWalletAttributes.label(folder: entry.folder, key: entry.key)
        let found = try entryItems(folder: entry.folder, key: entry.key, owner: owner)
        guard let first = found.first else {
            _ = try addSecretItem(
                label: label, attributes: stored.attributes, secret: stored.secret, contentType: stored.contentType,
                replace: false, owner: owner, access: access)
            return .added
        }
        // Another front end may have made a second item for the same entry: one stays.
        for extra in found.dropFirst() { try deleteSecretItem(extra.row, owner: owner) }
        // Another program's entry the person would not let this one read is written over all the
        // same (as kwalletd writes any entry of an open wallet), never said to be unchanged.
        if found.count == 1, (try? kwalletEntry(of: first, owner: owner)) == entry { return .unchanged }
        try updateSecretItem(
            first.row, label: label, attributes: stored.attributes, secret: stored.secret, contentType: stored.contentType, owner: owner)
        return .changed
    }

    /// false: there was no such entry.
    package func removeKWalletEntry(folder: String, key: String, owner: String?) throws -> Bool {
        let found = try entryItems(folder: folder, key: key, owner: owner)
        for item in found { try deleteSecretItem(item.row, owner: owner) }
        return !found.isEmpty
    }

    /// false: the folder existed.
    @discardableResult
    package func createKWalletFolder(_ folder: String, owner: String?) throws -> Bool {
        guard try kwalletMarkers(folder, owner: owner).isEmpty else { return false }
        let hasEntries = try !unlockedItems([KWalletAttributes.folder: folder], owner: owner).isEmpty
        _ = try addSecretItem(
            label: folder, attributes: [KWalletAttributes.folder: folder], secret: [], contentType: KWalletAttributes.binaryType,
            replace: false, owner: KWalletAttributes.folderOwner(owner))
        return !hasEntries
    }

    /// Removes a folder with its entries; false: there was no such folder.
    package func removeKWalletFolder(_ folder: String, owner: String?) throws -> Bool {
        let entries = try unlockedItems([KWalletAttributes.folder: folder], owner: owner)
        let markers = try kwalletMarkers(folder, owner: owner)
        for item in entries { try deleteSecretItem(item.row, owner: owner) }
        for item in markers { try deleteSecretItem(item.row, owner: KWalletAttributes.folderOwner(owner)) }
        return !(entries.isEmpty && markers.isEmpty)
    }

    /// Gives an entry another key in its folder. false: there is no entry `from`, or there is one
    /// named `to` (which KWallet's backend never overwrites; `from` == `to` included).
    package func renameKWalletEntry(folder: String, from: String, to: String, owner: String?) throws -> Bool {
        let found = try entryItems(folder: folder, key: from, owner: owner)
        guard let item = found.first, try entryItems(folder: folder, key: to, owner: owner).isEmpty else { return false }
        var attributes = item.attributes
        attributes[KWalletAttributes.key] = to
        attributes["username"] = to
        try updateSecretItem(item.row, label: KWalletAttributes.label(folder: folder, key: to), attributes: attributes, owner: owner)
        for extra in found.dropFirst() { try deleteSecretItem(extra.row, owner: owner) }
        return true
    }

    // MARK: Internals

    private func entryItems(folder: String, key: String, owner: String?) throws -> [SecretItem] {
        try unlockedItems([KWalletAttributes.folder: folder, KWalletAttributes.key: key], owner: owner)
    }

    /// The folder markers of `owner` (of one folder, or every one for nil).
    private func kwalletMarkers(_ folder: String?, owner: String?) throws -> [SecretItem] {
        let query = folder.map { [KWalletAttributes.folder: $0] } ?? [:]
        return try unlockedItems(query, owner: KWalletAttributes.folderOwner(owner))
    }

    /// The items a search finds; a locked keychain is an error, never an empty answer.
    private func unlockedItems(_ query: [String: String], owner: String?) throws -> [SecretItem] {
        // Without the index's key (no unlock since boot) a search cannot even name locked rows.
        guard status.whenUnlocked else { throw KeychainError.locked() }
        let found = try searchSecretItems(query, owner: owner)
        guard found.locked.isEmpty else { throw KeychainError.locked() }
        return found.unlocked
    }

    private func kwalletEntry(of item: SecretItem, owner: String?) throws -> KWalletEntry? {
        guard item.attributes[KWalletAttributes.key] != nil else { return nil }
        return KWalletAttributes.entry(of: item, secret: try secret(item.row, owner: owner).secret)
    }
}
