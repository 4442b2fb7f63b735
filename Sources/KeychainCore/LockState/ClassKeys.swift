/// Where unlocked class keys are kept.
package enum KeyStorage: Sendable {
    /// The user's persistent kernel keyring: shared by all the user's processes, gone at reboot.
    case kernel
    /// This process's memory only (embedded mode for apps and tests); never touches the kernel.
    case process
    /// A custodian's (`KeyCustodian`: keychain-broker): this process holds only the subkeys that
    /// read and search attributes, and asks the custodian for each item key.
    case broker
}

/// The class keys one operation can use, as their subkeys. An index key exists per key space: AC
/// items are indexed under a key from C, so a lookup can tell "locked" from "not found" while only
/// WhenUnlocked is locked; Always items under a key from D.
package struct ClassKeys {
    // Fields, not a dictionary: every SecItem call makes one of these.
    private let subkeys: PerLockClass<Subkeys>
    /// Whether ThisDeviceOnly items have their own class keys (a keychain sealed to a TPM).
    let separatesDeviceOnly: Bool

    init(_ subkeys: PerLockClass<Subkeys>, separatesDeviceOnly: Bool = false) {
        self.subkeys = subkeys
        self.separatesDeviceOnly = separatesDeviceOnly
    }

    init(_ subkeys: [LockClass: Subkeys], separatesDeviceOnly: Bool = false) {
        var table = PerLockClass<Subkeys>()
        for (lockClass, value) in subkeys { table[lockClass] = value }
        self.init(table, separatesDeviceOnly: separatesDeviceOnly)
    }

    /// The class key an item of `protection` is sealed under in this keychain.
    func lockClass(for protection: Protection) -> LockClass {
        protection.keyClass(separatingDeviceOnly: separatesDeviceOnly)
    }

    package func has(_ lockClass: LockClass) -> Bool { subkeys[lockClass] != nil }

    /// Writing an item needs its class key and the index key of its space.
    package func canWrite(_ lockClass: LockClass) -> Bool { has(lockClass) && indexKey(KeySpace(lockClass)) != nil }

    func metadataKey(_ lockClass: LockClass) -> Bytes? { subkeys[lockClass]?.metadata }
    /// The key of the settings MAC, when WhenUnlocked is open (`Keybag.settingsKey`).
    var settingsKey: Bytes? { subkeys[.whenUnlocked]?.settings }
    /// nil for a class whose keys a custodian keeps (`Subkeys(metadata:index:)`): its item keys
    /// are wrapped and unwrapped there.
    func wrappingKey(_ lockClass: LockClass) -> Bytes? { subkeys[lockClass]?.wrapping }

    package func indexKey(_ space: KeySpace) -> Crypto.HMACKey? {
        switch space {
        case .protected: return subkeys[.afterFirstUnlock]?.index
        case .always: return subkeys[.always]?.index
        }
    }
}

/// One optional value per lock class, in fields: what every call reads (the class keys, their
/// subkeys) without a dictionary's hashing and allocation.
struct PerLockClass<Value> {
    private var a: Value?
    private var c: Value?
    private var d: Value?
    private var au: Value?
    private var cu: Value?

    init() {}

    subscript(lockClass: LockClass) -> Value? {
        get {
            switch lockClass {
            case .whenUnlocked: return a
            case .afterFirstUnlock: return c
            case .always: return d
            case .whenUnlockedThisDeviceOnly: return au
            case .afterFirstUnlockThisDeviceOnly: return cu
            }
        }
        set {
            switch lockClass {
            case .whenUnlocked: a = newValue
            case .afterFirstUnlock: c = newValue
            case .always: d = newValue
            case .whenUnlockedThisDeviceOnly: au = newValue
            case .afterFirstUnlockThisDeviceOnly: cu = newValue
            }
        }
    }

    mutating func removeAll() { (a, c, d, au, cu) = (nil, nil, nil, nil, nil) }
}

/// The three subkeys of one class key: HKDF-Expand (one block each) with the class key as PRK.
/// Each is derived on first use (a helper process needs one or two of the nine) and a store keeps
/// them while the kernel keeps handing out the same class key (`matches`): deriving is two HMACs,
/// more than a whole lookup's other crypto. Wiped when the key is gone or replaced and when the
/// last reference goes.
/// Used only under the store's lock, like the rest of an operation.
final class Subkeys {
    /// Empty for subkeys a custodian handed out (`init(metadata:index:)`).
    private var classKey: Bytes
    private var metadataKey: Bytes?
    private var wrappingKey: Bytes?
    private var indexKey: Crypto.HMACKey?

    init(classKey: Bytes) { self.classKey = classKey }

    /// The subkeys a custodian gives a client for an open class: no class key, so no wrapping
    /// subkey and no settings key.
    init(metadata: Bytes, index: Bytes) {
        classKey = []
        metadataKey = metadata
        indexKey = Crypto.HMACKey(index)
    }

    var metadata: Bytes {
        if let metadataKey { return metadataKey }
        let key = Crypto.deriveKey(classKey, purpose: "metadata")
        metadataKey = key
        return key
    }

    var wrapping: Bytes? {
        if let wrappingKey { return wrappingKey }
        guard !classKey.isEmpty else { return nil }
        let key = Crypto.deriveKey(classKey, purpose: "item-keys")
        wrappingKey = key
        return key
    }

    var index: Crypto.HMACKey {
        if let indexKey { return indexKey }
        var key = Crypto.deriveKey(classKey, purpose: "index")
        defer { key.wipe() }
        let mac = Crypto.HMACKey(key)
        indexKey = mac
        return mac
    }

    /// Not kept: settings change rarely.
    var settings: Bytes? { classKey.isEmpty ? nil : Keybag.settingsKey(a: classKey) }

    /// Constant time: the class key is compared with one just read from the kernel.
    func matches(_ key: Bytes) -> Bool { !classKey.isEmpty && Crypto.equal(classKey, key) }

    /// Whether these are the subkeys a custodian handed out as `metadata` (the same class key).
    func matches(metadata: Bytes) -> Bool { classKey.isEmpty && metadataKey.map { Crypto.equal($0, metadata) } == true }

    deinit {
        classKey.wipe()
        metadataKey?.wipe()
        wrappingKey?.wipe()
    }
}

/// Rows are indexed in one of two spaces, by the lock class of their item.
package enum KeySpace: Int64, CaseIterable {
    case protected = 1
    case always = 2

    package init(_ lockClass: LockClass) { self = lockClass == .always ? .always : .protected }
}

/// What `security status` and `show-keychain-info` report.
package struct LockStatus: Equatable, Sendable {
    package var whenUnlocked: Bool
    package var afterFirstUnlock: Bool
    package var storage: KeyStorage
    /// What is in force (see `KeychainStore.settings`).
    package var settings: KeychainSettings
    package var settingsIntegrity: SettingsIntegrity
}
