/// Which attributes each class has, their types, defaults, and which of them make an item unique.
package enum AttributeSchema {
    private typealias Key = AttributeKey

    package enum Kind {
        case string, data, number, bool, date
        /// A number that Apple's constants give as decimal text (kSecAttrKeyTypeRSA is "42").
        case decimal
        /// A four-character code such as kSecAttrProtocolHTTPS ("htps"); numbers are accepted too.
        case code
        /// String or data (Apple stores account and service as blobs).
        case blob
        case protection
    }

    // Switches rather than dictionaries: a helper process asks for a handful of kinds once, and
    // building dictionaries of enums costs it more (runtime metadata lookups) than the lookups.
    // When tables overlap, the first one named wins.

    private static func commonKind(_ key: String) -> Kind? {
        switch key {
        case Key.accessible: return .protection
        case Key.accessGroup, Key.label: return .string
        case Key.creationDate, Key.modificationDate: return .date
        case Key.synchronizable: return .bool
        // kSecAttrAccessControl's conditions (SecAccessControlCreateFlags); its protection class is pdmn.
        case Key.accessControl: return .number
        // The access list (AccessList.swift): the engine's, never a caller's to set or search.
        case AccessList.attribute: return .string
        default: return nil
        }
    }

    private static func passwordKind(_ key: String) -> Kind? {
        switch key {
        case Key.description, Key.comment: return .string
        case Key.creator, Key.type: return .number
        case Key.isInvisible, Key.isNegative: return .bool
        case Key.account: return .blob
        // What the Secret Service keeps beyond Apple's attributes (SecretServiceItems.swift).
        case AttributeKey.freeFormAttributes: return .data
        case AttributeKey.contentType, AttributeKey.owner: return .string
        default: return nil
        }
    }

    private static func genericPasswordKind(_ key: String) -> Kind? {
        switch key {
        case Key.service: return .blob
        case Key.generic: return .data
        default: return nil
        }
    }

    private static func internetPasswordKind(_ key: String) -> Kind? {
        switch key {
        case Key.securityDomain, Key.server, Key.path: return .string
        case Key.protocol, Key.authenticationType: return .code
        case Key.port: return .number
        default: return nil
        }
    }

    private static func certificateKind(_ key: String) -> Kind? {
        switch key {
        case Key.certificateType, Key.certificateEncoding: return .number
        case Key.subject, Key.issuer, Key.serialNumber, Key.subjectKeyID, Key.publicKeyHash: return .data
        default: return nil
        }
    }

    private static func keyKind(_ key: String) -> Kind? {
        switch key {
        case Key.keyClass, Key.keyType, Key.keySizeInBits, Key.effectiveKeySize: return .decimal
        case Key.creator: return .number
        case Key.applicationLabel: return .data
        case Key.applicationTag: return .blob
        case Key.isPermanent, Key.canEncrypt, Key.canDecrypt, Key.canDerive, Key.canSign, Key.canVerify, Key.canWrap,
            Key.canUnwrap:
            return .bool
        default: return nil
        }
    }

    /// The attribute's type in this class, or nil if the class has no such attribute.
    package static func kind(_ key: String, for itemClass: ItemClass) -> Kind? {
        if let kind = commonKind(key) { return kind }
        switch itemClass {
        case .genericPassword: return passwordKind(key) ?? genericPasswordKind(key)
        case .internetPassword: return passwordKind(key) ?? internetPasswordKind(key)
        case .certificate: return certificateKind(key)
        case .key: return keyKind(key)
        case .identity: return certificateKind(key) ?? keyKind(key)
        }
    }

    /// Apple's primary keys: two items that agree on all of these are duplicates.
    package static func primaryKey(for itemClass: ItemClass) -> [String] {
        switch itemClass {
        case .genericPassword: return [Key.account, Key.service, Key.accessGroup, Key.synchronizable]
        case .internetPassword:
            return [
                Key.account, Key.securityDomain, Key.server, Key.protocol, Key.authenticationType, Key.port,
                Key.path, Key.accessGroup, Key.synchronizable
            ]
        case .certificate, .identity: return [Key.certificateType, Key.issuer, Key.serialNumber, Key.accessGroup, Key.synchronizable]
        case .key:
            return [
                Key.keyClass, Key.applicationLabel, Key.applicationTag, Key.creator, Key.keyType, Key.keySizeInBits,
                Key.effectiveKeySize, Key.accessGroup, Key.synchronizable
            ]
        }
    }

    /// The primary key's attributes but synchronizable (which a query names apart), each with the
    /// default an absent one stands for: made once, since every add and every imported line asks.
    static func identifyingDefaults(for itemClass: ItemClass) -> [(name: String, value: AttributeValue)] {
        identifyingDefaultsByCode[Int(itemClass.code) - 1]
    }

    private static let identifyingDefaultsByCode: [[(name: String, value: AttributeValue)]] =
        primaryKeyFieldsByCode.map { fields in fields.filter { $0.name != Key.synchronizable }.map { ($0.name, $0.missing) } }

    /// The primary key's attributes in order, each with its kind and the default an absent one
    /// stands for: what the primary-key hash of every add and update is made of, worked out once
    /// (each `kind` is a string switch, two per attribute otherwise).
    static func primaryKeyFields(for itemClass: ItemClass) -> [(name: String, kind: Kind?, missing: AttributeValue)] {
        primaryKeyFieldsByCode[Int(itemClass.code) - 1]
    }

    private static let primaryKeyFieldsByCode: [[(name: String, kind: Kind?, missing: AttributeValue)]] =
        ItemClass.allCases.sorted { $0.code < $1.code }.map { itemClass in
            primaryKey(for: itemClass).map { name in
                let kind = kind(name, for: itemClass)
                return (name, kind, defaultValue(name, kind: kind))
            }
        }

    /// The attribute that the `service` index column holds.
    package static func serviceKey(for itemClass: ItemClass) -> String {
        switch itemClass {
        case .genericPassword: return Key.service
        case .internetPassword: return Key.server
        case .certificate, .identity: return Key.label
        case .key: return Key.applicationTag
        }
    }

    /// What a missing attribute counts as, for uniqueness and for matching.
    package static func defaultValue(_ key: String, kind: Kind?) -> AttributeValue {
        switch key {
        case Key.protocol: return .int(0)
        case Key.synchronizable: return .bool(false)
        case Key.accessible: return .string(Protection.whenUnlocked.rawValue)
        default: break
        }
        switch kind {
        case .number?, .decimal?: return .int(0)
        case .bool?: return .bool(false)
        case .data?: return .data([])
        case .date?: return .date(0)
        default: return .string("")
        }
    }

    /// Checks and normalizes one value; a wrong type is errSecParam, never a crash or a silent cast.
    static func normalize(_ key: String, _ value: AttributeValue, for itemClass: ItemClass) throws -> AttributeValue {
        guard let kind = kind(key, for: itemClass) else {
            throw KeychainError.param("attribute \(key) does not belong to class \(itemClass.rawValue)")
        }
        switch (kind, value) {
        case (.string, .string), (.data, .data), (.bool, .bool), (.date, .date), (.number, .int),
            (.blob, .string), (.blob, .data):
            return value
        case (.data, .string(let s)):
            return .data(Array(s.utf8))
        case (.bool, .int(let i)) where i == 0 || i == 1:
            return .bool(i == 1)
        case (.number, .bool(let b)):
            return .int(b ? 1 : 0)
        case (.number, .string(let s)) where s.utf8.count == 4:
            // Creator and type are four-character codes held in a number, as on macOS.
            return .int(Int64(s.utf8.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }))
        case (.decimal, .int):
            return value
        case (.decimal, .string(let s)):
            guard let number = Int64(s) else { throw KeychainError.param("attribute \(key) must be a number") }
            return .int(number)
        case (.code, .string), (.code, .int):
            return value
        case (.protection, .string(let s)):
            guard Protection(rawValue: s) != nil else { throw KeychainError.param("unknown kSecAttrAccessible value \(s)") }
            return value
        default:
            throw KeychainError.param("attribute \(key) has the wrong type")
        }
    }

}
