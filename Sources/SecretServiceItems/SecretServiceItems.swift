import KeychainCore

/// A keychain item as the Secret Service shows it.
package struct SecretItem: Sendable {
    /// The item's row: its identity in this keychain, never reused.
    package var row: Int64
    package var itemClass: ItemClass
    package var label: String
    package var attributes: [String: String]
    package var contentType: String
    package var created: UInt64
    package var modified: UInt64
    /// When the item was made, to the fraction of a second `created` rounds away: what tells an
    /// item made in the same second as a recorded moment from one made before it.
    package var creationDate: Double
    package var secret: Bytes?
    /// The sandboxed app that created the item through the service (nil: an unconfined program or
    /// another front end).
    package var owner: String?

    /// Whether a search of `owner` for `query` finds this item: every pair exactly, and the item
    /// made by that owner (nil: by no sandboxed app, so that an app's items never answer
    /// another program's searches in place of its own).
    func matches(_ query: [String: String], owner: String?) -> Bool {
        self.owner == owner && query.allSatisfy { attributes[$0.key] == $0.value }
    }
}

/// What a Secret Service search finds: items it could read, and rows of locked items that the
/// attribute index says match (their attributes are encrypted under the locked class key).
package struct SecretSearchResult: Sendable {
    package var unlocked: [SecretItem] = []
    package var locked: [Int64] = []

    /// Every row found, locked or not, oldest first.
    package var rows: [Int64] { (unlocked.map(\.row) + locked).sorted() }
}

/// The Secret Service's items in the engine: generic and internet passwords (SecretAttributes says
/// which), with every attribute also indexed by a keyed hash so that searches on attributes Apple
/// does not have stay indexed, and so that a locked keychain can still say which rows match.
///
/// The index is a table of (HMAC(index key, name, value), row): as opaque as the other index
/// columns (without the key, nothing can be learned from a hash). It is keyed with the protected
/// space's index key, which AfterFirstUnlock keeps: a WhenUnlocked-locked keychain can still answer
/// "these locked items match", as the Secret Service's SearchItems must. A trigger removes a row's
/// hashes when any front end deletes the row. Items that other front ends add have no hashes; they
/// are found through the service/account columns while unlocked.
extension KeychainStore {

    /// The default content type of a secret, as libsecret sends it.
    package static let defaultContentType = "text/plain"

    /// The latest date the service shows (the last second of year 9999): a stored date beyond it,
    /// or one that is not finite (a crafted backup can carry either), is shown as this.
    static let latestDate = 253_402_300_799.0

    /// `query` narrowed to the items of `owner`, as the attribute index sees it.
    static func scoped(_ query: [String: String], owner: String?) -> [String: String] {
        FreeFormAttributes.scoped(query, owner: owner)
    }

    // MARK: Reading

    /// The rows of the items a search of `owner` can find, locked or not, oldest first: with an
    /// owner, that app's (found through the index, so locked ones too); without, every item no app
    /// owns.
    package func secretItemRows(owner: String? = nil) throws -> [Int64] {
        if owner != nil {
            let found = try searchSecretItemRows([:], owner: owner)
            return (found.unlocked + found.locked).sorted()
        }
        return try withLock {
            var sql = "SELECT rowid FROM items WHERE class IN (?, ?)"
            var values: [SQLiteValue] = [.int(ItemClass.genericPassword.code), .int(ItemClass.internetPassword.code)]
            if let key = try currentKeys().indexKey(.protected), try hasAttributeIndex() {
                sql += " AND rowid NOT IN (SELECT item FROM secret_attributes WHERE hash = ?)"
                let (name, value) = FreeFormAttributes.ownedIndexPair.first!
                values.append(.blob(Self.attributeHash(key, name: name, value: value)))
            }
            let stmt = try db.statement(sql + " ORDER BY rowid")
            stmt.bind(values)
            defer { stmt.reset() }
            var rows: [Int64] = []
            while try stmt.step() { rows.append(stmt.int(0)) }
            return rows
        }
    }

    /// Whether `row` is a Secret Service item of this keychain (locked or not).
    package func hasSecretItem(_ row: Int64) throws -> Bool {
        try withLock { try loadRow(row) != nil }
    }

    /// One item; errSecInteractionNotAllowed when its class key is locked, errSecItemNotFound when
    /// there is no such item, or, with an owner, when the item is not that app's.
    package func secretItem(_ row: Int64, includeSecret: Bool = false, owner: String? = nil) throws -> SecretItem {
        try secretItem(row, includeSecret: includeSecret, owner: owner, view: true)
    }

    /// One item's secret and its content type, as GetSecret(s) answer: the item as `secretItem`
    /// with `includeSecret` opens it, the same checks first, without the attribute view that
    /// answer does not carry.
    package func secret(_ row: Int64, owner: String? = nil) throws -> (secret: Bytes, contentType: String) {
        let item = try secretItem(row, includeSecret: true, owner: owner, view: false)
        return (item.secret ?? [], item.contentType)
    }

    private func secretItem(_ row: Int64, includeSecret: Bool, owner: String?, view: Bool) throws -> SecretItem {
        // The keys, the keybag they are checked against and the row come from one read snapshot
        // (one WAL read lock instead of one per statement).
        try withLock {
            guard includeSecret else {
                return try readSnapshot { keys in
                    guard let stored = try loadRow(row) else { throw KeychainError(.itemNotFound) }
                    return try secretItem(stored, row: row, keys: keys, includeSecret: false, owner: owner, view: view)
                }
            }
            // The secret is opened after the snapshot, as `find` opens it: an "Always allow" the
            // broker answered is written to the item's list then, which no read snapshot allows.
            let (stored, keys) = try readSnapshot { keys in (try loadRow(row), keys) }
            guard let stored else { throw KeychainError(.itemNotFound) }
            return try secretItem(stored, row: row, keys: keys, includeSecret: true, owner: owner, view: view)
        }
    }

    private func secretItem(_ stored: Row, row: Int64, keys: ClassKeys, includeSecret: Bool, owner: String?, view: Bool) throws -> SecretItem {
        guard keys.has(stored.lockClass) else {
            // Whether a locked item is the app's comes from the index; another app's locked item
            // does not exist for it.
            if owner != nil, try !indexHolds(Self.scoped([:], owner: owner), row: row, keys: keys) {
                throw KeychainError(.itemNotFound)
            }
            throw KeychainError.locked()
        }
        return try secretItem(stored, keys: keys, includeSecret: includeSecret, owner: owner, view: view)
    }

    /// Items whose attributes include every given pair, exactly (no pairs: every item); with an
    /// owner, only the items that app created.
    package func searchSecretItems(_ query: [String: String], owner: String? = nil) throws -> SecretSearchResult {
        let (unlocked, locked) = try search(query, owner: owner) { row, keys in
            let item = try secretItem(row, keys: keys, includeSecret: false)
            return item.matches(query, owner: owner) ? item : nil
        }
        return SecretSearchResult(unlocked: unlocked, locked: locked)
    }

    /// The rows `searchSecretItems` finds, unlocked and locked, without making the items the
    /// service would show: what SearchItems answers (paths only), so the attributes are compared
    /// one by one instead of building each item's view.
    package func searchSecretItemRows(_ query: [String: String], owner: String? = nil) throws -> (unlocked: [Int64], locked: [Int64]) {
        try search(query, owner: owner) { row, keys in
            let (item, _) = try openItem(row, keys: keys, secret: false) { _ in }
            let matches = item[AttributeKey.owner]?.stringValue == owner && SecretAttributes.viewMatches(query, item)
            return matches ? row.rowID : nil
        }
    }

    /// Each candidate row of an unlocked class given to `unlocked` (nil: it does not match), and
    /// the locked rows the attribute index says match.
    private func search<Found>(
        _ query: [String: String], owner: String?, unlocked: (Row, ClassKeys) throws -> Found?
    ) throws -> (unlocked: [Found], locked: [Int64]) {
        // One read snapshot for the keys, the candidates and the index, as `find` does.
        try withLock {
            try readSnapshot { keys in
                let scoped = Self.scoped(query, owner: owner)
                var found: [Found] = [], locked: [Int64] = []
                for row in try secretCandidates(scoped, keys: keys) {
                    if keys.has(row.lockClass) {
                        if let match = try unlocked(row, keys) { found.append(match) }
                    } else if try indexHolds(scoped, row: row.rowID, keys: keys),
                        try owner != nil || !indexHolds(FreeFormAttributes.ownedIndexPair, row: row.rowID, keys: keys)
                    {
                        locked.append(row.rowID)
                    }
                }
                return (found, locked)
            }
        }
    }

    /// Whether every item of this keychain is one the Secret Service manages: a password that
    /// needs nobody's presence, readable now. A keychain that also holds certificates, keys,
    /// identities, protected or locked items is not the service's to delete.
    package func holdsOnlySecretServiceItems() throws -> Bool {
        try withLock {
            let keys = try currentKeys()
            let stmt = try db.statement("SELECT rowid, class FROM items ORDER BY rowid")
            var rows: [Int64] = []
            while try stmt.step() {
                let itemClass = ItemClass(code: stmt.int(1))
                guard itemClass == .genericPassword || itemClass == .internetPassword else {
                    stmt.reset()
                    return false
                }
                rows.append(stmt.int(0))
            }
            stmt.reset()
            for rowID in rows {
                guard let row = try loadRow(rowID), keys.has(row.lockClass),
                    !AccessConditions(of: try openAttributes(row, keys: keys)).needsAPerson
                else { return false }
            }
            return true
        }
    }

    // MARK: Writing

    /// Whether `old` is protected and synced as the new item `new` would be, so that giving it
    /// `new`'s secret in place stores that secret as an insert would have. Its access group may
    /// differ: the owner is compared apart, and a look-alike's group of its own is what an insert
    /// colliding with the same items would get.
    static func keptAlike(_ old: Item, _ new: Item) -> Bool {
        old.protection == new.protection && old.attributes[AttributeKey.accessControl] == nil
            && new.attributes[AttributeKey.accessControl] == nil
            && old.effectiveValue(AttributeKey.synchronizable) == new.effectiveValue(AttributeKey.synchronizable)
    }

    /// Stores a new item. With `replace`, the item with the same attributes (the same set: not one
    /// that merely includes them, which for an empty set would be every item) takes the new label,
    /// secret and content type in place, as gnome-keyring's does: it keeps its row (so its object
    /// path) and its creation date; other items with that same set go. Where it is protected or
    /// synced otherwise than the new item would be, it goes too and the new item is added, so a
    /// replace never stores a secret more weakly, or syncs it, where a new item would not. An
    /// internet password that Apple's rules call the same one (the same user, server, protocol,
    /// port and path) goes too: that is how git's libsecret helper and git-credential-keychain
    /// update one credential (where it is another row than the item with the same set, both go and
    /// the new item is added in their place). Without `replace`, an item that would collide with
    /// an existing one is kept apart in its own access group, since the Secret Service allows
    /// look-alike items.
    ///
    /// `replaced`: the rows that went; `isNew`: false when `item` is an item changed in place.
    ///
    /// With an owner (a sandboxed app), the item is that app's: a generic password in the app's
    /// access group, whatever its attributes say, so that it never answers git's, docker's or
    /// another program's lookups, and `replace` touches only the app's own items.
    ///
    /// `created` and `modified` (seconds since 1970) keep the dates an item had elsewhere (an
    /// import from gnome-keyring); without them, or for 0, the item is dated now.
    /// `syncsNewItems` is the keychain's sync default as a batch read it once (`withSyncDefault`);
    /// nil reads it here.
    /// `access`: the list of programs a new item trusts (the client that stores it, as the broker
    /// names it); nil leaves it without one, as items made before lists. An item replaced in place
    /// is an update: it keeps its list where the list names the client, else it gets the
    /// client's (the engine's rule, `AccessList.creating`).
    package func addSecretItem(
        label: String, attributes: [String: String], secret: Bytes, contentType: String,
        replace: Bool, owner: String? = nil,
        created: Double? = nil, modified: Double? = nil, syncsNewItems: Bool? = nil, access: AccessList? = nil
    ) throws -> (item: SecretItem, replaced: [Int64], isNew: Bool) {
        let itemClass = owner == nil ? SecretAttributes.itemClass(for: attributes) : .genericPassword
        var item = Item(itemClass: itemClass, attributes: SecretAttributes.appleAttributes(attributes, itemClass: itemClass), secret: secret)
        item[AttributeKey.freeFormAttributes] = .data(FreeFormAttributes.encode(attributes))
        item[AttributeKey.contentType] = .string(contentType)
        item["labl"] = .string(label)
        if let access { item[AccessList.attribute] = .string(access.text) }
        if let owner {
            item[AttributeKey.owner] = .string(owner)
            item["agrp"] = .string(owner)
        } else {
            // `security sync default on`: unconfined programs' new items sync (a sandboxed app's
            // stay on this machine: the app may not be installed on the others).
            item = withSyncDefault(item, known: syncsNewItems)
        }
        for (key, date) in [("cdat", created), ("mdat", modified)] {
            if let date, date > 0, date.isFinite { item[key] = .date(min(date, Self.latestDate)) }
        }
        var (prepared, plain) = try Self.prepareNew(item, keepingDates: true)
        defer { plain?.wipe() }
        return try withLock {
            let keys = try currentKeys()
            guard keys.canWrite(.whenUnlocked), let indexKey = keys.indexKey(.protected) else { throw KeychainError.locked() }
            return try db.transaction {
                var replaced: [Int64] = []
                if replace {
                    var same: [(row: Row, item: Item)] = []
                    for row in try secretCandidates(Self.scoped(attributes, owner: owner), keys: keys) where keys.has(row.lockClass) {
                        let (old, _) = try openItem(row, keys: keys, secret: false) { _ in }
                        if old[AttributeKey.owner]?.stringValue == owner && SecretAttributes.view(of: old) == attributes {
                            try refuseNeedingAPerson(row, keys: keys)
                            same.append((row, old))
                        }
                    }
                    // Not in place where another row is the new internet password by Apple's
                    // rules (the item found is a look-alike in an access group of its own, or
                    // differs in whether it syncs): that row must go too, as the insert does.
                    // Nor where the item found is kept otherwise than a new one would be: the new
                    // secret would inherit a weaker class, or sync where new items do not.
                    if let (kept, keptItem) = same.min(by: { $0.row.rowID < $1.row.rowID }), Self.keptAlike(keptItem, prepared),
                        try itemClass != .internetPassword || Set(rowsWithPrimaryKey(of: prepared, keys: keys)).isSubset(of: [kept.rowID])
                    {
                        replaced = same.map(\.row.rowID).filter { $0 != kept.rowID }
                        try deleteRows(replaced)
                        var query = Query(itemClass: kept.itemClass)
                        query.rows = [kept.rowID]
                        query.synchronizable = .any
                        try update(
                            query, attributes: ["labl": .string(label), AttributeKey.contentType: .string(contentType)], secret: secret,
                            presence: PresenceOptions(interaction: .fail))
                        try indexAttributes(attributes, row: kept.rowID, key: indexKey, owner: owner)
                        guard let row = try loadRow(kept.rowID) else { throw KeychainError(.itemNotFound) }
                        return (try secretItem(row, keys: keys, includeSecret: false), replaced, false)
                    }
                    replaced = same.map(\.row.rowID)
                    try deleteRows(replaced)
                }
                let stored: Item
                do {
                    stored = try insert(prepared, secret: plain, keys: keys)
                } catch let error as KeychainError where error.code == .duplicateItem && !db.lostItsTransaction {
                    // (A failure that made SQLite roll back the batch is the caller's answer as it
                    // is: nothing more of the batch can be stored.)
                    // An internet password's key (user, server, protocol, port, path) is the
                    // credential itself: replace takes its place whoever stored it. A generic
                    // password's (service, account) is not: items with other attributes and the
                    // same two, or neither, are other items, and stay. So only an internet
                    // password's are looked up: a generic password with neither collides with
                    // every other such item, and reading all their rows was O(n) a store.
                    var ours = replace && itemClass == .internetPassword
                    let colliding = ours ? try rowsWithPrimaryKey(of: prepared, keys: keys) : []
                    for rowID in colliding {
                        guard let row = try loadRow(rowID) else { continue }
                        if !keys.has(row.lockClass) { throw KeychainError.locked() }
                        try refuseNeedingAPerson(row, keys: keys)
                        if try openAttributes(row, keys: keys)[AttributeKey.owner]?.stringValue != owner { ours = false }
                    }
                    if ours {
                        try deleteRows(colliding)
                        replaced += colliding
                    } else {
                        prepared["agrp"] = .string((owner ?? "org.freedesktop.secrets") + "." + (try Crypto.random(8)).hex)
                    }
                    stored = try insert(prepared, secret: plain, keys: keys)
                }
                try indexAttributes(attributes, row: stored.rowID, key: indexKey, owner: owner)
                guard let row = try loadRow(stored.rowID) else { throw KeychainError(.itemNotFound) }
                return (try secretItem(row, keys: keys, includeSecret: false), replaced, true)
            }
        }
    }

    /// Changes an item's label, attributes, secret or content type (nil: unchanged). The item keeps
    /// its class and its row, so its object path stays.
    @discardableResult
    package func updateSecretItem(
        _ rowID: Int64, label: String? = nil, attributes: [String: String]? = nil,
        secret: Bytes? = nil, contentType: String? = nil, owner: String? = nil
    ) throws -> SecretItem {
        let current = try secretItem(rowID, owner: owner)
        // Refused before anything is written, the attribute index included.
        try withLock { try checkChangeable(rowID, keys: try currentKeys()) }
        var changes: [String: AttributeValue] = [:]
        if let label { changes["labl"] = .string(label) }
        if let contentType { changes[AttributeKey.contentType] = .string(contentType) }
        if let attributes {
            let mapped = SecretAttributes.appleAttributes(attributes, itemClass: current.itemClass)
            let previous = SecretAttributes.mappedNames(current.itemClass, stored: current.attributes)
            for (_, apple) in previous + SecretAttributes.mappedNames(current.itemClass, stored: attributes) {
                changes[apple] = mapped[apple] ?? AttributeSchema.defaultValue(apple, kind: AttributeSchema.kind(apple, for: current.itemClass))
            }
            changes[AttributeKey.freeFormAttributes] = .data(FreeFormAttributes.encode(attributes))
            // The new hashes go in before the item changes and the old ones out after: a crash in
            // between leaves extra hashes (a search checks the attributes anyway), never missing ones.
            try withIndexKey { key in
                try db.transaction { try indexAttributes(attributes, row: rowID, key: key, owner: current.owner) }
            }
        }
        var query = Query(itemClass: current.itemClass)
        query.rows = [rowID]
        query.synchronizable = .any
        // The service could only have polkit authorize itself, not the client asking it.
        try update(query, attributes: changes, secret: secret, presence: PresenceOptions(interaction: .fail))
        if let attributes {
            try withIndexKey { key in
                try db.transaction {
                    try unindexAttributes(row: rowID)
                    try indexAttributes(attributes, row: rowID, key: key, owner: current.owner)
                }
            }
        }
        return try secretItem(rowID)
    }

    /// Deletes one item; errSecInteractionNotAllowed while it is locked; with an owner, only an
    /// item of that app.
    package func deleteSecretItem(_ rowID: Int64, owner: String? = nil) throws {
        if owner != nil { _ = try secretItem(rowID, owner: owner) }
        try withLock {
            try checkChangeable(rowID, keys: try currentKeys())
            try db.transaction { try deleteRows([rowID]) }
        }
    }

    // MARK: The collection's label

    /// The label a Secret Service client gave this keychain (nil: none; the service then shows the
    /// keychain's name). Kept beside the keybag, in the clear like the file's name.
    package func collectionLabel() throws -> String? {
        try withLock {
            let stmt = try db.statement("SELECT value FROM keychain WHERE name = 'secret-service.label'")
            defer { stmt.reset() }
            guard try stmt.step() else { return nil }
            return String(decoding: stmt.blob(0), as: UTF8.self)
        }
    }

    package func setCollectionLabel(_ label: String) throws {
        try KeychainStore.checkAttributesSize(["labl": .string(label)])
        try withLock {
            try db.transaction {
                try db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES ('secret-service.label', ?)")
                    .run([.blob(Array(label.utf8))])
            }
        }
    }

    // MARK: Internals (under the store's lock)

    private func withIndexKey(_ body: (Crypto.HMACKey) throws -> Void) throws {
        try withLock {
            guard let key = try currentKeys().indexKey(.protected) else { throw KeychainError.locked() }
            try body(key)
        }
    }

    private func loadRow(_ rowID: Int64) throws -> Row? {
        let stmt = try db.statement("SELECT class, lockclass, metadata, secret FROM items WHERE rowid = ? AND class IN (?, ?)")
        stmt.bind([.int(rowID), .int(ItemClass.genericPassword.code), .int(ItemClass.internetPassword.code)])
        defer { stmt.reset() }
        guard try stmt.step() else { return nil }
        guard let itemClass = ItemClass(code: stmt.int(0)), let lockClass = LockClass(rawValue: stmt.int(1)) else {
            throw KeychainError.decode("row \(rowID) has an invalid class")
        }
        return Row(
            rowID: rowID, itemClass: itemClass, lockClass: lockClass, space: KeySpace(lockClass),
            metadata: stmt.blob(2), secret: stmt.blob(3))
    }

    /// Items whose access control needs a person (made with SecItem or `security --require`) are
    /// not read, changed or deleted through the Secret Service: polkit would be asked to authorize
    /// the service, which cannot prove which client is asking.
    /// What the Secret Service may change or delete: an item that exists, is unlocked and needs
    /// nobody's presence.
    private func checkChangeable(_ rowID: Int64, keys: ClassKeys) throws {
        guard let row = try loadRow(rowID) else { throw KeychainError(.itemNotFound) }
        guard keys.has(row.lockClass) else { throw KeychainError.locked() }
        try refuseNeedingAPerson(row, keys: keys)
    }

    private func refuseNeedingAPerson(_ row: Row, keys: ClassKeys) throws {
        if AccessConditions(of: try openAttributes(row, keys: keys)).needsAPerson {
            throw KeychainError.presence(.interactionNotAllowed, "the item needs the user's presence, which the Secret Service cannot ask for")
        }
    }

    /// The item as the service shows it; errSecItemNotFound when an owner is given and the item is
    /// not that app's (checked before anything else is said about it).
    private func secretItem(_ row: Row, keys: ClassKeys, includeSecret: Bool, owner: String? = nil, view: Bool = true) throws -> SecretItem {
        // The metadata and item key are opened once for the attributes and the secret; the secret
        // only after the checks below passed.
        let (item, secret) = try openItem(row, keys: keys, secret: includeSecret) { item in
            if owner != nil && item[AttributeKey.owner]?.stringValue != owner { throw KeychainError(.itemNotFound) }
            if includeSecret && AccessConditions(of: item).needsAPerson {
                throw KeychainError.presence(.interactionNotAllowed, "the item needs the user's presence, which the Secret Service cannot ask for")
            }
        }
        func date(_ key: String) -> Double {
            guard case .date(let d)? = item[key], d > 0 else { return 0 }
            return d.isFinite ? min(d, Self.latestDate) : Self.latestDate
        }
        func seconds(_ key: String) -> UInt64 { UInt64(date(key).rounded()) }
        return SecretItem(
            row: row.rowID, itemClass: row.itemClass, label: item["labl"]?.stringValue ?? "",
            attributes: view ? SecretAttributes.view(of: item) : [:],
            contentType: item[AttributeKey.contentType]?.stringValue ?? Self.defaultContentType,
            created: seconds("cdat"), modified: seconds("mdat"), creationDate: date("cdat"),
            secret: secret,
            owner: item[AttributeKey.owner]?.stringValue)
    }

    /// Rows that may match, oldest first, narrowed class by class: by the keyed service and
    /// account columns where the query gives the attributes the class maps to them, and by the
    /// attribute index for the pairs the class has no column for (only Secret Service items have
    /// those). A mapped pair is never looked up in the index: another front end may have changed
    /// the Apple attribute since the index took it. The caller checks every pair against the item;
    /// a locked row's match through the index uses the hashes of what the Secret Service last
    /// stored, mapped attributes included.
    ///
    /// The columns are read when the query gives them, unless more than a few rows share them
    /// and the index has pairs to read instead (an application storing many items under one
    /// service, each with an id of its own); the index alone when the query gives neither. Read
    /// through the index only, the pairs that every item of an application or a libsecret schema
    /// shares (`xdg:schema`, `application`) made each lookup, each replace and each item of an
    /// import read every item of that schema.
    private func secretCandidates(_ query: [String: String], keys: ClassKeys) throws -> [Row] {
        var rows: [Row] = []
        var throughIndex: [[String: String]: [ItemClass]] = [:]
        // Both classes, whatever the query names: a generic password may hold network names as
        // pairs of its own (an app's items, or one given them by a later change: an item keeps its
        // class), and an internet password any other pair. Each is narrowed by its own means.
        for itemClass in [ItemClass.genericPassword, .internetPassword] {
            let unmapped = query.filter { !SecretAttributes.isMapped($0.key, $0.value, for: itemClass) }
            let service = itemClass == .internetPassword ? query["server"] : query["service"]
            let account = itemClass == .internetPassword ? query["user"] : query["account"]
            // Each space's query is made once (its keyed hashes), for the count and for the rows.
            var columns = try columnQueries(itemClass, service: service, account: account, keys: keys)
            var throughColumns = false
            if itemClass == .genericPassword, account == nil, let username = query["username"] {
                // `username` is a generic password's account only when the item has no `account`
                // (found by the column, which follows later changes); an item with both keeps it
                // as a pair of its own, which only the index finds. The service's column holds
                // both kinds; past a few rows, the account's column and the index instead.
                if try service == nil || holdMany(columns) {
                    throughIndex[unmapped.merging(["username": username]) { $1 }, default: []].append(itemClass)
                    columns = try columnQueries(itemClass, service: service, account: username, keys: keys)
                }
                throughColumns = true
            } else if service != nil || account != nil {
                throughColumns = try unmapped.isEmpty || !holdMany(columns)
            } else {
                throughColumns = unmapped.isEmpty
            }
            if !throughColumns {
                throughIndex[unmapped, default: []].append(itemClass)
                continue
            }
            var classRows: [Row] = []
            for column in columns {
                try collect(
                    Self.candidateSQL(byService: column.byService, byAccount: column.byAccount), column.values, itemClass, column.space,
                    into: &classRows)
            }
            rows += try classRows.filter { try unmapped.isEmpty || indexHolds(unmapped, row: $0.rowID, keys: keys) }
        }
        var seen = Set(rows.map(\.rowID))
        for (unmapped, classes) in throughIndex {
            for rowID in try (rowsIndexed(with: unmapped, keys: keys) ?? []).sorted() where !seen.contains(rowID) {
                if let row = try loadRow(rowID), classes.contains(row.itemClass) {
                    rows.append(row)
                    seen.insert(rowID)
                }
            }
        }
        return rows.sorted { $0.rowID < $1.rowID }
    }

    /// A candidate query of one key space: its values, and whether it narrows by each column.
    private typealias ColumnQuery = (space: KeySpace, values: [SQLiteValue], byService: Bool, byAccount: Bool)

    /// The candidate query of each key space `itemClass` is searched in: the space, the class,
    /// and the keyed hashes of the service and account given (none where the space's key is
    /// locked: its rows are all read).
    private func columnQueries(
        _ itemClass: ItemClass, service: String?, account: String?, keys: ClassKeys
    ) throws -> [ColumnQuery] {
        try KeySpace.allCases.filter { try mustSearch($0, itemClass) }.map { space in
            var values: [SQLiteValue] = [.int(space.rawValue), .int(itemClass.code)]
            guard let indexKey = keys.indexKey(space) else { return (space, values, false, false) }
            if let service {
                let name = AttributeSchema.serviceKey(for: itemClass)
                values.append(.blob(Self.indexHash(indexKey, itemClass: itemClass, name: name, value: .string(service))))
            }
            if let account { values.append(.blob(Self.indexHash(indexKey, itemClass: itemClass, name: "acct", value: .string(account)))) }
            return (space, values, service != nil, account != nil)
        }
    }

    /// Whether more than `bound` rows match these column queries: then the attribute index, read
    /// from its narrowest pair, is the shorter way (an application storing many items under one
    /// service, each with a pair of its own). Counted only up to the bound.
    private func holdMany(_ columns: [ColumnQuery], bound: Int64 = 16) throws -> Bool {
        var total: Int64 = 0
        for column in columns {
            guard column.byService || column.byAccount else { return true }
            let stmt = try db.statement(
                "SELECT count(*) FROM (SELECT 1 FROM items WHERE space = ? AND class = ?"
                    + (column.byService ? " AND service = ?" : "") + (column.byAccount ? " AND account = ?" : "") + " LIMIT ?)")
            stmt.bind(column.values + [.int(bound + 1 - total)])
            defer { stmt.reset() }
            _ = try stmt.step()
            total += stmt.int(0)
            if total > bound { return true }
        }
        return false
    }

    /// Rows that Apple's uniqueness rules call the same item as `item`.
    private func rowsWithPrimaryKey(of item: Item, keys: ClassKeys) throws -> [Int64] {
        let stmt = try db.statement("SELECT rowid FROM items WHERE space = ? AND class = ? AND pk = ?")
        var rows: [Int64] = []
        for space in KeySpace.allCases {
            guard let indexKey = keys.indexKey(space) else { continue }
            stmt.bind([.int(space.rawValue), .int(item.itemClass.code), .blob(Self.primaryKeyHash(indexKey, item: item))])
            defer { stmt.reset() }
            while try stmt.step() { rows.append(stmt.int(0)) }
        }
        return rows
    }
}
