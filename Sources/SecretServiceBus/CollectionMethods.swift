import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus

/// org.freedesktop.Secret.Collection and org.freedesktop.Secret.Item.
extension SecretService {
    func collection(at path: String) throws -> Collection {
        guard let (collection, row) = collections.resolve(path), row == nil else { throw ServiceError.noSuchObject("no collection \(path)") }
        return collection
    }

    func item(at path: String) throws -> (Collection, Int64) {
        guard let (collection, row) = collections.resolve(path), let row else { throw ServiceError.noSuchObject("no item \(path)") }
        return (collection, row)
    }

    func collectionMethod(_ member: String, _ call: Call) throws {
        let collection = try collection(at: call.path)
        let reader = call.reader
        switch member {
        case "SearchItems":
            let query = try reader.stringDictionary()
            let found = try collection.store().searchSecretItemRows(query, owner: call.owner)
            try reply(call) { try $0.objectPaths((found.unlocked + found.locked).map(collection.itemPath)) }
        case "CreateItem":
            var label = "", attributes: [String: String] = [:]
            try reader.properties { key, signature in
                switch key {
                case "org.freedesktop.Secret.Item.Label":
                    guard signature == "s" else { throw ServiceError.invalidArgs("\(key) must be a string") }
                    label = try reader.string()
                case "org.freedesktop.Secret.Item.Attributes":
                    guard signature == "a{ss}" else { throw ServiceError.invalidArgs("\(key) must be a{ss}") }
                    attributes = try reader.stringDictionary()
                default:
                    return false
                }
                return true
            }
            let wire = try reader.secret()
            let replace = try reader.bool()
            let secret = try session(wire.session, for: call).decode(wire)
            // Stored and answered with the calls that came with it (PendingStores.swift).
            queue(
                PendingStore(
                    call: call, collection: collection, label: label, attributes: attributes, secret: secret,
                    contentType: wire.contentType, replace: replace, access: storedAccess(for: call)))
        case "Delete":
            try call.requireUnconfined("delete keychains")
            guard !collection.isSession else { throw ServiceError.accessDenied("the session collection lasts as long as the service") }
            guard !collections.isLoginOrDefault(collection) else {
                throw ServiceError.accessDenied("\(collection.name) is the login or default keychain; delete it with `security delete-keychain`")
            }
            // The keychain's own password, through a prompt, before anything goes (Prompt.swift).
            let prompt = try makePrompt(.delete(collection), for: call)
            try reply(call) { try $0.objectPath(prompt) }
        default:
            throw ServiceError.notSupported("unknown method \(member)")
        }
    }

    func itemMethod(_ member: String, _ call: Call) throws {
        let (collection, row) = try item(at: call.path)
        let store = try collection.store()
        let reader = call.reader
        switch member {
        case "GetSecret":
            let session = try session(try reader.objectPath(), for: call)
            var opened = try readingSecrets(for: call) { try store.secret(row, owner: call.owner) }
            defer { opened.secret.wipe() }
            let wire = try session.encode(opened.secret, path: ObjectPaths.sessions + session.id, contentType: opened.contentType)
            try reply(call) { try $0.secret(wire) }
        case "SetSecret":
            let wire = try reader.secret()
            var secret = try session(wire.session, for: call).decode(wire)
            defer { secret.wipe() }
            try storing(for: call, access: storedAccess(for: call)) {
                _ = try store.updateSecretItem(row, secret: secret, contentType: wire.contentType, owner: call.owner)
            }
            try reply(call)
            itemChanged(collection, row)
        case "Delete":
            try store.deleteSecretItem(row, owner: call.owner)
            try reply(call) { try $0.objectPath(ObjectPaths.none) }
            emit(collection.path, Interface.collection, "ItemDeleted") { try $0.objectPath(collection.itemPath(row)) }
            emitPropertiesChanged(collection.path, Interface.collection, ["Items"])
        default:
            throw ServiceError.notSupported("unknown method \(member)")
        }
    }

    /// Deletes a keychain the service may delete: not the login or default one, and holding only
    /// items the service manages (called once its password was proven through a prompt).
    func deleteCollection(_ collection: Collection) throws {
        guard !collections.isLoginOrDefault(collection) else {
            throw ServiceError.accessDenied("\(collection.name) is the login or default keychain")
        }
        guard try collection.store().holdsOnlySecretServiceItems() else {
            throw ServiceError.accessDenied(
                "\(collection.name) holds items the Secret Service does not manage (certificates, keys, "
                    + "or items that ask for the user); delete it with `security delete-keychain`")
        }
        (try? collection.store())?.lockAll()
        collection.forget()
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(collection.file + suffix) }
        collections.remove(collection)
        emit(ObjectPaths.root, Interface.service, "CollectionDeleted") { try $0.objectPath(collection.path) }
        emitPropertiesChanged(ObjectPaths.root, Interface.service, ["Collections"])
    }

    func itemChanged(_ collection: Collection, _ row: Int64) {
        emit(collection.path, Interface.collection, "ItemChanged") { try $0.objectPath(collection.itemPath(row)) }
        emitPropertiesChanged(collection.itemPath(row), Interface.item, ["Label", "Attributes", "Modified"])
    }
}
