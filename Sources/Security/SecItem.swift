internal import KeychainCore

/// Adds an item. With a result pointer, returns what the kSecReturn* keys ask for (a reference
/// when none is given, as the reference says).
@discardableResult
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    secStatus {
        var request = try SecItemRequest(attributes)
        try request.checkNoSkip()
        try request.checkAccessControlForWriting()
        guard request.rows == nil, request.limit == nil, request.certificateFilter == nil else {
            throw KeychainError.param("search keys in SecItemAdd")
        }
        if request.synchronizable == .any { throw KeychainError.param("kSecAttrSynchronizableAny in SecItemAdd") }
        if request.synchronizable == .yes { request.attributes[AttributeKey.synchronizable] = .bool(true) }
        let keychain = try request.keychain ?? SecKeychain.defaultKeychain()
        if request.returnCount == 0 { request.returnRef = true }
        if request.itemClass == .identity {
            let identity = try addIdentity(request, to: keychain)
            result?.pointee = SecItemResult.build(identity, request: request, keychain: keychain)
            return
        }
        var item = Item(itemClass: request.itemClass, attributes: request.attributes)
        item.secret = try request.secret ?? valueData(of: request)
        // A SecKey knows its class: a 97-byte P-256 private key would otherwise read as a P-384
        // public one (the X9.63 forms differ only in length).
        if let key = request.valueRef as? SecKey, let material = key.material, item.attributes[AttributeKey.keyClass] == nil {
            item.attributes[AttributeKey.keyClass] = .int(material.keyClass.rawValue)
        }
        let stored = try keychain.store.add(item, presence: request.presence)
        result?.pointee = SecItemResult.build(stored, request: request, keychain: keychain)
    }
}

/// The data a kSecValueRef stands for: a certificate's DER, a key's external representation;
/// nil without one (the item then has no data, as on Apple's systems).
private func valueData(of request: SecItemRequest) throws -> Bytes? {
    switch (request.itemClass, request.valueRef) {
    case (_, nil): return nil
    case (.certificate, let certificate as SecCertificate): return certificate.certificate.der
    case (.key, let key as SecKey): return key.data
    default: throw KeychainError.param("kSecValueRef does not fit kSecClass \(request.itemClass.rawValue)")
    }
}

/// An identity is stored as its certificate and private key, together or not at all.
private func addIdentity(_ request: SecItemRequest, to keychain: SecKeychain) throws -> Identity {
    guard let identity = request.valueRef as? SecIdentity, request.secret == nil else {
        throw KeychainError.param("an identity is added as a SecIdentity in kSecValueRef")
    }
    var certificate = Item(itemClass: .certificate, secret: identity.certificate.certificate.der)
    var key = Item(itemClass: .key, secret: identity.privateKey.data)
    key[AttributeKey.keyClass] = .int(KeyClass.private.rawValue)
    for (name, value) in request.attributes {
        if ItemClass.certificate.has(name) { certificate[name] = value }
        if ItemClass.key.has(name) { key[name] = value }
    }
    return try keychain.store.addIdentity(certificate: certificate, privateKey: key)
}

/// Finds items. One result unless kSecMatchLimit asks for more; several return types give a
/// dictionary per item; a limit above one gives an array.
@discardableResult
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    result?.pointee = nil
    return secStatus {
        let request = try SecItemRequest(query)
        try request.checkReferenceAlone()
        if request.returnCount > 0 && result == nil { throw KeychainError.param("a return type was asked for with no result pointer") }
        let limit: Int?
        switch request.limit ?? .one {
        case .one: limit = 1
        case .count(let n): limit = n
        case .all: limit = nil
        }
        // Without kSecUseKeychain, the search list in order, by the engine's rule for it.
        let keychains = try request.keychain.map { [$0] } ?? SecKeychain.searchList()
        let built = try SearchList.search(keychains, limit: limit) { keychain, remaining in
            try find(request, in: keychain, limit: remaining)
        }.compactMap { $0 }
        guard let result, request.returnCount > 0 else { return }
        if request.limit == nil || request.limit == .one {
            result.pointee = built.first
        } else {
            result.pointee = NSArray(array: built)
        }
    }
}

/// One result per item found (nil where no return type was asked for), so that the search
/// counts items, not results.
private func find(_ request: SecItemRequest, in keychain: SecKeychain, limit: Int?) throws -> [AnyObject?] {
    if request.itemClass == .identity {
        let identities = try keychain.store.findIdentities(
            request.query, limit: limit, includeKeyData: request.returnRef,
            presence: request.presence)
        return identities.map { SecItemResult.build($0, request: request, keychain: keychain) }
    }
    // References to certificates and keys are made from their data.
    let needData =
        request.returnData
        || (request.returnRef && request.itemClass != .genericPassword
            && request.itemClass != .internetPassword)
    let items = try keychain.store.find(request.query, limit: limit, includeSecret: needData, presence: request.presence)
    return items.map { SecItemResult.build($0, request: request, keychain: keychain) }
}

/// Changes every item the query matches. Only real attributes and kSecValueData may be changed.
@discardableResult
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    secStatus {
        // Apple's s3dl_query_update (SecItemDb.c) refuses any match key, kSecMatchLimit included.
        if let key = try SecItemRequest.plain(query).keys.first(where: { $0.hasPrefix("m_") }) {
            throw KeychainError.param("\(key) in SecItemUpdate")
        }
        let request = try SecItemRequest(query)
        try request.checkNoSkip()
        try request.checkReferenceAlone()
        guard request.returnCount == 0 else { throw KeychainError.param("kSecReturn* keys in SecItemUpdate") }
        var changesDictionary = try SecItemRequest.plain(attributesToUpdate)
        guard !changesDictionary.isEmpty else { throw KeychainError.param("nothing to update") }
        guard changesDictionary["class"] == nil else { throw KeychainError.param("kSecClass cannot be updated") }
        changesDictionary["class"] = request.itemClass.rawValue
        let changes = try SecItemRequest(changesDictionary)
        try changes.checkAccessControlForWriting()
        guard changes.returnCount == 0, changes.limit == nil, changes.rows == nil, changes.keychain == nil,
            changes.valueRef == nil, changes.certificateFilter == nil,
            !changes.caseInsensitive, changes.synchronizable != .any
        else { throw KeychainError.param("only attributes and kSecValueData can be updated") }
        var newAttributes = changes.attributes
        if let sync = changes.synchronizable { newAttributes[AttributeKey.synchronizable] = .bool(sync == .yes) }
        let keychain = try request.keychain ?? SecKeychain.defaultKeychain()
        try keychain.store.update(request.query, attributes: newAttributes, secret: changes.secret, presence: request.presence)
    }
}

/// Deletes every item the query matches; for identities, their certificates and private keys.
@discardableResult
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    secStatus {
        let request = try SecItemRequest(query)
        try request.checkNoSkip()
        try request.checkReferenceAlone()
        // Delete acts on every match; securityd refuses any other limit ("match limit not
        // supported by delete", errSecMatchLimitUnsupported, which is errSecParam).
        guard request.limit == nil || request.limit == .all else {
            throw KeychainError.param("match limit not supported by delete")
        }
        let keychain = try request.keychain ?? SecKeychain.defaultKeychain()
        if request.itemClass == .identity {
            try keychain.store.deleteIdentities(request.query, presence: request.presence)
        } else {
            try keychain.store.delete(request.query, presence: request.presence)
        }
    }
}
