/// Where unlocked class keys are kept.
public enum KeyStorage: Sendable {
    /// The user's persistent kernel keyring: shared by all the user's processes, gone at reboot.
    case kernel
    /// This process's memory only (embedded mode for apps and tests); never touches the kernel.
    case process
}

/// The class keys one operation can use, and the subkeys derived from them. An index key exists
/// per key space: AC items are indexed under a key from C, so a lookup can tell "locked" from
/// "not found" while only WhenUnlocked is locked; Always items under a key from D.
struct ClassKeys {
    private var keys: [LockClass: Bytes] = [:]

    init(a: Bytes?, c: Bytes?, d: Bytes) {
        keys[.whenUnlocked] = a
        keys[.afterFirstUnlock] = c
        keys[.always] = d
    }

    func has(_ lockClass: LockClass) -> Bool { keys[lockClass] != nil }

    /// Writing an item needs its class key and the index key of its space.
    func canWrite(_ lockClass: LockClass) -> Bool { has(lockClass) && indexKey(KeySpace(lockClass)) != nil }

    func metadataKey(_ lockClass: LockClass) -> Bytes? { keys[lockClass].map { Crypto.deriveKey($0, purpose: "metadata") } }
    func wrappingKey(_ lockClass: LockClass) -> Bytes? { keys[lockClass].map { Crypto.deriveKey($0, purpose: "item-keys") } }

    func indexKey(_ space: KeySpace) -> Bytes? {
        switch space {
        case .protected: return keys[.afterFirstUnlock].map { Crypto.deriveKey($0, purpose: "index") }
        case .always: return keys[.always].map { Crypto.deriveKey($0, purpose: "index") }
        }
    }

    mutating func wipe() {
        for k in keys.keys { keys[k]!.wipe() }
    }
}

/// Rows are indexed in one of two spaces, by the lock class of their item.
enum KeySpace: Int64, CaseIterable {
    case protected = 1
    case always = 2

    init(_ lockClass: LockClass) { self = lockClass == .always ? .always : .protected }
}

/// What `security status` and `show-keychain-info` report.
public struct LockStatus: Equatable, Sendable {
    public var whenUnlocked: Bool
    public var afterFirstUnlock: Bool
    public var storage: KeyStorage
    public var settings: KeychainSettings
}
