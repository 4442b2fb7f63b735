/// Which attributes each class has, their types, defaults, and which of them make an item unique.
enum AttributeSchema {
    enum Kind {
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
        case "pdmn": return .protection
        case "agrp", "labl": return .string
        case "cdat", "mdat": return .date
        case "sync": return .bool
        // kSecAttrAccessControl's conditions (SecAccessControlCreateFlags); its protection class is pdmn.
        case "accc": return .number
        default: return nil
        }
    }

    private static func passwordKind(_ key: String) -> Kind? {
        switch key {
        case "desc", "icmt": return .string
        case "crtr", "type": return .number
        case "invi", "nega": return .bool
        case "acct": return .blob
        // What the Secret Service keeps beyond Apple's attributes (SecretServiceItems.swift).
        case SecretAttributes.storedKey: return .data
        case SecretAttributes.contentTypeKey, SecretAttributes.ownerKey: return .string
        default: return nil
        }
    }

    private static func genericPasswordKind(_ key: String) -> Kind? {
        switch key {
        case "svce": return .blob
        case "gena": return .data
        default: return nil
        }
    }

    private static func internetPasswordKind(_ key: String) -> Kind? {
        switch key {
        case "sdmn", "srvr", "path": return .string
        case "ptcl", "atyp": return .code
        case "port": return .number
        default: return nil
        }
    }

    private static func certificateKind(_ key: String) -> Kind? {
        switch key {
        case "ctyp", "cenc": return .number
        case "subj", "issr", "slnr", "skid", "pkhh": return .data
        default: return nil
        }
    }

    private static func keyKind(_ key: String) -> Kind? {
        switch key {
        case "kcls", "type", "bsiz", "esiz": return .decimal
        case "crtr": return .number
        case "klbl": return .data
        case "atag": return .blob
        case "perm", "encr", "decr", "drve", "sign", "vrfy", "wrap", "unwp": return .bool
        default: return nil
        }
    }

    /// The attribute's type in this class, or nil if the class has no such attribute.
    static func kind(_ key: String, for itemClass: ItemClass) -> Kind? {
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
    static func primaryKey(for itemClass: ItemClass) -> [String] {
        switch itemClass {
        case .genericPassword: return ["acct", "svce", "agrp", "sync"]
        case .internetPassword: return ["acct", "sdmn", "srvr", "ptcl", "atyp", "port", "path", "agrp", "sync"]
        case .certificate, .identity: return ["ctyp", "issr", "slnr", "agrp", "sync"]
        case .key: return ["kcls", "klbl", "atag", "crtr", "type", "bsiz", "esiz", "agrp", "sync"]
        }
    }

    /// The attribute that the `service` index column holds.
    static func serviceKey(for itemClass: ItemClass) -> String {
        switch itemClass {
        case .genericPassword: return "svce"
        case .internetPassword: return "srvr"
        case .certificate, .identity: return "labl"
        case .key: return "atag"
        }
    }

    /// What a missing attribute counts as, for uniqueness and for matching.
    static func defaultValue(_ key: String, kind: Kind?) -> AttributeValue {
        switch key {
        case "ptcl": return .int(0)
        case "sync": return .bool(false)
        case "pdmn": return .string(Protection.whenUnlocked.rawValue)
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
