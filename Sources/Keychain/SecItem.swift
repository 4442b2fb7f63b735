/// Adds an item. With a result pointer, returns what the kSecReturn* keys ask for (a reference
/// when none is given, as the reference says).
@discardableResult
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    secStatus {
        var request = try SecItemRequest(attributes)
        guard request.rows == nil, request.limit == nil else { throw KeychainError.param("search keys in SecItemAdd") }
        if request.synchronizable == .any { throw KeychainError.param("kSecAttrSynchronizableAny in SecItemAdd") }
        if request.synchronizable == .yes { request.attributes["sync"] = .bool(true) }
        let keychain = try request.keychain ?? SecKeychain.defaultKeychain()
        var item = Item(itemClass: request.itemClass, attributes: request.attributes)
        item.secret = request.secret ?? []
        let stored = try keychain.store.add(item)
        if let result {
            if request.returnCount == 0 { request.returnRef = true }
            result.pointee = SecItemResult.build(stored, request: request, keychain: keychain)
        }
    }
}

/// Finds items. One result unless kSecMatchLimit asks for more; several return types give a
/// dictionary per item; a limit above one gives an array.
@discardableResult
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    result?.pointee = nil
    return secStatus {
        let request = try SecItemRequest(query)
        if request.returnCount > 0 && result == nil { throw KeychainError.param("a return type was asked for with no result pointer") }
        let keychain = try request.keychain ?? SecKeychain.defaultKeychain()
        let limit: Int?
        switch request.limit ?? .one {
        case .one: limit = 1
        case .count(let n): limit = n
        case .all: limit = nil
        }
        let items = try keychain.store.find(request.query, limit: limit, includeSecret: request.returnData)
        guard let result, request.returnCount > 0 else { return }
        let built = items.compactMap { SecItemResult.build($0, request: request, keychain: keychain) }
        if request.limit == nil || request.limit == .one {
            result.pointee = built.first
        } else {
            result.pointee = NSArray(array: built)
        }
    }
}

/// Changes every item the query matches. Only real attributes and kSecValueData may be changed.
@discardableResult
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    secStatus {
        let request = try SecItemRequest(query)
        guard request.returnCount == 0 else { throw KeychainError.param("kSecReturn* keys in SecItemUpdate") }
        guard !attributesToUpdate.isEmpty else { throw KeychainError.param("nothing to update") }
        guard attributesToUpdate["class"] == nil else { throw KeychainError.param("kSecClass cannot be updated") }
        var changesDictionary = attributesToUpdate
        changesDictionary["class"] = request.itemClass.rawValue
        let changes = try SecItemRequest(changesDictionary)
        guard changes.returnCount == 0, changes.limit == nil, changes.rows == nil, changes.keychain == nil,
              !changes.caseInsensitive, changes.synchronizable != .any
        else { throw KeychainError.param("only attributes and kSecValueData can be updated") }
        var newAttributes = changes.attributes
        if let sync = changes.synchronizable { newAttributes["sync"] = .bool(sync == .yes) }
        let keychain = try request.keychain ?? SecKeychain.defaultKeychain()
        try keychain.store.update(request.query, attributes: newAttributes, secret: changes.secret)
    }
}

/// Deletes every item the query matches.
@discardableResult
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    secStatus {
        let request = try SecItemRequest(query)
        guard request.limit == nil else { throw KeychainError.param("kSecMatchLimit in SecItemDelete") }
        let keychain = try request.keychain ?? SecKeychain.defaultKeychain()
        try keychain.store.delete(request.query)
    }
}
