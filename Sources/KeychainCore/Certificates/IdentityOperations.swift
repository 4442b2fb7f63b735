/// A certificate and the private key whose public half it certifies.
package struct Identity: Sendable {
    package var certificate: Item
    package var privateKey: Item

    /// An identity's persistent reference names its certificate's row under the class "idnt".
    package var persistentReference: PersistentReference { PersistentReference(itemClass: .identity, rowID: certificate.rowID) }
}

/// kSecClassIdentity: identities are not stored as such (as on Apple's systems) but found by
/// pairing certificates with private keys whose kSecAttrApplicationLabel equals the
/// certificate's kSecAttrPublicKeyHash.
extension KeychainStore {
    /// The identities that match, in certificate order, at most `limit`. Query attributes of the
    /// key class select the key, all others the certificate; `rows` name certificates.
    package func findIdentities(
        _ query: Query, limit: Int? = 1, includeKeyData: Bool = false,
        presence: PresenceOptions = PresenceOptions()
    ) throws -> [Identity] {
        let (certificateQuery, keyQuery) = try Self.split(query)
        let certificates = try find(certificateQuery, limit: nil, includeSecret: true, presence: presence)
        let privateKeys = try find(keyQuery, limit: nil, includeSecret: includeKeyData, presence: presence)
        var keysByLabel: [AttributeValue: Item] = [:]
        for key in privateKeys where keysByLabel[key.effectiveValue(AttributeKey.applicationLabel)] == nil {
            keysByLabel[key.effectiveValue(AttributeKey.applicationLabel)] = key
        }
        var found: [Identity] = []
        for certificate in certificates {
            if let limit, found.count >= limit { break }
            if let key = keysByLabel[certificate.effectiveValue(AttributeKey.publicKeyHash)] {
                found.append(Identity(certificate: certificate, privateKey: key))
            }
        }
        guard !found.isEmpty else { throw KeychainError(.itemNotFound) }
        return found
    }

    /// Deletes the certificate and the private key of every matching identity, in one transaction;
    /// one whose halves need the user's presence goes only once it is given.
    @discardableResult
    package func deleteIdentities(_ query: Query, presence: PresenceOptions = PresenceOptions()) throws -> Int {
        let identities = try findIdentities(query, limit: nil, presence: presence)
        let allowed = try withPresence(presence) { gate in
            let admitted = try identities.filter {
                try gate.admits($0.certificate, changing: true) && gate.admits($0.privateKey, changing: true)
            }
            // A half sealed under an application password (a key added alone, then paired) goes
            // only with that password, as in delete().
            try withLock {
                let keys = try currentKeys()
                for half in admitted.flatMap({ [$0.certificate, $0.privateKey] }) where AccessConditions(of: half).contains(.applicationPassword) {
                    let rows = try lockedAwareMatches(try Self.normalized(Query(reference: half.persistentReference)), keys: keys)
                    try proveApplicationPasswords(of: rows, gate: gate, keys: keys)
                }
            }
            return admitted
        }
        guard !allowed.isEmpty else { throw KeychainError(.itemNotFound) }
        try delete(references: allowed.flatMap { [$0.certificate.persistentReference, $0.privateKey.persistentReference] })
        return allowed.count
    }

    /// Adds a certificate and its private key together; errSecParam if they do not belong together.
    @discardableResult
    package func addIdentity(certificate: Item, privateKey: Item) throws -> Identity {
        guard certificate.itemClass == .certificate, privateKey.itemClass == .key else {
            throw KeychainError.param("an identity is a certificate and a key")
        }
        // Each half keeps the access control it was given, so each must pass what a single add
        // checks. An identity's key is read through the pairing, which opens no application-password
        // seal: such an identity is refused rather than stored unsealed.
        for half in [certificate, privateKey] {
            let conditions = AccessConditions(of: half)
            try conditions.checkAvailable(fingersEnrolled: presenceAuthorizer.fingersEnrolled)
            if conditions.contains(.applicationPassword) {
                throw KeychainError(.unimplemented, "an identity with an application password: add its private key and certificate apart")
            }
        }
        let parsed = try Certificate(der: certificate.secret ?? [])
        let material = try KeyMaterial(data: privateKey.secret ?? [], keyClass: .private)
        guard material.applicationLabel == parsed.publicKeyHash else {
            throw KeychainError.param("the private key does not belong to the certificate")
        }
        let stored = try add([privateKey, certificate])
        return Identity(certificate: stored[1], privateKey: stored[0])
    }

    /// The certificate half and the key half of an identity query.
    static func split(_ query: Query) throws -> (Query, Query) {
        var certificateQuery = Query(itemClass: .certificate)
        var keyQuery = Query(itemClass: .key)
        for (name, value) in query.attributes {
            if AttributeSchema.kind(name, for: .certificate) != nil {
                certificateQuery.attributes[name] = value
            } else if AttributeSchema.kind(name, for: .key) != nil {
                keyQuery.attributes[name] = value
            } else {
                throw KeychainError.param("attribute \(name) does not belong to identities")
            }
        }
        keyQuery.attributes[AttributeKey.keyClass] = .int(KeyClass.private.rawValue)
        certificateQuery.rows = query.rows
        certificateQuery.certificateFilter = query.certificateFilter
        certificateQuery.synchronizable = query.synchronizable
        keyQuery.synchronizable = query.synchronizable
        certificateQuery.caseInsensitive = query.caseInsensitive
        keyQuery.caseInsensitive = query.caseInsensitive
        return (certificateQuery, keyQuery)
    }
}
