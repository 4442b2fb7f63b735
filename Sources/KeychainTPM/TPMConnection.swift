import COpenSSL
import CTSS2
import Glibc
import KeychainCore

/// One session with the TPM through tpm2-tss's ESAPI: opened, used for one job, closed. Every
/// transient object and session made through it is flushed before it closes, so nothing stays in
/// the TPM (a TPM without a resource manager, such as swtpm over TCP, has three or so slots).
///
/// Nothing from the TPM is trusted blindly: sizes are checked before bytes are copied, a
/// capability answer must be the one asked for, and an unsealed secret must have the length
/// sealed. A TPM that answers wrongly gives an error, never a crash or a shorter key.
final class TPMConnection {
    private var tcti: OpaquePointer?
    private var esys: OpaquePointer?
    private var transient: [ESYS_TR] = []
    let configuration: String

    init(_ configuration: TPMConfiguration) throws {
        guard let tcti = configuration.tcti else { throw TPMFailure.unavailable(configuration.absence) }
        self.configuration = tcti
        var context: OpaquePointer?
        let rc = Tss2_TctiLdr_Initialize(tcti, &context)
        guard rc == 0, let context else {
            throw TPMFailure.unavailable("no TPM reachable through \(tcti) (\(Self.describe(rc)))")
        }
        self.tcti = context
        var esys: OpaquePointer?
        let erc = Esys_Initialize(&esys, context, nil)
        guard erc == 0, let esys else {
            close()
            throw TPMFailure.unavailable("tpm2-tss cannot talk to the TPM through \(tcti) (\(Self.describe(erc)))")
        }
        self.esys = esys
    }

    deinit { close() }

    func close() {
        if let esys {
            for handle in transient.reversed() { _ = Esys_FlushContext(esys, handle) }
            transient.removeAll()
            var context: OpaquePointer? = esys
            Esys_Finalize(&context)
            self.esys = nil
        }
        if tcti != nil {
            Tss2_TctiLdr_Finalize(&tcti)
            tcti = nil
        }
    }

    func context() throws -> OpaquePointer {
        guard let esys else { throw TPMFailure.failed("the TPM connection is closed") }
        return esys
    }

    /// Flushes `handle` at close, unless flushed before (`flush`).
    func track(_ handle: ESYS_TR) { transient.append(handle) }

    /// Flushes a transient object or session made through this connection.
    func flush(_ handle: ESYS_TR) {
        guard let esys, let index = transient.firstIndex(of: handle) else { return }
        transient.remove(at: index)
        _ = Esys_FlushContext(esys, handle)
    }

    // MARK: Capabilities

    /// Up to `count` TPM properties from `first` on, as the TPM reports them.
    private func properties(from first: UInt32, count: UInt32) throws -> [UInt32: UInt32] {
        let esys = try context()
        var more: TPMI_YES_NO = 0
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        let rc = Esys_GetCapability(
            esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
            TPM2_CAP(TPMConstant.capTPMProperties), first, count, &more, &data)
        defer { Esys_Free(data) }
        guard rc == 0, let data else { throw Self.failure(rc, "TPM2_GetCapability") }
        guard data.pointee.capability == TPM2_CAP(TPMConstant.capTPMProperties) else {
            throw TPMFailure.failed("the TPM answered another capability than the one asked for")
        }
        var out: [UInt32: UInt32] = [:]
        let listed = Int(data.pointee.data.tpmProperties.count)
        withUnsafeBytes(of: &data.pointee.data.tpmProperties.tpmProperty) { raw in
            let all = raw.bindMemory(to: TPMS_TAGGED_PROPERTY.self)
            for entry in all.prefix(min(listed, all.count)) { out[entry.property] = entry.value }
        }
        return out
    }

    func lockoutState() throws -> TPMLockoutState {
        let p = try properties(from: TPMConstant.ptPermanent, count: TPMConstant.ptLockoutRecovery - TPMConstant.ptPermanent + 1)
        guard let permanent = p[TPMConstant.ptPermanent], let failures = p[TPMConstant.ptLockoutCounter],
            let maximum = p[TPMConstant.ptMaxAuthFail], let interval = p[TPMConstant.ptLockoutInterval]
        else { throw TPMFailure.failed("the TPM did not report its dictionary-attack state") }
        return TPMLockoutState(
            inLockout: permanent & TPMConstant.permanentInLockout != 0, failures: failures,
            maximum: maximum, interval: interval, permanent: permanent)
    }

    func manufacturer() throws -> String {
        guard let value = try properties(from: TPMConstant.ptManufacturer, count: 1)[TPMConstant.ptManufacturer] else {
            throw TPMFailure.failed("the TPM did not report its manufacturer")
        }
        // Four ASCII letters, padded with spaces or NULs ("IBM\0" for swtpm).
        var letters = (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32($0))) }
        while let last = letters.last, last == 0 || last == 0x20 { letters.removeLast() }
        return String(decoding: letters.map { (0x20..<0x7f).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    // MARK: Keys and sealed objects

    /// The storage primary key of the owner hierarchy, made from a fixed template (below): the
    /// same TPM gives the same key every time (it is derived from the hierarchy's seed), so it
    /// is recreated rather than kept at a persistent handle, which would take NV space, need
    /// provisioning and could be evicted or replaced by any program with owner authorization.
    /// Returns its handle and its name (nameAlg || digest of its public area).
    func createPrimary() throws -> (handle: ESYS_TR, name: Bytes) {
        let esys = try context()
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var template = TPMTemplates.storagePrimary()
        var outsideInfo = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var handle = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_CreatePrimary(
            esys, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE), &sensitive, &template, &outsideInfo, &pcrs, &handle,
            nil, nil, nil, nil)
        guard rc == 0 else {
            if TPMConstant.code(rc) == TPMConstant.rcBadAuth || TPMConstant.code(rc) == TPMConstant.rcAuthFail {
                // Hierarchy authorizations are not dictionary-attack protected: nothing was counted.
                throw TPMFailure.failed(
                    "its owner authorization is set (`tpm2_changeauth -c o`), and the keychain's storage key is made under the owner hierarchy without one: whoever set it can remove it (`tpm2_changeauth -c o -p THAT`); until then a sealed keychain opens with its recovery key (`security tpm-recover --no-tpm`; one never shown is in its escrow, `security tpm-escrow`)"
                )
            }
            throw Self.failure(rc, "TPM2_CreatePrimary")
        }
        transient.append(handle)
        return (handle, try name(of: handle))
    }

    private func name(of handle: ESYS_TR) throws -> Bytes {
        var name: UnsafeMutablePointer<TPM2B_NAME>?
        let rc = Esys_TR_GetName(try context(), handle, &name)
        defer { Esys_Free(name) }
        guard rc == 0, let name, let bytes = TPM2B.read(&name.pointee.name, size: name.pointee.size), bytes.count == 34
        else { throw Self.failure(rc, "the name of the primary key") }
        return bytes
    }

    /// A salted HMAC session (the salt encrypted to `primary`, so only the TPM that holds its
    /// private key learns the session key) with AES-128-CFB parameter encryption: the secret
    /// going in (TPM2_Create) and coming out (TPM2_Unseal) never crosses the bus in the clear,
    /// and the authorization HMAC cannot be replayed or checked against guesses by a listener.
    private func startSession(salt primary: ESYS_TR) throws -> ESYS_TR {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPMConstant.algAES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPMConstant.algCFB
        var session = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_StartAuthSession(
            try context(), primary, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(TPMConstant.seHMAC),
            &symmetric, TPMConstant.algSHA256, &session)
        guard rc == 0 else { throw Self.failure(rc, "TPM2_StartAuthSession") }
        transient.append(session)
        return session
    }

    private func setAttributes(_ session: ESYS_TR, _ attributes: TPMA_SESSION) throws {
        let rc = Esys_TRSess_SetAttributes(try context(), session, attributes, 0xff)
        guard rc == 0 else { throw Self.failure(rc, "session attributes") }
    }

    /// Seals `secret` under `parent` in a keyed-hash data object whose authorization is `auth`,
    /// subject to the TPM's dictionary-attack protection (no noDA). Returns the object's public
    /// and private areas, marshalled; the private area is encrypted under the parent's key, so
    /// only this TPM can load it.
    func seal(_ secret: Bytes, auth: Bytes, parent: ESYS_TR) throws -> (public: Bytes, private: Bytes) {
        try createSealed(secret, auth: auth, template: TPMTemplates.sealedData(), parent: parent)
    }

    /// TPM2_Create of a keyed-hash object holding `secret` (with `auth` as its authorization
    /// value) under `parent`, through a salted session that encrypts the secret on its way in:
    /// the object's public and private areas, marshalled.
    private func createSealed(_ secret: Bytes, auth: Bytes?, template: TPM2B_PUBLIC, parent: ESYS_TR) throws -> (public: Bytes, private: Bytes) {
        let esys = try context()
        let session = try startSession(salt: parent)
        defer { flush(session) }
        try setAttributes(session, TPMConstant.sessionContinue | TPMConstant.sessionDecrypt)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { TPM2B.wipe(&sensitive) }
        sensitive.sensitive.data.size = try TPM2B.fill(&sensitive.sensitive.data.buffer, with: secret)
        if let auth { sensitive.sensitive.userAuth.size = try TPM2B.fill(&sensitive.sensitive.userAuth.buffer, with: auth) }
        var template = template
        var outsideInfo = TPM2B_DATA()
        var creationPCRs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        let rc = Esys_Create(
            esys, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &sensitive,
            &template, &outsideInfo, &creationPCRs, &outPrivate, &outPublic, nil, nil, nil)
        defer { Esys_Free(outPrivate); Esys_Free(outPublic) }
        guard rc == 0, let outPrivate, let outPublic else { throw Self.failure(rc, "TPM2_Create") }
        return (try marshal(outPublic), try marshal(outPrivate))
    }

    /// Loads a sealed object under `parent` and unseals it with `auth`, through a salted session
    /// that encrypts the answer. `expectedLength`: anything else is an error, not a key.
    func unseal(public: Bytes, private: Bytes, auth: Bytes, parent: ESYS_TR, expectedLength: Int) throws -> Bytes {
        let object = try loadSealed(public: `public`, private: `private`, parent: parent, accepts: { TPMTemplates.isSealedData($0) })
        defer { flush(object) }
        try setAuth(object, auth)
        let session = try startSession(salt: parent)
        defer { flush(session) }
        return try unsealData(object, session: session, expectedLength: expectedLength)
    }

    /// Loads a sealed object of this program's (`accepts` checks its template before anything is
    /// sent to it) under `parent`; the caller flushes it.
    private func loadSealed(public: Bytes, private: Bytes, parent: ESYS_TR, accepts: (TPM2B_PUBLIC) -> Bool) throws -> ESYS_TR {
        var inPublic = try unmarshalPublic(`public`)
        guard accepts(inPublic) else {
            throw TPMFailure.failed("the sealed object in the keychain is not one this program makes")
        }
        var inPrivate = try unmarshalPrivate(`private`)
        var object = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_Load(
            try context(), parent, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
            &inPrivate, &inPublic, &object)
        guard rc == 0 else {
            // The private area is encrypted and authenticated under the parent's key: another
            // TPM (or this one after its owner hierarchy was cleared) cannot load it.
            if let code = TPMConstant.code(rc), TPMConstant.foreignObject.contains(code) {
                throw TPMFailure.foreign("the sealed secret does not load in this TPM (\(Self.describe(rc)))")
            }
            throw Self.failure(rc, "TPM2_Load")
        }
        transient.append(object)
        return object
    }

    private func setAuth(_ object: ESYS_TR, _ auth: Bytes) throws {
        var authValue = TPM2B_AUTH()
        defer { TPM2B.wipe(&authValue) }
        authValue.size = try TPM2B.fill(&authValue.buffer, with: auth)
        let src = Esys_TR_SetAuth(try context(), object, &authValue)
        guard src == 0 else { throw Self.failure(src, "the object's authorization") }
    }

    /// Unseals `object` through `session` (encrypting the answer); `policyFailed` says what a
    /// failed policy means, where the session is a policy session.
    private func unsealData(_ object: ESYS_TR, session: ESYS_TR, expectedLength: Int, policyFailed: String? = nil) throws -> Bytes {
        try setAttributes(session, TPMConstant.sessionContinue | TPMConstant.sessionEncrypt)
        var out: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        let urc = Esys_Unseal(try context(), object, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &out)
        defer {
            if let out { TPM2B.wipe(&out.pointee) }
            Esys_Free(out)
        }
        guard urc == 0, let out else {
            if let policyFailed, TPMConstant.code(urc) == TPMConstant.rcPolicyFail { throw TPMFailure.bootState(policyFailed) }
            throw Self.failure(urc, "TPM2_Unseal")
        }
        guard let secret = TPM2B.read(&out.pointee.buffer, size: out.pointee.size), secret.count == expectedLength else {
            throw TPMFailure.failed("the TPM unsealed a secret of the wrong length")
        }
        return secret
    }

    // MARK: Objects sealed to PCR values (a passwordless unlock)

    /// The SHA-256 bank's `pcrs` as a TPML_PCR_SELECTION.
    private static func selection(_ pcrs: [UInt8]) -> TPML_PCR_SELECTION {
        var list = TPML_PCR_SELECTION()
        list.count = 1
        list.pcrSelections.0.hash = TPMConstant.algSHA256
        list.pcrSelections.0.sizeofSelect = 3
        withUnsafeMutableBytes(of: &list.pcrSelections.0.pcrSelect) { raw in
            for pcr in pcrs where pcr < 24 { raw[Int(pcr / 8)] |= 1 << (pcr % 8) }
        }
        return list
    }

    /// A policy session (`trial`: one that only computes a digest) that has run TPM2_PolicyPCR
    /// over the PCRs' current values, then (`withAuthValue`) TPM2_PolicyAuthValue: the command it
    /// authorizes also needs the object's authorization value, in the session's HMAC. A real one
    /// is salted to `salt` and encrypts the answer of the command it authorizes.
    private func policySession(pcrs: [UInt8], trial: Bool, salt: ESYS_TR, withAuthValue: Bool = false) throws -> ESYS_TR {
        let esys = try context()
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPMConstant.algAES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPMConstant.algCFB
        var session = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_StartAuthSession(
            esys, trial ? ESYS_TR(ESYS_TR_NONE) : salt, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(trial ? TPMConstant.seTrial : TPMConstant.sePolicy),
            &symmetric, TPMConstant.algSHA256, &session)
        guard rc == 0 else { throw Self.failure(rc, "TPM2_StartAuthSession (policy)") }
        transient.append(session)
        // An empty digest: the TPM uses the PCRs' values now; the object's policy says which.
        var digest = TPM2B_DIGEST()
        var list = Self.selection(pcrs)
        let prc = Esys_PolicyPCR(esys, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &digest, &list)
        guard prc == 0 else {
            flush(session)
            throw Self.failure(prc, "TPM2_PolicyPCR")
        }
        if withAuthValue {
            let arc = Esys_PolicyAuthValue(esys, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE))
            guard arc == 0 else {
                flush(session)
                throw Self.failure(arc, "TPM2_PolicyAuthValue")
            }
        }
        return session
    }

    /// The SHA-256 values of `pcrs` now, in ascending order: the TPM must answer exactly the
    /// selection asked for (it may leave out PCRs it does not have), 32 bytes each.
    func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes] {
        var selection = Self.selection(pcrs)
        var updates: UInt32 = 0
        var answered: UnsafeMutablePointer<TPML_PCR_SELECTION>?
        var values: UnsafeMutablePointer<TPML_DIGEST>?
        let rc = Esys_PCR_Read(
            try context(), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &selection, &updates, &answered, &values)
        defer { Esys_Free(answered); Esys_Free(values) }
        guard rc == 0, let answered, let values else { throw Self.failure(rc, "TPM2_PCR_Read") }
        var asked = Self.selection(pcrs).pcrSelections.0
        let got = answered.pointee.pcrSelections.0
        let same = withUnsafeBytes(of: &asked.pcrSelect) { a in withUnsafeBytes(of: got.pcrSelect) { Array(a.prefix(3)) == Array($0.prefix(3)) } }
        guard answered.pointee.count == 1, got.hash == TPMConstant.algSHA256, got.sizeofSelect == 3, same, Int(values.pointee.count) == pcrs.count else {
            throw TPMFailure.failed("the TPM answered other PCRs than those asked for")
        }
        return try withUnsafeMutableBytes(of: &values.pointee.digests) { raw in
            let digests = raw.bindMemory(to: TPM2B_DIGEST.self)
            return try digests.prefix(pcrs.count).map { entry in
                var entry = entry
                guard let bytes = TPM2B.read(&entry.buffer, size: entry.size), bytes.count == 32 else {
                    throw TPMFailure.failed("the TPM answered a PCR value of the wrong size")
                }
                return bytes
            }
        }
    }

    /// Seals `secret` under `parent` in a keyed-hash data object that only a policy session
    /// proving the current values of `pcrs` can unseal: no authorization value (userWithAuth
    /// clear) and noDA, so a boot state that does not match costs no dictionary-attack try.
    func seal(_ secret: Bytes, toPCRs pcrs: [UInt8], parent: ESYS_TR) throws -> (public: Bytes, private: Bytes) {
        try seal(secret, toPCRs: pcrs, auth: nil, parent: parent)
    }

    /// The same, and with `auth`: the policy is PolicyPCR then PolicyAuthValue, so unsealing needs
    /// the PCRs' values and the authorization value both; the object is not noDA (each wrong
    /// authorization counts towards the lockout) and still has no userWithAuth (only its policy
    /// opens it). A changed PCR fails the policy (TPM_RC_POLICY_FAIL) before any HMAC is checked.
    func seal(_ secret: Bytes, toPCRs pcrs: [UInt8], auth: Bytes?, parent: ESYS_TR) throws -> (public: Bytes, private: Bytes) {
        let esys = try context()
        let trial = try policySession(pcrs: pcrs, trial: true, salt: parent, withAuthValue: auth != nil)
        var policy: UnsafeMutablePointer<TPM2B_DIGEST>?
        let grc = Esys_PolicyGetDigest(esys, trial, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &policy)
        defer { Esys_Free(policy) }
        flush(trial)
        guard grc == 0, let policy, policy.pointee.size == 32 else { throw Self.failure(grc, "TPM2_PolicyGetDigest") }
        var template = auth == nil ? TPMTemplates.pcrSealedData() : TPMTemplates.pcrAuthSealedData()
        template.publicArea.authPolicy = policy.pointee
        return try createSealed(secret, auth: auth, template: template, parent: parent)
    }

    /// Loads an object sealed by `seal(_:toPCRs:parent:)` and unseals it through a salted policy
    /// session over `pcrs`, which encrypts the answer. PCRs changed since: `TPMFailure.bootState`.
    func unseal(public: Bytes, private: Bytes, pcrs: [UInt8], parent: ESYS_TR, expectedLength: Int) throws -> Bytes {
        try unseal(public: `public`, private: `private`, pcrs: pcrs, auth: nil, parent: parent, expectedLength: expectedLength)
    }

    /// The same for an object sealed with `auth` too (`seal(_:toPCRs:auth:parent:)`).
    func unseal(public: Bytes, private: Bytes, pcrs: [UInt8], auth: Bytes?, parent: ESYS_TR, expectedLength: Int) throws -> Bytes {
        let attributes = auth == nil ? TPMTemplates.pcrSealedAttributes : TPMTemplates.pcrAuthSealedAttributes
        let object = try loadSealed(
            public: `public`, private: `private`, parent: parent,
            accepts: { TPMTemplates.isSealedData($0, attributes: attributes, withPolicy: true) })
        defer { flush(object) }
        if let auth { try setAuth(object, auth) }
        let session = try policySession(pcrs: pcrs, trial: false, salt: parent, withAuthValue: auth != nil)
        defer { flush(session) }
        return try unsealData(
            object, session: session, expectedLength: expectedLength,
            policyFailed:
                "PCR \(pcrs.map { String($0) }.joined(separator: ",")) no longer hold the values the keychain's key was sealed to (this machine booted differently)"
        )
    }

    // MARK: NV counters (a keychain's rollback counter)

    /// The attributes of a keychain's counter: a counter (only TPM2_NV_Increment changes it),
    /// read and incremented with its authorization value (derived from class key C, so no one
    /// without the keychain's keys can move it), and noDA: probing costs no lockout tries. Not
    /// orderly: an orderly counter jumps ahead after a power cut, which would look like an older
    /// copy of the file.
    static let counterAttributes: TPMA_NV = TPMConstant.nvAuthWrite | TPMConstant.nvAuthRead | TPMConstant.nvNoDA | (TPMConstant.ntCounter << 4)

    /// The same, made by the platform hierarchy with TPMA_NV_POLICY_DELETE: the owner hierarchy
    /// (whose authorization is empty on nearly every Linux machine, so anyone in group `tss` has
    /// it) cannot undefine it; only TPM2_NV_UndefineSpaceSpecial can, with the platform's
    /// authorization *and* `deletePolicy`, which needs the counter's own authorization value. The
    /// TPM refuses TPMA_NV_POLICY_DELETE on an index the owner defines (TPM_RC_ATTRIBUTES), and
    /// firmware usually closes the platform hierarchy before the system starts: there the counter
    /// is made by the owner as before (`counterAttributes`), and stays deletable by anyone with it.
    static let protectedCounterAttributes: TPMA_NV = counterAttributes | TPMConstant.nvPlatformCreate | TPMConstant.nvPolicyDelete

    /// TPM2_PolicyAuthValue, then TPM2_PolicyCommandCode(TPM2_NV_UndefineSpaceSpecial), from an
    /// empty digest: deleting a protected counter takes its authorization value, so the platform's
    /// authorization alone (empty on swtpm) does not do it either.
    static let deletePolicy: Bytes = {
        func extend(_ digest: Bytes, _ words: [UInt32]) -> Bytes {
            var data = digest
            for word in words { data += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: word >> $0) } }
            var out = Bytes(repeating: 0, count: 32)
            _ = SHA256(data, data.count, &out)
            return out
        }
        let afterAuthValue = extend(Bytes(repeating: 0, count: 32), [TPMConstant.ccPolicyAuthValue])
        return extend(afterAuthValue, [TPMConstant.ccPolicyCommandCode, TPMConstant.ccNVUndefineSpaceSpecial])
    }()

    /// An unsalted HMAC session: the authorization never crosses the bus in the clear, and it is
    /// 256 bits, so an HMAC seen on the bus gives no handle for guessing.
    private func hmacSession() throws -> ESYS_TR {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPMConstant.algNull
        var session = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_StartAuthSession(
            try context(), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(TPMConstant.seHMAC),
            &symmetric, TPMConstant.algSHA256, &session)
        guard rc == 0 else { throw Self.failure(rc, "TPM2_StartAuthSession") }
        transient.append(session)
        return session
    }

    /// The NV index at `index` as an ESAPI object with `auth` set, if it exists and is a counter
    /// of ours (attributes and size, of either kind); nil when there is none or another kind of
    /// index is there.
    private func counterObject(_ index: UInt32, auth: Bytes) throws -> ESYS_TR? {
        try counter(index, auth: auth)?.object
    }

    /// `counterObject`, and whether it is a protected one (`protectedCounterAttributes`).
    private func counter(_ index: UInt32, auth: Bytes) throws -> (object: ESYS_TR, protected: Bool)? {
        let esys = try context()
        var object = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_TR_FromTPMPublic(esys, index, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &object)
        guard rc == 0 else {
            if TPMConstant.code(rc) == TPMConstant.rcHandle { return nil }
            throw Self.failure(rc, "TPM2_NV_ReadPublic")
        }
        var nvPublic: UnsafeMutablePointer<TPM2B_NV_PUBLIC>?
        var nvName: UnsafeMutablePointer<TPM2B_NAME>?
        let prc = Esys_NV_ReadPublic(esys, object, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &nvPublic, &nvName)
        defer { Esys_Free(nvPublic); Esys_Free(nvName) }
        guard prc == 0, let nvPublic else {
            var closing = object
            _ = Esys_TR_Close(esys, &closing)
            throw Self.failure(prc, "TPM2_NV_ReadPublic")
        }
        var area = nvPublic.pointee.nvPublic
        let attributes = area.attributes & ~TPMConstant.nvWritten
        let protected = attributes == Self.protectedCounterAttributes
        let policy = TPM2B.read(&area.authPolicy.buffer, size: area.authPolicy.size)
        guard area.nvIndex == index, area.nameAlg == TPMConstant.algSHA256, area.dataSize == 8,
            protected ? policy == Self.deletePolicy : attributes == Self.counterAttributes && area.authPolicy.size == 0
        else {
            var closing = object
            _ = Esys_TR_Close(esys, &closing)
            return nil
        }
        var authValue = TPM2B_AUTH()
        defer { TPM2B.wipe(&authValue) }
        authValue.size = try TPM2B.fill(&authValue.buffer, with: auth)
        _ = Esys_TR_SetAuth(esys, object, &authValue)
        return (object, protected)
    }

    private func close(object: ESYS_TR) {
        guard let esys else { return }
        var closing = object
        _ = Esys_TR_Close(esys, &closing)
    }

    /// The counter's value; nil when `auth` is not its authorization (another keychain's counter).
    private func readCounter(_ object: ESYS_TR) throws -> UInt64? {
        let esys = try context()
        let session = try hmacSession()
        defer { flush(session) }
        var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
        let rc = Esys_NV_Read(esys, object, object, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), 8, 0, &data)
        defer { Esys_Free(data) }
        guard rc == 0, let data else {
            if TPMConstant.code(rc) == TPMConstant.rcAuthFail || TPMConstant.code(rc) == TPMConstant.rcBadAuth { return nil }
            throw Self.failure(rc, "TPM2_NV_Read")
        }
        guard let bytes = TPM2B.read(&data.pointee.buffer, size: data.pointee.size), bytes.count == 8 else {
            throw TPMFailure.failed("the TPM answered a counter of the wrong size")
        }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The first of `candidates` that holds a counter of ours opened by `auth`, and its value.
    /// With `expected` (the file's count), the one that agrees with it (at it, or one behind),
    /// else a protected one, else the first: a migration cut short leaves two, and the file says
    /// which is current. A counter of the earlier kind beside a protected one that agrees is the
    /// rest of such a migration, and is undefined.
    func findCounter(auth: Bytes, candidates: [UInt32], expected: UInt64? = nil) throws -> (index: UInt32, value: UInt64, protected: Bool)? {
        var found: [(index: UInt32, value: UInt64, protected: Bool)] = []
        for index in candidates {
            guard let (object, protected) = try counter(index, auth: auth) else { continue }
            defer { close(object: object) }
            if let value = try readCounter(object) { found.append((index, value, protected)) }
        }
        func agrees(_ entry: (index: UInt32, value: UInt64, protected: Bool)) -> Bool {
            expected.map { entry.value == $0 || entry.value &+ 1 == $0 } ?? false
        }
        guard
            let chosen = found.first(where: { agrees($0) && $0.protected }) ?? found.first(where: agrees) ?? found.first(where: \.protected)
                ?? found.first
        else { return nil }
        if agrees(chosen), chosen.protected {
            for entry in found where !entry.protected { try? removeCounter(auth: auth, index: entry.index) }
        }
        return chosen
    }

    /// A protected successor for the keychain's counter of the earlier kind at `index`, at
    /// `expected`: a protected counter of the keychain's already there, else a new one; nil where
    /// the platform hierarchy allows none, or the old counter is not as expected.
    func migrateCounter(auth: Bytes, index: UInt32, expected: UInt64, candidates: [UInt32]) throws -> (index: UInt32, value: UInt64)? {
        guard let (object, protected) = try counter(index, auth: auth) else { return nil }
        defer { close(object: object) }
        guard !protected, try readCounter(object) == expected else { return nil }
        for candidate in candidates where candidate != index {
            guard let (other, isProtected) = try counter(candidate, auth: auth) else { continue }
            defer { close(object: other) }
            if isProtected, let value = try readCounter(other) { return (candidate, value) }
        }
        guard let made = try? createCounter(auth: auth, candidates: candidates, platformOnly: true) else { return nil }
        return (made.index, made.value)
    }

    /// A new counter at the first free index of `candidates`, incremented once (a counter cannot
    /// be read before its first increment; it starts at the highest count this TPM ever had).
    /// `platformOnly`: a protected counter or none (a migration; the owner's would gain nothing).
    func createCounter(auth: Bytes, candidates: [UInt32], platformOnly: Bool = false) throws -> (index: UInt32, value: UInt64, protected: Bool) {
        let esys = try context()
        for index in candidates {
            var existing = ESYS_TR(ESYS_TR_NONE)
            if Esys_TR_FromTPMPublic(esys, index, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &existing) == 0 {
                close(object: existing)
                continue
            }
            var authValue = TPM2B_AUTH()
            defer { TPM2B.wipe(&authValue) }
            authValue.size = try TPM2B.fill(&authValue.buffer, with: auth)
            var info = TPM2B_NV_PUBLIC()
            info.nvPublic.nvIndex = index
            info.nvPublic.nameAlg = TPMConstant.algSHA256
            info.nvPublic.attributes = Self.protectedCounterAttributes
            info.nvPublic.authPolicy.size = try TPM2B.fill(&info.nvPublic.authPolicy.buffer, with: Self.deletePolicy)
            info.nvPublic.dataSize = 8
            var object = ESYS_TR(ESYS_TR_NONE)
            // The platform hierarchy first (a counter no one else with the TPM can remove); where
            // the firmware closed it or gave it a password, the owner's, as before.
            var rc = Esys_NV_DefineSpace(
                esys, ESYS_TR(ESYS_TR_RH_PLATFORM), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                &authValue, &info, &object)
            let protected = rc == 0
            if rc != 0 && TPMConstant.code(rc) != TPMConstant.rcNVDefined {
                if platformOnly { throw Self.failure(rc, "TPM2_NV_DefineSpace (platform)") }
                info.nvPublic.attributes = Self.counterAttributes
                info.nvPublic.authPolicy = TPM2B_DIGEST()
                rc = Esys_NV_DefineSpace(
                    esys, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                    &authValue, &info, &object)
            }
            guard rc == 0 else {
                if TPMConstant.code(rc) == TPMConstant.rcNVDefined { continue }
                if TPMConstant.code(rc) == TPMConstant.rcBadAuth || TPMConstant.code(rc) == TPMConstant.rcAuthFail {
                    throw TPMFailure.failed("the TPM's owner hierarchy has a password; a rollback counter cannot be made")
                }
                throw Self.failure(rc, "TPM2_NV_DefineSpace")
            }
            defer { close(object: object) }
            _ = Esys_TR_SetAuth(esys, object, &authValue)
            try increment(object)
            guard let value = try readCounter(object) else { throw TPMFailure.failed("the TPM refused the counter it just made") }
            return (index, value, protected)
        }
        throw TPMFailure.failed("no free NV index for a rollback counter (all of \(candidates.count) candidates are taken)")
    }

    private func increment(_ object: ESYS_TR) throws {
        let session = try hmacSession()
        defer { flush(session) }
        let rc = Esys_NV_Increment(try context(), object, object, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE))
        guard rc == 0 else { throw Self.failure(rc, "TPM2_NV_Increment") }
    }

    /// Increments the counter at `index` if it holds `expected`; returns its value after.
    func incrementCounter(auth: Bytes, index: UInt32, expected: UInt64) throws -> UInt64 {
        guard let object = try counterObject(index, auth: auth) else { throw TPMFailure.failed("the keychain's counter is gone from the TPM") }
        defer { close(object: object) }
        guard let value = try readCounter(object) else { throw TPMFailure.failed("the counter at that index is not this keychain's") }
        guard value == expected else { return value }
        try increment(object)
        guard let after = try readCounter(object), after > value else { throw TPMFailure.failed("the TPM's counter did not move") }
        return after
    }

    /// Removes the counter at `index`, if it is this keychain's (opened by `auth`).
    func removeCounter(auth: Bytes, index: UInt32) throws {
        guard let (object, protected) = try counter(index, auth: auth) else { return }
        guard try readCounter(object) != nil else {
            close(object: object)
            return
        }
        let rc: TSS2_RC
        if protected {
            let session: ESYS_TR
            do {
                session = try deleteSession()
            } catch {
                close(object: object)
                throw error
            }
            defer { flush(session) }
            rc = Esys_NV_UndefineSpaceSpecial(
                try context(), object, ESYS_TR(ESYS_TR_RH_PLATFORM), session, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE))
        } else {
            rc = Esys_NV_UndefineSpace(
                try context(), ESYS_TR(ESYS_TR_RH_OWNER), object, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE))
        }
        // Undefined, the object is gone from ESAPI too; not undefined, it is closed here.
        guard rc == 0 else {
            close(object: object)
            throw Self.failure(rc, "TPM2_NV_UndefineSpace")
        }
    }

    /// A policy session that has run `deletePolicy`'s two steps: with the counter's authorization
    /// value set, it authorizes TPM2_NV_UndefineSpaceSpecial on it.
    private func deleteSession() throws -> ESYS_TR {
        let esys = try context()
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPMConstant.algNull
        var session = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_StartAuthSession(
            esys, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(TPMConstant.sePolicy), &symmetric, TPMConstant.algSHA256, &session)
        guard rc == 0 else { throw Self.failure(rc, "TPM2_StartAuthSession (policy)") }
        transient.append(session)
        let arc = Esys_PolicyAuthValue(esys, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE))
        guard arc == 0 else {
            flush(session)
            throw Self.failure(arc, "TPM2_PolicyAuthValue")
        }
        let crc = Esys_PolicyCommandCode(
            esys, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), TPM2_CC(TPMConstant.ccNVUndefineSpaceSpecial))
        guard crc == 0 else {
            flush(session)
            throw Self.failure(crc, "TPM2_PolicyCommandCode")
        }
        return session
    }

    // MARK: Marshalling (tss2-mu), for the keybag

    func marshal(_ value: UnsafeMutablePointer<TPM2B_PUBLIC>) throws -> Bytes {
        var buffer = Bytes(repeating: 0, count: MemoryLayout<TPM2B_PUBLIC>.size)
        var offset = 0
        let rc = Tss2_MU_TPM2B_PUBLIC_Marshal(value, &buffer, buffer.count, &offset)
        guard rc == 0, offset <= buffer.count else { throw Self.failure(rc, "marshalling the public area") }
        return Array(buffer.prefix(offset))
    }

    func marshal(_ value: UnsafeMutablePointer<TPM2B_PRIVATE>) throws -> Bytes {
        var buffer = Bytes(repeating: 0, count: MemoryLayout<TPM2B_PRIVATE>.size)
        var offset = 0
        let rc = Tss2_MU_TPM2B_PRIVATE_Marshal(value, &buffer, buffer.count, &offset)
        guard rc == 0, offset <= buffer.count else { throw Self.failure(rc, "marshalling the private area") }
        return Array(buffer.prefix(offset))
    }

    /// The whole input must be one well-formed area: trailing bytes are refused too.
    private func unmarshalPublic(_ bytes: Bytes) throws -> TPM2B_PUBLIC {
        var value = TPM2B_PUBLIC()
        var offset = 0
        let rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(bytes, bytes.count, &offset, &value)
        guard rc == 0, offset == bytes.count else { throw TPMFailure.failed("the sealed object's public area in the keychain is damaged") }
        return value
    }

    private func unmarshalPrivate(_ bytes: Bytes) throws -> TPM2B_PRIVATE {
        var value = TPM2B_PRIVATE()
        var offset = 0
        let rc = Tss2_MU_TPM2B_PRIVATE_Unmarshal(bytes, bytes.count, &offset, &value)
        guard rc == 0, offset == bytes.count else { throw TPMFailure.failed("the sealed object's private area in the keychain is damaged") }
        return value
    }

    // MARK: Errors

    static func failure(_ rc: TSS2_RC, _ what: String) -> TPMFailure {
        switch TPMConstant.code(rc) {
        case TPMConstant.rcAuthFail?: return .authorization(nil)
        case TPMConstant.rcLockout?: return .lockout(nil)
        default: return .failed("\(what) failed: \(describe(rc))")
        }
    }

    /// "TPM_RC_INTEGRITY (0x9f)", "tpm2-tss error 0x70001 (ESAPI layer)", ...: names for the codes
    /// a person might meet, the number always.
    static func describe(_ rc: TSS2_RC) -> String {
        let hex = "0x" + String(rc, radix: 16)
        if let code = TPMConstant.code(rc) {
            return (TPMConstant.names[code].map { "\($0), " } ?? "TPM error ") + hex
        }
        let layers: [UInt32: String] = [6: "SAPI", 7: "ESAPI", 8: "system API", 9: "marshalling", 10: "TCTI", 12: "TCTI loader"]
        return "tpm2-tss error \(hex)" + (layers[rc >> 16].map { " (\($0) layer)" } ?? "")
    }
}

/// Copying to and from the fixed-size buffers of TPM2B structures (C arrays, which Swift sees as
/// tuples), always within their size.
enum TPM2B {
    static func fill<Buffer>(_ buffer: inout Buffer, with bytes: Bytes) throws -> UInt16 {
        try withUnsafeMutableBytes(of: &buffer) { raw in
            guard bytes.count <= raw.count, bytes.count <= Int(UInt16.max) else { throw TPMFailure.failed("a value too large for the TPM") }
            raw.copyBytes(from: bytes)
        }
        return UInt16(bytes.count)
    }

    /// nil when `size` claims more than the buffer holds.
    static func read<Buffer>(_ buffer: inout Buffer, size: UInt16) -> Bytes? {
        withUnsafeBytes(of: &buffer) { raw in Int(size) <= raw.count ? Array(raw.prefix(Int(size))) : nil }
    }

    static func wipe<Value>(_ value: inout Value) {
        withUnsafeMutableBytes(of: &value) { raw in
            if let base = raw.baseAddress { OPENSSL_cleanse(base, raw.count) }
        }
    }
}

/// The two object templates this program uses. Fixed: a keychain records the primary key's name
/// and the sealed object's public area, and both depend on every field here.
enum TPMTemplates {
    /// TCG's ECC P-256 storage root key template (restricted decryption key, AES-128-CFB for its
    /// children, noDA: no authorization of its own to guess), with an empty unique field.
    static func storagePrimary() -> TPM2B_PUBLIC {
        var template = object(
            TPMConstant.algECC,
            attributes: TPMConstant.attrFixedTPM | TPMConstant.attrFixedParent
                | TPMConstant.attrSensitiveDataOrigin | TPMConstant.attrUserWithAuth | TPMConstant.attrNoDA
                | TPMConstant.attrRestricted | TPMConstant.attrDecrypt)
        template.publicArea.parameters.eccDetail.symmetric.algorithm = TPMConstant.algAES
        template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128
        template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPMConstant.algCFB
        template.publicArea.parameters.eccDetail.scheme.scheme = TPMConstant.algNull
        template.publicArea.parameters.eccDetail.curveID = TPMConstant.eccNISTP256
        template.publicArea.parameters.eccDetail.kdf.scheme = TPMConstant.algNull
        return template
    }

    /// A public area of `type`, named with SHA-256, with `attributes`; the type's parameters are
    /// the caller's.
    static func object(_ type: TPM2_ALG_ID, attributes: TPMA_OBJECT) -> TPM2B_PUBLIC {
        var template = TPM2B_PUBLIC()
        template.publicArea.type = type
        template.publicArea.nameAlg = TPMConstant.algSHA256
        template.publicArea.objectAttributes = attributes
        return template
    }

    /// The attributes of a sealed secret: it stays in this TPM and under this parent, is used
    /// with its authorization value, and (no noDA) every wrong authorization counts towards the
    /// TPM's dictionary-attack lockout.
    static let sealedAttributes: TPMA_OBJECT = TPMConstant.attrFixedTPM | TPMConstant.attrFixedParent | TPMConstant.attrUserWithAuth

    /// An object sealed to PCR values: no authorization value (only its policy opens it) and
    /// noDA, so a changed boot state counts nothing towards the lockout.
    static let pcrSealedAttributes: TPMA_OBJECT = TPMConstant.attrFixedTPM | TPMConstant.attrFixedParent | TPMConstant.attrNoDA

    static func pcrSealedData() -> TPM2B_PUBLIC {
        var template = sealedData()
        template.publicArea.objectAttributes = pcrSealedAttributes
        return template
    }

    /// An object sealed to PCR values and an authorization value (`seal(_:toPCRs:auth:parent:)`):
    /// only its policy opens it (no userWithAuth), and without noDA, so every wrong authorization
    /// value counts towards the TPM's dictionary-attack lockout.
    static let pcrAuthSealedAttributes: TPMA_OBJECT = TPMConstant.attrFixedTPM | TPMConstant.attrFixedParent

    static func pcrAuthSealedData() -> TPM2B_PUBLIC {
        var template = sealedData()
        template.publicArea.objectAttributes = pcrAuthSealedAttributes
        return template
    }

    static func sealedData() -> TPM2B_PUBLIC {
        var template = object(TPMConstant.algKeyedHash, attributes: sealedAttributes)
        template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPMConstant.algNull
        return template
    }

    /// Whether a public area read from a keychain is a sealed object of exactly the kind asked
    /// for: `sealedData`'s (its attributes, no policy), or a PCR-sealed one (`pcrSealedAttributes`
    /// or `pcrAuthSealedAttributes`, with a policy). A file edited to hold an object without
    /// dictionary-attack protection, or usable with an authorization value alone where a policy
    /// was sealed, is refused before the TPM sees any authorization for it.
    static func isSealedData(_ value: TPM2B_PUBLIC, attributes: TPMA_OBJECT = sealedAttributes, withPolicy: Bool = false) -> Bool {
        let area = value.publicArea
        return area.type == TPMConstant.algKeyedHash && area.nameAlg == TPMConstant.algSHA256
            && area.objectAttributes == attributes && area.authPolicy.size == (withPolicy ? 32 : 0)
            && area.parameters.keyedHashDetail.scheme.scheme == TPMConstant.algNull
    }
}

/// Numbers of the TPM 2.0 specification (Part 2), spelled out: tpm2-tss defines them as macros
/// with casts, which Swift does not import.
enum TPMConstant {
    static let algAES: TPM2_ALG_ID = 0x0006
    static let algKeyedHash: TPM2_ALG_ID = 0x0008
    static let algSHA256: TPM2_ALG_ID = 0x000B
    static let algNull: TPM2_ALG_ID = 0x0010
    static let algECC: TPM2_ALG_ID = 0x0023
    static let algCFB: TPM2_ALG_ID = 0x0043
    static let eccNISTP256: TPM2_ECC_CURVE = 0x0003
    static let seHMAC: UInt8 = 0x00
    static let sePolicy: UInt8 = 0x01
    static let seTrial: UInt8 = 0x03

    static let attrFixedTPM: TPMA_OBJECT = 0x0000_0002
    static let attrFixedParent: TPMA_OBJECT = 0x0000_0010
    static let attrSensitiveDataOrigin: TPMA_OBJECT = 0x0000_0020
    static let attrUserWithAuth: TPMA_OBJECT = 0x0000_0040
    static let attrNoDA: TPMA_OBJECT = 0x0000_0400
    static let attrRestricted: TPMA_OBJECT = 0x0001_0000
    static let attrDecrypt: TPMA_OBJECT = 0x0002_0000

    static let sessionContinue: TPMA_SESSION = 0x01
    static let sessionDecrypt: TPMA_SESSION = 0x20
    static let sessionEncrypt: TPMA_SESSION = 0x40

    static let capTPMProperties: UInt32 = 0x0000_0006
    static let ptManufacturer: UInt32 = 0x105
    static let ptPermanent: UInt32 = 0x200
    static let ptLockoutCounter: UInt32 = 0x20E
    static let ptMaxAuthFail: UInt32 = 0x20F
    static let ptLockoutInterval: UInt32 = 0x210
    static let ptLockoutRecovery: UInt32 = 0x211
    static let permanentInLockout: UInt32 = 0x200

    static let rcAuthFail: UInt32 = 0x08E
    static let rcBadAuth: UInt32 = 0x0A2
    static let rcLockout: UInt32 = 0x921
    static let rcPolicyFail: UInt32 = 0x09D
    static let rcHandle: UInt32 = 0x08B
    static let rcNVDefined: UInt32 = 0x14C

    static let nvAuthWrite: TPMA_NV = 0x0000_0004
    static let nvAuthRead: TPMA_NV = 0x0004_0000
    static let nvNoDA: TPMA_NV = 0x0200_0000
    static let nvWritten: TPMA_NV = 0x2000_0000
    static let nvPolicyDelete: TPMA_NV = 0x0000_0400
    static let nvPlatformCreate: TPMA_NV = 0x4000_0000
    static let ccNVUndefineSpaceSpecial: UInt32 = 0x0000_011F
    static let ccPolicyAuthValue: UInt32 = 0x0000_016B
    static let ccPolicyCommandCode: UInt32 = 0x0000_016C
    static let ntCounter: TPMA_NV = 0x1
    /// Load failures of a private area made under another parent: integrity check (its HMAC
    /// under the parent's key fails), or a size or value that decrypts to nonsense.
    static let foreignObject: Set<UInt32> = [0x09F, 0x095, 0x084, 0x09A, 0x0A9]

    static let names: [UInt32: String] = [
        0x08E: "TPM_RC_AUTH_FAIL", 0x0A2: "TPM_RC_BAD_AUTH", 0x921: "TPM_RC_LOCKOUT", 0x09F: "TPM_RC_INTEGRITY",
        0x095: "TPM_RC_SIZE", 0x084: "TPM_RC_VALUE", 0x09A: "TPM_RC_KEY", 0x0A9: "TPM_RC_BINDING",
        0x085: "TPM_RC_HIERARCHY", 0x902: "TPM_RC_OBJECT_MEMORY", 0x903: "TPM_RC_SESSION_MEMORY",
        0x901: "TPM_RC_CONTEXT_GAP", 0x922: "TPM_RC_RETRY", 0x908: "TPM_RC_YIELDED", 0x90A: "TPM_RC_TESTING",
        0x100: "TPM_RC_INITIALIZE", 0x101: "TPM_RC_FAILURE", 0x086: "TPM_RC_ATTRIBUTES", 0x09D: "TPM_RC_POLICY_FAIL"
    ]

    /// The TPM's own response code in a tpm2-tss return code (the TPM's layer, or a resource
    /// manager passing it on), with format-1 codes stripped of the handle, session or parameter
    /// number they name; nil for errors of tpm2-tss itself.
    static func code(_ rc: TSS2_RC) -> UInt32? {
        guard rc >> 16 == 0 || rc >> 16 == 11 else { return nil }
        let value = rc & 0xFFFF
        return value & 0x80 != 0 ? 0x80 | (value & 0x3F) : value & 0xFFF
    }
}
