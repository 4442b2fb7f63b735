import Glibc
import KeychainCore

/// What `security tpm-status` reports: this machine's TPM, and whether and how the keychain is
/// sealed to it.
package struct TPMStatus: Sendable {
    /// Where the TPM would be reached ($KEYCHAIN_TPM_TCTI, or /dev/tpmrm0).
    package var configuration: TPMConfiguration
    /// The TPM here, when one answers.
    package var tpm: TPMDescription?
    /// Why no TPM can be used here, in one line; nil when one answers.
    package var problem: String?
    /// The keychain is sealed to a TPM (keybag version 3).
    package var sealed: Bool
    /// Sealed, and to the TPM here (its storage key is the one recorded); nil when that cannot be
    /// told (no TPM answers, or not sealed).
    package var sealedHere: Bool?
    /// The recovery record opens the current class keys A and C (false after a rotation made
    /// elsewhere by a version that did not renew it, or for a damaged record).
    package var recoveryKeyCurrent: Bool
    /// How many items are ThisDeviceOnly under the TPM-bound keys (Au, Cu).
    package var deviceOnlyItems: Int
    /// Sealed, and its binding records a rollback counter (`TPMSealedSecret.counted`): a record
    /// and a counter both gone are refused as an older copy.
    package var counted = false
    /// Sealed, and to these PCRs' values too (`tpm-enroll --pcrs`); empty: to none.
    package var pcrs: [UInt8] = []
}

/// What `security tpm-recover` did.
package struct TPMRecoveryOutcome: Sendable {
    /// ThisDeviceOnly items that were bound to the lost TPM and are gone.
    package var deviceOnlyItemsLost: Int
    /// The keychain is sealed again, to the TPM here; false: protected by its password only.
    package var sealedAgain: Bool
}

extension KeychainStore {
    /// Whether the keychain is sealed to a TPM (its keybag as last read).
    package var isSealedToTPM: Bool { withLock { keybag.isBound } }

    /// Seals the keychain to the TPM of `tpm`: from now on the key that unwraps its class keys
    /// needs the password and a secret that this TPM releases only for that password, each wrong
    /// guess counted by the TPM. WhenUnlocked and AfterFirstUnlock ThisDeviceOnly items move under
    /// class keys of their own, wrapped under that key alone. Returns the recovery key, which
    /// opens A and C (not the ThisDeviceOnly keys) without the TPM: the caller shows it once.
    ///
    /// Nothing is written unless the TPM sealed the secret and unsealed it again; the keychain is
    /// left unlocked. A keychain sealed already is errSecParam (remove the binding first, or
    /// `resealToTPM`). `pcrs`: the secret is also sealed to these PCRs' current values (a boot
    /// chain that changes them then needs the recovery key); empty: to none.
    package func sealToTPM(password: Bytes, pcrs: [UInt8] = [], tpm: TPMConfiguration = .current) throws -> RecoveryKey {
        try requireHeldKeys("sealing the keychain to the TPM (`security tpm-enroll`)")
        return try withLock {
            let recovery = try RecoveryKey.generate()
            var device = try DeviceKeys.generate()
            var a = Bytes(), c = Bytes()
            defer { device.wipe(); a.wipe(); c.wipe() }
            try db.transaction {
                var bag = try Keybag.load(from: db)
                guard !bag.isBound else {
                    throw KeychainError.param("this keychain is sealed to a TPM already (`security tpm-unenroll` removes the binding)")
                }
                // Without a binding the key-encryption key is the password's scrypt output: the
                // same salt and cost go on, S now only one half of the key.
                var keys = try bag.unwrapUpgrading(password: password)
                defer { keys.wipe() }
                swap(&a, &keys.a)
                swap(&c, &keys.c)
                // The counter first: the binding says whether there is one, under the wrapped keys' tags.
                let count = prepareRollbackCounter(uuid: bag.uuid, c: c, oldC: nil, tpm: tpm)
                let record = try RecoveryRecord.make(a: a, c: c, for: bag, key: recovery)
                try bag.bind(
                    a: a, c: c, device: device, stretched: keys.kek, recovery: record.bytes, tpm: tpm, counted: count != nil, pcrs: pcrs)
                try moveDeviceOnlyRows(a: a, c: c, d: bag.keyD, device: device, separating: true)
                try bag.save(to: db)
                try finishRollbackCounter(bag, count: count, c: c, oldC: nil, tpm: tpm)
                adopt(bag)
            }
            // The keybag before the binding opens with the password alone, off the TPM.
            discardPreviousKeybags()
            try install(a: a, c: c, device: device)
            return recovery
        }
    }

    /// Seals a keychain sealed already again, with a new secret, to the PCRs `pcrs` (their values
    /// now; empty: to none): the password (checked by the TPM, through the current binding, so
    /// the PCRs it is sealed to must still hold their values) and the class keys, the recovery
    /// key, the rollback counter and the passwordless unlock all stay as they are.
    package func resealToTPM(password: Bytes, pcrs: [UInt8], tpm: TPMConfiguration = .current) throws {
        guard pcrs.isEmpty || PCRSelection.isValid(pcrs) else { throw KeychainError.param("PCRs are 1 to 8 distinct numbers from 0 to 23") }
        try withLock {
            var a = Bytes(), c = Bytes()
            defer { a.wipe(); c.wipe() }
            var device: DeviceKeys?
            defer { device?.wipe() }
            try db.transaction {
                var bag = try Keybag.load(from: db)
                guard let binding = bag.binding else { throw KeychainError.param("this keychain is not sealed to a TPM") }
                guard bag.scrypt.isSane, bag.salt.count >= 16 else {
                    throw KeychainError(.decode, "the keybag is damaged (KDF parameters out of bounds)")
                }
                var stretched = try Crypto.scrypt(password: password, salt: bag.salt, parameters: bag.scrypt)
                defer { stretched.wipe() }
                var kek = try binding.sealed.kek(stretched: stretched, uuid: bag.uuid, tpm: tpm)
                defer { kek.wipe() }
                (a, c) = try bag.unwrap(kek: kek)
                device = try bag.unwrapDevice(kek: kek)
                try bag.seal(a: a, c: c, device: device, stretched: stretched, tpm: tpm, pcrs: pcrs)
                try bag.save(to: db)
                adopt(bag)
            }
            discardPreviousKeybags()
            try install(a: a, c: c, device: device)
        }
    }

    /// Removes the binding: the keychain opens with its password alone again (keybag version 2,
    /// as before enrolment, with a new salt), its ThisDeviceOnly items back under A and C, the
    /// recovery key no longer of any use. Needs the password, checked by the TPM.
    package func unsealFromTPM(password: Bytes, tpm: TPMConfiguration = .current) throws {
        try withLock {
            var a = Bytes(), c = Bytes()
            defer { a.wipe(); c.wipe() }
            try db.transaction {
                var bag = try Keybag.load(from: db)
                guard bag.isBound else { throw KeychainError.param("this keychain is not sealed to a TPM") }
                var keys = try bag.open(password: password, tpm: tpm)
                defer { keys.wipe() }
                guard keys.device != nil else { throw KeychainError.decode("the keybag is damaged") }
                // Moved out, not copied: the keys outlive the transaction (install, below).
                swap(&a, &keys.a)
                swap(&c, &keys.c)
                try moveDeviceOnlyRows(a: a, c: c, d: bag.keyD, device: keys.device!, separating: false)
                let uuid = bag.uuid
                try bag.unbind(a: a, c: c, password: password, scrypt: bag.scrypt)
                try bag.save(to: db)
                removeRollbackCounter(uuid: uuid, c: c, tpm: tpm)
                // Its ThisDeviceOnly keys are gone, and it was this TPM's to begin with.
                try PasswordlessRecord.remove(from: db)
                adopt(bag)
            }
            try install(a: a, c: c)
        }
    }

    /// Opens the keychain with its recovery key, when its TPM is gone (another machine, a new
    /// mainboard, a cleared TPM) or its password forgotten. A and C come back; the ThisDeviceOnly
    /// items were bound to the TPM alone and are deleted. The keychain then takes `newPassword`
    /// and is sealed again to the TPM of `tpm` when there is one (else it is protected by the
    /// password alone, as one never sealed). The recovery key stays valid (A and C are the same).
    /// A TPM that is configured but fails is an error, never a silent fall back to the password.
    /// Sealed again, it is to no PCRs unless `pcrs` names some: the boot chain that made the old
    /// PCR binding fail is usually the one now, and the user says whether to bind to it.
    package func recoverFromTPM(
        recoveryKey: RecoveryKey, newPassword: Bytes, pcrs: [UInt8] = [], tpm: TPMConfiguration = .current,
        scrypt: ScryptParameters? = nil
    ) throws -> TPMRecoveryOutcome {
        try withLock {
            var a = Bytes(), c = Bytes()
            var device = try DeviceKeys.generate()
            defer { a.wipe(); c.wipe(); device.wipe() }
            var outcome = TPMRecoveryOutcome(deviceOnlyItemsLost: 0, sealedAgain: tpm.tcti != nil)
            try db.transaction {
                var bag = try Keybag.load(from: db)
                guard bag.isBound else { throw KeychainError.param("this keychain is not sealed to a TPM and has no recovery key") }
                (a, c) = try bag.unwrap(recovery: recoveryKey)
                let parameters = scrypt ?? bag.scrypt.raisedToFloor()
                // Opened with the recovery key, the keychain is taken as it is: its count starts again here.
                let count = outcome.sealedAgain ? prepareRollbackCounter(uuid: bag.uuid, c: c, oldC: nil, tpm: tpm) : nil
                if outcome.sealedAgain {
                    try bag.rewrap(
                        a: a, c: c, device: device, password: newPassword, scrypt: parameters, tpm: tpm, counted: count != nil,
                        pcrs: pcrs)
                } else {
                    try bag.unbind(a: a, c: c, password: newPassword, scrypt: parameters)
                }
                let delete = try db.statement("DELETE FROM items WHERE lockclass IN (?, ?)")
                try delete.run([.int(LockClass.whenUnlockedThisDeviceOnly.rawValue), .int(LockClass.afterFirstUnlockThisDeviceOnly.rawValue)])
                outcome.deviceOnlyItemsLost = Int(db.changes)
                try bag.save(to: db)
                try finishRollbackCounter(bag, count: count, c: c, oldC: nil, tpm: tpm)
                // Made for the old TPM's ThisDeviceOnly keys: it could open nothing here.
                try PasswordlessRecord.remove(from: db)
                adopt(bag)
            }
            discardPreviousKeybags()
            try install(a: a, c: c, device: outcome.sealedAgain ? device : nil)
            return outcome
        }
    }

    /// The TPM here and this keychain's binding. Asks the TPM for nothing that needs an
    /// authorization, so it counts nothing and works in lockout.
    package func tpmStatus(tpm: TPMConfiguration = .current) -> TPMStatus {
        withLock {
            let bag = (try? Keybag.load(from: db)) ?? keybag
            var status = TPMStatus(
                configuration: tpm, tpm: nil, problem: nil, sealed: bag.isBound, sealedHere: nil,
                recoveryKeyCurrent: false, deviceOnlyItems: 0)
            if let binding = bag.binding {
                status.counted = binding.sealed.counted
                status.pcrs = binding.sealed.pcrs
                if let record = try? RecoveryRecord(bytes: binding.recovery) {
                    status.recoveryKeyCurrent = Crypto.equal(record.checkA, bag.checkA) && Crypto.equal(record.checkC, bag.checkC)
                }
                if let stmt = try? db.statement("SELECT count(*) FROM items WHERE lockclass IN (4, 5)"), (try? stmt.step()) == true {
                    status.deviceOnlyItems = Int(stmt.int(0))
                    stmt.reset()
                }
            }
            do {
                let (description, here) = try TPMAccess.operations(tpm).describe(primaryName: bag.binding?.sealed.primaryName)
                status.tpm = description
                status.sealedHere = here
            } catch let failure as TPMFailure {
                switch failure {
                case .unavailable(let why), .foreign(let why), .failed(let why), .bootState(let why): status.problem = why
                case .authorization, .lockout: status.problem = failure.keychainError.detail
                }
            } catch {
                status.problem = "\(error)"
            }
            return status
        }
    }
}
