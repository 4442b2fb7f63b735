/// How one item becomes one row: attributes sealed under the class's metadata key, the secret
/// under a random per-item key that is itself wrapped under the class key, and keyed hashes of
/// the attributes lookups use. Every ciphertext carries the row's identity as additional data,
/// so a ciphertext moved to another row, class or keychain fails to open; and (row format 2) the
/// secret's additional data carries a digest of the very metadata ciphertext it was sealed with,
/// so an older secret pasted under newer metadata, or older metadata over a newer secret, fails
/// too. Each seal draws a fresh nonce and stamps mdat, so that digest is the row's version.
package struct Row: Sendable {
    package var rowID: Int64
    package var itemClass: ItemClass
    package var lockClass: LockClass
    package var space: KeySpace
    package var metadata: Bytes
    package var secret: Bytes

    package init(rowID: Int64, itemClass: ItemClass, lockClass: LockClass, space: KeySpace, metadata: Bytes, secret: Bytes) {
        self.rowID = rowID
        self.itemClass = itemClass
        self.lockClass = lockClass
        self.space = space
        self.metadata = metadata
        self.secret = secret
    }
}

struct SealedRow {
    var pk: Bytes
    var account: Bytes
    var service: Bytes
    var metadata: Bytes
    var secret: Bytes
}

extension KeychainStore {
    /// `version` nil: row format 1, as rows written before the binding were sealed (still read,
    /// rewritten as format 2 by their next update or a key rotation). Format 2's metadata carries
    /// an empty version; its item key and secret carry the digest of that metadata ciphertext.
    func additionalData(rowID: Int64, itemClass: ItemClass, lockClass: LockClass, field: String, version: Bytes? = nil) -> Bytes {
        Self.additionalData(keychain: keybag.uuid, rowID: rowID, itemClass: itemClass, lockClass: lockClass, field: field, version: version)
    }

    /// `additionalData` of the keychain whose keybag uuid is `keychain`: what a custodian makes
    /// for a row it is asked about, with no store of its own.
    package static func additionalData(
        keychain: Bytes, rowID: Int64, itemClass: ItemClass, lockClass: LockClass, field: String, version: Bytes? = nil
    ) -> Bytes {
        var w = ByteWriter()
        w.string(version == nil ? "keychain-row-v1" : "keychain-row-v2")
        w.blob(keychain)
        w.u64(UInt64(rowID))
        w.u64(UInt64(itemClass.code))
        w.u64(UInt64(lockClass.rawValue))
        w.string(field)
        if let version { w.blob(version) }
        return w.bytes
    }

    /// What binds a format-2 secret to its metadata: the digest of the metadata ciphertext.
    package static func version(ofMetadata metadata: Bytes) -> Bytes { Crypto.sha256(metadata) }

    /// Opens the metadata under format 2, else format 1; the format that opened it is the
    /// format the secret must open under, so a row cannot be downgraded piecemeal.
    private func openMetadata(_ row: Row, key: Bytes) throws -> (plain: Bytes, version: Bytes?) {
        try Self.openMetadata(row, keychain: keybag.uuid, key: key)
    }

    /// `openMetadata` for keychain `uuid` without a store: the broker opens a row's metadata with
    /// its own key, to read the access list and what the question names.
    package static func openMetadata(_ row: Row, keychain uuid: Bytes, key: Bytes) throws -> (plain: Bytes, version: Bytes?) {
        func aad(_ version: Bytes?) -> Bytes {
            additionalData(
                keychain: uuid, rowID: row.rowID, itemClass: row.itemClass, lockClass: row.lockClass, field: "metadata", version: version)
        }
        if let plain = try? Crypto.open(row.metadata, key: key, aad: aad([])) {
            return (plain, version(ofMetadata: row.metadata))
        }
        return (try Crypto.open(row.metadata, key: key, aad: aad(nil)), nil)
    }

    /// Keyed hash of one attribute: equal values give equal hashes, and without the index key
    /// nothing can be learned from them.
    package static func indexHash(_ indexKey: Crypto.HMACKey, itemClass: ItemClass, name: String, value: AttributeValue) -> Bytes {
        var w = ByteWriter()
        w.u64(UInt64(itemClass.code))
        w.string(name)
        canonical(value, name: name, itemClass: itemClass).write(to: &w)
        return Array(indexKey.mac(w.bytes).prefix(16))
    }

    package static func primaryKeyHash(_ indexKey: Crypto.HMACKey, item: Item) -> Bytes {
        indexKey.mac(primaryKeyBytes(item))
    }

    /// What the primary-key hash is a MAC of: the same in every key space, so an add makes it once
    /// for its uniqueness probes and its row.
    package static func primaryKeyBytes(_ item: Item) -> Bytes {
        var w = ByteWriter(capacity: 256)
        w.u64(UInt64(item.itemClass.code))
        for field in AttributeSchema.primaryKeyFields(for: item.itemClass) {
            w.string(field.name)
            canonical(item.attributes[field.name] ?? field.missing, kind: field.kind).write(to: &w)
        }
        return w.bytes
    }

    /// One spelling per value, so that "acct" as a string and as the same bytes hash alike.
    static func canonical(_ value: AttributeValue, name: String, itemClass: ItemClass) -> AttributeValue {
        canonical(value, kind: AttributeSchema.kind(name, for: itemClass))
    }

    static func canonical(_ value: AttributeValue, kind: AttributeSchema.Kind?) -> AttributeValue {
        switch (kind, value) {
        case (.blob?, .string(let s)): return .data(Array(s.utf8))
        case (.bool?, .int(let i)): return .bool(i != 0)
        case (.code?, .string(let s)) where s.isEmpty: return .int(0)
        default: return value
        }
    }

    /// The additional-data field of an item's sealed data. An item added without kSecValueData
    /// has none at all (not empty data: Apple returns no kSecValueData key for it); its sealed
    /// body is the empty plaintext under the other field, so neither can pass for the other.
    private static func secretField(hasData: Bool) -> String { hasData ? "secret" : "no-secret" }

    /// `secret` nil: the item has no data. `primaryKey`: `primaryKeyBytes(item)`, when the caller
    /// made it already.
    func seal(_ item: Item, rowID: Int64, secret: Bytes?, keys: ClassKeys, primaryKey: Bytes? = nil) throws -> SealedRow {
        let lockClass = keys.lockClass(for: item.protection)
        let space = KeySpace(lockClass)
        guard let metadataKey = keys.metadataKey(lockClass), let indexKey = keys.indexKey(space) else { throw KeychainError.locked() }
        // nil in a custodian's keeping: the custodian wraps the item key.
        let wrappingKey = keys.wrappingKey(lockClass)
        guard wrappingKey != nil || custodian != nil else { throw KeychainError.locked() }
        let cls = item.itemClass
        let serviceName = AttributeSchema.serviceKey(for: cls)
        // The item key and the three nonces in one draw from the kernel's generator, not four.
        var random = try Crypto.random(Crypto.keyLength + 3 * Crypto.nonceLength)
        defer { random.wipe() }
        func nonce(_ n: Int) -> Bytes {
            let start = Crypto.keyLength + n * Crypto.nonceLength
            return Array(random[start..<start + Crypto.nonceLength])
        }
        let metadata = try Crypto.seal(
            encodeAttributes(item.attributes), key: metadataKey,
            aad: additionalData(rowID: rowID, itemClass: cls, lockClass: lockClass, field: "metadata", version: []),
            nonce: nonce(0))
        let version = Self.version(ofMetadata: metadata)
        var itemKey = Array(random[0..<Crypto.keyLength])
        defer { itemKey.wipe() }
        var body = ByteWriter(capacity: 2 * (Crypto.nonceLength + Crypto.tagLength + 4) + Crypto.keyLength + (secret?.count ?? 0))
        if let wrappingKey {
            body.blob(
                try Crypto.seal(
                    itemKey, key: wrappingKey,
                    aad: additionalData(rowID: rowID, itemClass: cls, lockClass: lockClass, field: "item-key", version: version),
                    nonce: nonce(1)))
        } else {
            let request = ItemKeyRequest(
                keychain: keybag.uuid, rowID: rowID, itemClass: cls, lockClass: lockClass, metadata: metadata, wrappedKey: [])
            body.blob(try custodian!.wrap(itemKey, for: request))
        }
        body.blob(
            try Crypto.seal(
                secret ?? [], key: itemKey,
                aad: additionalData(
                    rowID: rowID, itemClass: cls, lockClass: lockClass,
                    field: Self.secretField(hasData: secret != nil), version: version),
                nonce: nonce(2)))
        return SealedRow(
            pk: indexKey.mac(primaryKey ?? Self.primaryKeyBytes(item)),
            account: Self.indexHash(indexKey, itemClass: cls, name: AttributeKey.account, value: item.effectiveValue(AttributeKey.account)),
            service: Self.indexHash(indexKey, itemClass: cls, name: serviceName, value: item.effectiveValue(serviceName)),
            metadata: metadata,
            secret: body.bytes)
    }

    package func openAttributes(_ row: Row, keys: ClassKeys) throws -> Item {
        var opened = try openRow(row, keys: keys, keepingItemKey: false)
        opened.wipe()
        if custodyKeeps(row.lockClass), opened.version != nil { try checkCustodyBinding(row) }
        return opened.item
    }

    /// A row's attributes, and its item key when the caller goes on to read the secret: a lookup
    /// then opens the metadata and the item key once, not once for each half.
    struct OpenedRow {
        var item: Item
        var itemKey: Bytes?
        let version: Bytes?
        /// The entry a custodian returned with the item key ("Always allow"), to write.
        var alwaysAllow: AccessList? = nil
        mutating func wipe() { itemKey?.wipe() }
    }

    /// In a custodian's keeping, only the metadata is opened here: the item key (or the binding's
    /// check) is the custodian's, asked for once the row is known to be wanted (`custodyItemKey`,
    /// `checkCustodyBinding`).
    func openRow(_ row: Row, keys: ClassKeys, keepingItemKey: Bool) throws -> OpenedRow {
        guard let key = keys.metadataKey(row.lockClass) else { throw KeychainError.locked() }
        var (plain, version) = try openMetadata(row, key: key)
        defer { plain.wipe() }
        // Format 2: the item key must open under this metadata's digest, so metadata rolled back
        // alone (under a newer secret) is refused by attribute-only reads too.
        var itemKey: Bytes?
        if version != nil || keepingItemKey, !custodyKeeps(row.lockClass) {
            itemKey = try openItemKey(row, version: version, keys: keys)
            if !keepingItemKey { itemKey?.wipe(); itemKey = nil }
        }
        var item = Item(itemClass: row.itemClass, attributes: try decodeAttributes(plain))
        item.rowID = row.rowID
        // The stored protection must agree with the key that opened the row.
        guard keys.lockClass(for: item.protection) == row.lockClass else {
            itemKey?.wipe()
            throw KeychainError.decode("item protection does not match its row")
        }
        return OpenedRow(item: item, itemKey: itemKey, version: version)
    }

    /// The row's wrapped item key, as a custodian is shown it.
    func wrappedKey(of row: Row) throws -> Bytes { try sealedParts(row).wrappedKey }

    private func sealedParts(_ row: Row) throws -> (wrappedKey: Bytes, body: Bytes) {
        var r = ByteReader(row.secret)
        let wrapped = try r.blob(), body = try r.blob()
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in secret") }
        return (wrapped, body)
    }

    private func openItemKey(_ row: Row, version: Bytes?, keys: ClassKeys, interaction: CustodyInteraction = .allowed) throws -> Bytes {
        guard let wrappingKey = keys.wrappingKey(row.lockClass) else {
            guard custodian != nil, keys.has(row.lockClass) else { throw KeychainError.locked() }
            return try custodyItemKey(row, interaction: interaction).key
        }
        return try Crypto.open(
            try sealedParts(row).wrappedKey, key: wrappingKey,
            aad: additionalData(
                rowID: row.rowID, itemClass: row.itemClass, lockClass: row.lockClass,
                field: "item-key", version: version))
    }

    /// The item's data, or nil for an item that has none. `interaction`: whether a custodian may
    /// have the person asked (in a custodian's keeping).
    package func openSecret(_ row: Row, keys: ClassKeys, interaction: CustodyInteraction = .allowed) throws -> Bytes? {
        guard let metadataKey = keys.metadataKey(row.lockClass) else { throw KeychainError.locked() }
        // The metadata is opened (not only digested) so that its format, which an attacker cannot
        // change without the key, decides the secret's: an old format-1 secret under format-2
        // metadata does not open.
        var (plain, version) = try openMetadata(row, key: metadataKey)
        plain.wipe()
        var itemKey = try openItemKey(row, version: version, keys: keys, interaction: interaction)
        defer { itemKey.wipe() }
        return try openBody(row, itemKey: itemKey, version: version)
    }

    /// The item's data under an item key a custodian gave for this row.
    func openSecret(_ row: Row, keys: ClassKeys, itemKey: Bytes) throws -> Bytes? {
        guard let metadataKey = keys.metadataKey(row.lockClass) else { throw KeychainError.locked() }
        var (plain, version) = try openMetadata(row, key: metadataKey)
        plain.wipe()
        return try openBody(row, itemKey: itemKey, version: version)
    }

    /// The item, and with `secret` its data: one opening of the row's metadata and item key for
    /// both (as `find` does), the data opened only after `check` passed on the attributes; a check
    /// that throws opens nothing more.
    package func openItem(_ row: Row, keys: ClassKeys, secret: Bool, check: (Item) throws -> Void) throws -> (item: Item, secret: Bytes?) {
        var opened = try openRow(row, keys: keys, keepingItemKey: secret)
        defer { opened.wipe() }
        try check(opened.item)
        if custodyKeeps(row.lockClass) { try takeCustody(row, &opened, secret: secret, interaction: .allowed) }
        guard secret, let itemKey = opened.itemKey else { return (opened.item, nil) }
        let stored = try openBody(row, itemKey: itemKey, version: opened.version)
        if let list = opened.alwaysAllow { try recordAlwaysAllow(list, item: opened.item, row: row, stored: stored) }
        return (opened.item, stored)
    }

    /// In a custodian's keeping, once a row opened by `openRow` is wanted: its item key from the
    /// custodian (`secret`), else format 2's binding checked there.
    func takeCustody(_ row: Row, _ opened: inout OpenedRow, secret: Bool, interaction: CustodyInteraction) throws {
        if secret {
            let unwrapped = try custodyItemKey(row, interaction: interaction)
            opened.itemKey = unwrapped.key
            opened.alwaysAllow = unwrapped.alwaysAllow
        } else if opened.version != nil {
            try checkCustodyBinding(row)
        }
    }

    /// The secret under an item key already opened (`openRow`).
    func openBody(_ row: Row, itemKey: Bytes, version: Bytes?) throws -> Bytes? {
        let body = try sealedParts(row).body
        func open(hasData: Bool) throws -> Bytes {
            try Crypto.open(
                body, key: itemKey,
                aad: additionalData(
                    rowID: row.rowID, itemClass: row.itemClass, lockClass: row.lockClass,
                    field: Self.secretField(hasData: hasData), version: version))
        }
        do {
            return try open(hasData: true)
        } catch  where body.count == Crypto.nonceLength + Crypto.tagLength {
            // An empty plaintext: empty data, or no data at all.
            _ = try open(hasData: false)
            return nil
        }
    }
}

extension ItemKeyRequest {
    /// The additional data of the row's metadata in format 2, as the engine seals it: what a
    /// custodian opens the metadata (and its access list) under.
    package var metadataAdditionalData: Bytes { additionalData(field: "metadata", format: 2) }

    /// The additional data of the row's wrapped item key (format 2: bound to `metadata`).
    package var itemKeyAdditionalData: Bytes { additionalData(field: "item-key", format: 2) }

    /// The additional data of the row's `field` ("metadata", "item-key") in row format 1 or 2. A
    /// row whose metadata does not open under format 2 is a format 1 row (written before the
    /// binding, its list not bound to its secret), whose item key opens under format 1.
    package func additionalData(field: String, format: Int) -> Bytes {
        let version: Bytes? = format < 2 ? nil : field == "metadata" ? [] : KeychainStore.version(ofMetadata: metadata)
        return KeychainStore.additionalData(
            keychain: keychain, rowID: rowID, itemClass: itemClass, lockClass: lockClass, field: field, version: version)
    }
}
