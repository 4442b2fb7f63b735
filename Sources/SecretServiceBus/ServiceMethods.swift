import KeychainCore
import SecretServiceItems
import SessionBus

/// org.freedesktop.Secret.Service.
extension SecretService {
    func serviceMethod(_ member: String, _ call: Call) throws {
        let reader = call.reader
        switch member {
        case "OpenSession":
            let algorithm = try reader.string()
            try openSession(algorithm, reader, call)
        case "SearchItems":
            let query = try reader.stringDictionary()
            var unlocked: [String] = [], locked: [String] = []
            // An unused session collection holds nothing: searching it would make its keychain
            // and cost every search a second store's keys, snapshot and queries.
            for collection in collections.all where !collection.isSession || collection.isOpen {
                guard let found = try? collection.store().searchSecretItemRows(query, owner: call.owner) else { continue }
                unlocked += found.unlocked.map(collection.itemPath)
                locked += found.locked.map(collection.itemPath)
            }
            try reply(call) { w in
                try w.objectPaths(unlocked)
                try w.objectPaths(locked)
            }
        case "Unlock":
            let paths = try reader.objectPaths()
            var unlocked: [String] = [], pending: [(String, Collection)] = []
            for path in paths {
                guard let (collection, _) = collections.resolve(path) else { continue }
                if collection.isLocked { pending.append((path, collection)) } else { unlocked.append(path) }
            }
            let prompt = pending.isEmpty ? ObjectPaths.none : try makePrompt(.unlock(pending), for: call)
            try reply(call) { w in
                try w.objectPaths(unlocked)
                try w.objectPath(prompt)
            }
        case "Lock":
            try call.requireUnconfined("lock the user's keychains")
            let paths = try reader.objectPaths()
            var locked: [String] = []
            for path in paths {
                // The session collection's keys are nowhere but here: locking it would lose it.
                guard let (collection, _) = collections.resolve(path), !collection.isSession, let store = try? collection.store() else { continue }
                store.lock()
                locked.append(path)
            }
            noticeLockChanges()
            try reply(call) { w in
                try w.objectPaths(locked)
                try w.objectPath(ObjectPaths.none)
            }
        case "LockService":
            // gnome-keyring's extension: lock everything this service can lock.
            try call.requireUnconfined("lock the user's keychains")
            for collection in collections.all where !collection.isSession { (try? collection.store())?.lock() }
            noticeLockChanges()
            try reply(call)
        case "GetSecrets":
            let paths = try reader.objectPaths()
            let session = try session(try reader.objectPath(), for: call)
            var secrets: [(String, WireSecret)] = []
            // Without a broker, as before: what cannot be read is left out.
            let relayed = Self.relay != nil && call.caller == .unconfined
            try readingSecrets(for: call) {
                for path in paths {
                    // Locked and missing items are left out, as gnome-keyring does; with a broker,
                    // one the person refused (or nobody could be asked about) fails the call, as
                    // GetSecret does, so that the client says why rather than find nothing.
                    guard let (collection, row) = collections.resolve(path), let row else { continue }
                    let read = { try collection.store().secret(row, owner: call.owner) }
                    guard var opened = relayed ? try Self.refusalThrown(read) : try? read() else { continue }
                    // Wiped where it is held: a copy to wipe would be a second buffer, this one kept.
                    defer { opened.secret.wipe() }
                    secrets.append((path, try session.encode(opened.secret, path: ObjectPaths.sessions + session.id, contentType: opened.contentType)))
                }
            }
            try reply(call) { w in
                try w.container(BusType.array, "{o(oayays)}") {
                    for (path, secret) in secrets {
                        try w.container(BusType.dictEntry, "o(oayays)") {
                            try w.objectPath(path)
                            try w.secret(secret)
                        }
                    }
                }
            }
        case "ReadAlias":
            let name = try reader.string()
            let path = collections.alias(name)?.path ?? ObjectPaths.none
            try reply(call) { try $0.objectPath(path) }
        case "SetAlias":
            try call.requireUnconfined("change aliases")
            let name = try reader.string()
            let path = try reader.objectPath()
            guard !name.isEmpty, name.utf8.count <= 255 else { throw ServiceError.invalidArgs("an alias needs a name") }
            if path == ObjectPaths.none {
                try collections.setAlias(name, to: nil)
            } else {
                guard let (collection, row) = collections.resolve(path), row == nil else {
                    throw ServiceError.noSuchObject("no collection \(path)")
                }
                try collections.setAlias(name, to: collection)
            }
            try reply(call)
        case "CreateCollection":
            try call.requireUnconfined("create keychains")
            var label = ""
            try reader.properties { key, signature in
                guard key == "org.freedesktop.Secret.Collection.Label" else { return false }
                guard signature == "s" else { throw ServiceError.invalidArgs("\(key) must be a string") }
                label = try reader.string()
                return true
            }
            let alias = try reader.string()
            if !alias.isEmpty, let existing = collections.alias(alias) {
                try reply(call) { w in
                    try w.objectPath(existing.path)
                    try w.objectPath(ObjectPaths.none)
                }
                return
            }
            let prompt = try makePrompt(.create(label: label, alias: alias), for: call)
            try reply(call) { w in
                try w.objectPath(ObjectPaths.none)
                try w.objectPath(prompt)
            }
        default:
            throw ServiceError.notSupported("unknown method \(member)")
        }
    }

    private func openSession(_ algorithm: String, _ reader: MessageReader, _ call: Call) throws {
        let signature = try reader.variantSignature()
        _ = try reader.enter(BusType.variant, signature)
        let key: Bytes?
        var output: Bytes?
        switch algorithm {
        case "plain":
            key = nil
        case SessionCrypto.algorithm:
            guard signature == "ay" else { throw ServiceError.invalidArgs("\(algorithm) takes the client's public key as ay") }
            let negotiated = try SessionCrypto.negotiate(clientPublic: try reader.bytes())
            key = negotiated.key
            output = negotiated.publicKey
        default:
            throw ServiceError.notSupported("algorithm \(algorithm) is not supported")
        }
        guard sessions.values.filter({ $0.owner == call.sender }).count < Self.sessionsPerClient else {
            throw ServiceError.limitsExceeded("this client has \(Self.sessionsPerClient) open sessions")
        }
        let session = Session(id: nextID("s"), owner: call.sender, key: key)
        sessions[session.id] = session
        do {
            try reply(call) { w in
                if let output {
                    try w.container(BusType.variant, "ay") { try w.bytes(output) }
                } else {
                    try w.container(BusType.variant, "s") { try w.string("") }
                }
                try w.objectPath(ObjectPaths.sessions + session.id)
            }
        } catch {
            sessions[session.id] = nil
            throw error
        }
    }
}
