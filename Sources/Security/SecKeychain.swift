package import KeychainCore
internal import KeychainTPMPolicy

import Glibc

/// A keychain file, as macOS's SecKeychainRef: what `kSecUseKeychain` names and what the
/// SecKeychain* functions act on.
public final class SecKeychain: @unchecked Sendable {
    package let store: KeychainStore

    package init(store: KeychainStore) { self.store = store }

    public var path: String { store.path }

    /// Where an unlocked keychain's class keys are kept.
    public enum Storage: Sendable {
        /// The user's persistent kernel keyring: shared by all the user's processes, gone at reboot.
        case kernel
        /// This process's memory only (embedded mode); the kernel is never asked.
        case process

        var engine: KeyStorage {
            switch self {
            case .kernel: return .kernel
            case .process: return .process
            }
        }
    }

    /// Opens a keychain; by default class keys are looked up in the kernel keyring.
    public static func open(at path: String? = nil, storage: Storage = .kernel) throws -> SecKeychain {
        // Apple's API asks the person through the system (polkit here) for items that say so.
        FrontEnd.prepare()
        return SecKeychain(store: try KeychainStore.open(at: path, storage: storage.engine))
    }

    /// Creates a keychain and leaves it unlocked.
    public static func create(at path: String? = nil, password: String, storage: Storage = .kernel) throws -> SecKeychain {
        try create(at: path, password: password, storage: storage.engine, scrypt: nil)
    }

    /// The same with the engine's terms, and the key derivation's cost chosen (tests and the bench
    /// make cheap ones).
    package static func create(
        at path: String?, password: String, storage: KeyStorage,
        scrypt: ScryptParameters?
    ) throws -> SecKeychain {
        FrontEnd.prepare()
        return SecKeychain(store: try KeychainStore.create(at: path, password: Array(password.utf8), scrypt: scrypt, storage: storage))
    }

    public func unlock(password: String) throws { try store.unlock(password: Array(password.utf8)) }
    public func lock() { store.lock() }
    package var status: LockStatus { store.status }

    // MARK: The process's default keychain

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var chosenDefault: SecKeychain?

    /// The keychain SecItem calls use when a query names none: the one set by
    /// `SecKeychainSetDefault`, else the user's login keychain (`KEYCHAIN_PATH` overrides).
    public static func defaultKeychain() throws -> SecKeychain {
        registryLock.lock()
        defer { registryLock.unlock() }
        if let chosenDefault { return chosenDefault }
        let path = KeychainFile.defaultPath()
        guard KeychainFile.exists(path) else {
            throw KeychainError.noKeychain(at: path)
        }
        let keychain = try SecKeychain.open(at: path)
        chosenDefault = keychain
        return keychain
    }

    nonisolated(unsafe) private static var opened: [String: SecKeychain] = [:]

    /// The keychains a query that names none searches, in order: the user's search list
    /// (KeychainCore's SearchList, which `security list-keychains -s` sets), as SecItem searches
    /// it on macOS. A process that chose its default with SecKeychainSetDefault, or a user
    /// without a list, searches the default keychain alone.
    public static func searchList() throws -> [SecKeychain] {
        registryLock.lock()
        let chosen = chosenDefault
        registryLock.unlock()
        // A chosen default needs no file read: the list is read (three small files) only when used.
        if chosen != nil { return [try defaultKeychain()] }
        let paths = SearchList.searched()
        if paths == [KeychainFile.defaultPath()] { return [try defaultKeychain()] }
        registryLock.lock()
        defer { registryLock.unlock() }
        return try paths.map { path in
            if let keychain = opened[path] { return keychain }
            let keychain = try SecKeychain.open(at: path)
            opened[path] = keychain
            return keychain
        }
    }

    public static func setDefault(_ keychain: SecKeychain?) {
        registryLock.lock()
        chosenDefault = keychain
        registryLock.unlock()
    }
}

// The macOS functions over keychains, for code written against them.

public func SecKeychainCreate(
    _ pathName: String, _ passwordLength: UInt32, _ password: UnsafeRawPointer?,
    _ promptUser: Bool, _ initialAccess: AnyObject?,
    _ keychain: UnsafeMutablePointer<SecKeychain?>
) -> OSStatus {
    guard let password else { return errSecParam }
    let bytes = Array(UnsafeRawBufferPointer(start: password, count: Int(passwordLength)))
    FrontEnd.prepare()
    return secStatus {
        keychain.pointee = SecKeychain(store: try KeychainStore.create(at: pathName, password: bytes))
    }
}

public func SecKeychainOpen(_ pathName: String, _ keychain: UnsafeMutablePointer<SecKeychain?>) -> OSStatus {
    secStatus { keychain.pointee = try SecKeychain.open(at: pathName) }
}

public func SecKeychainUnlock(
    _ keychain: SecKeychain?, _ passwordLength: UInt32, _ password: UnsafeRawPointer?,
    _ usePassword: Bool
) -> OSStatus {
    guard let password, usePassword else { return errSecInteractionNotAllowed }
    let bytes = Array(UnsafeRawBufferPointer(start: password, count: Int(passwordLength)))
    return secStatus { try (keychain ?? SecKeychain.defaultKeychain()).store.unlock(password: bytes) }
}

public func SecKeychainLock(_ keychain: SecKeychain?) -> OSStatus {
    secStatus { try (keychain ?? SecKeychain.defaultKeychain()).store.lockReportingFailure() }
}

public func SecKeychainSetDefault(_ keychain: SecKeychain?) -> OSStatus {
    SecKeychain.setDefault(keychain)
    return errSecSuccess
}

public func SecKeychainCopyDefault(_ keychain: UnsafeMutablePointer<SecKeychain?>) -> OSStatus {
    secStatus { keychain.pointee = try SecKeychain.defaultKeychain() }
}

public func SecKeychainDelete(_ keychain: SecKeychain?) -> OSStatus {
    guard let keychain else { return errSecNoSuchKeychain }
    return secStatus {
        keychain.store.releaseRollbackCounter()
        keychain.store.lockAll()
        try KeychainFile.remove(keychain.path)
    }
}

/// Runs engine code and turns what it throws into Apple's result codes.
func secStatus(_ body: () throws -> Void) -> OSStatus {
    do {
        try body()
        return errSecSuccess
    } catch {
        return SecError(error).status
    }
}
