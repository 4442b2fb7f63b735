package import KeychainCore

/// What kSecReturnRef gives for a password item (macOS's SecKeychainItemRef): it names one row of
/// one keychain, and can be passed back in kSecValueRef or kSecMatchItemList.
public final class SecKeychainItem: CustomStringConvertible {
    package let itemClass: ItemClass
    public let rowID: Int64
    public let keychainPath: String

    init(itemClass: ItemClass, rowID: Int64, keychainPath: String) {
        self.itemClass = itemClass
        self.rowID = rowID
        self.keychainPath = keychainPath
    }

    public var description: String { "<SecKeychainItem \(itemClass.rawValue) \(rowID) in \(keychainPath)>" }
}

/// Turns engine items into the CF-shaped objects Apple's API returns.
enum SecItemResult {
    /// The attributes every item of a class reports, present or not (as Apple's do).
    static func reportedKeys(_ itemClass: ItemClass) -> [String] {
        let common = [
            AttributeKey.account, AttributeKey.accessGroup, AttributeKey.accessible, AttributeKey.synchronizable, AttributeKey.creationDate,
            AttributeKey.modificationDate, AttributeKey.sha1
        ]
        switch itemClass {
        case .genericPassword: return common + [AttributeKey.service]
        case .internetPassword:
            return common + [
                AttributeKey.securityDomain, AttributeKey.server, AttributeKey.protocol, AttributeKey.authenticationType, AttributeKey.port, AttributeKey.path
            ]
        default: return common.filter { $0 != AttributeKey.account }
        }
    }

    static func object(_ value: AttributeValue) -> Any {
        switch value {
        case .string(let s): return s
        case .data(let d): return Data(d)
        case .int(let i): return NSNumber(value: i)
        case .bool(let b): return NSNumber(value: b)
        case .date(let t): return Date(timeIntervalSince1970: t)
        }
    }

    static func attributes(_ item: Item) -> [String: Any] {
        var out: [String: Any] = [:]
        for key in reportedKeys(item.itemClass) {
            var value = item.effectiveValue(key)
            // Booleans such as sync are reported as the numbers 0 and 1.
            if key == AttributeKey.synchronizable, let b = value.boolValue { value = .int(b ? 1 : 0) }
            out[key] = object(value)
        }
        // The access list is not an Apple attribute (`security access` shows it).
        for (key, value) in item.attributes where out[key] == nil && key != AccessList.attribute {
            out[key] = object(value)
        }
        // kSecAttrAccessControl comes back as the object it was given as.
        if let flags = item.attributes[AttributeKey.accessControl]?.intValue {
            out[AttributeKey.accessControl] = SecAccessControl(
                protection: item.protection,
                flags: SecAccessControlCreateFlags(rawValue: CFOptionFlags(truncatingIfNeeded: flags)))
        }
        return out
    }

    /// What kSecReturnRef gives: a SecCertificate or SecKey made from the item's data, a
    /// SecKeychainItem for passwords.
    static func reference(_ item: Item, keychain: SecKeychain) -> AnyObject {
        let stored = StoredReference(rowID: item.rowID, keychainPath: keychain.path)
        switch item.itemClass {
        case .certificate:
            if let certificate = try? Certificate(der: item.secret ?? []) { return SecCertificate(certificate, stored: stored) }
        case .key:
            if item.effectiveValue(AttributeKey.keyClass).intValue == KeyClass.symmetric.rawValue {
                return SecKey(symmetric: item.secret ?? [], attributes: item.attributes, stored: stored)
            }
            let keyClass = item.effectiveValue(AttributeKey.keyClass).intValue.flatMap(KeyClass.init(rawValue:))
            if let material = try? KeyMaterial(data: item.secret ?? [], keyClass: keyClass) {
                return SecKey(material, attributes: item.attributes, stored: stored)
            }
        default:
            break
        }
        return SecKeychainItem(itemClass: item.itemClass, rowID: item.rowID, keychainPath: keychain.path)
    }

    /// An identity's results: its certificate's data, both halves' attributes, a SecIdentity.
    static func build(_ identity: Identity, request: SecItemRequest, keychain: SecKeychain) -> AnyObject? {
        var merged = identity.certificate
        merged.itemClass = .identity
        for (name, value) in identity.privateKey.attributes where merged.attributes[name] == nil && ItemClass.key.has(name) {
            merged.attributes[name] = value
        }
        return build(merged, request: request, keychain: keychain) { () -> AnyObject in
            guard let certificate = reference(identity.certificate, keychain: keychain) as? SecCertificate,
                let key = reference(identity.privateKey, keychain: keychain) as? SecKey
            else { return NSNull() }
            return SecIdentity(certificate: certificate, privateKey: key)
        }
    }

    /// One result per item: a single value for one return type, a dictionary for several.
    static func build(_ item: Item, request: SecItemRequest, keychain: SecKeychain) -> AnyObject? {
        build(item, request: request, keychain: keychain) { reference(item, keychain: keychain) }
    }

    private static func build(_ item: Item, request: SecItemRequest, keychain: SecKeychain, reference ref: () -> AnyObject) -> AnyObject? {
        let persistent = { Data(item.persistentReference.bytes) }
        if request.returnCount > 1 {
            var dict: [String: Any] = request.returnAttributes ? attributes(item) : [:]
            if request.returnAttributes { dict["class"] = item.itemClass.rawValue }
            // An item without data has no kSecValueData key (Apple's handle_result, SecItemDb.c).
            if request.returnData, let secret = item.secret { dict["v_Data"] = Data(secret) }
            if request.returnRef { dict["v_Ref"] = ref() }
            if request.returnPersistentRef { dict["v_PersistentRef"] = persistent() }
            return NSDictionary(dictionary: dict)
        }
        if request.returnData { return NSData(data: Data(item.secret ?? [])) }
        if request.returnAttributes { return NSDictionary(dictionary: attributes(item)) }
        if request.returnPersistentRef { return NSData(data: persistent()) }
        if request.returnRef { return ref() }
        return nil
    }
}
