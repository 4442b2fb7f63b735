package import KeychainCore

/// What Apple's SecKeyRef is: an RSA or EC key (or a symmetric key's bytes) and its attributes.
public final class SecKey: CustomStringConvertible {
    /// Nil for a symmetric key.
    package let material: KeyMaterial?
    let attributes: [String: AttributeValue]
    let data: Bytes
    let stored: StoredReference?

    init(_ material: KeyMaterial, attributes: [String: AttributeValue] = [:], stored: StoredReference? = nil) {
        self.material = material
        self.data = material.external
        var merged = attributes
        merged.merge(material.derivedAttributes) { _, derived in derived }
        self.attributes = merged
        self.stored = stored
    }

    init(symmetric data: Bytes, attributes: [String: AttributeValue], stored: StoredReference?) {
        material = nil
        self.data = data
        self.attributes = attributes
        self.stored = stored
    }

    public var description: String {
        guard let material else { return "<SecKey symmetric, \(data.count * 8) bits>" }
        return "<SecKey \(material.algorithm) \(material.keyClass), \(material.bits) bits>"
    }
}

/// A key from its external representation (PKCS#1 for RSA, X9.63 for EC; DER/PEM PKCS#8 and
/// SubjectPublicKeyInfo are read too). kSecAttrKeyClass and kSecAttrKeyType, when given, must agree.
public func SecKeyCreateWithData(
    _ keyData: CFData, _ attributes: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    do {
        var typed: [String: AttributeValue] = [:]
        // Other keys (kSecClass, kSecAttrIsPermanent's relatives) are not key attributes: ignored, as Apple does.
        for (name, value) in try SecItemRequest.plain(attributes) where ItemClass.key.has(name) {
            guard let converted = SecItemRequest.attributeValue(value) else { throw KeychainError.param("attribute \(name) has an unsupported type") }
            typed[name] = try ItemClass.key.normalize(name, converted)
        }
        let keyClass = try KeyClass.named(by: typed[AttributeKey.keyClass])
        if keyClass == .symmetric { return SecKey(symmetric: Array(keyData as Data), attributes: typed, stored: nil) }
        let algorithm = try KeyAlgorithm.named(by: typed[AttributeKey.keyType])
        return SecKey(try KeyMaterial(data: Array(keyData as Data), keyClass: keyClass, algorithm: algorithm), attributes: typed)
    } catch let caught {
        report(caught, error)
        return nil
    }
}

public func SecKeyCopyExternalRepresentation(_ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    Data(key.data) as NSData
}

public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    var out: [String: Any] = [:]
    for (name, value) in key.attributes where name != AccessList.attribute { out[name] = SecItemResult.object(value) }
    out["class"] = kSecClassKey as String
    out["v_Data"] = Data(key.data)
    return out as NSDictionary
}

/// The public half of an RSA or EC key; nil for a symmetric key.
public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? {
    guard let material = key.material else { return nil }
    if material.keyClass == .public { return key }
    return (try? KeyMaterial(data: material.publicExternal, keyClass: .public, algorithm: material.algorithm)).map { SecKey($0) }
}

/// Bytes per block: the modulus size for RSA, the field size for EC (as Apple reports them).
public func SecKeyGetBlockSize(_ key: SecKey) -> Int {
    guard let material = key.material else { return key.data.count }
    return (Int(material.bits) + 7) / 8
}
