internal import KeychainCore

/// A generic-password query with typed properties, after SAMKeychainQuery. It builds SecItem
/// dictionaries, so it behaves exactly as the functions it calls.
public final class KeychainQuery {
    public enum SynchronizationMode: Sendable { case any, no, yes }

    public var account: String?
    public var service: String?
    public var label: String?
    public var accessGroup: String?
    public var synchronizationMode: SynchronizationMode = .any
    /// The keychain to use; nil means the default keychain.
    public var keychain: SecKeychain?
    public var passwordData: Data?

    public init(service: String? = nil, account: String? = nil) {
        self.service = service
        self.account = account
    }

    /// The password as UTF-8 text.
    public var password: String? {
        get { passwordData.flatMap { String(data: $0, encoding: .utf8) } }
        set { passwordData = newValue.map { Data($0.utf8) } }
    }

    /// Stores any Codable value as the password data (a binary property list, as NSKeyedArchiver
    /// would on Apple's systems).
    public func setPasswordObject<T: Encodable>(_ object: T?) throws {
        guard let object else {
            passwordData = nil
            return
        }
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        passwordData = try encoder.encode(Boxed(value: object))
    }

    public func passwordObject<T: Decodable>(_ type: T.Type = T.self) throws -> T? {
        guard let passwordData else { return nil }
        return try PropertyListDecoder().decode(Unboxed<T>.self, from: passwordData).value
    }

    // Property lists need a container at the top level; the wrapper lets plain strings and numbers through.
    private struct Boxed<T: Encodable>: Encodable { var value: T }
    private struct Unboxed<T: Decodable>: Decodable { var value: T }

    public static var isSynchronizationAvailable: Bool { false }

    /// Saves the item: updates the existing one with this account, service and access group, or
    /// adds it. Fails with errSecParam without password data.
    public func save() throws {
        guard let passwordData else { throw SecError(errSecParam, "no password to save") }
        var query = baseQuery()
        var status = SecItemCopyMatching(query as CFDictionary, nil)
        if status == errSecSuccess {
            var changes: [String: Any] = [kSecValueData as String: passwordData]
            if let label { changes[kSecAttrLabel as String] = label }
            status = SecItemUpdate(query as CFDictionary, changes as CFDictionary)
        } else if status == errSecItemNotFound {
            query[kSecValueData as String] = passwordData
            if let label { query[kSecAttrLabel as String] = label }
            if synchronizationMode == .any { query[kSecAttrSynchronizable as String] = nil }
            status = SecItemAdd(query as CFDictionary, nil)
        }
        try check(status)
    }

    public func deleteItem() throws {
        try check(SecItemDelete(baseQuery() as CFDictionary))
    }

    /// Fetches the one matching item's password into `passwordData`.
    public func fetch() throws {
        var query = baseQuery()
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        try check(SecItemCopyMatching(query as CFDictionary, &result))
        passwordData = result as? Data
    }

    /// Every matching item's attributes; an empty array when none match.
    public func fetchAll() throws -> [[String: Any]] {
        var query = baseQuery()
        query[kSecReturnAttributes as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        try check(status)
        return (result as? [[String: Any]]) ?? []
    }

    private func baseQuery() -> [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
        if let service { query[kSecAttrService as String] = service }
        if let account { query[kSecAttrAccount as String] = account }
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        if let keychain { query[kSecUseKeychain as String] = keychain }
        switch synchronizationMode {
        case .any: query[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
        case .no: query[kSecAttrSynchronizable as String] = false
        case .yes: query[kSecAttrSynchronizable as String] = true
        }
        return query
    }

    private func check(_ status: OSStatus) throws {
        if status != errSecSuccess { throw SecError(status) }
    }
}
