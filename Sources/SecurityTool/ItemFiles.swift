import KeychainCore

/// Certificate and key files for `security import` and `export`: PEM, DER and PKCS#12.
enum ItemFiles {
    /// Reads `bytes` as macOS's import does: PKCS#12 (by -f, extension or content), PEM blocks,
    /// or one DER certificate or key. A private key and its certificate become an identity.
    static func read(_ bytes: Bytes, path: String, format: String?, passphrase: () throws -> String) throws -> PKCS12Bundle {
        let lowered = path.lowercased()
        if format == "pkcs12" || lowered.hasSuffix(".p12") || lowered.hasSuffix(".pfx") {
            return try PKCS12Bundle(data: bytes, passphrase: passphrase())
        }
        let blocks = PEM.blocks(in: bytes)
        if blocks.isEmpty {
            if let certificate = try? Certificate(der: bytes) { return PKCS12Bundle(privateKey: nil, certificate: certificate, chain: []) }
            if let key = try? KeyMaterial(data: bytes) { return try group(keys: [key], certificates: []) }
            if format == nil, isPKCS12(bytes) {
                return try PKCS12Bundle(data: bytes, passphrase: passphrase())
            }
            throw KeychainError(.decode, "\(path) is not a certificate, key or PKCS#12 file")
        }
        var certificates: [Certificate] = []
        var keys: [KeyMaterial] = []
        for block in blocks {
            switch block.label {
            case "CERTIFICATE", "X509 CERTIFICATE", "TRUSTED CERTIFICATE":
                certificates.append(try Certificate(der: block.der))
            case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "PUBLIC KEY", "RSA PUBLIC KEY":
                keys.append(try KeyMaterial(data: block.der))
            case "ENCRYPTED PRIVATE KEY":
                throw KeychainError(.unimplemented, "encrypted PEM keys: decrypt with `openssl pkey` or use a PKCS#12 file")
            default:
                continue  // EC PARAMETERS and the like carry nothing to store
            }
        }
        guard !certificates.isEmpty || !keys.isEmpty else { throw KeychainError(.decode, "\(path) holds no certificate or key") }
        return try group(keys: keys, certificates: certificates)
    }

    /// One key with the certificate it belongs to in front, the rest as chain. Files with several
    /// keys are rare; they are refused rather than half imported.
    private static func group(keys: [KeyMaterial], certificates: [Certificate]) throws -> PKCS12Bundle {
        guard keys.count <= 1 else { throw KeychainError(.unimplemented, "\(keys.count) keys in one file: import them one file each") }
        let privateKey = keys.first
        var rest = certificates
        var certificate: Certificate?
        if let privateKey, privateKey.keyClass == .private, let index = rest.firstIndex(where: { $0.publicKeyHash == privateKey.applicationLabel }) {
            certificate = rest.remove(at: index)
        } else if !rest.isEmpty {
            certificate = rest.removeFirst()
        }
        return PKCS12Bundle(privateKey: privateKey, certificate: certificate, chain: rest)
    }

    /// The outer SEQUENCE of a PKCS#12 PFX starts with INTEGER 3 (its version).
    private static func isPKCS12(_ bytes: Bytes) -> Bool {
        guard bytes.count > 8, bytes[0] == 0x30 else { return false }
        let lengthBytes = bytes[1] < 0x80 ? 0 : Int(bytes[1] & 0x7f)
        let at = 2 + lengthBytes
        return bytes.count > at + 2 && bytes[at] == 0x02 && bytes[at + 1] == 0x01 && bytes[at + 2] == 0x03
    }

    static func summary(_ imported: ImportedItems) -> [String] {
        var lines: [String] = []
        func add(_ count: Int, _ one: String, _ many: String) {
            if count > 0 { lines.append("\(count) \(count == 1 ? one : many) imported.") }
        }
        add(imported.identities, "identity", "identities")
        add(imported.keys, "key", "keys")
        add(imported.certificates, "certificate", "certificates")
        return lines
    }
}
