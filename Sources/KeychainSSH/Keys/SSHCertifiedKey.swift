package import KeychainCore

extension SSHPrivateKey {
    /// The key with its OpenSSH certificate, as `ssh-add` sends a key whose KEY-cert.pub lies
    /// beside it (sshkey_private_serialize of a certified key: the certificate, then the private
    /// fields that the certificate does not already carry). The certificate must certify this key.
    package func certified(by certificate: Bytes) throws -> SSHPrivateKey {
        var certificateReader = ByteReader(certificate)
        let certificateType = try certificateReader.string()
        var key = ByteReader(serialized())
        let type = try key.string()
        guard certificateType == type + "-cert-v01@openssh.com" else {
            throw SSHKeyError("the certificate is a \(certificateType), not one for this \(type) key")
        }
        // What the certificate holds already: Ed25519's public key stays (sshkey.c writes pk and
        // sk again); ECDSA's curve and point and RSA's n and e go.
        switch type {
        case "ssh-ed25519": break
        case "ssh-rsa": _ = try (key.blob(), key.blob())
        case _ where type.hasPrefix("ecdsa-sha2-"): _ = try (key.blob(), key.blob())
        default: throw SSHKeyError("a \(type) key cannot carry a certificate")
        }
        var out = ByteWriter()
        defer { out.wipe() }
        out.string(certificateType)
        out.blob(certificate)
        var rest = key.rest()
        defer { rest.wipe() }
        out.raw(rest)
        return try SSHPrivateKey(serialized: out.bytes)
    }
}
