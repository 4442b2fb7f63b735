/// What an import stored, and what it found already there.
package struct ImportedItems: Sendable {
    package var identities = 0
    package var certificates = 0
    package var keys = 0
    package var alreadyPresent = 0

    package var stored: Int { identities + certificates + keys }

    mutating func record(_ added: Bool, as kind: WritableKeyPath<ImportedItems, Int>) {
        if added { self[keyPath: kind] += 1 } else { alreadyPresent += 1 }
    }
}

/// Storing certificates and keys read from files (PEM, DER, PKCS#12): `security import` and
/// SecPKCS12Import with kSecImportExportKeychain.
extension KeychainStore {
    /// The private key and its certificate together, then the rest of the chain. Items already in
    /// the keychain are counted, not replaced; errSecDuplicateItem when nothing was new. All in one
    /// transaction: any other error keeps nothing of the bundle.
    @discardableResult
    package func importBundle(_ bundle: PKCS12Bundle, label: String? = nil, protection: Protection? = nil) throws -> ImportedItems {
        // One batch: one commit for a whole chain or CA bundle instead of one per certificate,
        // and on any error other than an item already there, nothing of the file is kept.
        let summary = try batch {
            var summary = ImportedItems()
            var rest = bundle.chain
            if let key = bundle.privateKey, key.keyClass == .private, let certificate = bundle.certificate {
                // As macOS does: the certificate is labelled by its subject, the key by the file's
                // friendlyName when it has one.
                let certificateItem = Self.item(certificate, label: label, protection: protection)
                let keyItem = Self.item(key, label: label ?? bundle.label ?? certificate.subjectSummary, protection: protection)
                do {
                    try add([keyItem, certificateItem])
                    summary.identities += 1
                } catch let error as KeychainError where error.code == .duplicateItem {
                    // One half is there already: store the other, so that the identity is complete.
                    summary.record(try addUnlessPresent(keyItem), as: \.keys)
                    summary.record(try addUnlessPresent(certificateItem), as: \.certificates)
                }
            } else {
                if let key = bundle.privateKey {
                    summary.record(try addUnlessPresent(Self.item(key, label: label ?? bundle.label, protection: protection)), as: \.keys)
                }
                if let certificate = bundle.certificate { rest.insert(certificate, at: 0) }
            }
            for certificate in rest {
                summary.record(try addUnlessPresent(Self.item(certificate, label: nil, protection: protection)), as: \.certificates)
            }
            return summary
        }
        if summary.stored == 0 && summary.alreadyPresent > 0 { throw KeychainError(.duplicateItem) }
        return summary
    }

    static func item(_ certificate: Certificate, label: String?, protection: Protection?) -> Item {
        var item = Item(itemClass: .certificate, secret: certificate.der)
        if let label { item[AttributeKey.label] = .string(label) }
        if let protection { item[AttributeKey.accessible] = .string(protection.rawValue) }
        return item
    }

    static func item(_ key: KeyMaterial, label: String?, protection: Protection?) -> Item {
        var item = Item(itemClass: .key, secret: key.external)
        item[AttributeKey.keyClass] = .int(key.keyClass.rawValue)
        if let label { item[AttributeKey.label] = .string(label) }
        if let protection { item[AttributeKey.accessible] = .string(protection.rawValue) }
        return item
    }

    /// False when an equal item (same primary key) is there already.
    private func addUnlessPresent(_ item: Item) throws -> Bool {
        do {
            try add(item)
            return true
        } catch let error as KeychainError where error.code == .duplicateItem {
            return false
        }
    }
}
