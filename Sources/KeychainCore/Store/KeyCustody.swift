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
    func custodyKeys(_ custodian: any KeyCustodian) throws -> ClassKeys {
        try refreshKeybag()
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
        if let cached = subkeyCache[.always], cached.matches(keybag.keyD) {
            present[.always] = cached
        } else {
            let fresh = Subkeys(classKey: keybag.keyD)
            subkeyCache[.always] = fresh
            present[.always] = fresh
        }
        settingsCheck = state.settingsVerified.map { verified in
            verified ? (keybag.settings, .verified) : (.safeDefaults, .damaged)
        }
        return ClassKeys(present)
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
        return try custodian.unwrap(itemKeyRequest(row, wrappedKey: wrappedKey(of: row)), interaction: interaction)
    }

    /// Format 2's binding of metadata to secret, checked by the custodian for a read of the
    /// attributes alone: nobody is asked, no key is given out.
    func checkCustodyBinding(_ row: Row) throws {
        guard let custodian else { throw KeychainError.locked() }
        try custodian.checkBinding(itemKeyRequest(row, wrappedKey: wrappedKey(of: row)))
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

extension Keybag {
    /// Writes a keybag's fields exactly as a custodian made them (`changePassword`), in place of
    /// the stored ones.
    static func save(fields: [String: Bytes], to db: SQLiteDatabase) throws {
        try db.execute("DELETE FROM keychain")
        let insert = try db.statement("INSERT INTO keychain(name, value) VALUES (?, ?)")
        for (name, value) in fields { try insert.run([.text(name), .blob(value)]) }
    }
}
