/// Encrypted backups (`security export` / `import`): every item but the ThisDeviceOnly ones,
/// sealed under a key derived from a backup password, to be restored on another machine.
extension KeychainStore {
    static let backupMagic = Array("keychain-backup-v1\n".utf8)

    /// Whether `bytes` are a backup made by exportBackup (rather than a certificate or key file).
    package static func isBackup(_ bytes: Bytes) -> Bool { bytes.starts(with: backupMagic) }

    package struct ExportSummary: Sendable {
        package var backup: Bytes
        package var exported: Int
        /// ThisDeviceOnly items, which by definition stay on this machine.
        package var keptOnDevice: Int
    }

    /// Refuses while any item is locked, so a backup is never silently partial.
    /// Items that need the user's presence are read once it is given (`presence`); those sealed
    /// under an application password go into the backup still sealed.
    package func exportBackup(
        password: Bytes, scrypt: ScryptParameters? = nil,
        presence: PresenceOptions = PresenceOptions()
    ) throws -> ExportSummary {
        var presence = presence
        presence.keepsSealedSecrets = true
        var items: [Item] = []
        for itemClass in ItemClass.allCases {
            var query = Query(itemClass: itemClass)
            query.synchronizable = .any
            query.includesAppItems = true
            do {
                items += try find(query, limit: nil, includeSecret: true, presence: presence)
            } catch let error as KeychainError where error.code == .itemNotFound {
                continue
            }
        }
        guard items.count == (try count()) else {
            throw KeychainError.locked("some items are locked; unlock the keychain to export it")
        }
        let portable = items.filter { !$0.protection.isThisDeviceOnly }
        var payload = ByteWriter()
        payload.u32(UInt32(portable.count))
        for item in portable {
            payload.u64(UInt64(item.itemClass.code))
            payload.blob(encodeAttributes(item.attributes.filter { $0.key != AttributeKey.sha1 }))
            payload.blob(item.secret ?? [])
        }
        var plain = payload.bytes
        defer { plain.wipe() }
        let params = scrypt ?? .tuned()
        try params.checkWritable()
        let salt = try Crypto.random(16)
        var key = try Crypto.scrypt(password: password, salt: salt, parameters: params)
        defer { key.wipe() }
        var out = ByteWriter()
        out.u64(params.n)
        out.u64(params.r)
        out.u64(params.p)
        out.blob(salt)
        let header = Self.backupMagic + out.bytes
        var file = ByteWriter()
        file.blob(try Crypto.seal(plain, key: key, aad: header))
        return ExportSummary(backup: header + file.bytes, exported: portable.count, keptOnDevice: items.count - portable.count)
    }

    package struct ImportSummary: Sendable {
        package var imported: Int
        package var alreadyPresent: Int
    }

    /// Adds the backup's items in one transaction (a batch): all of them or, on any error, none;
    /// items already present are left as they are. A wrong backup password is errSecAuthFailed,
    /// a damaged file errSecDecode.
    package func importBackup(_ backup: Bytes, password: Bytes) throws -> ImportSummary {
        guard backup.count > Self.backupMagic.count, Array(backup.prefix(Self.backupMagic.count)) == Self.backupMagic else {
            throw KeychainError.decode("not a keychain backup")
        }
        var r = ByteReader(Array(backup.dropFirst(Self.backupMagic.count)))
        let params = ScryptParameters(n: try r.u64(), r: try r.u64(), p: try r.u64())
        let salt = try r.blob()
        guard params.isSane, salt.count == 16 else { throw KeychainError.decode("the backup header is damaged") }
        let headerLength = backup.count - r.remaining
        let sealed = try r.blob()
        guard r.isAtEnd else { throw KeychainError.decode("trailing bytes in the backup") }
        var key = try Crypto.scrypt(password: password, salt: salt, parameters: params)
        defer { key.wipe() }
        var plain: Bytes
        do {
            plain = try Crypto.open(sealed, key: key, aad: Array(backup.prefix(headerLength)))
        } catch {
            throw KeychainError(.authFailed, "wrong backup password, or a damaged backup")
        }
        defer { plain.wipe() }
        var p = ByteReader(plain)
        return try batch {
            var summary = ImportSummary(imported: 0, alreadyPresent: 0)
            for _ in 0..<(try p.u32()) {
                guard let itemClass = ItemClass(code: Int64(bitPattern: try p.u64())) else { throw KeychainError.decode("unknown item class in backup") }
                var item = Item(itemClass: itemClass, attributes: try decodeAttributes(try p.blob()), secret: try p.blob())
                item.attributes[AttributeKey.sha1] = nil
                defer { item.secret?.wipe() }
                do {
                    _ = try add(item, keepingDates: true)
                    summary.imported += 1
                } catch let error as KeychainError where error.code == .duplicateItem {
                    summary.alreadyPresent += 1
                }
            }
            return summary
        }
    }
}
