internal import KeychainCore

/// An OpenSSH certificate (PROTOCOL.certkeys), read as sshkey.c's cert_parse reads it: every
/// field, the CA's signature checked over the bytes before it.
struct SSHCertificate {
    static let userType: UInt32 = 1
    static let hostType: UInt32 = 2

    let key: EVPKey
    let plainBlob: Bytes
    let serial: UInt64
    let type: UInt32
    let keyID: String
    let principals: [String]
    let validAfter: UInt64
    let validBefore: UInt64
    let signatureKey: Bytes

    init(blob: Bytes, kind: SSHKeyKind) throws {
        guard blob.count <= SSHLimits.maximumCertificate else { throw SSHKeyError("certificate too large") }
        var reader = ByteReader(blob)
        _ = try reader.string()
        _ = try reader.blob()  // nonce
        let (key, fields) = try SSHPublicKeyParts.readFields(of: kind, from: &reader)
        var plain = ByteWriter()
        plain.string(kind.name)
        plain.raw(fields)
        self.key = key
        plainBlob = plain.bytes
        serial = try reader.u64()
        type = try reader.u32()
        guard type == Self.userType || type == Self.hostType else { throw SSHKeyError("certificate of unknown type \(type)") }
        keyID = try reader.string()
        var names = ByteReader(try reader.blob())
        var principals: [String] = []
        while !names.isAtEnd { principals.append(try names.string()) }
        self.principals = principals
        validAfter = try reader.u64()
        validBefore = try reader.u64()
        _ = try reader.blob()  // critical options
        _ = try reader.blob()  // extensions
        _ = try reader.blob()  // reserved
        signatureKey = try reader.blob()
        let signedLength = blob.count - reader.remaining
        let signature = try reader.blob()
        guard reader.isAtEnd else { throw SSHKeyError("trailing bytes after a certificate") }
        // Checked before the CA's key is read, so that nested certificates cost nothing.
        guard let (_, caIsCertificate) = SSHKeyKind.parse(SSHPublicKey.keyType(of: signatureKey) ?? ""), !caIsCertificate else {
            throw SSHKeyError("a certificate signed by a certificate or an unsupported key")
        }
        let authority = try SSHPublicKeyParts(blob: signatureKey)
        guard authority.verify(signature: signature, of: Array(blob[0..<signedLength])) else {
            throw SSHKeyError("certificate signature does not verify")
        }
    }

    /// sshkey_cert_check_host: a host certificate, valid now, naming `host` among its principals
    /// (no principals: any host).
    func admitsHost(_ host: String, now: UInt64) -> Bool {
        guard type == Self.hostType, now >= validAfter, now < validBefore else { return false }
        return principals.isEmpty || principals.contains(host)
    }
}
