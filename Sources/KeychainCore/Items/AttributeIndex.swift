/// Free-form attributes: string pairs a front end keeps on a generic or internet password beyond
/// Apple's typed attributes (the Secret Service's `a{ss}`), encrypted with the item's other
/// attributes, and indexed by keyed hashes so that a search on them stays indexed and a locked
/// keychain can still say which rows match.
///
/// The index is a table of (HMAC(index key, name, value), row): as opaque as the other index
/// columns (without the key, nothing can be learned from a hash). It is keyed with the protected
/// space's index key, which AfterFirstUnlock keeps. A trigger removes a row's hashes when any front
/// end deletes the row. What the pairs mean is the front end's business; the engine knows only
/// where they are kept, and that an item made by a sandboxed app carries its owner.
extension AttributeKey {
    /// The free-form attributes as the front end gave them (encoded by `FreeFormAttributes`).
    package static let freeFormAttributes = "ssat"
    /// The MIME type of the secret (the Secret Service's content type).
    package static let contentType = "ssct"
    /// The sandboxed app that made the item (its app id); absent for every other item. Such an item
    /// matches only queries that name its access group or its row (`Query.includesAppItems`).
    package static let owner = "ssow"
}

package enum FreeFormAttributes {
    package static func encode(_ attributes: [String: String]) -> Bytes {
        var w = ByteWriter()
        w.u32(UInt32(attributes.count))
        for key in attributes.keys.sorted() {
            w.string(key)
            w.string(attributes[key]!)
        }
        return w.bytes
    }

    package static func decode(_ bytes: Bytes) throws -> [String: String] {
        var r = ByteReader(bytes)
        let count = try r.u32()
        // Grown once, not by doubling; a damaged count is capped (as decodeAttributes does).
        var out = [String: String](minimumCapacity: Int(min(count, 64)))
        for _ in 0..<count {
            let key = try r.string()
            out[key] = try r.string()
        }
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in free-form attributes") }
        return out
    }

    /// An item's free-form attributes ([:] when it has none).
    package static func of(_ item: Item) -> [String: String] {
        guard case .data(let bytes)? = item.attributes[AttributeKey.freeFormAttributes], let decoded = try? decode(bytes) else { return [:] }
        return decoded
    }

    /// The index name under which an item's owner is hashed beside its pairs. D-Bus strings, and so
    /// every pair a client can send, cannot hold a NUL: no pair can take this name.
    package static let ownerIndexName = "\u{0}owner"
    /// Hashed for every item an app owns, whichever app: what tells an owned locked item apart.
    package static let ownedIndexPair = ["\u{0}owned": ""]

    /// `pairs` as the index holds them for an item of `owner`: narrowed to that owner's items.
    package static func scoped(_ pairs: [String: String], owner: String?) -> [String: String] {
        guard let owner else { return pairs }
        var scoped = pairs
        scoped[ownerIndexName] = owner
        return scoped
    }
}

extension KeychainStore {
    package static let attributeIndexSchema = """
        CREATE TABLE IF NOT EXISTS secret_attributes (hash BLOB NOT NULL, item INTEGER NOT NULL,
            PRIMARY KEY (hash, item)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS secret_attributes_item ON secret_attributes(item);
        CREATE TRIGGER IF NOT EXISTS secret_attributes_cleanup AFTER DELETE ON items
            BEGIN DELETE FROM secret_attributes WHERE item = old.rowid; END;
        """

    package static func attributeHash(_ key: Crypto.HMACKey, name: String, value: String) -> Bytes {
        var w = ByteWriter()
        w.string("secret-service-attribute")
        w.string(name)
        w.string(value)
        return Array(key.mac(w.bytes).prefix(16))
    }

    package func hasAttributeIndex() throws -> Bool {
        let stmt = try db.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'secret_attributes'")
        defer { stmt.reset() }
        return try stmt.step()
    }

    /// Adds `row`'s pairs (and its owner's, for an app's item) to the index (in the caller's transaction).
    package func indexAttributes(_ pairs: [String: String], row: Int64, key: Crypto.HMACKey, owner: String?) throws {
        try db.execute(Self.attributeIndexSchema)
        let stmt = try db.statement("INSERT OR IGNORE INTO secret_attributes(hash, item) VALUES (?, ?)")
        var all = FreeFormAttributes.scoped(pairs, owner: owner)
        if owner != nil { all.merge(FreeFormAttributes.ownedIndexPair) { $1 } }
        for (name, value) in all {
            try stmt.run([.blob(Self.attributeHash(key, name: name, value: value)), .int(row)])
        }
    }

    /// Drops `row`'s pairs from the index (in the caller's transaction).
    package func unindexAttributes(row: Int64) throws {
        guard try hasAttributeIndex() else { return }
        try db.statement("DELETE FROM secret_attributes WHERE item = ?").run([.int(row)])
    }

    /// The rows the index holds every pair of `pairs` for (nil: no index, or no key to look with).
    ///
    /// Read from the pair that the fewest rows hold, each of the others then checked row by row
    /// through the (hash, item) key: a pair that every item of an application shares (a client
    /// storing many items under its name, then looking one up by its own attribute) is never read
    /// in full. Which pair is the narrowest is found by counting each only up to a bound that
    /// grows sixteenfold, so no count reads much more than the narrowest pair's rows.
    package func rowsIndexed(with pairs: [String: String], keys: ClassKeys) throws -> Set<Int64>? {
        guard let key = keys.indexKey(.protected), try hasAttributeIndex() else { return nil }
        let hashes = pairs.map { Self.attributeHash(key, name: $0.key, value: $0.value) }
        guard !hashes.isEmpty else { return [] }
        let count = try db.statement("SELECT count(*) FROM (SELECT 1 FROM secret_attributes WHERE hash = ? LIMIT ?)")
        var narrowest = 0
        var bound: Int64 = 16
        // One pair is its own narrowest: read it without counting it first.
        while hashes.count > 1 {
            var fewest = Int64.max
            for (i, hash) in hashes.enumerated() {
                count.bind([.blob(hash), .int(bound)])
                _ = try count.step()
                let n = count.int(0)
                count.reset()
                if n == 0 { return [] }
                if n < fewest { (fewest, narrowest) = (n, i) }
            }
            if fewest < bound { break }
            bound = bound > Int64.max / 16 ? Int64.max : bound * 16
        }
        let stmt = try db.statement("SELECT item FROM secret_attributes WHERE hash = ?")
        stmt.bind([.blob(hashes[narrowest])])
        var candidates: [Int64] = []
        while try stmt.step() { candidates.append(stmt.int(0)) }
        stmt.reset()
        let holds = try db.statement("SELECT 1 FROM secret_attributes WHERE hash = ? AND item = ?")
        var rows = Set<Int64>()
        for row in candidates {
            var every = true
            for (i, hash) in hashes.enumerated() where i != narrowest {
                holds.bind([.blob(hash), .int(row)])
                let found = try holds.step()
                holds.reset()
                if !found {
                    every = false
                    break
                }
            }
            if every { rows.insert(row) }
        }
        return rows
    }

    /// Whether the index has every pair of `pairs` for `row`: how a locked item is matched.
    package func indexHolds(_ pairs: [String: String], row: Int64, keys: ClassKeys) throws -> Bool {
        guard let key = keys.indexKey(.protected), try hasAttributeIndex() else { return false }
        let stmt = try db.statement("SELECT 1 FROM secret_attributes WHERE hash = ? AND item = ?")
        for (name, value) in pairs {
            stmt.bind([.blob(Self.attributeHash(key, name: name, value: value)), .int(row)])
            defer { stmt.reset() }
            guard try stmt.step() else { return false }
        }
        return true
    }

    /// Key rotation makes a new class key C, and the index is keyed under it: rebuilt from the
    /// pairs each re-sealed item carries, inside the rotation's transaction.
    func reindexAttributes(_ items: [Item], keys: ClassKeys) throws {
        guard try hasAttributeIndex() else { return }
        guard let key = keys.indexKey(.protected) else { throw KeychainError.locked() }
        try db.execute("DELETE FROM secret_attributes")
        for item in items { try indexFreeFormAttributes(of: item, key: key) }
    }

    /// Indexes the pairs an item carries, for an item that arrives whole rather than through the
    /// Secret Service (a backup's, another device's): the service finds them through the index
    /// only. Nothing for an item without any.
    func indexFreeFormAttributes(of item: Item, keys: ClassKeys) throws {
        guard item.attributes[AttributeKey.freeFormAttributes] != nil else { return }
        guard let key = keys.indexKey(.protected) else { throw KeychainError.locked() }
        try indexFreeFormAttributes(of: item, key: key)
    }

    private func indexFreeFormAttributes(of item: Item, key: Crypto.HMACKey) throws {
        guard case .data(let encoded)? = item.attributes[AttributeKey.freeFormAttributes] else { return }
        // No client's pair starts with NUL (D-Bus strings cannot hold one): such a name in a
        // backup's or another device's item would be an owner mark it planted for itself.
        let pairs = try FreeFormAttributes.decode(encoded).filter { !$0.key.hasPrefix("\u{0}") }
        try indexAttributes(pairs, row: item.rowID, key: key, owner: item.attributes[AttributeKey.owner]?.stringValue)
    }
}
