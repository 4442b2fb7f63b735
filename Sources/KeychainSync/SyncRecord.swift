import KeychainCore
/// Who wrote a record version and when: what the merge orders versions by. `mdat` is the item's
/// modification date (a tombstone's: when the deletion was seen), `version` a Lamport counter per
/// record (one more than any version the writer had seen), `writer` the writing device's id.
package struct SyncStamp: Sendable, Equatable {
    package var mdat: Double
    package var version: UInt64
    package var writer: Bytes

    package init(mdat: Double, version: UInt64, writer: Bytes) {
        self.mdat = mdat
        self.version = version
        self.writer = writer
    }
}

/// The total order every device applies, so that each one picks the same winner: the later
/// modification, then the higher version, then the greater writer id, then the greater digest of
/// the record file (two files can only tie on all four if they are the same file).
package struct SyncOrder: Sendable, Equatable, Comparable {
    package var stamp: SyncStamp
    package var digest: Bytes

    package init(stamp: SyncStamp, digest: Bytes) {
        self.stamp = stamp
        self.digest = digest
    }

    package static func < (a: SyncOrder, b: SyncOrder) -> Bool {
        if a.stamp.mdat != b.stamp.mdat { return a.stamp.mdat < b.stamp.mdat }
        if a.stamp.version != b.stamp.version { return a.stamp.version < b.stamp.version }
        if a.stamp.writer != b.stamp.writer { return a.stamp.writer.lexicographicallyPrecedes(b.stamp.writer) }
        return a.digest.lexicographicallyPrecedes(b.digest)
    }
}

/// One synchronizable item as the remote holds it: `records/<id hex>`, sealed under the group's
/// sync key of an epoch. The remote sees the id (random, 128 bits), the epoch and a length
/// rounded up to `paddingQuantum`; everything else is inside the AES-256-GCM ciphertext, whose
/// additional data binds it to its group, its id (the file name) and its epoch, so a record moved
/// to another name or edited fails to open. Inside, the writing device's Ed25519 signature covers
/// the same binding and the body: a device that holds the key but is not the writer cannot pass
/// its version off as another's.
package struct SyncRecord: Sendable, Equatable {
    package var id: Bytes
    package var itemClass: ItemClass
    /// A live record's attributes (every one the item has but the engine's hash); a tombstone's:
    /// the primary key only, which is what the receiving device deletes by.
    package var attributes: [String: AttributeValue]
    package var secret: Bytes?
    package var tombstone: Bool
    package var stamp: SyncStamp

    package init(id: Bytes, itemClass: ItemClass, attributes: [String: AttributeValue], secret: Bytes?, tombstone: Bool, stamp: SyncStamp) {
        self.id = id
        self.itemClass = itemClass
        self.attributes = attributes
        self.secret = secret
        self.tombstone = tombstone
        self.stamp = stamp
    }

    static let magic = Array("KCSR".utf8)
    static let formatVersion: UInt8 = 1
    /// Plaintexts are padded to a multiple of this, so a record's size tells little of its item.
    static let paddingQuantum = 256

    static func additionalData(group: Bytes, id: Bytes, epoch: UInt32) -> Bytes {
        var w = ByteWriter()
        w.blob(group)
        w.blob(id)
        w.u32(epoch)
        w.u8(formatVersion)
        return magic + w.bytes
    }

    /// The sealed file: magic, epoch, AES-GCM(nonce || ciphertext || tag).
    func seal(group: Bytes, epoch: UInt32, key: Bytes, signer: SyncDeviceKeys) throws -> Bytes {
        precondition(signer.deviceID == stamp.writer)
        let aad = Self.additionalData(group: group, id: id, epoch: epoch)
        var body = ByteWriter()
        body.u64(stamp.mdat.bitPattern)
        body.u64(stamp.version)
        body.blob(stamp.writer)
        body.u8(tombstone ? 1 : 0)
        body.u64(UInt64(bitPattern: itemClass.code))
        body.blob(encodeAttributes(attributes))
        body.u8(secret == nil ? 0 : 1)
        body.blob(secret ?? [])
        var plain = ByteWriter()
        plain.blob(body.bytes)
        plain.blob(signer.sign(aad + body.bytes))
        let used = plain.bytes.count + 4
        plain.blob(Bytes(repeating: 0, count: (Self.paddingQuantum - used % Self.paddingQuantum) % Self.paddingQuantum))
        var bytes = plain.bytes
        defer { bytes.wipe() }
        var file = ByteWriter()
        file.u32(epoch)
        return Self.magic + file.bytes + (try Crypto.seal(bytes, key: key, aad: aad))
    }

    /// The epoch a record file says it is sealed under (nil: not a record file).
    static func epoch(of file: Bytes) -> UInt32? {
        guard file.count > 8, Array(file.prefix(4)) == magic else { return nil }
        var r = ByteReader(Array(file[4..<8]))
        return try? r.u32()
    }

    /// Opens a record file named `id`; `key` is the sync key of its epoch, `writer` the device its
    /// stamp names (nil: not a device this one knows). Anything but a record sealed for this
    /// group, under this name and epoch, and signed by its writer is errSecDecode.
    static func open(_ file: Bytes, id: Bytes, group: Bytes, key: Bytes, device: (Bytes) -> SyncDevice?) throws -> SyncRecord {
        guard let epoch = epoch(of: file) else { throw KeychainError.decode("not a record file") }
        let aad = additionalData(group: group, id: id, epoch: epoch)
        var plain = try Crypto.open(Array(file.dropFirst(8)), key: key, aad: aad)
        defer { plain.wipe() }
        var outer = ByteReader(plain)
        let body = try outer.blob()
        let signature = try outer.blob()
        _ = try outer.blob()
        guard outer.isAtEnd else { throw KeychainError.decode("trailing bytes in a record") }
        var r = ByteReader(body)
        let mdat = Double(bitPattern: try r.u64())
        let version = try r.u64()
        let writer = try r.blob()
        guard let signer = device(writer), signer.verify(signature, of: aad + body) else {
            throw KeychainError.decode("the record is not signed by a device of the group")
        }
        let tombstone = try r.u8() == 1
        guard let itemClass = ItemClass(code: Int64(bitPattern: try r.u64())) else { throw KeychainError.decode("unknown item class in a record") }
        let attributes = try decodeAttributes(try r.blob())
        let hasSecret = try r.u8() == 1
        let secret = try r.blob()
        guard r.isAtEnd, mdat.isFinite else { throw KeychainError.decode("a record's body is malformed") }
        return SyncRecord(
            id: id, itemClass: itemClass, attributes: attributes, secret: hasSecret ? secret : nil, tombstone: tombstone,
            stamp: SyncStamp(mdat: mdat, version: version, writer: writer))
    }

    /// The item's identity on every device: its class and primary key. Two records with one
    /// identity are one item written twice (on two devices before either saw the other).
    package static func identity(of itemClass: ItemClass, _ attributes: [String: AttributeValue]) -> Bytes {
        let key = primaryKey(of: Item(itemClass: itemClass, attributes: attributes))
        var w = ByteWriter()
        w.u64(UInt64(bitPattern: itemClass.code))
        return Crypto.sha256(w.bytes + encodeAttributes(key))
    }

    package var identity: Bytes { Self.identity(of: itemClass, attributes) }

    /// The primary-key attributes alone: what a tombstone carries.
    package static func primaryKey(of item: Item) -> [String: AttributeValue] {
        var key: [String: AttributeValue] = [:]
        for name in AttributeSchema.primaryKey(for: item.itemClass) { key[name] = item.effectiveValue(name) }
        return key
    }

    /// What the value is, for telling a conflict that lost a value from one that lost nothing.
    package var valueDigest: Bytes {
        var w = ByteWriter()
        w.u8(tombstone ? 1 : 0)
        w.u64(UInt64(bitPattern: itemClass.code))
        var attributes = self.attributes
        attributes[AttributeKey.modificationDate] = nil
        attributes[AttributeKey.creationDate] = nil
        w.blob(encodeAttributes(attributes))
        w.blob(secret ?? [])
        return Crypto.sha256(w.bytes)
    }
}
