/// Which attributes each class has, their types, defaults, and which of them make an item unique.
enum AttributeSchema {
    enum Kind {
        case string, data, number, bool, date
        /// A four-character code such as kSecAttrProtocolHTTPS ("htps"); numbers are accepted too.
        case code
        /// String or data (Apple stores account and service as blobs).
        case blob
        case protection
    }

    static let common: [String: Kind] = [
        "pdmn": .protection, "agrp": .string, "cdat": .date, "mdat": .date, "labl": .string, "sync": .bool,
    ]

    static let password: [String: Kind] = [
        "desc": .string, "icmt": .string, "crtr": .number, "type": .number, "invi": .bool, "nega": .bool,
        "acct": .blob,
    ]

    static let certificate: [String: Kind] = [
        "ctyp": .number, "cenc": .number, "subj": .data, "issr": .data, "slnr": .data, "skid": .data, "pkhh": .data,
    ]

    static let key: [String: Kind] = [
        "kcls": .number, "klbl": .data, "perm": .bool, "atag": .blob, "type": .number, "bsiz": .number, "esiz": .number,
        "encr": .bool, "decr": .bool, "drve": .bool, "sign": .bool, "vrfy": .bool, "wrap": .bool, "unwp": .bool,
        "crtr": .number,
    ]

    /// Built once: every add, lookup and primary-key hash asks for these.
    private static let byClass: [ItemClass: [String: Kind]] = {
        func merged(_ tables: [String: Kind]...) -> [String: Kind] {
            tables.reduce(into: [:]) { all, table in all.merge(table) { first, _ in first } }
        }
        return [
            .genericPassword: merged(common, password, ["svce": .blob, "gena": .data]),
            .internetPassword: merged(common, password, [
                "sdmn": .string, "srvr": .string, "ptcl": .code, "atyp": .code, "port": .number, "path": .string,
            ]),
            .certificate: merged(common, certificate),
            .key: merged(common, key),
            .identity: merged(common, certificate, key),
        ]
    }()

    static func kinds(for itemClass: ItemClass) -> [String: Kind] { byClass[itemClass]! }

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
        case .number?: return .int(0)
        case .bool?: return .bool(false)
        case .data?: return .data([])
        case .date?: return .date(0)
        default: return .string("")
        }
    }

    /// Checks and normalizes one value; a wrong type is errSecParam, never a crash or a silent cast.
    static func normalize(_ key: String, _ value: AttributeValue, for itemClass: ItemClass) throws -> AttributeValue {
        guard let kind = kinds(for: itemClass)[key] else {
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
        case (.code, .string), (.code, .int):
            return value
        case (.protection, .string(let s)):
            guard Protection(rawValue: s) != nil else { throw KeychainError.param("unknown kSecAttrAccessible value \(s)") }
            return value
        default:
            throw KeychainError.param("attribute \(key) has the wrong type")
        }
    }

    static func kind(_ key: String, for itemClass: ItemClass) -> Kind? { kinds(for: itemClass)[key] }
}
