/// Re-keying: new class keys for a keychain whose old keys (or an old copy of its file with the
/// old password) may be in someone else's hands.
extension KeychainStore {
    /// Makes new class keys A, C and D, re-seals every item under them (a new item key, new
    /// metadata and secret ciphertexts, new keyed-hash index columns) and wraps A and C under
    /// `newPassword` (the same password if nil), all in one transaction: a crash leaves the old
    /// keychain or the new one, never a mix. The new keys then replace the old ones in the
    /// kernel (or in this process), leaving the keychain unlocked.
    ///
    /// D rotates too although it protects little: it is stored in the clear, so any copy of the
    /// file holds the D of that copy. Rotating it means no key from before opens any row after.
    ///
    /// A keychain sealed to a TPM gets new ThisDeviceOnly keys and a new sealed secret as well,
    /// and a new recovery key, returned (the old one opened the old A and C only): the caller
    /// shows it, once.
    @discardableResult
    package func rotateKeys(password: Bytes, newPassword: Bytes? = nil, scrypt: ScryptParameters? = nil) throws -> RecoveryKey? {
        if let custodian {
            try rotateKeysInCustody(custodian, password: password, newPassword: newPassword, scrypt: scrypt)
            return nil
        }
        return try withLock {
            var newA = try Crypto.random(Crypto.keyLength)
            var newC = try Crypto.random(Crypto.keyLength)
            var newDevice = try DeviceKeys.generate()
            defer { newA.wipe(); newC.wipe(); newDevice.wipe() }
            var recovery: RecoveryKey?
            // The new keys' counter is of no use if they are lost with the transaction: out of the TPM.
            var policy: TPMPolicy?, uuid: Bytes?, committed = false
            defer { if !committed, let policy, let uuid { policy.abandonedKeys(self, uuid: uuid, c: newC, tpm: .current) } }
            try db.transaction {
                var bag = try Keybag.load(from: db)
                var keys = try bag.unwrapUpgrading(password: password)
                defer { keys.wipe() }
                if bag.isBound { policy = try TPMAccess.installedPolicy() }
                // Settings that fail their MAC are not carried over under the new keys.
                let settings = bag.verifiedSettings(a: keys.a) ?? .safeDefaults
                var oldKeys: [LockClass: Subkeys] = [
                    .whenUnlocked: Subkeys(classKey: keys.a), .afterFirstUnlock: Subkeys(classKey: keys.c),
                    .always: Subkeys(classKey: bag.keyD)
                ]
                if let device = keys.device {
                    oldKeys[.whenUnlockedThisDeviceOnly] = Subkeys(classKey: device.a)
                    oldKeys[.afterFirstUnlockThisDeviceOnly] = Subkeys(classKey: device.c)
                }
                let old = ClassKeys(oldKeys, separatesDeviceOnly: bag.isBound)
                let newD = try Crypto.random(Crypto.keyLength)
                let new = ClassKeys(
                    [
                        .whenUnlocked: Subkeys(classKey: newA), .afterFirstUnlock: Subkeys(classKey: newC),
                        .always: Subkeys(classKey: newD), .whenUnlockedThisDeviceOnly: Subkeys(classKey: newDevice.a),
                        .afterFirstUnlockThisDeviceOnly: Subkeys(classKey: newDevice.c)
                    ],
                    separatesDeviceOnly: bag.isBound)
                try resealAllRows(from: old, to: new)
                bag.keyD = newD
                if let policy {
                    let (record, key) = try policy.recovery(a: newA, c: newC, keybag: bag)
                    bag.binding!.recovery = record
                    recovery = key
                }
                // The new keys' counter first: the binding says whether there is one, under their tags.
                var count: UInt64?
                if let policy {
                    uuid = bag.uuid
                    count = policy.preparingNewKeys(self, uuid: bag.uuid, c: newC, oldC: keys.c, tpm: .current)
                }
                try bag.rewrap(
                    a: newA, c: newC, device: bag.isBound ? newDevice : nil, password: newPassword ?? password,
                    scrypt: scrypt ?? bag.scrypt.raisedToFloor(), counted: bag.isBound ? count != nil : nil)
                bag.settings = settings
                bag.authenticateSettings(a: newA)
                try bag.save(to: db)
                // The counter's authorization came from the old C, and the passwordless copy wraps
                // the old keys: after a rotation it would open nothing (enrol it again).
                try policy?.replacedKeys(self, keybag: bag, count: count, c: newC, oldC: keys.c, tpm: .current)
                keybag = bag
            }
            committed = true
            // The old keys' rows too: every old frame opens with the old password.
            discardPreviousKeybags()
            try install(a: newA, c: newC, device: keybag.isBound ? newDevice : nil)
            return recovery
        }
    }

    /// Opens each row with the old keys and seals it again, at the same row id, with the new
    /// ones, through the same functions every add and update uses. A row that does not open is
    /// damaged: the rotation stops and the transaction rolls back, rather than dropping an item.
    private func resealAllRows(from old: ClassKeys, to new: ClassKeys) throws {
        let rows = try storedRows()
        let update = try db.statement(
            """
            UPDATE items SET space = ?, pk = ?, account = ?, service = ?, metadata = ?, secret = ? WHERE rowid = ?
            """)
        var items: [Item] = []
        for row in rows {
            let item = try openAttributes(row, keys: old)
            items.append(item)
            // nil (an item added without data) stays nil: the row keeps saying it has none.
            var secret = try openSecret(row, keys: old)
            defer { secret?.wipe() }
            let sealed = try seal(item, rowID: row.rowID, secret: secret, keys: new)
            try update.run([
                .int(row.space.rawValue), .blob(sealed.pk), .blob(sealed.account), .blob(sealed.service),
                .blob(sealed.metadata), .blob(sealed.secret), .int(row.rowID)
            ])
        }
        try reindexAttributes(items, keys: new)
    }
}

extension KeychainStore {
    /// Re-seals, at the same row ids, the rows whose items change class key between `old` and
    /// `new`: ThisDeviceOnly items when a binding is added or removed. The index key (from C) does
    /// not change, so neither do the index columns; the transaction is the caller's. A row that
    /// does not open stops everything (the caller's transaction rolls back).
    /// Moves the ThisDeviceOnly items between A and C and keys of their own, `device`: under
    /// their own when `separating` (a TPM binding added), back under A and C when not (removed).
    package func moveDeviceOnlyRows(a: Bytes, c: Bytes, d: Bytes, device: DeviceKeys, separating: Bool) throws {
        let shared = ClassKeys([.whenUnlocked: Subkeys(classKey: a), .afterFirstUnlock: Subkeys(classKey: c), .always: Subkeys(classKey: d)])
        let separate = ClassKeys(
            [
                .whenUnlocked: Subkeys(classKey: a), .afterFirstUnlock: Subkeys(classKey: c), .always: Subkeys(classKey: d),
                .whenUnlockedThisDeviceOnly: Subkeys(classKey: device.a), .afterFirstUnlockThisDeviceOnly: Subkeys(classKey: device.c)
            ], separatesDeviceOnly: true)
        try separating ? resealMovedRows(from: shared, to: separate) : resealMovedRows(from: separate, to: shared)
    }

    func resealMovedRows(from old: ClassKeys, to new: ClassKeys) throws {
        let rows = try storedRows(in: .protected)
        let update = try db.statement(
            """
            UPDATE items SET lockclass = ?, space = ?, pk = ?, account = ?, service = ?, metadata = ?, secret = ? WHERE rowid = ?
            """)
        for row in rows {
            let item = try openAttributes(row, keys: old)
            let target = new.lockClass(for: item.protection)
            guard target != row.lockClass else { continue }
            var secret = try openSecret(row, keys: old)
            defer { secret?.wipe() }
            let sealed = try seal(item, rowID: row.rowID, secret: secret, keys: new)
            try update.run([
                .int(target.rawValue), .int(KeySpace(target).rawValue), .blob(sealed.pk), .blob(sealed.account),
                .blob(sealed.service), .blob(sealed.metadata), .blob(sealed.secret), .int(row.rowID)
            ])
        }
    }
}

extension KeychainStore {
    /// Every row as stored, in row order (`space`: only the rows of that key space), read whole
    /// before anything is written back: what a re-seal with other keys walks.
    func storedRows(in space: KeySpace? = nil) throws -> [Row] {
        var rows: [Row] = []
        let select = try db.statement(
            "SELECT rowid, class, lockclass, metadata, secret FROM items\(space == nil ? "" : " WHERE space = ?") ORDER BY rowid")
        if let space { select.bind([.int(space.rawValue)]) }
        defer { select.reset() }
        while try select.step() {
            guard let itemClass = ItemClass(code: select.int(1)), let lockClass = LockClass(rawValue: select.int(2)) else {
                throw KeychainError.decode("row \(select.int(0)) has an invalid class")
            }
            rows.append(
                Row(
                    rowID: select.int(0), itemClass: itemClass, lockClass: lockClass, space: KeySpace(lockClass),
                    metadata: select.blob(3), secret: select.blob(4)))
        }
        return rows
    }
}

extension KeychainStore {
    /// One row sealed again under another class key, at the same row id: what a custodian does
    /// for each row of a rotation, so that the secret is opened only where the class keys are.
    /// The attributes are kept as they are; a new item key wraps the secret, bound (row format
    /// 2) to the new metadata. `old` and `new`: the class keys of the row's class.
    package static func resealRow(_ row: Row, keychain: Bytes, from old: Bytes, to new: Bytes) throws -> Row {
        var oldWrapping = Crypto.deriveKey(old, purpose: "item-keys"), newWrapping = Crypto.deriveKey(new, purpose: "item-keys")
        var oldMetadata = Crypto.deriveKey(old, purpose: "metadata"), newMetadata = Crypto.deriveKey(new, purpose: "metadata")
        defer { oldWrapping.wipe(); newWrapping.wipe(); oldMetadata.wipe(); newMetadata.wipe() }
        func aad(_ field: String, _ version: Bytes?) -> Bytes {
            additionalData(keychain: keychain, rowID: row.rowID, itemClass: row.itemClass, lockClass: row.lockClass, field: field, version: version)
        }
        var (plain, version) = try openMetadata(row, keychain: keychain, key: oldMetadata)
        defer { plain.wipe() }
        var r = ByteReader(row.secret)
        let wrapped = try r.blob(), body = try r.blob()
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in secret") }
        var itemKey = try Crypto.open(wrapped, key: oldWrapping, aad: aad("item-key", version))
        defer { itemKey.wipe() }
        var hasData = true
        var secret: Bytes
        do {
            secret = try Crypto.open(body, key: itemKey, aad: aad("secret", version))
        } catch  where body.count == Crypto.nonceLength + Crypto.tagLength {
            secret = try Crypto.open(body, key: itemKey, aad: aad("no-secret", version))
            hasData = false
        }
        defer { secret.wipe() }
        let metadata = try Crypto.seal(plain, key: newMetadata, aad: aad("metadata", []))
        let newVersion = Self.version(ofMetadata: metadata)
        var newItemKey = try Crypto.random(Crypto.keyLength)
        defer { newItemKey.wipe() }
        var sealed = ByteWriter(capacity: secret.count + 128)
        sealed.blob(try Crypto.seal(newItemKey, key: newWrapping, aad: aad("item-key", newVersion)))
        sealed.blob(try Crypto.seal(secret, key: newItemKey, aad: aad(hasData ? "secret" : "no-secret", newVersion)))
        return Row(
            rowID: row.rowID, itemClass: row.itemClass, lockClass: row.lockClass, space: row.space, metadata: metadata, secret: sealed.bytes)
    }
}

extension Keybag {
    /// This keybag with new class keys A, C and D under `password`: a rotation made by a
    /// custodian. The settings are carried over only if they verify under the old A.
    package func rekeyed(a: Bytes, c: Bytes, d: Bytes, oldA: Bytes, password: Bytes, scrypt: ScryptParameters) throws -> Keybag {
        var bag = self
        let settings = verifiedSettings(a: oldA) ?? .safeDefaults
        bag.keyD = d
        try bag.rewrap(a: a, c: c, password: password, scrypt: scrypt)
        bag.settings = settings
        bag.authenticateSettings(a: a)
        return bag
    }
}
