import Glibc

/// The engine: one keychain file, its keybag, and every operation on its items. Each front end
/// (SecItem, `security`, the PAM module, the credential helpers) is a thin layer over this type.
public final class KeychainStore: @unchecked Sendable {
    public let path: String
    public let storage: KeyStorage
    let db: SQLiteDatabase
    var keybag: Keybag
    private var processKeys: (a: Bytes?, c: Bytes?) = (nil, nil)
    /// Subkeys of the class keys last seen, by lock class; only used while the same key is seen again.
    private var subkeyCache: [LockClass: Subkeys] = [:]
    private let mutex = Mutex()

    init(path: String, db: SQLiteDatabase, keybag: Keybag, storage: KeyStorage) {
        self.path = path
        self.db = db
        self.keybag = keybag
        self.storage = storage
    }

    deinit {
        processKeys.a?.wipe()
        processKeys.c?.wipe()
    }

    /// A stable name for this keychain, used to name its keys in the kernel keyring.
    public var identifier: String { keybag.uuid.hex }

    /// The password KDF's cost parameters, as stored in the keybag.
    public var scryptParameters: ScryptParameters { withLock { keybag.scrypt } }

    func withLock<T>(_ body: () throws -> T) rethrows -> T { try mutex.withLock(body) }

    // MARK: Opening and creating

    /// Opens an existing keychain, refusing files and folders that others own or could write to.
    public static func open(at path: String? = nil, storage: KeyStorage = .kernel) throws -> KeychainStore {
        let path = path ?? KeychainFile.defaultPath()
        try KeychainFile.checkOwnership(KeychainFile.parent(of: path), isDirectory: true)
        try KeychainFile.checkOwnership(path, isDirectory: false)
        let db = try SQLiteDatabase(path: path)
        try configure(db)
        return KeychainStore(path: path, db: db, keybag: try Keybag.load(from: db), storage: storage)
    }

    /// Creates a keychain file 0600 in a 0700 folder and leaves it unlocked in `storage`.
    /// Without `scrypt`, the KDF is tuned to this machine (about 0.15 s per guess).
    public static func create(at path: String? = nil, password: Bytes, scrypt: ScryptParameters? = nil,
                              storage: KeyStorage = .kernel) throws -> KeychainStore {
        let path = path ?? KeychainFile.defaultPath()
        try KeychainFile.prepareDirectory(for: path)
        try KeychainFile.createFile(path)
        do {
            let db = try SQLiteDatabase(path: path)
            try db.execute("PRAGMA journal_mode=WAL")
            try configure(db)
            var (bag, a, c) = try Keybag.make(password: password, scrypt: scrypt ?? .tuned())
            defer { a.wipe(); c.wipe() }
            try db.transaction {
                try db.execute(schema)
                try bag.save(to: db)
            }
            let store = KeychainStore(path: path, db: db, keybag: bag, storage: storage)
            try store.install(a: a, c: c)
            return store
        } catch {
            for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
            throw error
        }
    }

    private static func configure(_ db: SQLiteDatabase) throws {
        // NORMAL in WAL mode loses no committed transaction when a process dies; secure_delete
        // zeroes freed pages so deleted ciphertext does not linger in the file. The index keys are
        // keyed hashes, so every add lands on random pages of three indexes: a larger page cache
        // and rarer checkpoints halve the cost of an add in a 100k-item keychain (make bench);
        // the cache only grows as far as it is used, so a helper's one lookup stays small.
        try db.execute("""
            PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON; PRAGMA temp_store=MEMORY;
            PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=8000; PRAGMA journal_size_limit=8388608
            """)
    }

    static let schema = """
        CREATE TABLE keychain (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE items (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT,
            class INTEGER NOT NULL,
            lockclass INTEGER NOT NULL,
            space INTEGER NOT NULL,
            pk BLOB NOT NULL,
            account BLOB NOT NULL,
            service BLOB NOT NULL,
            metadata BLOB NOT NULL,
            secret BLOB NOT NULL
        );
        CREATE UNIQUE INDEX items_pk ON items(space, class, pk);
        CREATE INDEX items_service ON items(space, class, service, account);
        CREATE INDEX items_account ON items(space, class, account);
        """

    // MARK: Lock state

    private func kernelName(_ lockClass: LockClass) -> String { "keychain:\(identifier):\(lockClass.letter)" }

    /// Derives the key from the password and puts the class keys where every call will find them.
    public func unlock(password: Bytes) throws {
        try withLock {
            keybag = try Keybag.load(from: db)
            var (a, c) = try keybag.unwrap(password: password)
            defer { a.wipe(); c.wipe() }
            try install(a: a, c: c)
        }
    }

    private func install(a: Bytes, c: Bytes) throws {
        switch storage {
        case .process:
            processKeys = (a, c)
        case .kernel:
            try KernelKeyring.store(c, description: kernelName(.afterFirstUnlock))
            try KernelKeyring.store(a, description: kernelName(.whenUnlocked))
            if keybag.settings.idleTimeout > 0 {
                KernelKeyring.setTimeout(kernelName(.whenUnlocked), seconds: keybag.settings.idleTimeout)
            }
        }
    }

    /// Locks WhenUnlocked items. AfterFirstUnlock stays open until reboot, as on Apple's systems.
    public func lock() {
        withLock {
            subkeyCache[.whenUnlocked] = nil
            switch storage {
            case .process:
                processKeys.a?.wipe()
                processKeys.a = nil
            case .kernel:
                KernelKeyring.remove(kernelName(.whenUnlocked))
            }
        }
    }

    /// Drops both class keys, as a reboot does; tests use it to leave no key behind.
    public func lockAll() {
        lock()
        withLock {
            subkeyCache[.afterFirstUnlock] = nil
            switch storage {
            case .process:
                processKeys.c?.wipe()
                processKeys.c = nil
            case .kernel:
                KernelKeyring.remove(kernelName(.afterFirstUnlock))
            }
        }
    }

    public var status: LockStatus {
        withLock {
            let keys = currentKeys()
            return LockStatus(whenUnlocked: keys.has(.whenUnlocked), afterFirstUnlock: keys.has(.afterFirstUnlock),
                              storage: storage, settings: keybag.settings)
        }
    }

    /// Checks a password without changing any state.
    public func verify(password: Bytes) throws {
        var (a, c) = try withLock { try Keybag.load(from: db).unwrap(password: password) }
        a.wipe()
        c.wipe()
    }

    /// Re-wraps the class keys under a new password in one transaction: a crash leaves either the
    /// old keybag or the new one, never neither.
    public func changePassword(from old: Bytes, to new: Bytes, scrypt: ScryptParameters? = nil) throws {
        try withLock {
            try db.transaction {
                var bag = try Keybag.load(from: db)
                var (a, c) = try bag.unwrap(password: old)
                defer { a.wipe(); c.wipe() }
                try bag.rewrap(a: a, c: c, password: new, scrypt: scrypt ?? bag.scrypt)
                try bag.save(to: db)
                keybag = bag
            }
        }
    }

    public var settings: KeychainSettings { withLock { keybag.settings } }

    public func setSettings(_ settings: KeychainSettings) throws {
        try withLock {
            try db.transaction {
                var bag = try Keybag.load(from: db)
                bag.settings = settings
                try bag.save(to: db)
                keybag = bag
            }
            if storage == .kernel, KernelKeyring.find(kernelName(.whenUnlocked)) != nil {
                KernelKeyring.setTimeout(kernelName(.whenUnlocked), seconds: settings.idleTimeout)
            }
        }
    }

    /// The keys as they are right now: read from the kernel on every call, so a lock by another
    /// process takes effect at once.
    func currentKeys() -> ClassKeys {
        switch storage {
        case .process:
            return classKeys(a: processKeys.a, c: processKeys.c)
        case .kernel:
            var a = KernelKeyring.read(kernelName(.whenUnlocked))
            var c = KernelKeyring.read(kernelName(.afterFirstUnlock))
            defer { a?.wipe(); c?.wipe() }
            if a != nil, keybag.settings.idleTimeout > 0 {
                // Each use restarts the idle clock.
                KernelKeyring.setTimeout(kernelName(.whenUnlocked), seconds: keybag.settings.idleTimeout)
            }
            return classKeys(a: a, c: c)
        }
    }

    private func classKeys(a: Bytes?, c: Bytes?) -> ClassKeys {
        var present: [LockClass: Subkeys] = [:]
        for (lockClass, key) in [(LockClass.whenUnlocked, a), (.afterFirstUnlock, c), (.always, keybag.keyD)] {
            guard let key else {
                subkeyCache[lockClass] = nil
                continue
            }
            if let cached = subkeyCache[lockClass], cached.matches(key) {
                present[lockClass] = cached
            } else {
                let fresh = Subkeys(classKey: key)
                subkeyCache[lockClass] = fresh
                present[lockClass] = fresh
            }
        }
        return ClassKeys(present)
    }
}
