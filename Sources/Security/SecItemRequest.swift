internal import KeychainCore
internal import KeychainPresence
internal import CFoundationBridge

/// A SecItem dictionary, checked and translated for the engine. Anything malformed is errSecParam.
struct SecItemRequest {
    enum Limit: Equatable {
        case one
        case count(Int)
        case all
    }

    var itemClass: ItemClass
    var attributes: [String: AttributeValue] = [:]
    var synchronizable: Query.Synchronizable?
    var secret: Bytes?
    var returnData = false
    var returnAttributes = false
    var returnRef = false
    var returnPersistentRef = false
    var limit: Limit?
    var caseInsensitive = false
    var rows: [Int64]?
    /// kSecValuePersistentRef: names its item by itself, class included.
    var reference: PersistentReference?
    var keychain: SecKeychain?
    /// kSecValueRef of a certificate, key or identity: what SecItemAdd stores, what a search names.
    var valueRef: AnyObject?
    var certificateFilter: CertificateFilter?
    var accessControl: SecAccessControl?
    var authenticationUI = PresenceInteraction.allow
    /// kSecUseOperationPrompt and kSecUseAuthenticationContext.
    var operationPrompt: String?
    var authenticationContext: AuthenticationContext?

    /// How many attributes the caller named, as securityd's query_attr_count counts them: every
    /// attribute key, kSecAttrSynchronizable included unless it is kSecAttrSynchronizableAny
    /// (which query_add_attribute_with_desc skips), kSecAttrAccessControl not (it is kept beside
    /// the attribute pairs); kSecClass, kSecReturn*, kSecMatch*, kSecUse* and kSecValue* are no
    /// attributes.
    private(set) var attributeCount = 0

    var returnCount: Int { [returnData, returnAttributes, returnRef, returnPersistentRef].filter { $0 }.count }

    /// A persistent reference names its row by itself: securityd refuses a row id together with
    /// any attribute (errSecItemIllegalQuery from s3dl_copy_matching, s3dl_query_update and
    /// _SecItemDelete), which reaches the caller as errSecParam.
    func checkReferenceAlone() throws {
        if reference != nil && attributeCount > 0 {
            throw KeychainError.param("a persistent reference and other attributes cannot be searched at the same time")
        }
    }

    /// Keys that ask for behaviour this engine gives anyway (the data-protection keychain is the
    /// only kind here; polkit's agent names the calling process itself).
    private static let accepted: Set<String> = ["nleg", "u_CallerName"]

    /// A dictionary as the caller passed it: keys are CFStrings (or Swift strings bridged, or
    /// `String?` keys); anything else as a key is errSecParam.
    init(_ dictionary: CFDictionary) throws {
        try self.init(Self.plain(dictionary))
    }

    static func plain(_ dictionary: CFDictionary) throws -> [String: Any] {
        // The objects the dictionary holds, read through CF (CFoundationBridge) and converted here
        // for the types a SecItem dictionary is made of: NSDictionary's Swift interface converts
        // every key and value, data byte by byte.
        let count = dictionary.count
        guard count > 0 else { return [:] }
        var keys = [UnsafeRawPointer?](repeating: nil, count: count)
        var values = [UnsafeRawPointer?](repeating: nil, count: count)
        let cf = UnsafeRawPointer(Unmanaged.passUnretained(dictionary).toOpaque())
        guard keychain_cf_dictionary_count(cf) == count else { return try converted(dictionary) }
        keychain_cf_dictionary_keys_and_values(cf, &keys, &values)
        var plain: [String: Any] = Dictionary(minimumCapacity: count)
        for index in 0..<count {
            guard let rawKey = keys[index], let rawValue = values[index] else { return try converted(dictionary) }
            let key = Unmanaged<AnyObject>.fromOpaque(rawKey).takeUnretainedValue()
            let value = Unmanaged<AnyObject>.fromOpaque(rawValue).takeUnretainedValue()
            // Anything but a string key takes Foundation's way, for its error.
            guard let name = string(key) else { return try converted(dictionary) }
            // Anything this does not know is converted by Foundation, as before.
            guard let converted = swiftValue(value) ?? dictionary.object(forKey: key) else { return try converted(dictionary) }
            plain[name] = converted
        }
        return plain
    }

    /// A key or value object that is a string, as Foundation's conversion would give it.
    private static func string(_ object: AnyObject) -> String? {
        (object as? NSString).map { $0 as String }
    }

    private static let booleans = (true: NSNumber(value: true), false: NSNumber(value: false))

    /// What Foundation's conversion (`__SwiftValue.fetch`) makes of the objects SecItem
    /// dictionaries hold most: strings, data, CF's two booleans and other numbers; nil for the rest.
    private static func swiftValue(_ object: AnyObject) -> Any? {
        if let text = string(object) { return text }
        if let data = object as? NSData { return data.length == 0 ? Data() : Data(bytes: data.bytes, count: data.length) }
        if object === booleans.true { return true }
        if object === booleans.false { return false }
        if let number = object as? NSNumber, String(cString: number.objCType) != "c" { return number }
        return nil
    }

    /// The dictionary as NSDictionary's Swift interface gives it (the way for anything unusual).
    private static func converted(_ dictionary: CFDictionary) throws -> [String: Any] {
        // enumerateKeysAndObjects hands each value with its key; NSDictionary's iterator looks
        // every key up again.
        var plain: [String: Any] = Dictionary(minimumCapacity: dictionary.count)
        var stranger: Any?
        dictionary.enumerateKeysAndObjects(options: []) { key, value, stop in
            guard let name = key as? String else {
                stranger = key
                stop.pointee = true
                return
            }
            plain[name] = value
        }
        if let stranger { throw KeychainError.param("a dictionary key is not a string (a \(type(of: stranger)))") }
        return plain
    }

    /// An item with an access control cannot be synchronizable (Apple's rule); whether this machine
    /// can meet its conditions is the engine's check.
    func checkAccessControlForWriting() throws {
        guard accessControl != nil else { return }
        if synchronizable == .yes {
            throw KeychainError.param("item with kSecAttrAccessControl is not synchronizable")
        }
    }

    /// What the engine needs to ask the person, or not.
    var presence: PresenceOptions {
        let reason = operationPrompt
        return PresenceOptions(
            interaction: authenticationUI, operationPrompt: operationPrompt, context: authenticationContext,
            askApplicationPassword: {
                try PinentryPrompt().ask(
                    description: reason ?? "An application wants to use a keychain item protected by an application password.",
                    prompt: "Application password:")
            })
    }

    /// Apple allows kSecUseAuthenticationUISkip in SecItemCopyMatching only.
    func checkNoSkip() throws {
        if authenticationUI == .skip {
            throw KeychainError.param("kSecUseAuthenticationUISkip is allowed only for SecItemCopyMatching")
        }
    }

    init(_ dictionary: [String: Any]) throws {
        // Before the engine opens a store for this call: polkit asks for the person, and
        // keychain-tpm-helper reaches the TPM of a sealed keychain.
        FrontEnd.prepare()
        // Apple lets kSecValueRef and kSecValuePersistentRef stand for kSecClass.
        guard
            let raw = dictionary["class"] ?? dictionary["v_Ref"].flatMap(Self.itemClass(of:))?.rawValue
                ?? dictionary["v_PersistentRef"].flatMap({ try? Self.persistentReference($0) })?.itemClass.rawValue
        else {
            throw KeychainError.param("the dictionary has no kSecClass")
        }
        guard let name = raw as? String, let cls = ItemClass(rawValue: name) else {
            // The type, not the value: describing an arbitrary caller value can itself trap
            // (a Date of NaN seconds does).
            throw KeychainError.param("unknown kSecClass (a \(type(of: raw)))")
        }
        itemClass = cls
        // kSecUseNoAuthenticationUI means Fail unless kSecUseAuthenticationUI says otherwise.
        if let noUI = dictionary["u_NoAuthUI"], try Self.flag(noUI, "kSecUseNoAuthenticationUI") { authenticationUI = .fail }
        for (key, value) in dictionary where key != "class" && key != "u_NoAuthUI" {
            try take(key, value)
        }
        if let filter = certificateFilter, cls != .certificate && cls != .identity,
            filter.subjectContains != nil || filter.emailAddressIfPresent != nil || filter.issuers != nil
        {
            throw KeychainError.param("certificate search keys in a search for \(cls.rawValue) items")
        }
        if let accessControl {
            let protection = AttributeValue.string(accessControl.protection.rawValue)
            if let given = attributes[AttributeKey.accessible], given != protection {
                throw KeychainError.param("kSecAttrAccessible disagrees with the protection of kSecAttrAccessControl")
            }
            attributes[AttributeKey.accessible] = protection
            attributes[AttributeKey.accessControl] = .int(Int64(accessControl.flags.rawValue))
        }
        if cls != .certificate && cls != .identity { certificateFilter = nil }
        certificateFilter?.caseInsensitive = caseInsensitive
    }

    static func itemClass(of reference: Any) -> ItemClass? {
        switch reference {
        case is SecCertificate: return .certificate
        case is SecKey: return .key
        case is SecIdentity: return .identity
        case let item as SecKeychainItem: return item.itemClass
        default: return nil
        }
    }

    private mutating func filter(_ change: (inout CertificateFilter) -> Void) {
        var filter = certificateFilter ?? CertificateFilter()
        change(&filter)
        certificateFilter = filter
    }

    private mutating func take(_ key: String, _ value: Any) throws {
        // Most keys are attributes: they skip the string comparisons of every case below, which
        // name kSecReturn*, kSecMatch*, kSecUse* and kSecValue* keys ("r_Data": a letter and an
        // underscore) and three attributes of their own.
        if !Self.isSpecial(key) { return try takeAttribute(key, value) }
        switch key {
        case "r_Data": returnData = try Self.flag(value, key)
        case "r_Attributes": returnAttributes = try Self.flag(value, key)
        case "r_Ref": returnRef = try Self.flag(value, key)
        case "r_PersistentRef": returnPersistentRef = try Self.flag(value, key)
        case "m_CaseInsensitive": caseInsensitive = try Self.flag(value, key)
        case "m_Limit": limit = try Self.limit(value)
        case "v_Data":
            guard let data = value as? Data else { throw KeychainError.param("kSecValueData must be Data") }
            secret = Array(data)
        case "v_PersistentRef":
            let ref = try Self.persistentReference(value)
            reference = ref
            addRows([ref.rowID])
        case "v_Ref":
            if let ref = value as? SecKeychainItem {
                addRows([ref.rowID])
            } else if Self.itemClass(of: value) != nil {
                valueRef = value as AnyObject
            } else {
                throw KeychainError.param("kSecValueRef must be an item, certificate, key or identity reference")
            }
        case "m_ItemList":
            guard let list = value as? [Any], !list.isEmpty else { throw KeychainError.param("kSecMatchItemList must be a non-empty array") }
            addRows(
                try list.map { entry in
                    if let ref = entry as? SecKeychainItem { return ref.rowID }
                    if let stored = Self.storedReference(entry) { return stored.rowID }
                    if Self.itemClass(of: entry) != nil {
                        throw KeychainError(.unimplemented, "kSecMatchItemList with references to items in no keychain")
                    }
                    return try Self.persistentReference(entry).rowID
                })
        case "m_SubjectContains":
            guard let text = value as? String else { throw KeychainError.param("kSecMatchSubjectContains must be a string") }
            filter { $0.subjectContains = text }
        case "m_EmailAddressIfPresent":
            guard let text = value as? String else { throw KeychainError.param("kSecMatchEmailAddressIfPresent must be a string") }
            filter { $0.emailAddressIfPresent = text }
        case "m_Issuers":
            guard let list = value as? [Any], !list.isEmpty,
                case let names = list.compactMap({ $0 as? Data }), names.count == list.count
            else {
                throw KeychainError.param("kSecMatchIssuers must be a non-empty array of X.500 names (Data)")
            }
            filter { $0.issuers = names.map { Array($0) } }
        case "m_ValidOnDate":
            let seconds: Double
            if value is NSNull {
                seconds = SystemClock.now()
            } else if let date = value as? Date, date.timeIntervalSince1970.isFinite {
                seconds = date.timeIntervalSince1970
            } else {
                throw KeychainError.param("kSecMatchValidOnDate must be a date or kCFNull")
            }
            filter { $0.validOn = seconds }
        case "m_TrustedOnly":
            if try Self.flag(value, key) {
                throw KeychainError(.unimplemented, "kSecMatchTrustedOnly: trust settings are not kept in this keychain")
            }
        case "u_Keychain":
            guard let kc = value as? SecKeychain else { throw KeychainError.param("kSecUseKeychain must be a SecKeychain") }
            keychain = kc
        case AttributeKey.synchronizable:
            if let s = value as? String {
                guard s == "syna" else { throw KeychainError.param("kSecAttrSynchronizable must be a boolean or kSecAttrSynchronizableAny") }
                synchronizable = .any
            } else {
                synchronizable = try Self.flag(value, key) ? .yes : .no
                attributeCount += 1
            }
        case AttributeKey.accessControl:
            guard let control = value as? SecAccessControl else {
                throw KeychainError.param("Unexpected type of kSecAttrAccessControl attribute")
            }
            accessControl = control
        case "acls":
            // kSecAttrAccess: the item's access list, kept under the engine's own attribute.
            guard let access = value as? SecAccess else { throw KeychainError.param("kSecAttrAccess must be a SecAccess (SecAccessCreate)") }
            attributes[AccessList.attribute] = .string(access.list.text)
            attributeCount += 1
        case AccessList.attribute:
            throw KeychainError.param("\(key) is not an attribute of Apple's API; give the item's access as kSecAttrAccess")
        case "u_AuthUI":
            switch value as? String {
            case "u_AuthUIA": authenticationUI = .allow
            case "u_AuthUIF": authenticationUI = .fail
            case "u_AuthUIS": authenticationUI = .skip
            default: throw KeychainError.param("kSecUseAuthenticationUI must be kSecUseAuthenticationUIAllow, Fail or Skip")
            }
        case "u_OpPrompt":
            guard let prompt = value as? String else { throw KeychainError.param("kSecUseOperationPrompt must be a string") }
            operationPrompt = prompt
        case "u_AuthCtx":
            guard let provider = value as? AuthenticationContextProviding else {
                throw KeychainError.param("kSecUseAuthenticationContext must be an LAContext")
            }
            authenticationContext = provider.authenticationContext
        case _ where Self.accepted.contains(key):
            break
        case _ where key.hasPrefix("m_") || key.hasPrefix("r_") || key.hasPrefix("u_") || key.hasPrefix("v_"):
            throw KeychainError(.unimplemented, "\(key) is not supported for \(itemClass.rawValue) items")
        default:
            try takeAttribute(key, value)
        }
    }

    private static func isSpecial(_ key: String) -> Bool {
        let utf8 = key.utf8
        if utf8.count >= 2, utf8[utf8.index(after: utf8.startIndex)] == UInt8(ascii: "_") { return true }
        return key == AttributeKey.synchronizable || key == AttributeKey.accessControl || key == "acls" || key == AccessList.attribute
            || accepted.contains(key)
    }

    private mutating func takeAttribute(_ key: String, _ value: Any) throws {
        // The access list is the engine's: refused as any attribute the class lacks is.
        if key == AccessList.attribute { throw KeychainError.param("attribute \(key) does not belong to class \(itemClass.rawValue)") }
        guard let converted = Self.attributeValue(value) else {
            throw KeychainError.param("attribute \(key) has a value of an unsupported type")
        }
        attributes[key] = converted
        attributeCount += 1
    }

    private mutating func addRows(_ new: [Int64]) {
        rows = (rows ?? []) + new
    }

    /// The engine's query for this dictionary's search part. A reference from a keychain names
    /// its row; one made in memory names what makes its item unique.
    var query: Query {
        var q = reference.map(Query.init(reference:)) ?? Query(itemClass: itemClass)
        // A kSecClass other than the reference's own matches nothing.
        q.itemClass = itemClass
        q.attributes = attributes
        if let synchronizable { q.synchronizable = synchronizable }
        q.caseInsensitive = caseInsensitive
        q.rows = rows
        q.certificateFilter = certificateFilter
        if let valueRef {
            if let stored = Self.storedReference(valueRef) {
                q.rows = (q.rows ?? []) + [stored.rowID]
            } else if let certificate = (valueRef as? SecCertificate) ?? (valueRef as? SecIdentity)?.certificate {
                q.attributes[AttributeKey.issuer] = .data(certificate.certificate.issuer)
                q.attributes[AttributeKey.serialNumber] = .data(certificate.certificate.serialNumber)
            } else if let key = valueRef as? SecKey {
                if let label = key.attributes[AttributeKey.applicationLabel] { q.attributes[AttributeKey.applicationLabel] = label }
                if let keyClass = key.attributes[AttributeKey.keyClass] { q.attributes[AttributeKey.keyClass] = keyClass }
            }
        }
        return q
    }

    static func storedReference(_ reference: Any) -> StoredReference? {
        switch reference {
        case let certificate as SecCertificate: return certificate.stored
        case let key as SecKey: return key.stored
        case let identity as SecIdentity: return identity.certificate.stored
        default: return nil
        }
    }

    static func flag(_ value: Any, _ key: String) throws -> Bool {
        if let n = value as? NSNumber, type(of: value) != String.self { return n.boolValue }
        throw KeychainError.param("\(key) must be a boolean")
    }

    static func limit(_ value: Any) throws -> Limit {
        if let s = value as? String {
            switch s {
            case "m_LimitOne": return .one
            case "m_LimitAll": return .all
            default: throw KeychainError.param("unknown kSecMatchLimit \(s)")
            }
        }
        guard type(of: value) != Bool.self, let n = value as? NSNumber, String(cString: n.objCType) != "c" || n.intValue > 1,
            let count = integer(n), count >= 1
        else {
            throw KeychainError.param("kSecMatchLimit must be kSecMatchLimitOne, kSecMatchLimitAll or a number of at least 1")
        }
        return count == 1 ? .one : .count(Int(clamping: count))
    }

    static func persistentReference(_ value: Any) throws -> PersistentReference {
        guard let data = value as? Data, let ref = PersistentReference(bytes: Array(data)) else {
            throw KeychainError.param("not a persistent reference")
        }
        return ref
    }

    /// CF values to engine values. Linux Foundation has no CFBoolean, but an NSNumber made from a
    /// Bool reports the objCType "c", which tells booleans from numbers.
    static func attributeValue(_ value: Any) -> AttributeValue? {
        switch value {
        case let s as String: return .string(s)
        case let d as Data: return .data(Array(d))
        case let d as Date: return d.timeIntervalSince1970.isFinite ? .date(d.timeIntervalSince1970) : nil
        default: break
        }
        if type(of: value) == Bool.self, let b = value as? Bool { return .bool(b) }
        if let n = value as? NSNumber {
            if String(cString: n.objCType) == "c", n.int64Value == 0 || n.int64Value == 1 { return .bool(n.boolValue) }
            return integer(n).map { .int($0) }
        }
        return nil
    }

    /// A number as Int64, or nil for NaN, infinities, fractions and integers beyond Int64 (a
    /// large UInt64 would otherwise wrap around, and converting a non-finite double traps).
    static func integer(_ n: NSNumber) -> Int64? {
        switch String(cString: n.objCType) {
        case "f", "d":
            let double = n.doubleValue
            guard double.isFinite, double == double.rounded(), double >= -9.223372036854775808e18,
                double < 9.223372036854775808e18
            else { return nil }
            return Int64(double)
        case "Q", "L", "I", "S", "C":
            return n.uint64Value <= UInt64(Int64.max) ? Int64(n.uint64Value) : nil
        default:
            return n.int64Value
        }
    }
}
