/// The keybag's `tpm` field: a 256-bit secret T sealed in this machine's TPM under the storage
/// primary key of the owner hierarchy, with an authorization value derived from the password.
///
/// The key that wraps the class keys then needs both halves (`kek`): the password's scrypt output
/// S and T. T comes out of the TPM only for the right authorization, and the TPM checks it itself:
/// every wrong guess counts towards its dictionary-attack lockout, and a copy of the file on
/// another machine has nothing to guess against (the private area loads in this TPM only).
///
///     S        = scrypt(password, salt)                  (the keybag's KDF, as without a TPM)
///     authValue = HMAC(S, "keychain-tpm-auth-v1" || uuid), trailing zero bytes removed
///     P        = HMAC(S, "keychain-tpm-password-v1" || uuid)
///     T        = TPM2_Unseal(object, authValue)          (salted session, response encrypted)
///     KEK      = HMAC(P, "keychain-tpm-kek-v1" || uuid || T)
///
/// What the TPM sees (authValue) does not give P: a TPM or TCTI that lies or records learns no
/// more than an offline check of password guesses at scrypt's cost per guess (what a keychain
/// without a TPM gives to whoever has its file), and whatever it answers, the KEK still depends
/// on S. A wrong T gives a KEK that opens nothing: errSecDecode, never a weaker key.
package struct TPMSealedSecret: Equatable {
    /// 2 adds `counted`; a format 1 record (written before it) reads as not counted. 3 adds
    /// `pcrs`, and is written only when there are some: a record without keeps its bytes (they
    /// are in the wrapped keys' additional data).
    static let format: UInt32 = 2
    static let pcrFormat: UInt32 = 3
    /// `TPMTemplates.storagePrimary`; a later template would get another number.
    static let primaryTemplate: UInt32 = 1
    static let secretLength = 32
    /// How a `TPMFailure.bootState` reads as a keychain error (the passwordless unlock's, too).
    package static let bootStatePrefix = "the TPM refused: "

    /// The primary key's name when the secret was sealed: a different one means another TPM (or
    /// this one after its owner hierarchy was cleared), known before any authorization is sent.
    package var primaryName: Bytes
    /// TPM2B_PUBLIC and TPM2B_PRIVATE of the sealed object, marshalled by tss2-mu.
    package var sealedPublic: Bytes
    package var sealedPrivate: Bytes
    /// The keychain was given a rollback counter when its keys were wrapped (`RollbackRecord`):
    /// a record and a counter both gone are then an older copy put back, not a keychain sealed
    /// before counters. In the record, so in the wrapped keys' additional data: no one without
    /// the keys can clear it.
    package var counted = false
    /// The PCRs (SHA-256 bank) the object is also sealed to (issue 28: `tpm-enroll --pcrs`),
    /// empty for none. Its policy is then PolicyPCR over their values at sealing and
    /// PolicyAuthValue: the password's authorization value is still needed and counted, and a
    /// boot chain that changed them (`TPMFailure.bootState`) opens nothing and counts nothing.
    /// In the record, so in the wrapped keys' additional data: it cannot be stripped or changed.
    package var pcrs: [UInt8] = []

    // MARK: Derivations

    static func authValue(stretched: Bytes, uuid: Bytes) -> Bytes {
        var auth = Crypto.hmacSHA256(key: stretched, label("keychain-tpm-auth-v1", uuid))
        // The TPM drops trailing zero bytes of an authorization value; so do we, on both sides.
        while auth.last == 0 { auth.removeLast() }
        return auth
    }

    static func kek(stretched: Bytes, sealed: Bytes, uuid: Bytes) -> Bytes {
        var passwordPart = Crypto.hmacSHA256(key: stretched, label("keychain-tpm-password-v1", uuid))
        defer { passwordPart.wipe() }
        var message = label("keychain-tpm-kek-v1", uuid)
        message.append(contentsOf: sealed)
        defer { message.wipe() }
        return Crypto.hmacSHA256(key: passwordPart, message)
    }

    private static func label(_ text: String, _ uuid: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string(text)
        w.blob(uuid)
        return w.bytes
    }

    // MARK: Sealing and unsealing

    /// Seals a new random T in the TPM of `tpm` for the password whose scrypt output is
    /// `stretched`, checks at once that it unseals, and returns the record and the KEK.
    /// `pcrs`: also sealed to those PCRs' current values (empty: not).
    static func make(stretched: Bytes, uuid: Bytes, tpm: TPMConfiguration, pcrs: [UInt8] = []) throws -> (TPMSealedSecret, kek: Bytes) {
        guard pcrs.isEmpty || PCRSelection.isValid(pcrs) else { throw KeychainError.param("PCRs are 1 to 8 distinct numbers from 0 to 23") }
        var secret = try Crypto.random(secretLength)
        var auth = authValue(stretched: stretched, uuid: uuid)
        defer { secret.wipe(); auth.wipe() }
        var record = try keychainErrors(sealing: true) {
            pcrs.isEmpty ? try TPMAccess.operations(tpm).seal(secret, auth: auth) : try TPMAccess.operations(tpm).seal(secret, auth: auth, pcrs: pcrs)
        }
        record.pcrs = pcrs
        return (record, kek(stretched: stretched, sealed: secret, uuid: uuid))
    }

    /// The KEK, once the TPM of `tpm` has accepted the password's authorization value.
    package func kek(stretched: Bytes, uuid: Bytes, tpm: TPMConfiguration) throws -> Bytes {
        var auth = Self.authValue(stretched: stretched, uuid: uuid)
        defer { auth.wipe() }
        var secret: Bytes
        do {
            secret = try Self.keychainErrors {
                pcrs.isEmpty
                    ? try TPMAccess.operations(tpm).unseal(self, auth: auth, length: Self.secretLength)
                    : try TPMAccess.operations(tpm).unseal(self, auth: auth, pcrs: pcrs, length: Self.secretLength)
            }
        } catch let error as KeychainError where error.code == .authFailed && error.detail.hasPrefix(Self.bootStatePrefix) {
            let refusal =
                TPMAccess.policy?.bootStateRefusal(pcrs: pcrs, tpm: tpm)
                ?? "PCR \(PCRSelection.describe(pcrs)) differs from the value this keychain was sealed to; the TPM counted no wrong password. Its recovery key opens it now (`security tpm-recover`)"
            throw KeychainError(.serviceNotAvailable, refusal)
        }
        defer { secret.wipe() }
        return Self.kek(stretched: stretched, sealed: secret, uuid: uuid)
    }

    /// The TPM's failures as the keychain's errors; `sealing`: there is no binding yet to speak of.
    package static func keychainErrors<T>(sealing: Bool = false, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let failure as TPMFailure {
            if sealing, case .unavailable(let why) = failure {
                throw KeychainError(.serviceNotAvailable, "no TPM to seal this keychain to: \(why)")
            }
            throw failure.keychainError
        }
    }

    // MARK: Storage

    package var bytes: Bytes {
        var w = ByteWriter()
        w.u32(pcrs.isEmpty ? Self.format : Self.pcrFormat)
        w.u32(Self.primaryTemplate)
        w.blob(primaryName)
        w.blob(sealedPublic)
        w.blob(sealedPrivate)
        w.u32(counted ? 1 : 0)
        if !pcrs.isEmpty { w.blob(pcrs) }
        return w.bytes
    }

    package init(primaryName: Bytes, sealedPublic: Bytes, sealedPrivate: Bytes, counted: Bool = false, pcrs: [UInt8] = []) {
        self.primaryName = primaryName
        self.sealedPublic = sealedPublic
        self.sealedPrivate = sealedPrivate
        self.counted = counted
        self.pcrs = pcrs
    }

    package init(bytes: Bytes) throws {
        var r = ByteReader(bytes)
        let format = try r.u32()
        guard format == 1 || format == Self.format || format == Self.pcrFormat, try r.u32() == Self.primaryTemplate else {
            throw KeychainError.decode("the keychain's TPM record is of an unknown format")
        }
        self.init(primaryName: try r.blob(), sealedPublic: try r.blob(), sealedPrivate: try r.blob())
        if format >= 2 {
            let flags = try r.u32()
            guard flags <= 1 else { throw KeychainError.decode("the keychain's TPM record is damaged") }
            counted = flags == 1
        }
        if format >= Self.pcrFormat {
            pcrs = try r.blob()
            guard PCRSelection.isValid(pcrs) else { throw KeychainError.decode("the keychain's TPM record is damaged") }
        }
        // Sizes of TPM2B_NAME (SHA-256), TPM2B_PUBLIC and TPM2B_PRIVATE at most.
        guard r.isAtEnd, primaryName.count == 34, (1...640).contains(sealedPublic.count), (1...1024).contains(sealedPrivate.count) else {
            throw KeychainError.decode("the keychain's TPM record is damaged")
        }
    }
}

extension TPMFailure {
    package var keychainError: KeychainError {
        switch self {
        case .unavailable(let why):
            return KeychainError(
                .serviceNotAvailable,
                "this keychain is sealed to a TPM, and there is \(why.hasPrefix("no TPM") ? why : "no TPM here: \(why)"); open it with its recovery key (`security tpm-recover`)"
            )
        case .foreign(let why):
            return KeychainError(
                .serviceNotAvailable,
                "this keychain is sealed to another TPM (a copy from another machine, or this TPM's owner hierarchy was cleared: \(why)); open it with its recovery key (`security tpm-recover`)"
            )
        case .authorization(let state):
            var detail = "wrong password for this keychain; the TPM counted the attempt"
            if let state, state.maximum > 0 {
                detail +=
                    state.inLockout
                    ? ", and now refuses every password for a while (dictionary-attack lockout)"
                    : " (\(state.failures) of \(state.maximum) before it refuses every password for a while)"
            }
            return KeychainError(.authFailed, detail)
        case .lockout(let state):
            var detail =
                "the TPM is in dictionary-attack lockout after too many wrong passwords: it refuses every password, the right one too, until the lockout ends"
            if let state, state.interval > 0 {
                detail +=
                    " (it forgets one wrong password every \(state.interval) s; its owner can end the lockout at once with the TPM's lockout authorization)"
            }
            return KeychainError(.quotaExceeded, detail)
        case .failed(let why):
            return KeychainError(.deviceFailed, "the TPM failed: \(why)")
        case .bootState(let why):
            return KeychainError(.authFailed, TPMSealedSecret.bootStatePrefix + why)
        }
    }
}
