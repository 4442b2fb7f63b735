import COpenSSL
import CTSS2
import KeychainCore

/// ECDSA P-256 signing keys made inside the TPM, under the same storage primary as the
/// keychain's sealed objects: an SSH key that signs but never leaves the machine. The blob kept
/// outside is the key's public area and its private area (encrypted and authenticated under the
/// primary's key), so only this TPM, with this owner hierarchy, can load it.
extension LocalTPM {
    /// A new key: its public point (X9.63, 04 || X || Y) and its blob.
    package func createSigningKey() throws -> (point: Bytes, blob: Bytes) {
        try connected { connection in
            let (primary, _) = try connection.createPrimary()
            return try connection.createSigningKey(parent: primary)
        }
    }

    /// The signature (r, s; 32 bytes each, big-endian) of a SHA-256 `digest` by the key in `blob`.
    package func sign(digest: Bytes, blob: Bytes) throws -> (r: Bytes, s: Bytes) {
        try connected { connection in
            let (primary, _) = try connection.createPrimary()
            return try connection.sign(digest: digest, blob: blob, parent: primary)
        }
    }
}

extension TPMConnection {
    /// The key's authorization value is empty: the blob is the secret (kept in the keychain), so
    /// there is nothing to guess and the key is noDA, usable while the keychain's sealed objects
    /// are in dictionary-attack lockout. No parameter encryption: nothing secret crosses the bus.
    func createSigningKey(parent: ESYS_TR) throws -> (point: Bytes, blob: Bytes) {
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var template = TPMTemplates.signingKey()
        var outsideInfo = TPM2B_DATA()
        var creationPCRs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        let rc = Esys_Create(
            try context(), parent, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &sensitive,
            &template, &outsideInfo, &creationPCRs, &outPrivate, &outPublic, nil, nil, nil)
        defer { Esys_Free(outPrivate); Esys_Free(outPublic) }
        guard rc == 0, let outPrivate, let outPublic else { throw Self.failure(rc, "TPM2_Create (signing key)") }
        guard TPMTemplates.isSigningKey(outPublic.pointee) else { throw TPMFailure.failed("the TPM made another kind of key than the one asked for") }
        var ecc = outPublic.pointee.publicArea.unique.ecc
        guard let x = Self.scalar(&ecc.x.buffer, size: ecc.x.size), let y = Self.scalar(&ecc.y.buffer, size: ecc.y.size) else {
            throw TPMFailure.failed("the TPM answered a public point that is not P-256's")
        }
        let key = ([0x04] + x + y, try marshal(outPublic) + marshal(outPrivate))
        // As the sealing unseals what it sealed: a key whose point was damaged on its way out
        // would be published and never sign; this one loads, signs, and verifies by its point.
        var check = Bytes(repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for i in check.indices { check[i] = generator.next() }
        _ = try sign(digest: check, blob: key.1, parent: parent)
        return key
    }

    func sign(digest: Bytes, blob: Bytes, parent: ESYS_TR) throws -> (r: Bytes, s: Bytes) {
        guard digest.count == 32 else { throw TPMFailure.failed("a SHA-256 digest is 32 bytes, not \(digest.count)") }
        var (inPublic, inPrivate) = try Self.signingKeyAreas(blob)
        let esys = try context()
        var key = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_Load(
            esys, parent, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &inPrivate, &inPublic, &key)
        guard rc == 0 else {
            if let code = TPMConstant.code(rc), TPMConstant.foreignObject.contains(code) {
                throw TPMFailure.foreign(
                    "this key belongs to another TPM (or this TPM's owner hierarchy was cleared since): it does not load here (\(Self.describe(rc)))")
            }
            throw Self.failure(rc, "TPM2_Load (signing key)")
        }
        track(key)
        defer { flush(key) }
        var message = TPM2B_DIGEST()
        message.size = try TPM2B.fill(&message.buffer, with: digest)
        var scheme = TPMT_SIG_SCHEME()
        scheme.scheme = TPMConstant.algECDSA
        scheme.details.ecdsa.hashAlg = TPMConstant.algSHA256
        // A digest made outside the TPM: the null ticket, as tpm2_sign -d sends. The TPM accepts
        // it for an unrestricted key, which is what makes this one sign anything it is given.
        var ticket = TPMT_TK_HASHCHECK()
        ticket.tag = TPMConstant.stHashCheck
        ticket.hierarchy = TPMConstant.rhNull
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        let src = Esys_Sign(esys, key, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &message, &scheme, &ticket, &signature)
        defer { Esys_Free(signature) }
        guard src == 0, let signature else { throw Self.failure(src, "TPM2_Sign") }
        var ecdsa = signature.pointee.signature.ecdsa
        guard signature.pointee.sigAlg == TPMConstant.algECDSA, ecdsa.hash == TPMConstant.algSHA256,
            let r = Self.scalar(&ecdsa.signatureR.buffer, size: ecdsa.signatureR.size),
            let s = Self.scalar(&ecdsa.signatureS.buffer, size: ecdsa.signatureS.size),
            r.contains(where: { $0 != 0 }), s.contains(where: { $0 != 0 })
        else { throw TPMFailure.failed("the TPM answered a signature that is not an ECDSA P-256 one") }
        // The point is the loaded public area's, which the TPM checked against the private one.
        var ecc = inPublic.publicArea.unique.ecc
        guard let x = Self.scalar(&ecc.x.buffer, size: ecc.x.size), let y = Self.scalar(&ecc.y.buffer, size: ecc.y.size),
            Self.verifies(point: [0x04] + x + y, digest: digest, r: r, s: s)
        else { throw TPMFailure.failed("the TPM answered a signature that does not verify by the key's public point") }
        return (r, s)
    }

    /// libcrypto's judgement of (r, s) as `point`'s ECDSA signature of `digest`: what the TPM
    /// answers is checked, not trusted (the engine's KeyMaterial reads the point, off-curve ones
    /// refused).
    private static func verifies(point: Bytes, digest: Bytes, r: Bytes, s: Bytes) -> Bool {
        defer { ERR_clear_error() }
        guard let material = try? KeyMaterial(data: point, keyClass: .public, algorithm: .ec), material.bits == 256,
            let spki = try? material.standardDER()
        else { return false }
        let key = spki.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_PKEY_CTX_new(key, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context) }
        let signature = derSignature(r: r, s: s)
        return EVP_PKEY_verify_init(context) == 1 && EVP_PKEY_verify(context, signature, signature.count, digest, digest.count) == 1
    }

    /// ECDSA-Sig-Value (SEQUENCE of two INTEGERs), for scalars of 32 bytes: every length fits in
    /// one byte.
    private static func derSignature(r: Bytes, s: Bytes) -> Bytes {
        func integer(_ magnitude: Bytes) -> Bytes {
            var value = Array(magnitude.drop { $0 == 0 })
            if value.first.map({ $0 & 0x80 != 0 }) ?? true { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }

    /// A P-256 coordinate or scalar, left-padded to 32 bytes (a TPM may drop leading zeros); nil
    /// when empty or longer.
    private static func scalar<Buffer>(_ buffer: inout Buffer, size: UInt16) -> Bytes? {
        guard let bytes = TPM2B.read(&buffer, size: size), (1...32).contains(bytes.count) else { return nil }
        return Bytes(repeating: 0, count: 32 - bytes.count) + bytes
    }

    /// A blob's two areas: exactly one TPM2B_PUBLIC of `TPMTemplates.signingKey`'s kind, then
    /// exactly one TPM2B_PRIVATE. Anything else is refused before the TPM sees it.
    private static func signingKeyAreas(_ blob: Bytes) throws -> (TPM2B_PUBLIC, TPM2B_PRIVATE) {
        let damaged = TPMFailure.failed("not a TPM signing key blob (damaged, or not one this program makes)")
        var inPublic = TPM2B_PUBLIC()
        var inPrivate = TPM2B_PRIVATE()
        var offset = 0
        guard Tss2_MU_TPM2B_PUBLIC_Unmarshal(blob, blob.count, &offset, &inPublic) == 0, TPMTemplates.isSigningKey(inPublic),
            Tss2_MU_TPM2B_PRIVATE_Unmarshal(blob, blob.count, &offset, &inPrivate) == 0, offset == blob.count, inPrivate.size > 0
        else { throw damaged }
        return (inPublic, inPrivate)
    }
}

extension TPMTemplates {
    static let signingKeyAttributes: TPMA_OBJECT =
        TPMConstant.attrFixedTPM | TPMConstant.attrFixedParent | TPMConstant.attrSensitiveDataOrigin | TPMConstant.attrUserWithAuth
        | TPMConstant.attrNoDA | TPMConstant.attrSign

    /// An unrestricted ECDSA-SHA256 P-256 signing key (no decrypt, no policy).
    static func signingKey() -> TPM2B_PUBLIC {
        var template = object(TPMConstant.algECC, attributes: signingKeyAttributes)
        template.publicArea.parameters.eccDetail.symmetric.algorithm = TPMConstant.algNull
        template.publicArea.parameters.eccDetail.scheme.scheme = TPMConstant.algECDSA
        template.publicArea.parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPMConstant.algSHA256
        template.publicArea.parameters.eccDetail.curveID = TPMConstant.eccNISTP256
        template.publicArea.parameters.eccDetail.kdf.scheme = TPMConstant.algNull
        return template
    }

    /// Whether a public area is `signingKey`'s kind exactly: a blob edited into a decryption key,
    /// a restricted one or one behind a policy is refused.
    static func isSigningKey(_ value: TPM2B_PUBLIC) -> Bool {
        let area = value.publicArea
        let ecc = area.parameters.eccDetail
        return area.type == TPMConstant.algECC && area.nameAlg == TPMConstant.algSHA256 && area.objectAttributes == signingKeyAttributes
            && area.authPolicy.size == 0 && ecc.symmetric.algorithm == TPMConstant.algNull && ecc.scheme.scheme == TPMConstant.algECDSA
            && ecc.scheme.details.ecdsa.hashAlg == TPMConstant.algSHA256 && ecc.curveID == TPMConstant.eccNISTP256
            && ecc.kdf.scheme == TPMConstant.algNull
    }
}

extension TPMConstant {
    static let algECDSA: TPM2_ALG_ID = 0x0018
    static let attrSign: TPMA_OBJECT = 0x0004_0000
    static let stHashCheck: TPM2_ST = 0x8024
    static let rhNull: TPMI_RH_HIERARCHY = 0x4000_0007
}
