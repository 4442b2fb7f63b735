import Glibc
import KeychainCore

/// A TPM-sealed keychain's rollback counter: an NV counter index in the TPM and, in the keybag's
/// `counter` row, the count this file last agreed with, under a MAC keyed from class key C. A whole
/// older copy of the file put back (a backup restored, a sync tool, anyone with write access and
/// no keys) still carries its older count; the TPM's counter never goes back, so the next unlock
/// notices and refuses (`errSecInvalidKeychain`), until the user accepts the older copy.
///
/// How often it moves: once per unlock (password, passwordless login, recovery), and at enrolment,
/// rotation and recovery; never per item write, so a day's use costs as many NV writes as unlocks,
/// not as many as stores (see docs/security-model.md, "Rollback counter", for the measured wear).
/// What that leaves out: changes made since the last unlock: a copy taken and put back between two
/// unlocks is not noticed.
///
/// The counter's authorization value comes from class key C, so only someone holding the keychain's
/// keys can read or move it; noDA, so probing indices costs no lockout tries.
struct RollbackRecord {
    static let rowName = "counter"
    var value: UInt64
    var mac: Bytes

    static func key(c: Bytes) -> Bytes { Crypto.deriveKey(c, purpose: "tpm-rollback-counter") }

    static func auth(c: Bytes, uuid: Bytes) -> Bytes {
        var key = key(c: c)
        defer { key.wipe() }
        var w = ByteWriter()
        w.string("keychain-counter-auth-v1")
        w.blob(uuid)
        var auth = Crypto.hmacSHA256(key: key, w.bytes)
        // The TPM drops trailing zero bytes of an authorization value; so do we.
        while auth.last == 0 { auth.removeLast() }
        return auth
    }

    static func mac(c: Bytes, uuid: Bytes, value: UInt64) -> Bytes {
        var key = key(c: c)
        defer { key.wipe() }
        var w = ByteWriter()
        w.string("keychain-counter-v1")
        w.blob(uuid)
        w.u64(value)
        return Crypto.hmacSHA256(key: key, w.bytes)
    }

    /// Four NV indices in the owner's range (0x01800000-0x01BFFFFF), picked from the keychain's
    /// uuid: the counter is found again without the file's help (a record removed from the file
    /// does not hide it), and a few keychains on one TPM rarely meet.
    static func candidates(uuid: Bytes) -> [UInt32] {
        var w = ByteWriter()
        w.string("keychain-counter-index-v1")
        w.blob(uuid)
        let digest = Crypto.sha256(w.bytes)
        let start = (UInt32(digest[0]) << 16 | UInt32(digest[1]) << 8 | UInt32(digest[2])) % 0x3F_FFFC
        return (0..<4).map { 0x0180_0000 + start + $0 }
    }

    var bytes: Bytes {
        var w = ByteWriter()
        w.u64(value)
        w.blob(mac)
        return w.bytes
    }

    /// The stored record if its MAC verifies under `c`; nil when there is none or it does not.
    static func load(from db: SQLiteDatabase, c: Bytes, uuid: Bytes) throws -> (record: RollbackRecord?, present: Bool) {
        let select = try db.statement("SELECT value FROM keychain WHERE name = ?")
        select.bind([.text(rowName)])
        defer { select.reset() }
        guard try select.step() else { return (nil, false) }
        var r = ByteReader(select.blob(0))
        guard let value = try? r.u64(), let mac = try? r.blob(), r.isAtEnd, Crypto.equal(mac, Self.mac(c: c, uuid: uuid, value: value)) else {
            return (nil, true)
        }
        return (RollbackRecord(value: value, mac: mac), true)
    }

    static func save(_ value: UInt64, c: Bytes, uuid: Bytes, to db: SQLiteDatabase) throws {
        let record = RollbackRecord(value: value, mac: mac(c: c, uuid: uuid, value: value))
        try db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES (?, ?)").run([.text(rowName), .blob(record.bytes)])
    }

    static func remove(from db: SQLiteDatabase) throws {
        try db.statement("DELETE FROM keychain WHERE name = ?").run([.text(rowName)])
    }
}

/// What `tpm-status` says of the rollback counter.
package struct RollbackStatus: Sendable, Equatable {
    /// The count the file says it last agreed with (its MAC is checked at each unlock, not here).
    package var fileCount: UInt64
}

extension KeychainStore {
    /// The rollback counter's record as the file has it; nil when there is none.
    package var rollbackStatus: RollbackStatus? {
        withLock {
            guard let select = try? db.statement("SELECT value FROM keychain WHERE name = ?") else { return nil }
            select.bind([.text(RollbackRecord.rowName)])
            defer { select.reset() }
            guard (try? select.step()) == true else { return nil }
            var r = ByteReader(select.blob(0))
            return (try? r.u64()).map { RollbackStatus(fileCount: $0) }
        }
    }

    /// Checks the file against the TPM's counter and moves both on by one; called by every unlock
    /// of a sealed keychain with the keys it just unwrapped, before they are installed. A file
    /// behind the TPM (an older copy), a record removed or damaged while the TPM has the counter,
    /// or a counter gone from the TPM: errSecInvalidKeychain, unless `accepting` (the user said
    /// the older copy is theirs), which takes the file's state as the current one.
    /// A keychain never counted (its binding says so: `TPMSealedSecret.counted`) gets a counter;
    /// where none can be made (an owner password), it goes on without, as `tpm-status` says. One
    /// whose binding says it was counted, with neither record nor counter left, is an older copy
    /// put back with both removed (plain SQL and the owner hierarchy do that, no key does): refused.
    /// Returns whether the keychain has a counter now, for the caller to record in the binding.
    @discardableResult
    func advanceRollbackCounter(_ bag: Keybag, c: Bytes, tpm: TPMConfiguration, accepting: Bool) throws -> Bool {
        guard let binding = bag.binding else { return false }
        var auth = RollbackRecord.auth(c: c, uuid: bag.uuid)
        defer { auth.wipe() }
        let candidates = RollbackRecord.candidates(uuid: bag.uuid)
        let operations = try TPMSealedSecret.keychainErrors { try TPMAccess.operations(tpm) }
        func ask(_ action: TPMCounterRequest.Action) throws -> TPMCounterAnswer {
            try TPMSealedSecret.keychainErrors { try operations.counter(TPMCounterRequest(action, auth: auth, candidates: candidates)) }
        }
        let remedy =
            "if this copy is the one you want (a backup you restored), `security unlock-keychain --accept-older-copy` opens it and makes it the current one"
        // The file's record is read, compared and written inside one write transaction, which
        // other processes wait for: two unlocks at once (two logins, a login and a screen unlock)
        // must not see each other's half-done step as an older copy. The TPM's increment comes
        // after the commit (the file first, so an interruption leaves it ahead, never behind).
        var counting = true
        let increment: (index: UInt32, expected: UInt64, atLeast: UInt64, protected: Bool)? = try db.transaction {
            let (stored, present) = try RollbackRecord.load(from: db, c: c, uuid: bag.uuid)
            let action: TPMCounterRequest.Action = stored.map { .findMatching(expected: $0.value) } ?? .find
            let found = try ask(action)
            switch (stored, found.index) {
            case (nil, 0) where accepting || (!present && !binding.sealed.counted):
                // Never counted yet (or the user accepts a file whose record was lost): a new counter.
                counting = try startCounting(bag, c: c, ask: ask)
                return nil
            case (nil, 0) where !present:
                throw KeychainError(
                    .invalidKeychain,
                    "this keychain was sealed with a rollback counter, but neither its record in the file nor the counter in the TPM is there any more: an older copy was put back and both were removed; \(remedy)"
                )
            case (nil, 0):
                throw KeychainError(.invalidKeychain, "the keychain's rollback record is damaged; \(remedy)")
            case (nil, _):
                guard accepting else {
                    throw KeychainError(
                        .invalidKeychain,
                        "this keychain file has no valid rollback record, but the TPM keeps its counter (at \(found.value)): an older copy, from before it was counted, was put back, or the file was changed; \(remedy)"
                    )
                }
                try RollbackRecord.save(found.value + 1, c: c, uuid: bag.uuid, to: db)
                return (found.index, found.value, found.value + 1, found.protected)
            case (let record?, 0):
                guard accepting else {
                    throw KeychainError(
                        .invalidKeychain,
                        "the TPM no longer has this keychain's rollback counter (the file says \(record.value)): it was removed, so an older copy cannot be told from this one; \(remedy)"
                    )
                }
                counting = try startCounting(bag, c: c, ask: ask)
                return nil
            case (let record?, _):
                if record.value == found.value || accepting {
                    try RollbackRecord.save(found.value + 1, c: c, uuid: bag.uuid, to: db)
                    return (found.index, found.value, found.value + 1, found.protected)
                } else if record.value == found.value + 1 {
                    // The last unlock wrote its count and has not moved the TPM's yet (or stopped before it).
                    return (found.index, found.value, record.value, found.protected)
                } else if record.value < found.value {
                    throw KeychainError(
                        .invalidKeychain,
                        "this keychain file is an older copy: it was last unlocked at count \(record.value), and this TPM's counter for it is at \(found.value) (\(found.value - record.value) unlock\(found.value - record.value == 1 ? "" : "s") later); something put an older copy back, and items changed or deleted since would come back; \(remedy)"
                    )
                } else {
                    throw KeychainError(
                        .invalidKeychain,
                        "this keychain file's count (\(record.value)) is ahead of this TPM's counter (\(found.value)): it is not the file this counter kept; \(remedy)"
                    )
                }
            }
        }
        guard let increment else { return counting }
        // The helper reads the counter, compares it with `expected` and increments it: two steps
        // in the TPM, so two unlocks at once that both read the old value would both move it, and
        // leave the TPM one ahead of the file (the next unlock would call the file an older copy).
        // The keychain's write lock, taken for nothing but this, makes the two steps one.
        let after = try db.transaction { try ask(.increment(index: increment.index, expected: increment.expected)) }
        // Another unlock of the same keychain may have moved it meanwhile, never past the file's
        // count (each moves it only from the value it expects, after the file was written).
        guard after.value >= increment.atLeast else { throw KeychainError(.deviceFailed, "the TPM's rollback counter did not move as asked") }
        if !increment.protected { migrateRollbackCounter(bag, c: c, from: increment.index, at: after.value, ask: ask) }
        return true
    }

    /// A counter of the earlier kind (the owner's, which anyone with the TPM can undefine)
    /// replaced by a protected one where the platform hierarchy allows (TPMConnection's
    /// `protectedCounterAttributes`): the new count in the file first, then the old counter
    /// undefined. Cut short, the next unlock's `findMatching` takes whichever counter agrees with
    /// the file and finishes the move; where the platform hierarchy is closed nothing changes.
    private func migrateRollbackCounter(
        _ bag: Keybag, c: Bytes, from index: UInt32, at value: UInt64, ask: (TPMCounterRequest.Action) throws -> TPMCounterAnswer
    ) {
        let moved: Bool? = try? db.transaction {
            // Another unlock moved on meanwhile: the next one migrates.
            guard try RollbackRecord.load(from: db, c: c, uuid: bag.uuid).record?.value == value else { return false }
            let successor = try ask(.migrate(index: index, expected: value))
            guard successor.index != 0, successor.index != index, successor.protected else { return false }
            try RollbackRecord.save(successor.value, c: c, uuid: bag.uuid, to: db)
            return true
        }
        if moved == true { _ = try? ask(.remove(index: index)) }
    }

    /// A new counter, its count in the file; where none can be made (an owner password, NV space
    /// full, or its four indices taken by someone else with the TPM, who can also undefine it),
    /// the keychain goes on without one, its record removed, as `tpm-status` says: an index held
    /// by another user must not keep the keychain locked, even after `--accept-older-copy`.
    private func startCounting(_ bag: Keybag, c: Bytes, ask: (TPMCounterRequest.Action) throws -> TPMCounterAnswer) throws -> Bool {
        guard let created = try? ask(.create) else {
            try RollbackRecord.remove(from: db)
            return false
        }
        try db.transaction { try RollbackRecord.save(created.value, c: c, uuid: bag.uuid, to: db) }
        return true
    }

    /// The counter for keys `c` of a keychain about to be sealed, recovered or rotated, made
    /// before its keys are wrapped (the binding records that it has one): the one the TPM has for
    /// these keys already, else a new one; its count, or nil where none can be made (an owner
    /// password, NV space full). For a rotation, when the TPM has no room, the counter of the old
    /// keys `oldC` makes room (`finishRollbackCounter` removes it anyway).
    func prepareRollbackCounter(uuid: Bytes, c: Bytes, oldC: Bytes?, tpm: TPMConfiguration) -> UInt64? {
        guard let operations = try? TPMAccess.operations(tpm) else { return nil }
        let candidates = RollbackRecord.candidates(uuid: uuid)
        var auth = RollbackRecord.auth(c: c, uuid: uuid)
        defer { auth.wipe() }
        if let found = try? operations.counter(TPMCounterRequest(.find, auth: auth, candidates: candidates)), found.index != 0 {
            return found.value
        }
        if let created = try? operations.counter(TPMCounterRequest(.create, auth: auth, candidates: candidates)) { return created.value }
        guard let oldC else { return nil }
        removeTPMCounter(uuid: uuid, c: oldC, tpm: tpm)
        return (try? operations.counter(TPMCounterRequest(.create, auth: auth, candidates: candidates)))?.value
    }

    /// Once the keybag is written: the count of the counter `prepareRollbackCounter` gave in the
    /// file (or no record, without one), and the counter of the old keys `oldC` out of the TPM
    /// (its authorization came from them).
    func finishRollbackCounter(_ bag: Keybag, count: UInt64?, c: Bytes, oldC: Bytes?, tpm: TPMConfiguration) throws {
        if let oldC { removeTPMCounter(uuid: bag.uuid, c: oldC, tpm: tpm) }
        if let count {
            try RollbackRecord.save(count, c: c, uuid: bag.uuid, to: db)
        } else {
            try RollbackRecord.remove(from: db)
        }
    }

    /// Before a sealed keychain is deleted: its rollback counter leaves the TPM (NV space is
    /// small), when the keychain is open enough to prove it is its own (class key C, in this
    /// process or the kernel). Locked, the index stays: nothing without C may remove it.
    package func releaseRollbackCounter(tpm: TPMConfiguration = .current) {
        withLock {
            guard keybag.isBound else { return }
            let key = heldClassKey(.afterFirstUnlock)
            guard var c = key, keybag.matches(c, .afterFirstUnlock) else { return }
            defer { c.wipe() }
            removeRollbackCounter(uuid: keybag.uuid, c: c, tpm: tpm)
        }
    }

    /// Removes the counter of a keychain no longer sealed (its record goes with the binding).
    func removeRollbackCounter(uuid: Bytes, c: Bytes, tpm: TPMConfiguration) {
        try? RollbackRecord.remove(from: db)
        removeTPMCounter(uuid: uuid, c: c, tpm: tpm)
    }

    /// The TPM's counter for keys `c`, if it has one, removed; the file is left as it is.
    func removeTPMCounter(uuid: Bytes, c: Bytes, tpm: TPMConfiguration) {
        guard let operations = try? TPMAccess.operations(tpm) else { return }
        var auth = RollbackRecord.auth(c: c, uuid: uuid)
        defer { auth.wipe() }
        let candidates = RollbackRecord.candidates(uuid: uuid)
        // Each of them: a migration cut short leaves two.
        for _ in candidates {
            guard let found = try? operations.counter(TPMCounterRequest(.find, auth: auth, candidates: candidates)), found.index != 0,
                (try? operations.counter(TPMCounterRequest(.remove(index: found.index), auth: auth, candidates: candidates))) != nil
            else { break }
        }
    }
}
