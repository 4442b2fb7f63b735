internal import KeychainCore

// Keys of the dictionaries SecPKCS12Import returns, and its options (SecImportExport.h).
public let kSecImportItemLabel: CFString = NSString(string: "label")
public let kSecImportItemKeyID: CFString = NSString(string: "keyid")
public let kSecImportItemTrust: CFString = NSString(string: "trust")
public let kSecImportItemCertChain: CFString = NSString(string: "chain")
public let kSecImportItemIdentity: CFString = NSString(string: "identity")
/// macOS's option: also add what was read to this SecKeychain.
public let kSecImportExportKeychain: CFString = NSString(string: "keychain")

/// Reads a PKCS#12 file. As on iOS, the items are returned, not stored: pass the identity to
/// SecItemAdd (kSecValueRef), or give kSecImportExportKeychain to have them added.
/// errSecAuthFailed for a wrong passphrase, errSecDecode for data that is not PKCS#12.
public func SecPKCS12Import(_ pkcs12Data: CFData, _ options: CFDictionary, _ items: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    items.pointee = nil
    return secStatus {
        let passphrase: String?
        switch options[kSecImportExportPassphrase] {
        case nil: passphrase = nil
        case let text as String: passphrase = text
        default: throw KeychainError.param("kSecImportExportPassphrase must be a string")
        }
        let keychain: SecKeychain?
        switch options[kSecImportExportKeychain] {
        case nil: keychain = nil
        case let target as SecKeychain: keychain = target
        default: throw KeychainError.param("kSecImportExportKeychain must be a SecKeychain")
        }
        let bundle = try PKCS12Bundle(data: Array(pkcs12Data), passphrase: passphrase)
        var chain = bundle.chain.map { SecCertificate($0) }
        var item: [String: Any] = [:]
        if let certificate = bundle.certificate {
            chain.insert(SecCertificate(certificate), at: 0)
        }
        if let key = bundle.privateKey, let certificate = bundle.certificate {
            guard key.applicationLabel == certificate.publicKeyHash else {
                throw KeychainError(.decode, "the PKCS#12 file's key does not belong to its certificate")
            }
            item[kSecImportItemIdentity as String] = SecIdentity(certificate: chain[0], privateKey: SecKey(key))
            item[kSecImportItemKeyID as String] = Data(key.applicationLabel)
        }
        if let label = bundle.label { item[kSecImportItemLabel as String] = label }
        item[kSecImportItemCertChain as String] = chain
        if let keychain {
            try keychain.store.importBundle(bundle, label: bundle.label)
        }
        items.pointee = [item]
    }
}
