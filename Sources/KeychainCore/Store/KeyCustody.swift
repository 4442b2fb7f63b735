/// A keychain in a custodian's keeping (`KeyStorage.broker`): what this process does instead of
/// holding class keys. It reads and searches attributes with the subkeys the custodian hands out;
/// every item key is wrapped and unwrapped by the custodian, which decides who gets one.
extension KeychainStore {
    /// The keychain as its custodian is shown it: the keybag's fields as last read from the file.
    var custodyKeybag: CustodyKeybag { CustodyKeybag(uuid: keybag.uuid, fields: custodyFields, path: path) }

    /// What only the class keys themselves can do (a rotation, sealing to a TPM) cannot be done
    /// where this process holds none: said plainly, with the way to do it today.
    package func requireHeldKeys(_ operation: String) throws {
        guard storage == .broker else { return }
        throw KeychainError(
            .unimplemented,
            "\(operation) is not available yet for a keychain in keychain-broker's custody: it needs the class keys, which only the broker holds (an administrator can stop keychain-broker.socket, run it, and start the broker again)"
        )
    }

    /// `currentKeys` in a custodian's keeping: one round trip, which is also the lock check and
    /// restarts the idle clock. D still comes from the file (outside the custodian's boundary).
    /// The state kept from the last call stands in for it while the keybag is the same, when
    /// the custodian tells every change (the broker's notices) and told none since, or inside a
    /// read (`custodyRead`) whose item requests carry its generation, which the custodian
    /// refuses if its keys changed since. A read of attributes alone, or of the lock status,
    /// then no longer restarts the idle clock: only what reaches the broker does.
    func custodyKeys(_ custodian: any KeyCustodian) throws -> ClassKeys {
        try refreshKeybag()
        if let kept = keptStateStanding(custodian) {
            if custodyCache.reading { custodyCache.usedKept = true }
            if settingsCheck == nil { settingsCheck = Self.settingsCheck(kept.settingsVerified, keybag.settings) }
            var present = kept.open
            present[.always] = alwaysSubkeys()
            return ClassKeys(present)
        }
        let state = try custodian.state(of: custodyKeybag)
        var present = PerLockClass<Subkeys>()
        for lockClass in [LockClass.whenUnlocked, .afterFirstUnlock] {
            guard let given = state.open[lockClass] else {
                subkeyCache[lockClass] = nil
                continue
            }
            if let cached = subkeyCache[lockClass], cached.matches(metadata: given.metadata) {
                present[lockClass] = cached
            } else {
                let fresh = Subkeys(metadata: given.metadata, index: given.index)
                subkeyCache[lockClass] = fresh
                present[lockClass] = fresh
            }
        }
        custodyCache.kept = CustodyCache.Kept(
            generation: state.generation, fields: custodyFields, open: present, settingsVerified: state.settingsVerified, mark: state.mark)
        present[.always] = alwaysSubkeys()
        settingsCheck = Self.settingsCheck(state.settingsVerified, keybag.settings)
        return ClassKeys(present)
    }

    /// The kept state, where it may stand in for a `state` call (`custodyKeys`).
    private func keptStateStanding(_ custodian: any KeyCustodian) -> CustodyCache.Kept? {
        // Never in a write's transaction: a writer checks the keys it commits with.
        guard !db.inTransaction || db.inReadSnapshot, let kept = custodyCache.kept, kept.fields == custodyFields else { return nil }
        switch kept.mark.map({ custodian.isUnchanged(since: $0) }) {
        case true?: return kept
        case false?: return nil
        case nil: return custodyCache.reading ? kept : nil
        }
    }

    /// Whether the custodian keeps `lockClass`'s key: every class but Always, whose key is in the
    /// file (outside the custodian's boundary, as Apple's design puts it); its rows open here.
    func custodyKeeps(_ lockClass: LockClass) -> Bool { custodian != nil && lockClass != .always }

    private func alwaysSubkeys() -> Subkeys {
        if let cached = subkeyCache[.always], cached.matches(keybag.keyD) { return cached }
        let fresh = Subkeys(classKey: keybag.keyD)
        subkeyCache[.always] = fresh
        return fresh
    }

    private static func settingsCheck(_ verified: Bool?, _ settings: KeychainSettings) -> (KeychainSettings, SettingsIntegrity)? {
        verified.map { $0 ? (settings, .verified) : (.safeDefaults, .damaged) }
    }

    /// A read (a lookup) in a custodian's keeping, in one round trip when it can: the state kept
    /// from the last call stands in for a `state` call (`custodyKeys`), and the item request
    /// that follows (an unwrap, a binding check) carries its generation, so a lock by another
    /// process still fails the very next read. When nothing the custodian answered in the read
    /// vouched for the kept state (nothing found, an item found by attributes alone with no
    /// request, a class the kept state had locked), the state is asked for after all: the
    /// outcome stands if it had not changed, else the read runs again on the new state.
    /// Under the store's lock.
    func custodyRead<T>(_ body: () throws -> T) throws -> T {
        guard let custodian, !custodyCache.reading else { return try body() }
        custodyCache.reading = true
        custodyCache.usedKept = false
        custodyCache.confirmed = false
        defer { custodyCache.reading = false }
        let outcome = Result { try body() }
        guard custodyCache.usedKept, !custodyCache.confirmed, let kept = custodyCache.kept else { return try outcome.get() }
        // Told of every change (the broker's notices), and none came: the kept state held.
        if let mark = kept.mark, custodian.isUnchanged(since: mark) { return try outcome.get() }
        custodyCache.reading = false
        _ = try custodyKeys(custodian)
        if custodyCache.kept?.generation == kept.generation { return try outcome.get() }
        // Once more on the state just read (kept now), whatever it finds.
        custodyCache.reading = true
        return try body()
    }

    /// `body` with the row's request (`itemKeyRequest`), carrying the generation of the kept
    /// state. When the custodian's keys changed since, the state is asked for once (a lock shows
    /// as one) and the request sent again with the new generation.
    private func currentGeneration<T>(
        _ row: Row, _ request: ItemKeyRequest, _ custodian: any KeyCustodian, _ body: (ItemKeyRequest) throws -> T
    ) throws -> T {
        var request = request
        request.generation = custodyCache.kept?.generation ?? 0
        do {
            let result = try body(request)
            custodyCache.confirmed = true
            return result
        } catch is CustodyGenerationChanged {
            let reading = custodyCache.reading
            custodyCache.reading = false
            defer { custodyCache.reading = reading }
            let keys = try custodyKeys(custodian)
            guard keys.has(row.lockClass) else { throw KeychainError.locked() }
            request.generation = custodyCache.kept?.generation ?? 0
            do {
                let result = try body(request)
                custodyCache.confirmed = true
                return result
            } catch is CustodyGenerationChanged {
                throw KeychainError.locked("the keychain's keys changed in keychain-broker during the read")
            }
        }
    }

    /// The custodian's question about one row.
    func itemKeyRequest(_ row: Row, wrappedKey: Bytes) -> ItemKeyRequest {
        ItemKeyRequest(
            keychain: keybag.uuid, rowID: row.rowID, itemClass: row.itemClass, lockClass: row.lockClass,
            metadata: row.metadata, wrappedKey: wrappedKey)
    }

    /// A password change made by the custodian, its keybag saved as the custodian returned it,
    /// in one transaction as `changePassword` does it here.
    func changePasswordInCustody(from old: Bytes, to new: Bytes, scrypt: ScryptParameters?) throws {
        guard let custodian else { return }
        try withLock {
            try db.transaction {
                try refreshKeybag(force: true)
                let fields = try custodian.changePassword(
                    custodyKeybag, from: old, to: new, scrypt: scrypt ?? keybag.scrypt.raisedToFloor())
                let bag = try Keybag(fields: fields)
                guard bag.uuid == keybag.uuid, bag.keyD == keybag.keyD else {
                    throw KeychainError.decode("keychain-broker returned the keybag of another keychain")
                }
                try Keybag.save(fields: fields, to: db)
                keybag = bag
                custodyFields = fields
                dataVersion = try currentDataVersion()
            }
            discardPreviousKeybags()
        }
    }

    /// `rotateKeys` in a custodian's keeping: the custodian makes the new keys and seals every
    /// row again (their secrets never come here), in batches that fit its messages; this process
    /// indexes the new rows with the new subkeys and writes them and the new keybag in one
    /// transaction, as a rotation here does. A row the custodian cannot open stops everything.
    func rotateKeysInCustody(_ custodian: any KeyCustodian, password: Bytes, newPassword: Bytes?, scrypt: ScryptParameters?) throws {
        try withLock {
            try db.transaction {
                try refreshKeybag(force: true)
                let uuid = keybag.uuid
                let begun = try custodian.beginRotation(
                    custodyKeybag, password: password, newPassword: newPassword, scrypt: scrypt ?? keybag.scrypt.raisedToFloor())
                let bag = try Keybag(fields: begun.fields)
                guard bag.uuid == uuid, bag.binding == nil, let a = begun.open[.whenUnlocked], let c = begun.open[.afterFirstUnlock] else {
                    throw KeychainError.decode("keychain-broker returned the keybag of another keychain")
                }
                let new = ClassKeys([
                    .whenUnlocked: Subkeys(metadata: a.metadata, index: a.index),
                    .afterFirstUnlock: Subkeys(metadata: c.metadata, index: c.index), .always: Subkeys(classKey: bag.keyD)
                ])
                let update = try db.statement(
                    "UPDATE items SET space = ?, pk = ?, account = ?, service = ?, metadata = ?, secret = ? WHERE rowid = ?")
                var items: [Item] = []
                for batch in Self.rotationBatches(try storedRows()) {
                    let resealed = try custodian.rotate(batch, keychain: uuid)
                    guard resealed.count == batch.count else { throw KeychainError.decode("keychain-broker returned other rows") }
                    for (row, before) in zip(resealed, batch) {
                        guard row.rowID == before.rowID, row.itemClass == before.itemClass, row.lockClass == before.lockClass else {
                            throw KeychainError.decode("keychain-broker returned other rows")
                        }
                        let item = try openRow(row, keys: new, keepingItemKey: false).item
                        guard let indexKey = new.indexKey(row.space) else { throw KeychainError.locked() }
                        let serviceName = AttributeSchema.serviceKey(for: item.itemClass)
                        try update.run([
                            .int(row.space.rawValue), .blob(indexKey.mac(Self.primaryKeyBytes(item))),
                            .blob(
                                Self.indexHash(
                                    indexKey, itemClass: item.itemClass, name: AttributeKey.account, value: item.effectiveValue(AttributeKey.account))),
                            .blob(Self.indexHash(indexKey, itemClass: item.itemClass, name: serviceName, value: item.effectiveValue(serviceName))),
                            .blob(row.metadata), .blob(row.secret), .int(row.rowID)
                        ])
                        items.append(item)
                    }
                }
                try reindexAttributes(items, keys: new)
                try Keybag.save(fields: begun.fields, to: db)
                try custodian.commitRotation(CustodyKeybag(uuid: uuid, fields: begun.fields, path: path))
                keybag = bag
                custodyFields = begun.fields
                subkeyCache.removeAll()
                settingsCheck = nil
                dataVersion = try currentDataVersion()
            }
            // The old keys' rows too: every old frame opens with the old password.
            discardPreviousKeybags()
        }
    }

    /// Rows in batches of at most `rotationBatchBytes` of ciphertext, so that a request and its
    /// reply fit the custodian's messages (keychain-broker's: 1 MiB). A row larger than that alone
    /// goes alone, and the custodian refuses it if it does not fit.
    static let rotationBatchBytes = 384 << 10

    static func rotationBatches(_ rows: [Row]) -> [[Row]] {
        var batches: [[Row]] = []
        var batch: [Row] = []
        var size = 0
        for row in rows {
            let cost = row.metadata.count + row.secret.count + 64
            if !batch.isEmpty, size + cost > rotationBatchBytes {
                batches.append(batch)
                batch = []
                size = 0
            }
            batch.append(row)
            size += cost
        }
        if !batch.isEmpty { batches.append(batch) }
        return batches
    }

    /// New settings, their MAC made by the custodian (under class key A, held or from `password`).
    func setSettingsInCustody(_ settings: KeychainSettings, password: Bytes?) throws {
        guard let custodian else { return }
        try withLock {
            try db.transaction {
                try refreshKeybag(force: true)
                let mac = try custodian.settingsMAC(custodyKeybag, settings: settings.bytes, password: password)
                var bag = keybag
                bag.settings = settings
                bag.settingsMAC = mac
                try bag.save(to: db)
                let fields = try Keybag.fields(in: db)
                keybag = try Keybag(fields: fields)
                custodyFields = fields
                settingsCheck = nil
                dataVersion = try currentDataVersion()
            }
        }
    }

    /// The row's item key from the custodian. `alwaysAllow`, when the person answered so, is
    /// for the caller to write into the item's list (`recordAlwaysAllow`).
    func custodyItemKey(_ row: Row, interaction: CustodyInteraction) throws -> UnwrappedItemKey {
        guard let custodian else { throw KeychainError.locked() }
        let request = itemKeyRequest(row, wrappedKey: try wrappedKey(of: row))
        return try currentGeneration(row, request, custodian) { try custodian.unwrap($0, interaction: interaction) }
    }

    /// Format 2's binding of metadata to secret, checked by the custodian for a read of the
    /// attributes alone: nobody is asked, no key is given out. A row checked before, byte for
    /// byte the same, is not sent again: the check's answer depends on nothing else (new keys
    /// come with rows sealed again), and a service that lists the same items on every call (the
    /// Secret Service's SearchItems, the SSH agent's keys) would otherwise pay a round trip to
    /// the broker for each item each time.
    func checkCustodyBinding(_ row: Row) throws {
        guard let custodian else { throw KeychainError.locked() }
        let request = itemKeyRequest(row, wrappedKey: try wrappedKey(of: row))
        let checked = Self.bindingDigest(request)
        if custodyCache.checkedBindings.contains(checked) { return }
        try currentGeneration(row, request, custodian) { try custodian.checkBinding($0) }
        custodyCache.rememberBinding(checked)
    }

    /// What a binding's check answered for: every field of the request the custodian checked.
    private static func bindingDigest(_ request: ItemKeyRequest) -> Bytes {
        var w = ByteWriter(capacity: 64 + request.metadata.count + request.wrappedKey.count)
        w.blob(request.keychain)
        w.u64(UInt64(bitPattern: request.rowID))
        w.string(request.itemClass.rawValue)
        w.u64(UInt64(bitPattern: request.lockClass.rawValue))
        w.blob(request.metadata)
        w.blob(request.wrappedKey)
        return Crypto.sha256(w.bytes)
    }

    /// After the person answered "Always allow" for `item` (read from `row`, its secret `stored`
    /// as the row holds it): the caller's entry joins the item's list and the row is sealed again
    /// (a new item key, wrapped by the custodian), without asking again (`list`: the custodian's).
    /// Skipped when the row changed since it was read: the entry is then asked for next time.
    func recordAlwaysAllow(_ list: AccessList, item: Item, row: Row, stored: Bytes?) throws {
        guard !db.inReadSnapshot else { return }
        var item = item
        item.attributes[AccessList.attribute] = .string(list.text)
        try db.transaction {
            let current = try db.statement("SELECT metadata, secret FROM items WHERE rowid = ?")
            current.bind([.int(row.rowID)])
            let unchanged = try {
                defer { current.reset() }
                return try current.step() && current.blob(0) == row.metadata && current.blob(1) == row.secret
            }()
            guard unchanged else { return }
            let keys = try currentKeys()
            let sealed = try seal(item, rowID: row.rowID, secret: stored, keys: keys)
            try db.statement("UPDATE items SET metadata = ?, secret = ? WHERE rowid = ?")
                .run([.blob(sealed.metadata), .blob(sealed.secret), .int(row.rowID)])
        }
    }
}

/// What a store keeps of its custodian's last `state` (`custodyKeys`), and where a read stands.
struct CustodyCache {
    struct Kept {
        var generation: UInt64
        /// The keybag the state was asked with: the kept state stands only for the same one.
        var fields: [String: Bytes]
        /// The open classes' subkeys (A, C).
        var open: PerLockClass<Subkeys>
        var settingsVerified: Bool?
        /// The custodian's mark of the state (`CustodyState.mark`).
        var mark: UInt64?
    }

    /// The rows whose binding the custodian confirmed (`checkCustodyBinding`), by digest; at
    /// most `maximumBindings`, then begun again.
    private(set) var checkedBindings: Set<Bytes> = []
    static let maximumBindings = 4096

    mutating func rememberBinding(_ digest: Bytes) {
        if checkedBindings.count >= Self.maximumBindings { checkedBindings = [] }
        checkedBindings.insert(digest)
    }

    var kept: Kept?
    /// Inside `custodyRead`: the kept state may stand in for a `state` call.
    var reading = false
    /// The read used the kept state, and an item request since vouched for it.
    var usedKept = false
    var confirmed = false
}

extension Keybag {
    /// Writes a keybag's fields exactly as a custodian made them (`changePassword`), in place of
    /// the stored ones.
    static func save(fields: [String: Bytes], to db: SQLiteDatabase) throws {
        try db.execute("DELETE FROM keychain")
        let insert = try db.statement("INSERT INTO keychain(name, value) VALUES (?, ?)")
        for (name, value) in fields { try insert.run([.text(name), .blob(value)]) }
    }
}
