/// A keychain item as the engine hands it out: attributes with defaults filled in, and the secret
/// when it was asked for.
package struct Item: Sendable {
    package var itemClass: ItemClass
    package var attributes: [String: AttributeValue]
    /// nil when not asked for, and for an item that has no data (added without any).
    package var secret: Bytes?
    package internal(set) var rowID: Int64 = 0

    package init(itemClass: ItemClass, attributes: [String: AttributeValue] = [:], secret: Bytes? = nil) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.secret = secret
    }

    package subscript(key: String) -> AttributeValue? {
        get { attributes[key] }
        set { attributes[key] = newValue }
    }

    package var protection: Protection {
        attributes[AttributeKey.accessible]?.stringValue.flatMap(Protection.init(rawValue:)) ?? .whenUnlocked
    }

    package var persistentReference: PersistentReference { PersistentReference(itemClass: itemClass, rowID: rowID) }

    /// The value that counts for matching and uniqueness: the stored one or the class default.
    package func effectiveValue(_ key: String) -> AttributeValue {
        attributes[key] ?? AttributeSchema.defaultValue(key, kind: AttributeSchema.kind(key, for: itemClass))
    }
}

/// Apple's persistent reference: the class code and the row, stable across processes.
/// Rows are never reused (AUTOINCREMENT), so an old reference cannot name a newer item.
package struct PersistentReference: Equatable, Hashable, Sendable {
    package var itemClass: ItemClass
    package var rowID: Int64

    package init(itemClass: ItemClass, rowID: Int64) {
        self.itemClass = itemClass
        self.rowID = rowID
    }

    package init?(bytes: Bytes) {
        guard bytes.count == 12, let cls = ItemClass(rawValue: String(decoding: bytes[0..<4], as: UTF8.self)) else { return nil }
        var row: UInt64 = 0
        for b in bytes[4..<12] { row = row << 8 | UInt64(b) }
        guard row > 0, row <= UInt64(Int64.max) else { return nil }
        itemClass = cls
        rowID = Int64(row)
    }

    package var bytes: Bytes { Array(itemClass.rawValue.utf8) + Bytes(bigEndian: UInt64(rowID)) }
}

/// What a search asks for. Attributes absent from `attributes` are wildcards.
package struct Query: Sendable {
    package enum Synchronizable: Sendable { case no, yes, any }

    package var itemClass: ItemClass
    package var attributes: [String: AttributeValue]
    package var synchronizable: Synchronizable = .no
    package var caseInsensitive = false
    /// kSecMatchItemList / kSecValuePersistentRef: only these rows.
    package var rows: [Int64]?
    /// kSecMatchSubjectContains, kSecMatchIssuers, ...: conditions on a certificate's data.
    package var certificateFilter: CertificateFilter?
    /// Whether items a sandboxed app made through the Secret Service match. They match only a
    /// query that names their access group or their row, or one that asks for them (a listing):
    /// otherwise an app could plant the item another program then finds in place of its own.
    package var includesAppItems = false

    package init(itemClass: ItemClass, attributes: [String: AttributeValue] = [:]) {
        self.itemClass = itemClass
        self.attributes = attributes
    }

    /// The one item a persistent reference names, whether it is synchronizable or not: Apple adds
    /// no kSecAttrSynchronizable filter to a query that holds one (SecDbQuery.c,
    /// query_create_with_limit).
    package init(reference: PersistentReference) {
        self.init(itemClass: reference.itemClass)
        rows = [reference.rowID]
        synchronizable = .any
    }

    /// The query that names exactly the item `item` would collide with: every attribute of its
    /// class's primary key, with the default an absent one stands for.
    package init(identifying item: Item) {
        self.init(itemClass: item.itemClass)
        let identifying = AttributeSchema.identifyingDefaults(for: item.itemClass)
        attributes.reserveCapacity(identifying.count)
        for (name, absent) in identifying {
            attributes[name] = item.attributes[name] ?? absent
        }
        synchronizable = item.effectiveValue(AttributeKey.synchronizable).boolValue == true ? .yes : .no
    }

    func matches(_ item: Item) -> Bool {
        if !includesAppItems, rows == nil, attributes[AttributeKey.accessGroup] == nil, item.attributes[AttributeKey.owner] != nil { return false }
        switch synchronizable {
        case .any: break
        case .no: if item.effectiveValue(AttributeKey.synchronizable).boolValue == true { return false }
        case .yes: if item.effectiveValue(AttributeKey.synchronizable).boolValue != true { return false }
        }
        for (key, wanted) in attributes where !item.effectiveValue(key).matches(wanted, caseInsensitive: caseInsensitive) {
            return false
        }
        return true
    }
}
