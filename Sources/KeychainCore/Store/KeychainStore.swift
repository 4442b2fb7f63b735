import Glibc

/// The engine: one keychain file, its keybag, and every operation on its items. Each front end
/// (SecItem, `security`, the PAM module, the credential helpers) is a thin layer over this type.
package final class KeychainStore: @unchecked Sendable {
    package let path: String
    package let storage: KeyStorage
    package let db: SQLiteDatabase
    package internal(set) var keybag: Keybag
    /// The class keys of `.process` storage, by class (A, C, and Au, Cu when sealed to a TPM).
    var processKeys: [LockClass: Bytes] = [:]
    /// Subkeys of the class keys last seen, by lock class; only used while the same key is seen again.
    var subkeyCache = PerLockClass<Subkeys>()
    /// In a custodian's keeping: its last state, which a read may use instead of asking again.
    var custodyCache = CustodyCache()
    /// The kernel keyring's names of this keychain's keys, made once per keybag uuid (two stored
    /// properties, not one tuple: every call reads a name, and a tuple is copied whole to be read).
    private var kernelNames = PerLockClass<String>()
    private var kernelNamesUUID: Bytes = []
    /// The settings in force and whether their MAC verified, once class key A was seen.
    var settingsCheck: (settings: KeychainSettings, integrity: SettingsIntegrity)?
    /// SQLite's data_version when the keybag was last read (`refreshKeybag`).
    var dataVersion: Int64 = 0
    /// SQLite's data_version as the last call to `refreshKeybag` saw it.
    private(set) var seenDataVersion: Int64 = -1
    /// Which item classes the Always key space holds rows of, as of a data_version and this
    /// connection's own changes (`alwaysSpaceHolds`).
    var alwaysSpace: (version: Int64, changes: Int64, classes: [Int64: Bool]) = (-1, -1, [:])
    /// Set when a batch rolled back: what this process kept of the keybag may be what the
    /// rollback undid, and data_version does not move for this connection's own changes.
    private var keybagStale = false
    private let mutex = Mutex()
    /// Who confirms the user's presence for items whose access control asks for it.
    package var presenceAuthorizer: PresenceAuthorizer = KeychainStore.defaultPresenceAuthorizer
    /// What new stores get. The engine asks nobody itself (it starts no process): each front end
    /// installs polkit at its start (KeychainPresence's `PresenceSetup`), `security` with a
    /// terminal agent; until then an item that asks for the user is refused as not interactive.
    nonisolated(unsafe) package static var defaultPresenceAuthorizer: PresenceAuthorizer = NobodyToAsk()
    /// Who keeps class keys for this process (keychain-broker's client), installed by each front
    /// end at its start as the presence and TPM seams are; nil: the kernel keyring, as before.
    nonisolated(unsafe) package static var custodian: (any KeyCustodian)?
    /// The custodian of a `.broker` store; nil in every other mode.
    package let custodian: (any KeyCustodian)?
    /// The keybag's fields as stored, which a custodian is shown (`.broker` only; read with the
    /// keybag by `refreshKeybag`).
    var custodyFields: [String: Bytes] = [:]
    /// Set by an unlock that was this keychain's first in its custodian's keeping: its class keys
    /// were in the user's reach until then (`security unlock-keychain` advises a rotation).
    package private(set) var firstUnlockInCustody = false

    init(path: String, db: SQLiteDatabase, keybag: Keybag, storage: KeyStorage, custodian: (any KeyCustodian)? = nil) {
        self.path = path
        self.db = db
        self.keybag = keybag
        self.storage = custodian == nil ? storage : .broker
        self.custodian = custodian
    }

    deinit {
        for lockClass in Array(processKeys.keys) { processKeys[lockClass]?.wipe() }
    }

    /// A stable name for this keychain, used to name its keys in the kernel keyring.
    package var identifier: String { keybag.uuid.hex }

    /// The password KDF's cost parameters, as stored in the keybag.
    package var scryptParameters: ScryptParameters { withLock { keybag.scrypt } }

    package func withLock<T>(_ body: () throws -> T) rethrows -> T { try mutex.withLock(body) }

    // MARK: Opening and creating

    /// Opens an existing keychain, refusing files and folders that others own or could write to.
    package static func open(at path: String? = nil, storage: KeyStorage = .kernel) throws -> KeychainStore {
        let path = path ?? KeychainFile.defaultPath()
        let db = try SQLiteDatabase(verified: path)
        try configure(db)
        // Read before the keybag: a commit in between makes the next call read the keybag again.
        let version = try dataVersion(of: db)
        let fields = try Keybag.fields(in: db)
        let keybag = try Keybag(fields: fields)
        let custodian = storage == .kernel ? custodian(keeping: keybag, fields: fields, path: path) : nil
        let store = KeychainStore(path: path, db: db, keybag: keybag, storage: storage, custodian: custodian)
        if custodian != nil { store.custodyFields = fields }
        store.dataVersion = version
        return store
    }

    /// The installed custodian, when it keeps this keychain. No setting of the user's turns it
    /// off: the next unlock would put the class keys back where every process of the user reads
    /// them (KeychainBroker's `BrokerSetup` says where a broker is).
    private static func custodian(keeping keybag: Keybag, fields: [String: Bytes], path: String) -> (any KeyCustodian)? {
        guard let custodian, !keybag.isBound else { return nil }
        return custodian.keeps(CustodyKeybag(uuid: keybag.uuid, fields: fields, path: path)) ? custodian : nil
    }

    /// Creates a keychain file 0600 in a 0700 folder and leaves it unlocked in `storage`.
    /// Without `scrypt`, the KDF is tuned to this machine (about 0.15 s per guess).
    package static func create(
        at path: String? = nil, password: Bytes, scrypt: ScryptParameters? = nil,
        storage: KeyStorage = .kernel
    ) throws -> KeychainStore {
        let path = path ?? KeychainFile.defaultPath()
        try KeychainFile.prepareDirectory(for: path)
        try KeychainFile.createFile(path)
        do {
            let db = try SQLiteDatabase(verified: path)
            try db.execute("PRAGMA journal_mode=WAL")
            try configure(db)
            // Where a custodian runs, it makes the class keys and keeps them: a new keychain is
            // never sealed to a TPM, so it is one the custodian keeps. `.process` (the Secret
            // Service's session collection) and `.kernel` without a custodian make them here.
            if storage == .kernel, let custodian = Self.custodian, custodian.keeps(CustodyKeybag(uuid: [], fields: [:], path: path)) {
                let fields = try custodian.create(password: password, scrypt: scrypt ?? .tuned(), path: path)
                let bag = try Keybag(fields: fields)
                guard bag.version == Keybag.formatVersion, bag.binding == nil else {
                    throw KeychainError.decode("keychain-broker returned a keybag of another format")
                }
                try db.transaction {
                    try db.execute(schema)
                    try Keybag.save(fields: fields, to: db)
                }
                let store = KeychainStore(path: path, db: db, keybag: bag, storage: storage, custodian: custodian)
                store.custodyFields = try Keybag.fields(in: db)
                return store
            }
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

    /// A keychain that lives as long as this process (the Secret Service's `session` collection):
    /// sealed under 256 random bits that are dropped at once, its class keys in this process's
    /// memory only, so once the process is gone nothing can open the file. A random password
    /// needs no stretching, hence the smallest scrypt cost; hex, as passwords hold no NUL.
    package static func createEphemeral(at path: String) throws -> KeychainStore {
        var random = try Crypto.random(32)
        var password = Bytes(random.hex.utf8)
        defer { random.wipe(); password.wipe() }
        return try create(at: path, password: password, scrypt: ScryptParameters(n: 2), storage: .process)
    }

    private static func configure(_ db: SQLiteDatabase) throws {
        // NORMAL in WAL mode loses no committed transaction when a process dies; secure_delete
        // zeroes freed pages so deleted ciphertext does not linger in the file. The index keys are
        // keyed hashes, so every add lands on random pages of three indexes: a larger page cache
        // and rarer checkpoints halve the cost of an add in a 100k-item keychain (make bench);
        // the cache only grows as far as it is used, so a helper's one lookup stays small. After
        // a checkpoint the log is kept at the size it reaches between checkpoints, not cut back:
        // rewriting pages the file already has is a quarter cheaper for a long-lived writer (the
        // Secret Service, a loop of adds) than allocating them again (make bench's insert floor).
        // It holds more old frames then (rows' ciphertext, and keybags before a password change,
        // which is why such a change empties it: `discardPreviousKeybags`).
        try db.execute(
            """
            PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON; PRAGMA temp_store=MEMORY;
            PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=\(walCheckpointPages); PRAGMA journal_size_limit=\(walSizeLimit)
            """)
    }

    /// Pages the write-ahead log holds before a commit checkpoints it.
    package static let walCheckpointPages = 8000
    /// What a checkpointed log is cut back to: a little more than it holds at a checkpoint (each
    /// page is a frame with a 24-byte header), so only a log that one large transaction grew
    /// beyond that is cut.
    package static let walSizeLimit = walCheckpointPages * (4096 + 24) + (1 << 20)

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

    func kernelName(_ lockClass: LockClass) -> String {
        if kernelNamesUUID != keybag.uuid { kernelNames.removeAll() }
        // The same bytes in the keybag's own buffer: the next comparison is one of identity.
        kernelNamesUUID = keybag.uuid
        if let name = kernelNames[lockClass] { return name }
        let name = "keychain:\(identifier):\(lockClass.letter)"
        kernelNames[lockClass] = name
        return name
    }

    /// Derives the key from the password and puts the class keys where every call will find them.
    /// A keychain made by an earlier version is upgraded in place first, in one transaction.
    /// Sealed to a TPM, the file's count is checked against the TPM's rollback counter first
    /// (the installed `TPMPolicy`): an older copy is refused unless `acceptingOlderCopy`.
    package func unlock(password: Bytes, acceptingOlderCopy: Bool = false, tpm: TPMConfiguration = .current) throws {
        try TPMDeadline.command { try unlockUnderDeadline(password: password, acceptingOlderCopy: acceptingOlderCopy, tpm: tpm) }
    }

    /// `unlock`, its TPM calls (the sealed secret, the rollback counter) under one time limit.
    private func unlockUnderDeadline(password: Bytes, acceptingOlderCopy: Bool, tpm: TPMConfiguration) throws {
        try withLock {
            if let custodian {
                try refreshKeybag()
                subkeyCache.removeAll()
                settingsCheck = nil
                firstUnlockInCustody = try custodian.unlock(custodyKeybag, password: password)
                return
            }
            // The derivation takes a while; if another process re-keyed the keychain meanwhile,
            // the keys it gave are stale and must not reach the kernel: derive again.
            for _ in 0..<3 {
                let version = try currentDataVersion()
                var bag = try Keybag.load(from: db)
                var keys = try bag.open(password: password, tpm: tpm)
                defer { keys.wipe() }
                if bag.version < Keybag.formatVersion { bag = try upgrade(bag, kek: keys.kek, a: keys.a, c: keys.c) }
                let now = try Keybag.load(from: db)
                guard now.wrappedA == bag.wrappedA, now.wrappedC == bag.wrappedC else { continue }
                if let sealed = bag.binding?.sealed {
                    let counted = try TPMAccess.installedPolicy().unlocking(
                        self, keybag: bag, c: keys.c, tpm: tpm, acceptingOlderCopy: acceptingOlderCopy)
                    if let device = keys.device, sealed.counted != counted {
                        bag = try recordCounted(counted, bag, kek: keys.kek, a: keys.a, c: keys.c, device: device)
                    }
                }
                keybag = bag
                dataVersion = version
                subkeyCache.removeAll()
                settingsCheck = nil
                return try install(a: keys.a, c: keys.c, device: keys.device)
            }
            throw KeychainError(.io, "the keychain's keys kept changing while it was being unlocked; try again")
        }
    }

    /// Records in the binding whether the keychain has a rollback counter now: one sealed before
    /// counters that got one, or one the user accepted (`--accept-older-copy`) where no counter
    /// can be made. Unless another process changed the keybag since it was read (then it stays).
    private func recordCounted(_ counted: Bool, _ old: Keybag, kek: Bytes, a: Bytes, c: Bytes, device: DeviceKeys) throws -> Keybag {
        try db.transaction {
            var bag = try Keybag.load(from: db)
            guard bag.wrappedA == old.wrappedA, bag.wrappedC == old.wrappedC, bag.salt == old.salt, bag.binding == old.binding else { return bag }
            try bag.recordCounted(counted, a: a, c: c, device: device, kek: kek)
            try bag.save(to: db)
            return bag
        }
    }

    /// Writes the upgraded keybag, unless another process changed the keybag since it was read
    /// (then the keybag now in the file is used: it, too, must open with these keys).
    private func upgrade(_ old: Keybag, kek: Bytes, a: Bytes, c: Bytes) throws -> Keybag {
        try db.transaction {
            var bag = try Keybag.load(from: db)
            if bag.version < Keybag.formatVersion {
                guard bag.wrappedA == old.wrappedA, bag.wrappedC == old.wrappedC, bag.salt == old.salt else {
                    throw KeychainError.param("the keychain's password changed while it was being unlocked; try again")
                }
                try bag.upgrade(kek: kek, a: a, c: c)
                try bag.save(to: db)
            } else if !bag.matches(a, .whenUnlocked) || !bag.matches(c, .afterFirstUnlock) {
                throw KeychainError.param("the keychain's keys changed while it was being unlocked; try again")
            }
            return bag
        }
    }

    /// Takes `bag`, just written or checked by a caller holding the lock, as the keychain's
    /// keybag; `dataVersion`: the commits it was read at, when it was read outside a write.
    package func adopt(_ bag: Keybag, dataVersion version: Int64? = nil) {
        keybag = bag
        if let version { dataVersion = version }
    }

    /// Class key `lockClass` as this process holds it now (in the process, or trusted in the
    /// kernel); nil when locked.
    /// Always nil in a custodian's keeping (`.broker`): this process never holds them.
    package func heldClassKey(_ lockClass: LockClass) -> Bytes? {
        switch storage {
        case .process: return processKeys[lockClass]
        case .kernel: return try? trustedKernelKey(lockClass)
        case .broker: return nil
        }
    }

    /// Puts keys the password (or a rotation) just gave into their place. A key already in the
    /// kernel under the same name is invalidated first, so every key stored has a new serial and
    /// a process that found the old one wrong can only ever remove the old one. `device`: the
    /// ThisDeviceOnly keys of a keychain sealed to a TPM (without, any left over are removed).
    package func install(a: Bytes, c: Bytes, device: DeviceKeys? = nil) throws {
        try requireHeldKeys("putting class keys in place")
        subkeyCache.removeAll()
        settingsCheck = nil
        let idle = (keybag.verifiedSettings(a: a) ?? .safeDefaults).idleTimeout
        // Cu before C and Au before A: a key counts only while the key of its lock state is
        // there too (`currentKeys`), so a reader never sees A with a stale Au.
        let keys: [(LockClass, Bytes?)] = [
            (.afterFirstUnlockThisDeviceOnly, device?.c), (.afterFirstUnlock, c),
            (.whenUnlockedThisDeviceOnly, device?.a), (.whenUnlocked, a)
        ]
        switch storage {
        case .process:
            for (lockClass, key) in keys {
                processKeys[lockClass]?.wipe()
                processKeys[lockClass] = key
            }
        case .kernel:
            for (lockClass, key) in keys {
                if let old = KernelKeyring.readEntry(kernelName(lockClass)), key == nil || !Crypto.equal(old.key, key!) {
                    KernelKeyring.remove(serial: old.serial, description: kernelName(lockClass))
                }
            }
            for (lockClass, key) in keys {
                guard let key else { continue }
                try KernelKeyring.store(key, description: kernelName(lockClass))
                if idle > 0, lockClass.lockState == .whenUnlocked { KernelKeyring.setTimeout(kernelName(lockClass), seconds: idle) }
            }
        case .broker: break
        }
    }

    /// Locks WhenUnlocked items. AfterFirstUnlock stays open until reboot, as on Apple's systems.
    /// A custodian that cannot be reached leaves the keys where they are: `lockReportingFailure`
    /// says so.
    package func lock() {
        try? lockReportingFailure()
    }

    /// `lock`, throwing what a custodian answered (`.broker`; the other modes cannot fail).
    package func lockReportingFailure() throws {
        try withLock {
            if let custodian {
                subkeyCache.removeAll()
                settingsCheck = nil
                return try custodian.lock(custodyKeybag)
            }
            drop(.whenUnlocked)
        }
    }

    /// Removes a lock state's keys (A and Au, or C and Cu), the ThisDeviceOnly one first.
    private func drop(_ lockState: LockClass) {
        if lockState == .whenUnlocked { settingsCheck = nil }
        for lockClass in [lockState.deviceOnly, lockState].compactMap({ $0 }) {
            subkeyCache[lockClass] = nil
            switch storage {
            case .process:
                processKeys[lockClass]?.wipe()
                processKeys[lockClass] = nil
            case .kernel:
                KernelKeyring.remove(kernelName(lockClass))
            case .broker: break
            }
        }
    }

    /// Drops both class keys, as a reboot does; tests use it to leave no key behind. A custodian
    /// keeps AfterFirstUnlock until its own restart at reboot: only WhenUnlocked goes there.
    package func lockAll() {
        lock()
        if custodian == nil { withLock { drop(.afterFirstUnlock) } }
    }

    package var status: LockStatus {
        withLock {
            let keys = (try? currentKeys()) ?? ClassKeys([:])
            let (settings, integrity) = settingsInForce(keys)
            return LockStatus(
                whenUnlocked: keys.has(.whenUnlocked), afterFirstUnlock: keys.has(.afterFirstUnlock),
                storage: storage, settings: settings, settingsIntegrity: integrity)
        }
    }

    /// Checks a password without changing any state.
    package func verify(password: Bytes) throws {
        if let custodian {
            return try withLock {
                try refreshKeybag()
                try custodian.verify(custodyKeybag, password: password)
            }
        }
        var keys = try withLock { try Keybag.load(from: db).open(password: password) }
        keys.wipe()
    }

    /// Re-wraps the class keys under a new password in one transaction: a crash leaves either the
    /// old keybag or the new one, never neither. The items stay under the same class keys, so a
    /// copy of the file taken before still opens with the old password, and so do items added
    /// later if the attacker also gets the new file: `rotatingKeys` (see `rotateKeys`) closes that.
    /// Without `scrypt`, the stored cost is kept, or raised to the tuned floor if below it.
    /// Rotating the keys of a keychain sealed to a TPM returns its new recovery key.
    @discardableResult
    package func changePassword(
        from old: Bytes, to new: Bytes, scrypt: ScryptParameters? = nil,
        rotatingKeys: Bool = false
    ) throws -> RecoveryKey? {
        if rotatingKeys { return try rotateKeys(password: old, newPassword: new, scrypt: scrypt) }
        if custodian != nil {
            try changePasswordInCustody(from: old, to: new, scrypt: scrypt)
            return nil
        }
        try withLock {
            try db.transaction {
                var bag = try Keybag.load(from: db)
                var keys = try bag.unwrapUpgrading(password: old)
                defer { keys.wipe() }
                try bag.rewrap(a: keys.a, c: keys.c, device: keys.device, password: new, scrypt: scrypt ?? bag.scrypt.raisedToFloor())
                try bag.save(to: db)
                keybag = bag
                dataVersion = try currentDataVersion()
            }
            discardPreviousKeybags()
        }
        return nil
    }

    /// After a commit that wrapped the class keys anew (a new password, new keys, a TPM seal):
    /// the write-ahead log still holds the keybags from before it, and the file may hold the old
    /// keybag's page until a checkpoint copies the new one over it; the old password (or the
    /// password without the TPM) opens them. A checkpoint that empties the log does both (freed
    /// cells zeroed: secure_delete). Best effort, waiting a second by default: while a reader in
    /// another process stays on an older snapshot, `previousKeybagsLinger` holds and this
    /// connection tries again after its later transactions and reads, and when it closes.
    @discardableResult
    package func discardPreviousKeybags(waitingAtMost milliseconds: Int32 = 1000) -> Bool {
        db.checkpointEmptyingLog(waitingAtMost: milliseconds)
    }

    /// The write-ahead log may still hold a keybag from before the last change of password, keys
    /// or TPM seal (`discardPreviousKeybags` could not empty it yet).
    package var previousKeybagsLinger: Bool { db.logStillToEmpty }

    /// The settings in force: verified under class key A, or the safe defaults when their MAC
    /// fails; while WhenUnlocked is locked, the stored ones (unverified, and acted on by nothing).
    package var settings: KeychainSettings { status.settings }

    /// Changes the settings. Needs class key A: from the kernel (the keychain is unlocked) or
    /// from `password`. Locked and no password: errSecInteractionNotAllowed.
    package func setSettings(_ settings: KeychainSettings, password: Bytes? = nil) throws {
        if custodian != nil { return try setSettingsInCustody(settings, password: password) }
        try withLock {
            try db.transaction {
                var bag: Keybag
                var settingsKey: Bytes
                if let password {
                    bag = try Keybag.load(from: db)
                    var keys = try bag.unwrapUpgrading(password: password)
                    defer { keys.wipe() }
                    settingsKey = Keybag.settingsKey(a: keys.a)
                } else {
                    guard let key = try currentKeys().settingsKey else {
                        throw KeychainError.locked("the keychain is locked: its settings change with its password or once it is unlocked")
                    }
                    bag = keybag
                    settingsKey = key
                }
                defer { settingsKey.wipe() }
                bag.settings = settings
                bag.authenticateSettings(key: settingsKey)
                try bag.save(to: db)
                keybag = bag
                settingsCheck = nil
                dataVersion = try currentDataVersion()
            }
            if storage == .kernel, KernelKeyring.find(kernelName(.whenUnlocked)) != nil {
                KernelKeyring.setTimeout(kernelName(.whenUnlocked), seconds: settings.idleTimeout)
                if keybag.isBound { KernelKeyring.setTimeout(kernelName(.whenUnlockedThisDeviceOnly), seconds: settings.idleTimeout) }
            }
        }
    }

    /// What SQLite's data_version says about commits by other connections: it changes when one
    /// has committed since this connection last asked, and costs no I/O.
    package func currentDataVersion() throws -> Int64 { try Self.dataVersion(of: db) }

    private static func dataVersion(of db: SQLiteDatabase) throws -> Int64 {
        let stmt = try db.statement("PRAGMA data_version")
        defer { stmt.reset() }
        _ = try stmt.step()
        return stmt.int(0)
    }

    /// Reloads the keybag when another process has committed since it was read: a rotation or a
    /// password change elsewhere must be seen before this process seals anything under a key.
    func refreshKeybag(force: Bool = false) throws {
        let version = try currentDataVersion()
        seenDataVersion = version
        guard version != dataVersion || force || keybagStale else { return }
        keybagStale = false
        let fields = try Keybag.fields(in: db)
        let bag = try Keybag(fields: fields)
        if custodian != nil { custodyFields = fields }
        if bag.checkA != keybag.checkA || bag.checkC != keybag.checkC || bag.keyD != keybag.keyD || bag.version != keybag.version
            || bag.binding?.checkAu != keybag.binding?.checkAu || bag.binding?.checkCu != keybag.binding?.checkCu
        {
            subkeyCache.removeAll()
        }
        if bag.settingsMAC != keybag.settingsMAC || bag.settings != keybag.settings { settingsCheck = nil }
        keybag = bag
        dataVersion = version
    }

    /// The keys as they are right now: read from the kernel on every call, so a lock by another
    /// process takes effect at once. A key that does not match its check value in the keybag
    /// (planted by another process, or left over from before a rotation) is treated as locked
    /// and removed. Writers call this inside their transaction, so the keybag they check against
    /// is the one their rows will be committed with.
    package func currentKeys() throws -> ClassKeys {
        if let custodian { return try custodyKeys(custodian) }
        try refreshKeybag()
        var found = PerLockClass<Bytes>()
        let classes = keybag.isBound ? Self.boundClasses : Self.unboundClasses
        defer { for lockClass in classes { found[lockClass]?.wipe() } }
        for lockClass in classes {
            switch storage {
            case .process:
                guard let key = processKeys[lockClass] else { continue }
                if isTrusted(key, lockClass) {
                    found[lockClass] = key
                } else {
                    processKeys[lockClass]?.wipe()
                    processKeys[lockClass] = nil
                }
            case .kernel:
                found[lockClass] = try trustedKernelKey(lockClass)
            case .broker: break
            }
        }
        // A ThisDeviceOnly key opens nothing without the key of its lock state: a lock, or an
        // idle timeout, that took A but not yet Au has locked WhenUnlocked ThisDeviceOnly too.
        for lockClass in classes where found[lockClass.lockState] == nil { found[lockClass]?.wipe(); found[lockClass] = nil }
        let a = found[.whenUnlocked]
        let keys = classKeys(found)
        if let a, settingsCheck == nil {
            let verified = keybag.verifiedSettings(a: a)
            settingsCheck = (verified ?? .safeDefaults, verified == nil ? .damaged : .verified)
        }
        if storage == .kernel, a != nil, let idle = settingsCheck?.settings.idleTimeout, idle > 0 {
            // Each use restarts the idle clock.
            KernelKeyring.setTimeout(kernelName(.whenUnlocked), seconds: idle)
            if found[.whenUnlockedThisDeviceOnly] != nil { KernelKeyring.setTimeout(kernelName(.whenUnlockedThisDeviceOnly), seconds: idle) }
        }
        return keys
    }

    /// Made once: `allCases` is a new array at every call.
    private static let allLockClasses = LockClass.allCases
    private static let unboundClasses: [LockClass] = [.whenUnlocked, .afterFirstUnlock]
    private static let boundClasses: [LockClass] = [
        .whenUnlocked, .afterFirstUnlock, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly
    ]

    /// Thrown inside a read snapshot when a kernel key does not fit the snapshot's keybag: the
    /// keybag may have changed since the snapshot began, and only the file's latest keybag may
    /// condemn a key (`readSnapshot` looks again outside the snapshot).
    private struct SnapshotTooOld: Error {}

    /// Runs `body` with the class keys and the rows it reads in one SQLite read snapshot (one WAL
    /// read lock for the whole lookup, not one per statement), the keys checked against the
    /// keybag of that same snapshot. Inside a transaction, it runs in that transaction. Under the
    /// store's lock.
    package func readSnapshot<T>(_ body: (ClassKeys) throws -> T) throws -> T {
        if db.inTransaction { return try body(currentKeys()) }
        for _ in 0..<3 {
            do {
                return try db.read { try body(currentKeys()) }
            } catch is SnapshotTooOld {
                // Outside any snapshot: the latest keybag is read, a key that fits it is kept,
                // one that does not is removed. Then the snapshot is taken again.
                _ = try currentKeys()
            }
        }
        // Keys and keybag kept changing under us: no snapshot, statement by statement.
        return try body(currentKeys())
    }

    /// A key already checked (the cached subkeys hold the same bytes) or one whose check value fits.
    private func isTrusted(_ key: Bytes, _ lockClass: LockClass) -> Bool {
        if let cached = subkeyCache[lockClass], cached.matches(key) { return true }
        return keybag.matches(key, lockClass)
    }

    func trustedKernelKey(_ lockClass: LockClass) throws -> Bytes? {
        guard var entry = KernelKeyring.readEntry(kernelName(lockClass)) else { return nil }
        if isTrusted(entry.key, lockClass) { return entry.key }
        if db.inReadSnapshot {
            entry.key.wipe()
            throw SnapshotTooOld()
        }
        // Before removing a key, make sure the keybag it failed against is the one in the file.
        try refreshKeybag(force: true)
        if isTrusted(entry.key, lockClass) { return entry.key }
        entry.key.wipe()
        // A keychain of the previous format has no check values: its kernel keys wait for the
        // upgrade at the next unlock with the password, and are left for that version's tools.
        if keybag.version >= 2 { KernelKeyring.remove(serial: entry.serial, description: kernelName(lockClass)) }
        return nil
    }

    private func settingsInForce(_ keys: ClassKeys) -> (KeychainSettings, SettingsIntegrity) {
        guard keys.has(.whenUnlocked), let check = settingsCheck else { return (keybag.settings, .unverified) }
        return check
    }

    private func classKeys(_ found: PerLockClass<Bytes>) -> ClassKeys {
        var present = PerLockClass<Subkeys>()
        for lockClass in Self.allLockClasses {
            guard let key = lockClass == .always ? keybag.keyD : found[lockClass] else {
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
        return ClassKeys(present, separatesDeviceOnly: keybag.isBound)
    }

    // MARK: Batches

    /// Runs `body` as one write transaction: every change made inside it (`add`, `update`,
    /// `delete`, `addOrUpdate`, the Secret Service's `addSecretItem`, ...) joins it and is
    /// committed with the others when `body` returns, or none of them if `body` throws. Each
    /// operation inside keeps its own checks (lock state, uniqueness, presence) and its own
    /// atomicity: one that fails is undone alone (a savepoint), so a caller may catch its error,
    /// skip that item and go on. Other threads using this store wait until the batch ends; other
    /// processes' writers wait for the write lock as they do for any transaction (up to 10 s),
    /// and read the state from before the batch until it commits.
    ///
    /// For bulk writers (`security import`, `import-secrets`): one commit instead of one per item.
    package func batch<T>(_ body: () throws -> T) throws -> T {
        try withLock {
            if db.inTransaction { return try db.transaction(body) }
            do {
                return try db.transaction(body)
            } catch {
                // What this process learned inside (a keybag it wrote, subkeys) may be undone.
                keybagStale = true
                subkeyCache.removeAll()
                settingsCheck = nil
                throw error
            }
        }
    }

    /// Adds every item in one transaction (a batch), each with the checks of `add`; an item
    /// that is already there (errSecDuplicateItem) is skipped and counted, any other error
    /// undoes the whole batch. Dates are set here unless `keepingDates` (a backup's).
    package func addAll(_ items: [Item], keepingDates: Bool = false) throws -> (added: [Item], duplicates: Int) {
        try batch {
            var added: [Item] = []
            var duplicates = 0
            added.reserveCapacity(items.count)
            for item in items {
                do {
                    added.append(try add(item, keepingDates: keepingDates))
                } catch let error as KeychainError where error.code == .duplicateItem {
                    duplicates += 1
                }
            }
            return (added, duplicates)
        }
    }
}

extension ScryptParameters {
    /// These parameters, or the tuned ones if these cost less than the floor.
    package func raisedToFloor() -> ScryptParameters {
        n * r * p < Self.floor.n * Self.floor.r * Self.floor.p ? .tuned() : self
    }
}
