/// The synchronizable items of this keychain as the exchange sees them: by identity (class and
/// primary key), each with a hash of everything it holds, so a change since the last exchange
/// shows as a hash that moved.
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
        var attributes = item.attributes
        attributes[AttributeKey.sha1] = nil
        w.blob(encodeAttributes(attributes))
        w.u8(item.secret == nil ? 0 : 1)
        w.blob(item.secret ?? [])
        return Crypto.sha256(w.bytes)
    }

    /// Every synchronizable item whose secret can be read without asking anyone, and the
    /// identities of those that cannot (items that need the user's presence): the exchange leaves
    /// the latter as they are rather than take them for deleted.
    func syncSnapshot() throws -> (readable: [Bytes: SyncLocalItem], present: Set<Bytes>) {
        var readable: [Bytes: SyncLocalItem] = [:]
        var present = Set<Bytes>()
        var presence = PresenceOptions(interaction: .skip)
        presence.keepsSealedSecrets = true
        for itemClass in Self.syncedClasses {
            var query = Query(itemClass: itemClass)
            query.synchronizable = .yes
            query.includesAppItems = true
            do {
                for item in try find(query, limit: nil) { present.insert(SyncRecord.identity(of: itemClass, item.attributes)) }
                for item in try find(query, limit: nil, includeSecret: true, presence: presence) {
                    let identity = SyncRecord.identity(of: itemClass, item.attributes)
                    readable[identity] = SyncLocalItem(item: item, hash: Self.syncHash(item), identity: identity)
                }
            } catch let error as KeychainError where error.code == .itemNotFound {
                continue
            }
        }
        return (readable, present)
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
