/// Certificates and keys carry attributes that come from their data, not from the caller: they
/// are derived whenever the data is stored, so a search by them can be trusted.
enum DerivedAttributes {
    /// A certificate's attributes that only its DER decides (read-only in Apple's documentation).
    static let certificateReadOnly: Set<String> = [
        AttributeKey.subject, AttributeKey.issuer, AttributeKey.serialNumber, AttributeKey.subjectKeyID, AttributeKey.publicKeyHash,
        AttributeKey.certificateType, AttributeKey.certificateEncoding
    ]

    /// The item with its derived attributes, and the data to store. Throws errSecDecode for data
    /// that is not a certificate or key, errSecParam for attributes that contradict it.
    static func apply(to item: Item, secret: Bytes) throws -> (Item, Bytes) {
        var item = item
        switch item.itemClass {
        case .genericPassword, .internetPassword:
            return (item, secret)
        case .certificate:
            let certificate = try Certificate(der: secret)
            for key in certificateReadOnly { item.attributes[key] = nil }
            item.attributes.merge(certificate.derivedAttributes) { _, derived in derived }
            if item.attributes[AttributeKey.label] == nil { item.attributes[AttributeKey.label] = .string(certificate.subjectSummary) }
            return (item, secret)
        case .key:
            if item.attributes[AttributeKey.keyClass]?.intValue == KeyClass.symmetric.rawValue {
                guard !secret.isEmpty else { throw KeychainError.param("a symmetric key needs kSecValueData") }
                let bits = AttributeValue.int(Int64(secret.count) * 8)
                if item.attributes[AttributeKey.keySizeInBits] == nil { item.attributes[AttributeKey.keySizeInBits] = bits }
                if item.attributes[AttributeKey.effectiveKeySize] == nil {
                    item.attributes[AttributeKey.effectiveKeySize] = item.attributes[AttributeKey.keySizeInBits]
                }
                return (item, secret)
            }
            if item.attributes[AttributeKey.keyType]?.intValue == OpenSSHKeyItem.keyType {
                guard !secret.isEmpty else { throw KeychainError.param("an OpenSSH key needs kSecValueData") }
                item.attributes[AttributeKey.keyClass] = .int(KeyClass.private.rawValue)
                let capabilities: [String: AttributeValue] = [
                    AttributeKey.canSign: .bool(true), AttributeKey.canDecrypt: .bool(false), AttributeKey.canEncrypt: .bool(false),
                    AttributeKey.canDerive: .bool(false), AttributeKey.canVerify: .bool(false), AttributeKey.canWrap: .bool(false),
                    AttributeKey.canUnwrap: .bool(false), AttributeKey.isPermanent: .bool(true)
                ]
                item.attributes.merge(capabilities) { given, _ in given }
                return (item, secret)
            }
            let wantedClass = try KeyClass.named(by: item.attributes[AttributeKey.keyClass])
            let wantedType = try KeyAlgorithm.named(by: item.attributes[AttributeKey.keyType])
            let material = try KeyMaterial(data: secret, keyClass: wantedClass, algorithm: wantedType)
            item.attributes.merge(material.derivedAttributes) { _, derived in derived }
            item.attributes.merge(material.defaultCapabilities) { given, _ in given }
            return (item, material.external)
        case .identity:
            throw KeychainError.param("an identity is stored as its certificate and private key: add a SecIdentity with kSecValueRef")
        }
    }
}
