internal import CSodium
import Glibc
import KeychainCore

/// A passwordless unlock: a second copy of a TPM-sealed keychain's class keys that a login
/// without a password (fingerprint, smart card, autologin) opens, through the PAM module's
/// `passwordless` option. Its key needs two secrets, and neither is the password:
///
///     T   = TPM2_Unseal(object)       sealed to the current values of some PCRs (PCR 7 by default):
///                                     this TPM, booted the same way; no authorization value, noDA
///     R   = 32 random bytes           in the keybag only inside a sealed box to the machine's key,
///                                     whose secret half only root can read (`MachineKey`); root opens
///                                     it, and hands R back only for the user named inside
///     KEK = HMAC(R, "keychain-passwordless-kek-v1" || uuid || T)
///
/// KEK wraps A, C and the ThisDeviceOnly keys Au and Cu; each wrapped key's additional data binds
/// it to the keychain, its class, its check value and a digest of the record, and the keys it
/// gives must fit the keybag's check values (a record made before a rotation opens nothing).
///
/// What that trades, as the README says: root on this machine, booted this way, can unlock the
/// keychain without the password (it holds R's key, and the TPM answers it); another user (no R:
/// neither the file nor the machine key is readable to them), a stolen disk (no T: the TPM stays in
/// the machine) and the disk booted elsewhere (another TPM, or other PCR values) cannot.
package struct PasswordlessRecord {
    static let rowName = "passwordless"
    static let format: UInt32 = 1
    static let secretLength = 32

    var pcrs: [UInt8]
    var sealed: TPMSealedSecret
    /// crypto_box_seal of (uid, uuid, R) to `machineKey`.
    var box: Bytes
    var machineKey: Bytes
    /// The check values of the class keys wrapped here: the keybag's when made, so a record made
    /// for other keys (a rotation, a recovery) is known to be stale without trying it.
    var checks: [Bytes]
    var wrapped: [Bytes]

    /// A, C, Au, Cu: the order of `checks` and `wrapped`.
    static let classes: [LockClass] = [.whenUnlocked, .afterFirstUnlock, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly]

    var bytes: Bytes {
        var w = ByteWriter()
        w.u32(Self.format)
        w.blob(header)
        for value in checks + wrapped { w.blob(value) }
        return w.bytes
    }

    /// What the wrapped keys' additional data binds them to.
    var header: Bytes {
        var w = ByteWriter()
        w.blob(pcrs)
        w.blob(sealed.bytes)
        w.blob(box)
        w.blob(machineKey)
        return w.bytes
    }

    init(pcrs: [UInt8], sealed: TPMSealedSecret, box: Bytes, machineKey: Bytes, checks: [Bytes], wrapped: [Bytes]) {
        self.pcrs = pcrs
        self.sealed = sealed
        self.box = box
        self.machineKey = machineKey
        self.checks = checks
        self.wrapped = wrapped
    }

    init(bytes: Bytes) throws {
        var r = ByteReader(bytes)
        guard try r.u32() == Self.format else { throw KeychainError.decode("the keychain's passwordless record is of an unknown format") }
        var h = ByteReader(try r.blob())
        pcrs = try h.blob()
        sealed = try TPMSealedSecret(bytes: try h.blob())
        box = try h.blob()
        machineKey = try h.blob()
        checks = try (0..<4).map { _ in try r.blob() }
        wrapped = try (0..<4).map { _ in try r.blob() }
        guard h.isAtEnd, r.isAtEnd, PCRSelection.isValid(pcrs), box.count == MachineKey.boxLength(Self.plaintextLength),
            machineKey.count == MachineKey.keyLength, checks.allSatisfy({ $0.count == 16 })
        else { throw KeychainError.decode("the keychain's passwordless record is damaged") }
    }

    /// uid (4 bytes), uuid (16), R (32).
    static let plaintextLength = 4 + 4 + 16 + 4 + 32

    /// The uid a box's opened content names (root checks it before anything is handed over).
    package static func owner(ofOpened plaintext: Bytes) -> UInt32? {
        var r = ByteReader(plaintext)
        return plaintext.count == plaintextLength ? try? r.u32() : nil
    }

    static func plaintext(uid: UInt32, uuid: Bytes, secret: Bytes) -> Bytes {
        var w = ByteWriter()
        w.u32(uid)
        w.blob(uuid)
        w.blob(secret)
        return w.bytes
    }

    func aad(_ lockClass: LockClass, uuid: Bytes, check: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-passwordless-v1")
        w.blob(uuid)
        w.string(lockClass.letter)
        w.blob(check)
        w.blob(Crypto.sha256(header))
        return w.bytes
    }

    static func kek(secret: Bytes, sealed: Bytes, uuid: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string("keychain-passwordless-kek-v1")
        w.blob(uuid)
        w.blob(sealed)
        var message = w.bytes
        defer { message.wipe() }
        return Crypto.hmacSHA256(key: secret, message)
    }

    static func load(from db: SQLiteDatabase) throws -> PasswordlessRecord? {
        let select = try db.statement("SELECT value FROM keychain WHERE name = ?")
        select.bind([.text(rowName)])
        defer { select.reset() }
        guard try select.step() else { return nil }
        return try PasswordlessRecord(bytes: select.blob(0))
    }

    static func remove(from db: SQLiteDatabase) throws {
        try db.statement("DELETE FROM keychain WHERE name = ?").run([.text(rowName)])
    }
}

/// The machine's key pair for passwordless unlocks (X25519, libsodium's sealed boxes): anyone
/// can seal to its public half, only root can open with its secret half. Made by the PAM module
/// (as root) the first time a session opens through a service with the `passwordless` option.
package enum MachineKey {
    /// Root's folder: root-owned, 0755 (the public key is for everyone); the secret key 0600.
    nonisolated(unsafe) package static var folder = "/var/lib/keychain/passwordless"
    static let publicName = "machine.pub"
    static let secretName = "machine.key"
    static let lockName = "machine.lock"
    package static let keyLength = 32
    static func boxLength(_ plaintext: Int) -> Int { plaintext + 48 }

    /// The public key, from a root-owned file no one else can change, in such a folder.
    package static func publicKey() throws -> Bytes {
        try checkFolder()
        guard let key = try read(folder + "/" + publicName, secret: false) else {
            throw KeychainError(
                .itemNotFound,
                "this machine has no key for passwordless unlocks yet (\(folder)/\(publicName)): it is made by the first session opened through a PAM service with pam_keychain's passwordless option"
            )
        }
        return key
    }

    /// Root only: the key pair, made now if there is none (or only half of one).
    package static func loadOrCreate() throws -> (public: Bytes, secret: Bytes) {
        guard geteuid() == 0 else { throw KeychainError.param("only root can read this machine's passwordless key") }
        for path in [parent(of: folder), folder] where !path.isEmpty {
            // 0755 whatever the application's umask (077 after a pam_umask): the users read the public key.
            if mkdir(path, 0o755) == 0 {
                chmod(path, 0o755)
            } else if errno != EEXIST {
                throw KeychainError(.io, "cannot make \(path): \(String(cString: strerror(errno)))")
            }
        }
        try checkFolder()
        // Several first sessions at once (a boot with autologins) make one pair, not halves of
        // several: a lock file only root can open (no user can hold it), waited for at most 2 s.
        let lockPath = folder + "/" + lockName
        let lock = Glibc.open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw KeychainError(.io, "cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        var locked = false
        for _ in 0..<200 {
            if flock(lock, LOCK_EX | LOCK_NB) == 0 {
                locked = true
                break
            }
            usleep(10_000)
        }
        guard locked else { throw KeychainError(.io, "\(lockPath) is held by another session for too long") }
        if let pub = try read(folder + "/" + publicName, secret: false), var secret = try read(folder + "/" + secretName, secret: true) {
            var derived = Bytes(repeating: 0, count: keyLength)
            defer { derived.wipe() }
            guard Crypto.sodiumReady, crypto_scalarmult_base(&derived, secret) == 0, Crypto.equal(derived, pub) else {
                secret.wipe()
                throw KeychainError.decode("\(folder): the machine's passwordless key pair does not match")
            }
            return (pub, secret)
        }
        let (pub, secret) = try makePair()
        // The secret half first: a public key is never there without its secret.
        try PlainFiles.replace(folder + "/" + secretName, with: secret, mode: 0o600)
        try PlainFiles.replace(folder + "/" + publicName, with: pub, mode: 0o644)
        return (pub, secret)
    }

    static func makePair() throws -> (public: Bytes, secret: Bytes) {
        var pub = Bytes(repeating: 0, count: keyLength), secret = Bytes(repeating: 0, count: keyLength)
        guard Crypto.sodiumReady, crypto_box_keypair(&pub, &secret) == 0 else { throw KeychainError(.io, "cannot make a key pair") }
        return (pub, secret)
    }

    static func seal(_ message: Bytes, to publicKey: Bytes) throws -> Bytes {
        guard publicKey.count == keyLength else { throw KeychainError.param("a machine key is 32 bytes") }
        var box = Bytes(repeating: 0, count: boxLength(message.count))
        guard Crypto.sodiumReady, crypto_box_seal(&box, message, UInt64(message.count), publicKey) == 0 else {
            throw KeychainError(.io, "crypto_box_seal failed")
        }
        return box
    }

    /// The box's content, or nil when it was not sealed to this key pair (or was changed).
    package static func open(_ box: Bytes, public: Bytes, secret: Bytes) -> Bytes? {
        guard Crypto.sodiumReady, box.count > 48, box.count <= 4096, `public`.count == keyLength, secret.count == keyLength else { return nil }
        var message = Bytes(repeating: 0, count: box.count - 48)
        guard crypto_box_seal_open(&message, box, UInt64(box.count), `public`, secret) == 0 else {
            message.wipe()
            return nil
        }
        return message
    }

    private static func parent(of path: String) -> String {
        String(path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/"))
    }

    /// The folder and its parent: root's, writable by no one else, not a symbolic link.
    private static func checkFolder() throws {
        for path in [parent(of: folder), folder] where !path.isEmpty {
            var st = stat()
            guard lstat(path, &st) == 0 else {
                throw KeychainError(
                    .itemNotFound,
                    "this machine has no key for passwordless unlocks yet (\(folder)): it is made by the first session opened through a PAM service with pam_keychain's passwordless option"
                )
            }
            guard st.st_mode & S_IFMT == S_IFDIR, st.st_uid == 0, st.st_mode & 0o022 == 0 else {
                throw KeychainError.param("\(path) must be a folder of root's that no one else can write to")
            }
        }
    }

    /// A 32-byte key file of root's: not a link, writable by root alone (and for the secret,
    /// readable by root alone); nil when there is none.
    private static func read(_ path: String, secret: Bool) throws -> Bytes? {
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw KeychainError(errno == EACCES ? .authFailed : .io, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == 0, st.st_mode & (secret ? 0o077 : 0o022) == 0,
            st.st_size == keyLength
        else { throw KeychainError.param("\(path) must be a 32-byte file of root's\(secret ? " that no one else can read" : "")") }
        var key = Bytes(repeating: 0, count: keyLength)
        guard Glibc.read(fd, &key, keyLength) == keyLength else {
            key.wipe()
            throw KeychainError(.io, "cannot read \(path)")
        }
        return key
    }
}

/// What `security status` and `tpm-status` say of a keychain's passwordless unlock.
package struct PasswordlessStatus: Sendable, Equatable {
    /// The PCRs (SHA-256 bank) its TPM secret is sealed to.
    package var pcrs: [UInt8]
    /// It wraps the keychain's current class keys (false after a key rotation or a recovery).
    package var current: Bool
    /// The machine key its box was sealed to.
    package var machineKey: Bytes = []
}

extension KeychainStore {
    /// The keychain's passwordless unlock, if it has one (nil also for a damaged record).
    package var passwordless: PasswordlessStatus? {
        withLock {
            guard let record = try? PasswordlessRecord.load(from: db), let bag = try? Keybag.load(from: db) else { return nil }
            let current = zip(PasswordlessRecord.classes, record.checks).allSatisfy { Crypto.equal(bag.check($0), $1) }
            return PasswordlessStatus(pcrs: record.pcrs, current: current, machineKey: record.machineKey)
        }
    }

    /// Adds (or replaces) the passwordless unlock of a keychain sealed to the TPM of `tpm`: A, C,
    /// Au and Cu wrapped under a key that needs a secret sealed in this TPM to the current values
    /// of `pcrs` and a secret that only root (`machineKey`'s holder) gives back, for `uid` only.
    /// Needs the password (checked by the TPM). Nothing is written unless the TPM sealed and
    /// unsealed the new secret.
    package func enrolPasswordless(
        password: Bytes, machineKey: Bytes, uid: UInt32, pcrs: [UInt8] = PCRSelection.standard,
        tpm: TPMConfiguration = .current
    ) throws {
        guard PCRSelection.isValid(pcrs) else { throw KeychainError.param("PCRs are 1 to 8 distinct numbers from 0 to 23") }
        try withLock {
            try db.transaction {
                let bag = try Keybag.load(from: db)
                guard bag.isBound else {
                    throw KeychainError.param(
                        "this keychain is not sealed to a TPM: `security tpm-enroll --passwordless` seals it and adds the passwordless unlock")
                }
                var keys = try bag.open(password: password, tpm: tpm)
                defer { keys.wipe() }
                guard let device = keys.device else { throw KeychainError.decode("the keybag is damaged") }
                var secret = try Crypto.random(PasswordlessRecord.secretLength)
                var sealedSecret = try Crypto.random(PasswordlessRecord.secretLength)
                defer { secret.wipe(); sealedSecret.wipe() }
                let sealed = try TPMSealedSecret.keychainErrors(sealing: true) { try TPMAccess.operations(tpm).seal(sealedSecret, toPCRs: pcrs) }
                var plaintext = PasswordlessRecord.plaintext(uid: uid, uuid: bag.uuid, secret: secret)
                defer { plaintext.wipe() }
                var record = PasswordlessRecord(
                    pcrs: pcrs, sealed: sealed, box: try MachineKey.seal(plaintext, to: machineKey), machineKey: machineKey,
                    checks: PasswordlessRecord.classes.map { bag.check($0) }, wrapped: [])
                var passwordlessKEK = PasswordlessRecord.kek(secret: secret, sealed: sealedSecret, uuid: bag.uuid)
                defer { passwordlessKEK.wipe() }
                record.wrapped = try zip(PasswordlessRecord.classes, [keys.a, keys.c, device.a, device.c]).map { lockClass, key in
                    try Crypto.seal(key, key: passwordlessKEK, aad: record.aad(lockClass, uuid: bag.uuid, check: bag.check(lockClass)))
                }
                try db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES (?, ?)").run([.text(PasswordlessRecord.rowName), .blob(record.bytes)])
            }
        }
    }

    /// Removes the passwordless unlock; false when there was none.
    @discardableResult
    package func removePasswordless() throws -> Bool {
        try withLock {
            let removed = try db.transaction {
                // A damaged record is removed too: it could open nothing.
                guard try rowExists(PasswordlessRecord.rowName) else { return false }
                try PasswordlessRecord.remove(from: db)
                return true
            }
            // The record opens the class keys without the password: no copy of it stays in the log.
            if removed { discardPreviousKeybags() }
            return removed
        }
    }

    private func rowExists(_ name: String) throws -> Bool {
        let select = try db.statement("SELECT 1 FROM keychain WHERE name = ?")
        select.bind([.text(name)])
        defer { select.reset() }
        return try select.step()
    }

    /// The sealed box the PAM module (root) opens with the machine's key; nil without a
    /// passwordless unlock. Read as the user: root never reads the user's file.
    package func passwordlessBox() throws -> Bytes? {
        try withLock { try PasswordlessRecord.load(from: db)?.box }
    }

    /// Unlocks with what root opened from `passwordlessBox()` for `uid`, and the secret that the
    /// TPM of `tpm` releases only while the PCRs hold the values sealed to. Anything that does
    /// not fit (another user's box, another keychain's, a changed record, a TPM that answers
    /// wrongly) is an error and leaves the keychain as it was.
    package func unlockPasswordless(opened plaintext: Bytes, uid: UInt32, tpm: TPMConfiguration = .current) throws {
        try TPMDeadline.command { try unlockPasswordlessUnderDeadline(opened: plaintext, uid: uid, tpm: tpm) }
    }

    /// `unlockPasswordless`, its TPM calls under one time limit.
    private func unlockPasswordlessUnderDeadline(opened plaintext: Bytes, uid: UInt32, tpm: TPMConfiguration) throws {
        try withLock {
            let version = try currentDataVersion()
            let bag = try Keybag.load(from: db)
            guard let record = try PasswordlessRecord.load(from: db) else {
                throw KeychainError(.itemNotFound, "this keychain has no passwordless unlock (`security tpm-enroll --passwordless` adds one)")
            }
            var r = ByteReader(plaintext)
            let owner = try r.u32(), uuid = try r.blob()
            var secret = try r.blob()
            defer { secret.wipe() }
            guard r.isAtEnd, owner == uid, Crypto.equal(uuid, bag.uuid), secret.count == PasswordlessRecord.secretLength else {
                throw KeychainError.decode("the passwordless key is another user's or another keychain's")
            }
            guard bag.isBound, zip(PasswordlessRecord.classes, record.checks).allSatisfy({ Crypto.equal(bag.check($0), $1) }) else {
                throw KeychainError.decode("the passwordless unlock was made for other keys (a rotation or a recovery since): enrol it again")
            }
            var sealedSecret: Bytes
            do {
                sealedSecret = try TPMSealedSecret.keychainErrors {
                    try TPMAccess.operations(tpm).unseal(record.sealed, pcrs: record.pcrs, length: PasswordlessRecord.secretLength)
                }
            } catch let error as KeychainError where error.code == .authFailed && error.detail.hasPrefix(TPMSealedSecret.bootStatePrefix) {
                // The same code and prefix (pam_keychain reads them as a changed boot state), in words that
                // tell a PCR extended after boot from a changed boot chain.
                let words = BootStateDiagnosis.words(BootStateDiagnosis.cause(record.pcrs, tpm: tpm), record.pcrs, sealed: "the passwordless unlock")
                throw KeychainError(.authFailed, TPMSealedSecret.bootStatePrefix + words + "; the password still opens the keychain")
            }
            defer { sealedSecret.wipe() }
            var kek = PasswordlessRecord.kek(secret: secret, sealed: sealedSecret, uuid: bag.uuid)
            defer { kek.wipe() }
            var keys: [Bytes] = []
            defer { for i in keys.indices { keys[i].wipe() } }
            for (lockClass, wrapped) in zip(PasswordlessRecord.classes, record.wrapped) {
                guard let key = try? Crypto.open(wrapped, key: kek, aad: record.aad(lockClass, uuid: bag.uuid, check: bag.check(lockClass))),
                    bag.matches(key, lockClass)
                else {
                    throw KeychainError.decode("the passwordless unlock opens nothing: the file was changed, or the TPM answered wrongly")
                }
                keys.append(key)
            }
            try advanceRollbackCounter(bag, c: keys[1], tpm: tpm, accepting: false)
            adopt(bag, dataVersion: version)
            try install(a: keys[0], c: keys[1], device: DeviceKeys(a: keys[2], c: keys[3]))
        }
    }
}
