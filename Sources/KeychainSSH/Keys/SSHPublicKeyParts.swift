internal import KeychainCore

/// A public key blob taken apart: its kind, the plain key (a certificate's embedded key), and
/// the certificate when it is one.
struct SSHPublicKeyParts {
    let kind: SSHKeyKind
    let key: EVPKey
    /// The plain key's blob (for a certificate, the key it certifies), its numbers without
    /// leading zeros.
    let plainBlob: Bytes
    let certificate: SSHCertificate?
    private var certificateBlob: Bytes? = nil

    /// What sshkey_equal compares: a certificate's blob, a plain key's numbers.
    var canonicalBlob: Bytes { certificateBlob ?? plainBlob }

    init(blob: Bytes) throws {
        var reader = ByteReader(blob)
        let name = try reader.string()
        guard let (kind, isCertificate) = SSHKeyKind.parse(name) else { throw SSHKeyError("unsupported key type \(name.prefix(64))") }
        if isCertificate {
            let certificate = try SSHCertificate(blob: blob, kind: kind)
            self.init(kind: kind, key: certificate.key, plainBlob: certificate.plainBlob, certificate: certificate)
            certificateBlob = blob
        } else {
            let (key, fields) = try Self.readFields(of: kind, from: &reader)
            guard reader.isAtEnd else { throw SSHKeyError("trailing bytes after a \(name) key") }
            var canonical = ByteWriter()
            canonical.string(name)
            canonical.raw(fields)
            self.init(kind: kind, key: key, plainBlob: canonical.bytes, certificate: nil)
            certificateBlob = nil
        }
    }

    private init(kind: SSHKeyKind, key: EVPKey, plainBlob: Bytes, certificate: SSHCertificate?) {
        self.kind = kind
        self.key = key
        self.plainBlob = plainBlob
        self.certificate = certificate
    }

    /// The key's public fields after its type name, in the order public blobs hold them; returns
    /// the key and the fields' bytes as read.
    static func readFields(of kind: SSHKeyKind, from reader: inout ByteReader) throws -> (EVPKey, Bytes) {
        var writer = ByteWriter()
        switch kind {
        case .ed25519:
            let pk = try reader.blob()
            writer.blob(pk)
            return (try EVPKey.ed25519(publicKey: pk), writer.bytes)
        case .ecdsa(let curve):
            let curveName = try reader.string()
            guard curveName == curve.rawValue else { throw SSHKeyError("curve \(curveName.prefix(32)) under \(curve.keyType)") }
            let point = try reader.blob()
            writer.string(curveName)
            writer.blob(point)
            return (try EVPKey.ec(curve: curve, point: point, scalar: nil), writer.bytes)
        case .rsa:
            let e = try reader.mpint()
            let n = try reader.mpint()
            writer.mpint(e)
            writer.mpint(n)
            return (try EVPKey.rsa(n: n, e: e), writer.bytes)
        }
    }

    /// Verifies an SSH signature blob (string algorithm, string signature) over `data`.
    func verify(signature: Bytes, of data: Bytes) -> Bool {
        var reader = ByteReader(signature)
        guard let algorithm = try? reader.string(), let raw = try? reader.blob(), reader.isAtEnd else { return false }
        switch kind {
        case .ed25519:
            return algorithm == "ssh-ed25519" && key.verify(raw, of: data, digest: nil)
        case .ecdsa(let curve):
            var numbers = ByteReader(raw)
            guard algorithm == curve.keyType, let r = try? numbers.mpint(), let s = try? numbers.mpint(), numbers.isAtEnd,
                let der = ECDSASignature.der(r: r, s: s)
            else { return false }
            return key.verify(der, of: data, digest: curve.digest)
        case .rsa:
            guard let digest = SSHSignatureAlgorithm.rsaDigest(for: algorithm) else { return false }
            return key.verify(raw, of: data, digest: digest)
        }
    }
}

/// RSA's signature algorithm names and the agent's flags that choose them.
enum SSHSignatureAlgorithm {
    static let rsaSHA256Flag: UInt32 = 2
    static let rsaSHA512Flag: UInt32 = 4

    /// As agent_decode_alg: SHA-256 wins when both flags are set; no flag is ssh-rsa's SHA-1.
    static func rsa(flags: UInt32) -> (name: String, digest: String) {
        if flags & rsaSHA256Flag != 0 { return ("rsa-sha2-256", "SHA256") }
        if flags & rsaSHA512Flag != 0 { return ("rsa-sha2-512", "SHA512") }
        return ("ssh-rsa", "SHA1")
    }

    static func rsaDigest(for name: String) -> String? {
        switch name {
        case "rsa-sha2-256": return "SHA256"
        case "rsa-sha2-512": return "SHA512"
        case "ssh-rsa": return "SHA1"
        default: return nil
        }
    }
}
