import KeychainCore
/// The synchronizable items of this keychain as the exchange sees them: by identity (class and
/// primary key), each with a hash of its attributes, so a change since the last exchange shows as
/// a hash that moved. The attributes hold the secret's SHA-1 (Apple's sha1 column) and the
/// modification date, so no secret is decrypted to find what changed: only those of the items
/// that did are read.
struct SyncLocalItem {
    var item: Item
    var hash: Bytes
    var identity: Bytes
}

extension KeychainStore {
    static let syncedClasses: [ItemClass] = [.genericPassword, .internetPassword, .certificate, .key]

    static func syncHash(_ item: Item) -> Bytes {
        var w = ByteWriter()
        w.u64(UInt64(bitPattern: item.itemClass.code))
        w.blob(encodeAttributes(item.attributes))
        return Crypto.sha256(w.bytes)
    }

    /// Every synchronizable item, attributes only. Refused (errSecInteractionNotAllowed) while
    /// any item of a class that can sync is locked: a search leaves locked items out, and an
    /// exchange would take every WhenUnlocked item for deleted while the screen is locked, and
    /// send tombstones for them to every device.
    func syncSnapshot() throws -> [Bytes: SyncLocalItem] {
        try checkUnlockedForSync()
        var items: [Bytes: SyncLocalItem] = [:]
        for itemClass in Self.syncedClasses {
            var query = Query(itemClass: itemClass)
            query.synchronizable = .yes
            query.includesAppItems = true
            do {
                for item in try find(query, limit: nil) {
                    let identity = SyncRecord.identity(of: itemClass, item.attributes)
                    items[identity] = SyncLocalItem(item: item, hash: Self.syncHash(item), identity: identity)
                }
            } catch let error as KeychainError where error.code == .itemNotFound {
                continue
            }
        }
        // Again after: a search leaves out, without a word, the rows of a class locked while it
        // ran (once any other row matched). A keychain that locked between the check above and
        // the searches would otherwise give a snapshot without its WhenUnlocked items, and send
        // tombstones for all of them.
        try checkUnlockedForSync()
        return items
    }

    private func checkUnlockedForSync() throws {
        try withLock {
            let keys = try currentKeys()
            let classes = Self.syncedClasses.map { String($0.code) }.joined(separator: ", ")
            let stmt = try db.statement("SELECT DISTINCT lockclass FROM items WHERE class IN (\(classes)) AND lockclass IN (1, 2, 3)")
            defer { stmt.reset() }
            while try stmt.step() {
                guard let lockClass = LockClass(rawValue: stmt.int(0)), keys.has(lockClass) else {
                    throw KeychainError.locked("the keychain is locked: sync exchanges run while it is unlocked")
                }
            }
        }
    }

    /// The item with its secret, nil when reading it would ask for the user's presence: the
    /// exchange then leaves it as it is (neither sent nor taken for deleted). An application
    /// password's item goes as it is stored, sealed.
    func syncItemWithSecret(_ item: Item) throws -> Item? {
        var presence = PresenceOptions(interaction: .skip)
        presence.keepsSealedSecrets = true
        do {
            return try find(Query(reference: item.persistentReference), limit: 1, includeSecret: true, presence: presence).first
        } catch let error as KeychainError where error.code == .itemNotFound {
            return nil
        }
    }

    /// The synchronizable item with this class and primary key, secret included, if any.
    func syncItem(_ itemClass: ItemClass, key: [String: AttributeValue]) throws -> Item? {
        var query = Query(identifying: Item(itemClass: itemClass, attributes: key))
        query.includesAppItems = true
        var presence = PresenceOptions(interaction: .skip)
        presence.keepsSealedSecrets = true
        do {
            return try find(query, limit: 1, includeSecret: true, presence: presence).first
        } catch let error as KeychainError where error.code == .itemNotFound {
            return nil
        }
    }
}
