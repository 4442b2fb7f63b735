package import KeychainCore

/// A private key as the agent holds it: read from OpenSSH's private serialization (contract 1:
/// what SSH2_AGENTC_ADD_IDENTITY carries), or a TPM-resident key whose private part never leaves
/// the TPM.
package final class SSHPrivateKey: @unchecked Sendable {
    /// How a TPM-resident key signs: (SHA-256 digest, the key's TPM blob) to (r, s). The
    /// executable installs KeychainTPMClient's signer; nil means no TPM, and such keys fail.
    nonisolated(unsafe) package static var tpmSign: (@Sendable (Bytes, Bytes) throws -> (r: Bytes, s: Bytes))?

    /// The internal type name of a TPM-resident key's serialization; never sent on the wire.
    package static let tpmKeyType = "keychain-tpm-ecdsa-sha2-nistp256"
    /// A TPM2B_PUBLIC||TPM2B_PRIVATE pair is a few hundred bytes.
    private static let maximumTPMBlob = 4096

    private enum Signer {
        case software(EVPKey, SSHKeyKind)
        case tpm(point: Bytes, blob: Bytes)
    }

    private let signer: Signer
    /// Contract 1's bytes, canonical (mpints without leading zeros); wiped when the key goes.
    private var storage: Bytes
    package let publicBlob: Bytes
    package let keyType: String

    /// The key's size as `ssh-keygen -l` prints it.
    package var bits: Int {
        switch signer {
        case .software(let key, _): return key.bits
        case .tpm: return 256
        }
    }

    package var isTPMResident: Bool {
        if case .tpm = signer { return true }
        return false
    }

    package convenience init(serialized: Bytes) throws {
        var reader = ByteReader(serialized)
        try self.init(reading: &reader)
        guard reader.isAtEnd else { throw SSHKeyError("trailing bytes after a private key") }
    }

    package init(reading reader: inout ByteReader) throws {
        var out = ByteWriter()
        defer { out.wipe() }
        let name = try reader.string()
        out.string(name)
        if name == Self.tpmKeyType {
            let point = try reader.blob()
            let blob = try reader.blob()
            guard blob.count <= Self.maximumTPMBlob, !blob.isEmpty else { throw SSHKeyError("bad TPM key blob") }
            _ = try EVPKey.ec(curve: .p256, point: point, scalar: nil)
            out.blob(point)
            out.blob(blob)
            var wire = ByteWriter()
            wire.string(SSHCurve.p256.keyType)
            wire.string(SSHCurve.p256.rawValue)
            wire.blob(point)
            signer = .tpm(point: point, blob: blob)
            publicBlob = wire.bytes
            keyType = SSHCurve.p256.keyType
            storage = out.bytes
            return
        }
        guard let (kind, isCertificate) = SSHKeyKind.parse(name) else { throw SSHKeyError("unsupported key type \(name.prefix(64))") }
        var publicFields: ByteReader
        var certificateBlob: Bytes?
        if isCertificate {
            let certificate = try reader.blob()
            out.blob(certificate)
            let parts = try SSHPublicKeyParts(blob: certificate)
            guard SSHPublicKey.keyType(of: certificate) == name else { throw SSHKeyError("certificate of another type") }
            publicFields = ByteReader(parts.plainBlob)
            _ = try publicFields.string()
            certificateBlob = certificate
        } else {
            publicFields = ByteReader([])
        }
        let key: EVPKey
        var plain = ByteWriter()
        plain.string(kind.name)
        switch kind {
        case .ed25519:
            // The private serialization repeats the public key even for a certificate.
            let pk = try reader.blob()
            var sk = try reader.blob()
            defer { sk.wipe() }
            out.blob(pk)
            out.blob(sk)
            if isCertificate, try publicFields.blob() != pk { throw SSHKeyError("certificate is for another key") }
            guard pk.count == 32, sk.count == 64, Array(sk[32...]) == pk else { throw SSHKeyError("bad Ed25519 private key") }
            var seed = Array(sk[0..<32])
            defer { seed.wipe() }
            key = try EVPKey.ed25519(privateSeed: seed)
            guard key.rawPublicKey == pk else { throw SSHKeyError("Ed25519 private key does not match its public key") }
            plain.blob(pk)
        case .ecdsa(let curve):
            // A certificate carries the public fields; a plain key carries them here.
            var source = isCertificate ? publicFields : reader
            guard try source.string() == curve.rawValue else { throw SSHKeyError("curve does not match key type") }
            let point = try source.blob()
            if isCertificate {
                publicFields = source
            } else {
                reader = source
                out.string(curve.rawValue)
                out.blob(point)
            }
            var d = try reader.mpint()
            defer { d.wipe() }
            out.mpint(d)
            key = try EVPKey.ec(curve: curve, point: point, scalar: d)
            plain.string(curve.rawValue)
            plain.blob(point)
        case .rsa:
            var source = isCertificate ? publicFields : reader
            // The certificate's order is e, n; the private serialization's n, e.
            let n: Bytes
            let e: Bytes
            if isCertificate {
                e = try source.mpint()
                n = try source.mpint()
                publicFields = source
            } else {
                n = try source.mpint()
                e = try source.mpint()
                reader = source
                out.mpint(n)
                out.mpint(e)
            }
            var secrets = try (0..<4).map { _ in try reader.mpint() }
            defer { for index in secrets.indices { secrets[index].wipe() } }
            secrets.forEach { out.mpint($0) }
            key = try EVPKey.rsa(n: n, e: e, private: (d: secrets[0], iqmp: secrets[1], p: secrets[2], q: secrets[3]))
            plain.mpint(e)
            plain.mpint(n)
        }
        signer = .software(key, kind)
        publicBlob = certificateBlob ?? plain.bytes
        keyType = name
        storage = out.bytes
    }

    deinit { storage.wipe() }

    /// Contract 1's bytes (for a TPM key, its internal form: the point and the TPM's blob).
    package func serialized() -> Bytes { storage }

    /// The signature blob (string algorithm, string signature) over `data`. `flags` choose RSA's
    /// hash (SSH_AGENT_RSA_SHA2_256 = 2, _512 = 4; none: ssh-rsa's SHA-1, as OpenSSH signs).
    package func sign(_ data: Bytes, flags: UInt32) throws -> Bytes {
        var out = ByteWriter()
        switch signer {
        case .software(let key, .ed25519):
            out.string("ssh-ed25519")
            out.blob(try key.sign(data, digest: nil))
        case .software(let key, .ecdsa(let curve)):
            out.string(curve.keyType)
            out.blob(try ECDSASignature.wire(fromDER: try key.sign(data, digest: curve.digest)))
        case .software(let key, .rsa):
            let algorithm = SSHSignatureAlgorithm.rsa(flags: flags)
            out.string(algorithm.name)
            out.blob(try key.sign(data, digest: algorithm.digest))
        case .tpm(_, let blob):
            guard let tpmSign = Self.tpmSign else { throw SSHKeyError("no TPM signer for a TPM-resident key") }
            let (r, s) = try tpmSign(Crypto.sha256(data), blob)
            var numbers = ByteWriter()
            numbers.mpint(r)
            numbers.mpint(s)
            out.string(SSHCurve.p256.keyType)
            out.blob(numbers.bytes)
            // A TPM answer is checked like any other peer's before it is handed on.
            guard SSHPublicKey.verify(signature: out.bytes, of: data, by: publicBlob) else {
                throw SSHKeyError("the TPM's signature does not verify")
            }
        }
        return out.bytes
    }
}
