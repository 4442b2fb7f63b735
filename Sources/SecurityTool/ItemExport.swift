import KeychainCore

/// `security export -t ...`: certificates and public keys as PEM or DER; private keys only inside
/// a passphrase-protected PKCS#12 file, never in the clear.
enum ItemExport {
    static func export(
        from store: KeychainStore, type: String, format: String?, pem: Bool,
        passphrase: () throws -> String
    ) throws -> Bytes {
        switch type {
        case "certs":
            let certificates = try StoredCertificates.all(in: store).map(\.certificate)
            return try encode(certificates.map(\.der), label: "CERTIFICATE", der: format == "x509" && !pem)
        case "pubKeys":
            let keys = try storedKeys(store, .public)
            return try encode(keys.map { try $0.standardDER() }, label: "PUBLIC KEY", der: format == "openssl" && !pem)
        case "identities", "privKeys":
            guard format == nil || format == "pkcs12" else {
                throw KeychainError(.param, "private keys are exported as PKCS#12 only (-f pkcs12)")
            }
            return try pkcs12(from: store, keysOnly: type == "privKeys", passphrase: passphrase)
        default:
            throw KeychainError(.param, "unsupported -t \(type): use certs, pubKeys, identities or privKeys")
        }
    }

    /// PEM blocks one after another, or the DER of exactly one item.
    private static func encode(_ items: [Bytes], label: String, der: Bool) throws -> Bytes {
        guard !items.isEmpty else { throw KeychainError(.itemNotFound) }
        if der {
            guard items.count == 1 else { throw KeychainError(.param, "\(items.count) items: DER holds one; use PEM (-p)") }
            return items[0]
        }
        return Array(items.map { PEM.encode($0, label: label) }.joined().utf8)
    }

    private static func storedKeys(_ store: KeychainStore, _ keyClass: KeyClass) throws -> [KeyMaterial] {
        var query = Query(itemClass: .key, attributes: [AttributeKey.keyClass: .int(keyClass.rawValue)])
        query.synchronizable = .any
        return try store.find(query, limit: nil, includeSecret: true).map { try KeyMaterial(data: $0.secret ?? [], keyClass: keyClass) }
    }

    /// One identity (with the issuers the keychain holds) or one private key per file: PKCS#12
    /// as OpenSSL writes it keeps a single key.
    private static func pkcs12(from store: KeychainStore, keysOnly: Bool, passphrase: () throws -> String) throws -> Bytes {
        if keysOnly {
            let keys = try storedKeys(store, .private)
            guard keys.count == 1 else { throw KeychainError(.param, "\(keys.count) private keys: a PKCS#12 file here holds one") }
            return try PKCS12Bundle.encode(privateKey: keys[0], certificate: nil, chain: [], label: nil, passphrase: passphrase())
        }
        var query = Query(itemClass: .identity)
        query.synchronizable = .any
        let identities = try store.findIdentities(query, limit: nil, includeKeyData: true)
        guard identities.count == 1, let identity = identities.first else {
            throw KeychainError(.param, "\(identities.count) identities: a PKCS#12 file here holds one; delete or move the others first")
        }
        let certificate = try Certificate(der: identity.certificate.secret ?? [])
        let key = try KeyMaterial(data: identity.privateKey.secret ?? [], keyClass: .private)
        let stored = try StoredCertificates.all(in: store).map(\.certificate)
        let chain = certificate.issuers(among: stored)
        let label = identity.certificate[AttributeKey.label]?.stringValue
        return try PKCS12Bundle.encode(privateKey: key, certificate: certificate, chain: chain, label: label, passphrase: passphrase())
    }
}
