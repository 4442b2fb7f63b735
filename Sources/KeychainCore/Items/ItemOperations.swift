/// SecItemAdd, CopyMatching, Update and Delete, as the engine does them.
extension KeychainStore {
    /// Adds one item. Missing attributes get Apple's defaults (WhenUnlocked, not synchronizable);
    /// creation and modification dates are set here.
    /// An item whose access control needs a person is refused (errSecNotAvailable) when this
    /// machine cannot meet its conditions; one with an application password gets its secret sealed
    /// under it (from `presence`'s context, or asked for).
    @discardableResult
    package func add(_ item: Item, presence: PresenceOptions = PresenceOptions()) throws -> Item {
        let conditions = AccessConditions(of: item)
        guard conditions.needsAPerson else { return try add(item, keepingDates: false) }
        try conditions.checkAvailable(fingersEnrolled: presenceAuthorizer.fingersEnrolled)
        guard conditions.contains(.applicationPassword) else { return try add(item, keepingDates: false) }
        return try withPresence(presence) { gate in
            var (prepared, secret) = try Self.prepareNew(item, keepingDates: false)
            if let plain = secret {
                secret = try gate.storedForm(of: plain, conditions: conditions)
                prepared.attributes[AttributeKey.sha1] = .data(Crypto.sha1(secret!))
            }
            return try withLock {
                try db.transaction { try insert(prepared, secret: secret, keys: try currentKeys()) }
            }
        }
    }

    /// `keepingDates` is for restoring a backup, whose items keep the dates they had.
    package func add(_ item: Item, keepingDates: Bool) throws -> Item {
        let (prepared, secret) = try Self.prepareNew(item, keepingDates: keepingDates)
        return try withLock {
            try db.transaction {
                let keys = try currentKeys()
                let stored = try insert(prepared, secret: secret, keys: keys)
                try indexFreeFormAttributes(of: stored, keys: keys)
                return stored
            }
        }
    }

    /// Adds several items in one transaction: all of them or, on any error, none (an identity is
    /// a certificate and a private key that must not be stored apart).
    @discardableResult
    package func add(_ items: [Item]) throws -> [Item] {
        let prepared = try items.map { try Self.prepareNew($0, keepingDates: false) }
        return try withLock {
            try db.transaction {
                let keys = try currentKeys()
                return try prepared.map { try insert($0.0, secret: $0.1, keys: keys) }
            }
        }
    }

    /// Stores `item` in one transaction, as `security add-* -U` and the credential helpers' store
    /// do: where `query` (by default, the item `item` would collide with) finds items, the oldest
    /// takes `item`'s attributes and secret in place (keeping its creation date and persistent
    /// reference) and any others go; where it finds none, `item` is added. Other processes see the
    /// old item or the new one, never neither and never both.
    /// Old items that need a person are changed only once `presence` gives it (Skip is Fail
    /// here: an item left out would be stored twice).
    /// `keepingOld` names attributes an old item keeps as they are (or absent), which `item` gives
    /// only for when it is new: the access list `security add-* -U` writes only when asked to.
    package func addOrUpdate(
        _ item: Item, matching query: Query? = nil, keepingOld: Set<String> = [], presence: PresenceOptions = PresenceOptions()
    ) throws {
        let query = try Self.normalized(query ?? Query(identifying: item))
        guard query.itemClass == item.itemClass, item.itemClass != .identity else {
            throw KeychainError.param("addOrUpdate needs a query of the item's own class, and no identity")
        }
        let conditions = AccessConditions(of: item)
        let changes = try self.changes(item.attributes.filter { !keepingOld.contains($0.key) }, secret: item.secret, for: item.itemClass)
        var (prepared, plain) = try Self.prepareNew(item, keepingDates: false)
        defer { plain?.wipe() }
        try withPresence(presence) { gate in
            try withLock {
                try db.transaction {
                    let keys = try currentKeys()
                    var matches: [(Row, Item)] = []
                    do {
                        matches = try lockedAwareMatches(query, keys: keys)
                    } catch let error as KeychainError where error.code == .itemNotFound {}
                    for (_, old) in matches where try !gate.admits(old, changing: true) {
                        throw KeychainError(.interactionNotAllowed, "the old item needs the user's presence")
                    }
                    try proveApplicationPasswords(of: matches, gate: gate, keys: keys)
                    guard let first = matches.first else {
                        var secret = plain
                        if let given = plain, conditions.contains(.applicationPassword) {
                            secret = try gate.storedForm(of: given, conditions: conditions)
                            prepared.attributes[AttributeKey.sha1] = .data(Crypto.sha1(secret!))
                        }
                        _ = try insert(prepared, secret: secret, keys: keys)
                        return
                    }
                    try deleteRows(matches.dropFirst().map { $0.0.rowID })
                    try change([first], changes, secret: item.secret, gate: gate, keys: keys)
                }
            }
        }
    }

    /// Defaults, dates and the secret's hash for a new item. An item given no secret keeps none
    /// (a password added without kSecValueData); certificates and keys cannot be made without.
    package static func prepareNew(_ item: Item, keepingDates: Bool) throws -> (Item, Bytes?) {
        let hasData = item.secret != nil
        var (item, secret) = try DerivedAttributes.apply(to: normalized(item), secret: item.secret ?? [])
        let stamp = AttributeValue.date(SystemClock.now())
        if !keepingDates || item.attributes[AttributeKey.creationDate] == nil { item.attributes[AttributeKey.creationDate] = stamp }
        if !keepingDates || item.attributes[AttributeKey.modificationDate] == nil { item.attributes[AttributeKey.modificationDate] = stamp }
        item.attributes[AttributeKey.accessible] = .string(item.protection.rawValue)
        if item.attributes[AttributeKey.synchronizable] == nil { item.attributes[AttributeKey.synchronizable] = .bool(false) }
        try checkSynchronizable(item)
        item.secret = hasData ? secret : nil
        try checkSize(secret)
        item.attributes[AttributeKey.sha1] = .data(Crypto.sha1(secret))
        // The program that made the item is its list's first entry. An item restored from a
        // backup (`keepingDates`) keeps the list it had, or none (a legacy item stays legacy).
        if !keepingDates, item.attributes[AccessList.attribute] == nil { item.attributes[AccessList.attribute] = AccessList.creatorAttribute }
        return (item, item.secret)
    }

    /// Inserts inside the caller's transaction.
    package func insert(_ item: Item, secret: Bytes?, keys: ClassKeys) throws -> Item {
        let lockClass = keys.lockClass(for: item.protection)
        guard keys.canWrite(lockClass) else {
            throw KeychainError.locked("keychain is locked: cannot add a \(item.protection.rawValue) item")
        }
        let primaryKey = Self.primaryKeyBytes(item)
        try checkUnique(item, primaryKey: primaryKey, keys: keys, excluding: nil)
        let rowID = try nextRowID()
        let sealed = try seal(item, rowID: rowID, secret: secret, keys: keys, primaryKey: primaryKey)
        try db.statement(
            """
            INSERT INTO items(rowid, class, lockclass, space, pk, account, service, metadata, secret)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        ).run([
            .int(rowID), .int(item.itemClass.code), .int(lockClass.rawValue),
            .int(KeySpace(lockClass).rawValue), .blob(sealed.pk), .blob(sealed.account),
            .blob(sealed.service), .blob(sealed.metadata), .blob(sealed.secret)
        ])
        var stored = item
        stored.rowID = rowID
        return stored
    }

    /// The items that match, oldest first, at most `limit` (nil: all). Throws errSecItemNotFound
    /// when none match, and errSecInteractionNotAllowed when none match among the unlocked items
    /// but locked ones might.
    ///
    /// Reading the secret of an item whose access control needs a person first asks (polkit, its
    /// application password) as `presence` allows; Skip leaves such items out. Attributes alone
    /// never ask, as on Apple's systems.
    package func find(
        _ query: Query, limit: Int? = 1, includeSecret: Bool = false,
        presence: PresenceOptions = PresenceOptions()
    ) throws -> [Item] {
        let query = try Self.normalized(query)
        return try withPresence(presence) { gate in
            try withLock { try custodyRead { try findOnce(query, limit: limit, includeSecret: includeSecret, gate: gate) } }
        }
    }

    /// `find` under the store's lock: one run of the lookup.
    private func findOnce(_ query: Query, limit: Int?, includeSecret: Bool, gate: PresenceGate) throws -> [Item] {
        // The keys, the keybag they are checked against and the candidate rows come from
        // one read snapshot; the rows are opened after it ends.
        let (keys, rows, lockedSpace) = try readSnapshot { keys -> (ClassKeys, [Row], Bool) in
            let (rows, lockedSpace) = try candidates(query, keys: keys)
            return (keys, rows, lockedSpace)
        }
        var found: [Item] = []
        var skippedLocked = false
        var chain = CertificateChainSource(store: self, keys: keys)
        for row in rows {
            if let limit, found.count >= limit { break }
            guard keys.has(row.lockClass) else {
                skippedLocked = true
                continue
            }
            var opened = try openRow(row, keys: keys, keepingItemKey: includeSecret)
            defer { opened.wipe() }
            var item = opened.item
            guard query.matches(item) else { continue }
            if includeSecret, try !gate.admits(item) { continue }
            if let filter = query.certificateFilter, query.itemClass == .certificate {
                let der = try openSecret(row, keys: keys, interaction: gate.custodyInteraction) ?? []
                guard try filter.accepts(Certificate(der: der), chain: &chain) else { continue }
                if includeSecret { item.secret = der }
            } else {
                if custodyKeeps(row.lockClass), try !takeCustody(row, &opened, includeSecret: includeSecret, gate: gate) { continue }
                if includeSecret, let itemKey = opened.itemKey {
                    let stored = try openBody(row, itemKey: itemKey, version: opened.version)
                    if let list = opened.alwaysAllow { try recordAlwaysAllow(list, item: item, row: row, stored: stored) }
                    item.secret = try stored.map { try gate.readableForm(of: $0, conditions: AccessConditions(of: item)) }
                }
            }
            found.append(item)
        }
        if found.isEmpty {
            if skippedLocked || lockedSpace { throw KeychainError.locked() }
            throw KeychainError(.itemNotFound)
        }
        return found
    }

    /// `takeCustody` for a lookup: false when the item is to be left out (kSecUseAuthenticationUISkip
    /// and the custodian would have had to ask).
    private func takeCustody(_ row: Row, _ opened: inout OpenedRow, includeSecret: Bool, gate: PresenceGate) throws -> Bool {
        do {
            try takeCustody(row, &opened, secret: includeSecret, interaction: gate.custodyInteraction)
            return true
        } catch let error as KeychainError where error.code == .interactionNotAllowed && gate.skipsItemsNeedingAPerson {
            return false
        }
    }

    /// Changes every matching item; returns how many. Refuses (and changes nothing) when a
    /// matching candidate is locked or when a change would make two items equal.
    /// Items whose access control needs a person are changed only once it is given (`presence`).
    @discardableResult
    package func update(
        _ query: Query, attributes changes: [String: AttributeValue], secret: Bytes? = nil,
        presence: PresenceOptions = PresenceOptions()
    ) throws -> Int {
        let query = try Self.normalized(query)
        if query.itemClass == .identity {
            throw KeychainError.param("identities are updated through their certificate or key")
        }
        let changes = try self.changes(changes, secret: secret, for: query.itemClass)
        return try withPresence(presence) { gate in
            try withLock {
                try db.transaction {
                    let keys = try currentKeys()
                    let matches = try changeable(lockedAwareMatches(query, keys: keys), gate: gate, keys: keys)
                    if matches.isEmpty { throw KeychainError(.itemNotFound) }
                    try change(matches, changes, secret: secret, gate: gate, keys: keys)
                    return matches.count
                }
            }
        }
    }

    /// The attributes an update writes, checked and normalized (dates and the hash are the
    /// engine's), with the hash of new data. Conditions of a new access control must be ones this
    /// machine can meet.
    private func changes(_ given: [String: AttributeValue], secret: Bytes?, for itemClass: ItemClass) throws -> [String: AttributeValue] {
        try Self.checkAttributesSize(given)
        if itemClass == .certificate, let key = given.keys.first(where: DerivedAttributes.certificateReadOnly.contains) {
            throw KeychainError.param("\(key) is read-only: it comes from the certificate's data")
        }
        var changes = try given.reduce(into: [String: AttributeValue]()) { out, pair in
            guard ![AttributeKey.creationDate, AttributeKey.modificationDate, AttributeKey.sha1].contains(pair.key) else { return }
            out[pair.key] = try AttributeSchema.normalize(pair.key, pair.value, for: itemClass)
        }
        if let secret {
            try Self.checkSize(secret)
            changes[AttributeKey.sha1] = .data(Crypto.sha1(secret))
        }
        if let accc = changes[AttributeKey.accessControl] {
            try AccessConditions(of: Item(itemClass: itemClass, attributes: [AttributeKey.accessControl: accc]))
                .checkAvailable(fingersEnrolled: presenceAuthorizer.fingersEnrolled)
        }
        return changes
    }

    /// Writes `changes` (and `secret`, when given) into matched rows, inside the caller's
    /// transaction: the modification date moves, the secret is sealed or opened when an
    /// application password comes or goes, and a change that would make two items equal is refused.
    private func change(
        _ matches: [(Row, Item)], _ changes: [String: AttributeValue], secret: Bytes?,
        gate: PresenceGate, keys: ClassKeys
    ) throws {
        for (row, old) in matches {
            var item = old
            for (k, v) in changes { item.attributes[k] = v }
            item.attributes[AttributeKey.modificationDate] = .date(SystemClock.now())
            var plain = try secret ?? openSecretToChange(row, &item, keys: keys, gate: gate)
            defer { plain?.wipe() }
            let (before, after) = (AccessConditions(of: old), AccessConditions(of: item))
            if secret != nil, changes[AccessList.attribute] == nil { try keepListOnlyForItsOwn(row, &item) }
            if let secret {
                // New data for a certificate or key brings its own derived attributes.
                let derived: Bytes
                (item, derived) = try DerivedAttributes.apply(to: item, secret: secret)
                item.attributes[AttributeKey.sha1] = .data(Crypto.sha1(derived))
                plain = derived
                if after.contains(.applicationPassword) {
                    plain = try gate.storedForm(of: derived, conditions: after)
                    item.attributes[AttributeKey.sha1] = .data(Crypto.sha1(plain!))
                }
            } else if before.contains(.applicationPassword) != after.contains(.applicationPassword), let stored = plain {
                // Adding or removing the application password seals or opens the secret.
                plain =
                    before.contains(.applicationPassword)
                    ? try gate.readableForm(of: stored, conditions: before)
                    : try gate.storedForm(of: stored, conditions: after)
                item.attributes[AttributeKey.sha1] = .data(Crypto.sha1(plain!))
            }
            try Self.checkSynchronizable(item)
            let lockClass = keys.lockClass(for: item.protection)
            guard keys.canWrite(lockClass) else { throw KeychainError.locked() }
            try checkUnique(item, primaryKey: Self.primaryKeyBytes(item), keys: keys, excluding: row.rowID)
            let sealed = try seal(item, rowID: row.rowID, secret: plain, keys: keys)
            try rewrite(row.rowID, lockClass: lockClass, sealed)
        }
    }

    /// New data written over an item whose list does not trust the writer gets the writer's own
    /// list, as a new item would: otherwise a process of the user could plant an item that trusts
    /// it (`any`, or an interpreter) where a trusted program will store a secret (`security
    /// add-generic-password -U`, a helper's store), and read what arrives (the fourth-issue
    /// attacker's review). The custodian answers whether the writer is on the old list, asking
    /// nobody; a writer it trusts keeps the list, as Apple keeps an item's access on an update,
    /// unless the list lets in programs that run whatever they are given (`any`, an interpreter),
    /// which the writer's own entry on it does not make safe: a planted list would name both.
    private func keepListOnlyForItsOwn(_ row: Row, _ item: inout Item) throws {
        guard custodyKeeps(row.lockClass) else { return }
        let open = AccessList.of(item)?.entries.contains {
            if case .interpreter = $0 { return true }
            return $0 == .anyProgram
        }
        if open == true {
            item.attributes[AccessList.attribute] = AccessList.creatorAttribute
            return
        }
        do {
            var trusted = try custodyItemKey(row, interaction: .notAllowed)
            trusted.key.wipe()
        } catch let error as KeychainError where error.code == .interactionNotAllowed || error.code == .authFailed {
            item.attributes[AccessList.attribute] = AccessList.creatorAttribute
        }
    }

    /// The stored secret of a row a change seals again. In a custodian's keeping, inside the
    /// change's transaction nobody is asked: an item key that needs the person is a demand, met
    /// outside (`withPresence`) and used on the next run; an "Always allow" answer joins the
    /// item's list, which this change writes.
    private func openSecretToChange(_ row: Row, _ item: inout Item, keys: ClassKeys, gate: PresenceGate) throws -> Bytes? {
        guard custodyKeeps(row.lockClass) else { return try openSecret(row, keys: keys) }
        var unwrapped: UnwrappedItemKey
        if let held = gate.heldKey(for: row) {
            unwrapped = held
        } else {
            do {
                unwrapped = try custodyItemKey(row, interaction: .notAllowed)
            } catch let error as KeychainError where error.code == .interactionNotAllowed && gate.custodyInteraction == .allowed {
                throw PresenceGate.CustodyDemand(row: row)
            }
        }
        defer { unwrapped.key.wipe() }
        if let list = unwrapped.alwaysAllow { item.attributes[AccessList.attribute] = .string(list.text) }
        return try openSecret(row, keys: keys, itemKey: unwrapped.key)
    }

    /// Writes a sealed item over its row. The index columns are written only when they change:
    /// SQLite rewrites an index entry whenever its column is set, to the same value or not, and
    /// most updates (a new password) leave every indexed attribute as it was.
    private func rewrite(_ rowID: Int64, lockClass: LockClass, _ sealed: SealedRow) throws {
        let space = KeySpace(lockClass).rawValue
        let current = try db.statement("SELECT space, pk, account, service FROM items WHERE rowid = ?")
        current.bind([.int(rowID)])
        let indexed = try {
            defer { current.reset() }
            return try current.step() && current.int(0) == space && current.blob(1) == sealed.pk
                && current.blob(2) == sealed.account && current.blob(3) == sealed.service
        }()
        if indexed {
            try db.statement("UPDATE items SET lockclass = ?, metadata = ?, secret = ? WHERE rowid = ?")
                .run([.int(lockClass.rawValue), .blob(sealed.metadata), .blob(sealed.secret), .int(rowID)])
            return
        }
        try db.statement(
            """
            UPDATE items SET lockclass = ?, space = ?, pk = ?, account = ?, service = ?, metadata = ?, secret = ?
            WHERE rowid = ?
            """
        ).run([
            .int(lockClass.rawValue), .int(space), .blob(sealed.pk), .blob(sealed.account), .blob(sealed.service),
            .blob(sealed.metadata), .blob(sealed.secret), .int(rowID)
        ])
    }

    /// Deletes every matching item; returns how many. Items whose access control needs the user's
    /// presence go only once it is given (`presence`; Skip keeps them).
    @discardableResult
    package func delete(_ query: Query, presence: PresenceOptions = PresenceOptions()) throws -> Int {
        let query = try Self.normalized(query)
        return try withPresence(presence) { gate in
            try withLock {
                try db.transaction {
                    let keys = try currentKeys()
                    let matches = try changeable(lockedAwareMatches(query, keys: keys), gate: gate, keys: keys)
                    if matches.isEmpty { throw KeychainError(.itemNotFound) }
                    try deleteRows(matches.map { $0.0.rowID })
                    return matches.count
                }
            }
        }
    }

    /// What an update or delete may change among `matches`: the items the gate admits, each one
    /// sealed under an application password opened by the password at hand.
    private func changeable(_ matches: [(Row, Item)], gate: PresenceGate, keys: ClassKeys) throws -> [(Row, Item)] {
        let admitted = try matches.filter { try gate.admits($0.1, changing: true) }
        try proveApplicationPasswords(of: admitted, gate: gate, keys: keys)
        return admitted
    }

    /// Before an update, replace or delete: the application password at hand opens every matched
    /// item sealed under one (`PresenceGate.proveApplicationPassword`).
    func proveApplicationPasswords(of matches: [(Row, Item)], gate: PresenceGate, keys: ClassKeys) throws {
        for (row, item) in matches where AccessConditions(of: item).contains(.applicationPassword) {
            try gate.proveApplicationPassword(of: item, stored: try openSecret(row, keys: keys, interaction: gate.custodyInteraction))
        }
    }

    /// Deletes the items these references name, in one transaction; returns how many existed.
    @discardableResult
    package func delete(references: [PersistentReference]) throws -> Int {
        try withLock {
            try db.transaction {
                let stmt = try db.statement("DELETE FROM items WHERE rowid = ? AND class = ?")
                var deleted = 0
                for reference in Set(references) {
                    try stmt.run([.int(reference.rowID), .int(reference.itemClass.code)])
                    deleted += Int(db.changes)
                }
                return deleted
            }
        }
    }

    /// The secret of one item found earlier: empty for an item that has no data, as Apple's
    /// kSecReturnData alone gives.
    package func secret(of item: Item) throws -> Bytes {
        guard let found = try find(Query(reference: item.persistentReference), limit: 1, includeSecret: true).first else {
            throw KeychainError(.itemNotFound)
        }
        return found.secret ?? []
    }

    /// How many rows the file holds, locked or not (for `show-keychain-info` and tests).
    package func count() throws -> Int {
        try withLock {
            let stmt = try db.statement("SELECT count(*) FROM items")
            _ = try stmt.step()
            defer { stmt.reset() }
            return Int(stmt.int(0))
        }
    }

    // MARK: Internals

    /// Every certificate that can be read now, for chain walks; runs under the caller's lock.
    func readableCertificates(keys: ClassKeys) throws -> [Certificate] {
        let (rows, _) = try candidates(Query(itemClass: .certificate), keys: keys)
        return try rows.filter { keys.has($0.lockClass) }.map { try Certificate(der: openSecret($0, keys: keys) ?? []) }
    }

    package func deleteRows(_ rowIDs: [Int64]) throws {
        let stmt = try db.statement("DELETE FROM items WHERE rowid = ?")
        for rowID in rowIDs { try stmt.run([.int(rowID)]) }
    }

    /// Matches for update and delete, which must not act on a part of the matches only.
    func lockedAwareMatches(_ query: Query, keys: ClassKeys) throws -> [(Row, Item)] {
        let (rows, lockedSpace) = try candidates(query, keys: keys)
        var matches: [(Row, Item)] = []
        for row in rows {
            guard keys.has(row.lockClass) else { throw KeychainError.locked() }
            guard custodyKeeps(row.lockClass) else {
                let item = try openAttributes(row, keys: keys)
                if query.matches(item) { matches.append((row, item)) }
                continue
            }
            // In a custodian's keeping the binding is checked there: for the matches only.
            var opened = try openRow(row, keys: keys, keepingItemKey: false)
            guard query.matches(opened.item) else { continue }
            try takeCustody(row, &opened, secret: false, interaction: .notAllowed)
            matches.append((row, opened.item))
        }
        if matches.isEmpty {
            throw lockedSpace ? KeychainError.locked() : KeychainError(.itemNotFound)
        }
        return matches
    }

    /// Rows the indexes say may match, in insertion order. `lockedSpace` is true when a whole key
    /// space could not be searched and holds rows of this class.
    private func candidates(_ query: Query, keys: ClassKeys) throws -> (rows: [Row], lockedSpace: Bool) {
        var rows: [Row] = []
        var lockedSpace = false
        let serviceName = AttributeSchema.serviceKey(for: query.itemClass)
        for space in KeySpace.allCases {
            guard let indexKey = keys.indexKey(space) else {
                if try spaceHolds(space, query.itemClass) { lockedSpace = true }
                continue
            }
            guard try mustSearch(space, query.itemClass) else { continue }
            var values: [SQLiteValue] = [.int(space.rawValue), .int(query.itemClass.code)]
            var service = false
            var account = false
            if !query.caseInsensitive {
                if let value = query.attributes[serviceName] {
                    service = true
                    values.append(.blob(Self.indexHash(indexKey, itemClass: query.itemClass, name: serviceName, value: value)))
                }
                if let value = query.attributes[AttributeKey.account] {
                    account = true
                    values.append(.blob(Self.indexHash(indexKey, itemClass: query.itemClass, name: AttributeKey.account, value: value)))
                }
            }
            let sql = Self.candidateSQL(byService: service, byAccount: account, byRow: query.rows != nil)
            if let wanted = query.rows {
                for rowID in Set(wanted) {
                    try collect(sql, values + [.int(rowID)], query.itemClass, space, into: &rows)
                }
            } else {
                try collect(sql, values, query.itemClass, space, into: &rows)
            }
        }
        rows.sort { $0.rowID < $1.rowID }
        return (rows, lockedSpace)
    }

    /// Whether the key space holds any row of the class.
    private func spaceHolds(_ space: KeySpace, _ itemClass: ItemClass) throws -> Bool {
        let probe = try db.statement("SELECT 1 FROM items WHERE space = ? AND class = ? LIMIT 1")
        probe.bind([.int(space.rawValue), .int(itemClass.code)])
        defer { probe.reset() }
        return try probe.step()
    }

    /// Whether a search for items of the class must look in `space`: every space but Always
    /// while it is known to hold no row of the class (`alwaysSpaceHolds`).
    package func mustSearch(_ space: KeySpace, _ itemClass: ItemClass) throws -> Bool {
        guard space == .always, db.inReadSnapshot else { return true }
        return try alwaysSpaceHolds(itemClass)
    }

    /// `spaceHolds` for the Always space, kept while nothing was written: most keychains hold no
    /// Always item (Apple deprecated them), and a lookup then makes no index hashes and runs no
    /// query there. Only asked inside a read snapshot, after `currentKeys` read that snapshot's
    /// data_version: another process's commit moves data_version, this connection's own writes
    /// move its total of changes, and either drops what was kept.
    private func alwaysSpaceHolds(_ itemClass: ItemClass) throws -> Bool {
        let changes = db.totalChanges
        if alwaysSpace.version != seenDataVersion || alwaysSpace.changes != changes {
            alwaysSpace = (seenDataVersion, changes, [:])
        }
        if let known = alwaysSpace.classes[itemClass.code] { return known }
        let holds = try spaceHolds(.always, itemClass)
        alwaysSpace.classes[itemClass.code] = holds
        return holds
    }

    /// The candidate query by the service and account index columns (and one row), in insertion
    /// order: written out once, since each is prepared once and found again by its text.
    package static func candidateSQL(byService: Bool, byAccount: Bool, byRow: Bool = false) -> String {
        candidateSQLByShape[(byService ? 1 : 0) + (byAccount ? 2 : 0) + (byRow ? 4 : 0)]
    }

    /// By service (1), account (2), row (4).
    private static let candidateSQLByShape: [String] = (0..<8).map { shape in
        var sql = "SELECT rowid, lockclass, metadata, secret FROM items WHERE space = ? AND class = ?"
        if shape & 1 != 0 { sql += " AND service = ?" }
        if shape & 2 != 0 { sql += " AND account = ?" }
        sql += shape & 4 != 0 ? " AND rowid = ?" : " ORDER BY rowid"
        return sql
    }

    package func collect(_ sql: String, _ values: [SQLiteValue], _ itemClass: ItemClass, _ space: KeySpace, into rows: inout [Row]) throws {
        let stmt = try db.statement(sql)
        stmt.bind(values)
        defer { stmt.reset() }
        while try stmt.step() {
            guard let lockClass = LockClass(rawValue: stmt.int(1)), KeySpace(lockClass) == space else {
                throw KeychainError.decode("row \(stmt.int(0)) has an invalid protection class")
            }
            rows.append(
                Row(
                    rowID: stmt.int(0), itemClass: itemClass, lockClass: lockClass, space: space,
                    metadata: stmt.blob(2), secret: stmt.blob(3)))
        }
    }

    /// errSecDuplicateItem if another item has the same primary key, in either key space that can
    /// be searched now.
    private func checkUnique(_ item: Item, primaryKey: Bytes, keys: ClassKeys, excluding rowID: Int64?) throws {
        let stmt = try db.statement("SELECT rowid FROM items WHERE space = ? AND class = ? AND pk = ?")
        for space in KeySpace.allCases {
            guard let indexKey = keys.indexKey(space) else { continue }
            stmt.bind([.int(space.rawValue), .int(item.itemClass.code), .blob(indexKey.mac(primaryKey))])
            defer { stmt.reset() }
            while try stmt.step() {
                if stmt.int(0) != rowID { throw KeychainError(.duplicateItem) }
            }
        }
    }

    /// Row ids are chosen before the insert because they are part of every ciphertext's additional data.
    private func nextRowID() throws -> Int64 {
        let stmt = try db.statement("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'items'), 0) + 1")
        defer { stmt.reset() }
        _ = try stmt.step()
        return stmt.int(0)
    }

    /// Apple's rule (kSecAttrAccessible's documentation): a synchronizable item's protection class
    /// cannot be a ThisDeviceOnly one, which by definition never leaves the machine; errSecParam.
    static func checkSynchronizable(_ item: Item) throws {
        if item.effectiveValue(AttributeKey.synchronizable).boolValue == true, item.protection.isThisDeviceOnly {
            throw KeychainError.param("a synchronizable item cannot be \(item.protection.rawValue) (ThisDeviceOnly): such items never leave this device")
        }
    }

    /// The largest secret an item may hold. Keychains keep passwords, keys and certificates; a
    /// larger value is refused with errSecAllocate before any memory is spent on encrypting it.
    package static let maximumSecretSize = 64 << 20

    static func checkSize(_ secret: Bytes) throws {
        guard secret.count <= maximumSecretSize else {
            throw KeychainError(.allocate, "the item's data is larger than \(maximumSecretSize >> 20) MiB")
        }
    }

    /// Attributes are small by nature; this bound keeps every length field of the row format far
    /// from overflow whatever a caller passes.
    package static let maximumAttributesSize = 16 << 20

    package static func checkAttributesSize(_ attributes: [String: AttributeValue]) throws {
        var total = 0
        for (key, value) in attributes {
            total += key.utf8.count + 16
            switch value {
            case .string(let s): total += s.utf8.count
            case .data(let d): total += d.count
            default: break
            }
        }
        guard total <= maximumAttributesSize else {
            throw KeychainError(.allocate, "the item's attributes are larger than \(maximumAttributesSize >> 20) MiB")
        }
    }

    static func normalized(_ item: Item) throws -> Item {
        var out = item
        out.attributes = try normalized(item.attributes, for: item.itemClass)
        return out
    }

    static func normalized(_ query: Query) throws -> Query {
        var out = query
        out.attributes = try normalized(query.attributes, for: query.itemClass)
        return out
    }

    /// Attributes checked for size and each for its type in `itemClass`.
    private static func normalized(_ attributes: [String: AttributeValue], for itemClass: ItemClass) throws -> [String: AttributeValue] {
        try checkAttributesSize(attributes)
        var out = attributes
        for (key, value) in attributes {
            out[key] = try AttributeSchema.normalize(key, value, for: itemClass)
        }
        return out
    }
}
