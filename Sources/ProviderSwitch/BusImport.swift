import CSDBus
import Glibc
import KeychainCore
import KeychainPresence
import SecretServiceBus
import SecretServiceItems
import SessionBus

/// Another Secret Service provider on the session bus (gnome-keyring-daemon, KWallet's,
/// KeePassXC's, or this program serving other keychains), seen as a client sees it.
struct RemoteProvider {
    static let service = "org.freedesktop.Secret.Service"
    static let collection = "org.freedesktop.Secret.Collection"
    static let item = "org.freedesktop.Secret.Item"

    let client: BusClient
    /// The bus name it is called at (org.freedesktop.secrets, org.gnome.keyring, a unique name).
    let name: String
    /// How long a prompt of its own may take (a person types a password into its dialog).
    let promptTimeout: Double
    private(set) var session = ObjectPaths.none

    init(client: BusClient, name: String, promptTimeout: Double) {
        self.client = client
        self.name = name
        self.promptTimeout = promptTimeout
    }

    /// A plain session: both ends are the user's own processes on the user's own bus, which only
    /// the user's processes can watch; every provider supports it.
    mutating func openSession() throws {
        let reply = try client.call(name, ObjectPaths.root, Self.service, "OpenSession") { w in
            try w.string("plain")
            try w.container(BusType.variant, "s") { try w.string("") }
        }
        let reader = reply.reader
        try reader.skip(signature: "v")
        session = try reader.objectPath()
    }

    func closeSession() {
        guard session != ObjectPaths.none else { return }
        _ = try? client.call(name, session, "org.freedesktop.Secret.Session", "Close")
    }

    func collections() throws -> [String] {
        try client.property(name, ObjectPaths.root, Self.service, "Collections") { reader, _ in try reader.objectPaths() }
    }

    func alias(_ alias: String) -> String? {
        guard let reply = try? client.call(name, ObjectPaths.root, Self.service, "ReadAlias", { try $0.string(alias) }),
            let path = try? reply.reader.objectPath(), path != ObjectPaths.none
        else { return nil }
        return path
    }

    struct CollectionInfo {
        var path: String
        var label = ""
        var locked = false
        var items: [String] = []

        /// The last element of its path (`login`, `kdewallet`, `Passwords`).
        var element: String { String(path.split(separator: "/").last ?? "") }
    }

    /// One object's properties of `interface`, each handed to `read` with the reader positioned
    /// on its value; `read` answers false for one it skips.
    private func properties(
        of path: String, _ interface: String, _ read: (_ key: String, _ signature: String, _ reader: MessageReader) throws -> Bool
    ) throws {
        let reply = try client.call(name, path, "org.freedesktop.DBus.Properties", "GetAll") { try $0.string(interface) }
        let reader = reply.reader
        try reader.properties { key, signature in try read(key, signature, reader) }
    }

    func collection(_ path: String) throws -> CollectionInfo {
        var info = CollectionInfo(path: path)
        try properties(of: path, Self.collection) { key, signature, reader in
            switch (key, signature) {
            case ("Label", "s"): info.label = try reader.string()
            case ("Locked", "b"): info.locked = try reader.bool()
            case ("Items", "ao"): info.items = try reader.objectPaths()
            default: return false
            }
            return true
        }
        return info
    }

    struct ItemInfo {
        var path: String
        var label = ""
        var attributes: [String: String] = [:]
        var created: UInt64 = 0
        var modified: UInt64 = 0
        var locked = false
        var secret: Bytes?
        var contentType = KeychainStore.defaultContentType
    }

    func item(_ path: String) throws -> ItemInfo {
        var info = ItemInfo(path: path)
        try properties(of: path, Self.item) { key, signature, reader in
            switch (key, signature) {
            case ("Label", "s"): info.label = try reader.string()
            case ("Attributes", "a{ss}"): info.attributes = try reader.stringDictionary()
            case ("Created", "t"): info.created = try reader.uint64()
            case ("Modified", "t"): info.modified = try reader.uint64()
            case ("Locked", "b"): info.locked = try reader.bool()
            default: return false
            }
            return true
        }
        return info
    }

    /// Unlocks the objects through the provider's own prompt when it asks for one; whether all
    /// of them are unlocked.
    func unlock(_ paths: [String]) throws -> Bool {
        let reply = try client.call(name, ObjectPaths.root, Self.service, "Unlock") { try $0.objectPaths(paths) }
        let reader = reply.reader
        let unlocked = try reader.objectPaths()
        let prompt = try reader.objectPath()
        if prompt == ObjectPaths.none { return Set(unlocked) == Set(paths) }
        guard let done = try client.runPrompt(name, prompt, timeout: promptTimeout) else { return false }
        return Set(unlocked + done).isSuperset(of: paths)
    }

    /// The secrets of the items (locked ones are left out, as the spec says), by item path.
    func secrets(_ paths: [String]) throws -> [String: (value: Bytes, contentType: String)] {
        var out: [String: (value: Bytes, contentType: String)] = [:]
        var start = 0
        while start < paths.count {
            let batch = Array(paths[start..<min(start + 64, paths.count)])
            start += batch.count
            let reply = try client.call(name, ObjectPaths.root, Self.service, "GetSecrets") { w in
                try w.objectPaths(batch)
                try w.objectPath(session)
            }
            let reader = reply.reader
            _ = try reader.enter(BusType.array, "{o(oayays)}")
            while try reader.enter(BusType.dictEntry, "o(oayays)") {
                let path = try reader.objectPath()
                let secret = try reader.secret()
                if secret.parameters.isEmpty { out[path] = (secret.value, secret.contentType) }
                try reader.exit()
            }
            try reader.exit()
        }
        return out
    }

    /// A new collection through the provider's own prompt (it asks for the new password); its path.
    func createCollection(label: String) throws -> String? {
        let reply = try client.call(name, ObjectPaths.root, Self.service, "CreateCollection") { w in
            try w.container(BusType.array, "{sv}") {
                try w.container(BusType.dictEntry, "sv") {
                    try w.string(Self.collection + ".Label")
                    try w.container(BusType.variant, "s") { try w.string(label) }
                }
            }
            try w.string("")
        }
        let reader = reply.reader
        let path = try reader.objectPath()
        let prompt = try reader.objectPath()
        if path != ObjectPaths.none { return path }
        guard prompt != ObjectPaths.none, let made = try client.runPrompt(name, prompt, timeout: promptTimeout) else { return nil }
        return made.first
    }

    /// An app's secret from the provider's own portal backend (gnome-keyring's keeps it where its
    /// Secret Service does not serve it): written to a pipe, as xdg-desktop-portal asks for it.
    func portalSecret(of appID: String) throws -> Bytes {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw ServiceError.failed("no pipe: \(String(cString: strerror(errno)))") }
        defer { close(fds[0]) }
        var writeEnd = fds[1]
        let reply: BusReply
        do {
            reply = try client.call(name, SecretPortal.path, SecretPortal.interface, "RetrieveSecret", timeout: promptTimeout) { w in
                try w.objectPath("/org/freedesktop/portal/desktop/request/keychain_secret_service/import")
                try w.string(appID)
                try w.verify(sd_bus_message_append_basic(w.message, CChar(UInt8(ascii: "h")), &writeEnd))
                try w.container(BusType.array, "{sv}") {}
            }
        } catch {
            close(writeEnd)
            throw error
        }
        close(writeEnd)
        var response: UInt32 = 2
        _ = sd_bus_message_read_basic(reply.message, CChar(UInt8(ascii: "u")), &response)
        guard response == 0 else { throw ServiceError.failed("its portal answered \(response)") }
        var secret = Bytes()
        var buffer = Bytes(repeating: 0, count: 256)
        defer { buffer.wipe() }
        while secret.count <= 4096 {
            var poller = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 2000) > 0 else { break }
            let n = read(fds[0], &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            secret += buffer[..<n]
        }
        guard !secret.isEmpty else { throw ServiceError.failed("its portal wrote no secret") }
        return secret
    }

    func search(_ collection: String, _ attributes: [String: String]) throws -> [String] {
        let reply = try client.call(name, collection, Self.collection, "SearchItems") { try $0.stringDictionary(attributes) }
        return try reply.reader.objectPaths()
    }

    func createItem(in collection: String, label: String, attributes: [String: String], secret: Bytes, contentType: String) throws {
        let reply = try client.call(name, collection, Self.collection, "CreateItem") { w in
            try w.container(BusType.array, "{sv}") {
                try w.container(BusType.dictEntry, "sv") {
                    try w.string(Self.item + ".Label")
                    try w.container(BusType.variant, "s") { try w.string(label) }
                }
                try w.container(BusType.dictEntry, "sv") {
                    try w.string(Self.item + ".Attributes")
                    try w.container(BusType.variant, "a{ss}") { try w.stringDictionary(attributes) }
                }
            }
            try w.secret(WireSecret(session: session, parameters: [], value: secret, contentType: contentType))
            try w.bool(false)
        }
        let reader = reply.reader
        let item = try reader.objectPath()
        let prompt = try reader.objectPath()
        if item == ObjectPaths.none {
            guard prompt != ObjectPaths.none, try client.runPrompt(name, prompt, timeout: promptTimeout) != nil else {
                throw ServiceError.accessDenied("the item was not stored: its prompt was dismissed")
            }
        }
    }
}

extension MessageReader {
    func skip(signature: String) throws {
        let rc = sd_bus_message_skip(message, signature)
        if rc < 0 { throw ServiceError.invalidArgs("cannot read the reply: \(String(cString: strerror(-rc)))") }
    }
}

/// What `import` and `export` count, and the lines they print. Those lines show names another
/// provider or program chose (wallets, folders, keys, labels, a program's name): escaped for
/// the terminal (TerminalText), here where every one of them passes.
final class TransferTally {
    let verb: String
    let dryRun: Bool
    private(set) var added = 0, alreadyThere = 0, failed = 0, skipped = 0

    /// What was counted, put back when a batch that counted it is rolled back.
    var counts: (added: Int, alreadyThere: Int, failed: Int) {
        get { (added, alreadyThere, failed) }
        set { (added, alreadyThere, failed) = newValue }
    }

    init(verb: String, dryRun: Bool) {
        self.verb = verb
        self.dryRun = dryRun
    }

    func fail(_ place: String, _ why: String, count: Int = 1) {
        failed += count
        fputs("keychain-secret-service: \(verb): " + TerminalText.escaped("\(place): \(why)") + "\n", stderr)
    }

    func note(_ line: String) {
        fputs("keychain-secret-service: \(verb): " + TerminalText.escaped(line) + "\n", stderr)
    }

    func skip(_ place: String, _ why: String) {
        skipped += 1
        note("\(place): skipped: \(why)")
    }

    func count(added isNew: Bool, _ place: String) {
        if isNew { added += 1 } else { alreadyThere += 1 }
        if dryRun { list(isNew ? "would add" : "already there", place) }
    }

    /// A dry run's line on standard output.
    func list(_ what: String, _ text: String) {
        print(what.padded(14) + TerminalText.escaped(text))
    }

    func summary() {
        let rest = (skipped == 0 ? "" : ", \(skipped) skipped") + (failed == 0 ? "" : ", \(failed) could not come")
        if dryRun {
            print("\(verb): dry run: \(added) would be added, \(alreadyThere) already there\(rest); nothing was changed")
        } else {
            print("\(verb): \(added) added, \(alreadyThere) already there\(rest)")
        }
    }
}

extension String {
    func padded(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}

/// Passwords asked through pinentry, as the service's prompts ask them: a keychain's to unlock
/// it, a new keychain's (twice).
package struct PasswordAsker {
    let program: String
    let timeout: Double

    package init(program: String, timeout: Double) {
        (self.program, self.timeout) = (program, timeout)
    }

    func ask(title: String, description: String, error: String? = nil, twice: Bool = false) throws -> Bytes {
        let conversation: PinentryConversation
        do {
            conversation = try PinentryConversation(program: program, errors: STDERR_FILENO)
        } catch let refused as SystemPrompter.Refused {
            throw KeychainError(.interactionNotAllowed, "\(refused)")
        }
        defer { conversation.stop() }
        // pinentry-curses and pinentry-tty draw the description on a terminal; it names wallets
        // and collections another provider chose.
        conversation.ask(
            title: title, description: TerminalText.escaped(description), prompt: "Password:", error: error, repeatPrompt: twice ? "Repeat:" : nil)
        switch conversation.wait(until: SystemClock.monotonic() + timeout) {
        case .passphrase(let password) where !password.isEmpty:
            return password
        case .passphrase(var password):
            password.wipe()
            throw KeychainError(.userCanceled, "no password was given")
        case .cancelled:
            throw KeychainError(.userCanceled, "the password dialog was dismissed")
        case .failed, .confirmed, nil:
            throw KeychainError(.interactionNotAllowed, "\(program) gave no password")
        }
    }

    /// A keychain unlocked in the kernel (for every front end), its password asked up to three times.
    func unlock(_ store: KeychainStore, name: String, why: String) throws {
        var error: String?
        for _ in 0..<3 {
            var password = try ask(title: "Unlock keychain", description: "\(why) Enter the password of the keychain \u{201C}\(name)\u{201D}.", error: error)
            defer { password.wipe() }
            do {
                try store.unlock(password: password)
                return
            } catch let failure as KeychainError where failure.code == .authFailed {
                error = "Wrong password; try again."
            }
        }
        throw KeychainError(.authFailed, "the keychain \(name) stayed locked: three wrong passwords")
    }
}

/// `keychain-secret-service import [--from NAME] [--dry-run]`: every collection and item of a
/// running provider into keychains. The provider's `login` collection (or, where it has none,
/// the one its `default` alias names: KWallet's kdewallet, KeePassXC's database) goes to the login
/// keychain; every other collection to the keychain of its name, made (its password asked through
/// pinentry) when missing and labelled as the collection was. Each item keeps its label,
/// attributes, secret, content type and dates; an item already there (same label, attributes and
/// secret) is not added again, so a second run changes nothing.
package struct BusImport {
    let from: String
    /// Whether the provider was named (--from): then even another keychain-secret-service (one
    /// serving another user's HOME on this bus) is read.
    var named = false
    let dryRun: Bool
    let asker: PasswordAsker
    let promptTimeout: Double

    package init(from: String, named: Bool = false, dryRun: Bool, asker: PasswordAsker, promptTimeout: Double) {
        (self.from, self.named, self.dryRun, self.asker, self.promptTimeout) = (from, named, dryRun, asker, promptTimeout)
    }

    /// The keychain a collection goes to.
    static func keychain(for collection: RemoteProvider.CollectionInfo, login: Bool) -> String {
        if login { return KeychainFile.loginPath() }
        return KeychainFile.resolve(keychainName(element: collection.element))
    }

    /// A collection's path element as a keychain name: gnome-keyring's and this service's `_xx`
    /// escapes undone where they give a letter, digit, `-`, `.` or space; else the element as it is.
    static func keychainName(element: String) -> String {
        var out = ""
        var bytes = Array(element.utf8)[...]
        while let byte = bytes.first {
            if byte == UInt8(ascii: "_"), bytes.count >= 3,
                let value = UInt8(String(decoding: bytes.dropFirst().prefix(2), as: UTF8.self), radix: 16),
                (value >= 0x30 && value <= 0x39) || (value >= 0x41 && value <= 0x5a) || (value >= 0x61 && value <= 0x7a)
                    || value == UInt8(ascii: "-") || value == UInt8(ascii: ".") || value == UInt8(ascii: " ") || value == UInt8(ascii: "_")
            {
                out.unicodeScalars.append(Unicode.Scalar(value))
                bytes = bytes.dropFirst(3)
            } else {
                out.unicodeScalars.append(Unicode.Scalar(byte))
                bytes = bytes.dropFirst()
            }
        }
        if out.isEmpty || out.hasPrefix(".") { return element.isEmpty ? "imported" : "_" + element }
        return out
    }

    /// Runs the import; the exit status (0, or 1 when anything could not come).
    package func run(client: BusClient) -> Int32 {
        let tally = TransferTally(verb: "import", dryRun: dryRun)
        guard let peer = client.peer(from) else {
            tally.note("nothing provides \(from) on the session bus")
            return 1
        }
        guard peer.uid == getuid() else {
            tally.note("\(from) is provided by \(peer.shown) of uid \(peer.uid), not yours; nothing was read")
            return 1
        }
        if peer.isKeychainService && !named {
            tally.note(
                "\(from) is provided by keychain-secret-service (pid \(peer.pid)): these are the keychain's own items; nothing to import (name it with --from to read it all the same)"
            )
            return 0
        }
        if KWalletDaemon.isKWallet(peer) {
            // KWallet's Secret Service shows its own entries partly or not at all: its own API
            // shows them all, on the same connection.
            let service = KWalletDaemon.objectPath(for: from) != nil ? from : KWalletDaemon.service(of: peer)
            guard let kwallet = client.peer(service), kwallet.pid == peer.pid else {
                tally.note("\(from) is provided by \(peer.shown), which does not answer \(service): its wallets cannot be read whole; nothing was read")
                return 1
            }
            return KWalletImport(importer: self, service: service).run(client: client, peer: kwallet)
        }
        var provider = RemoteProvider(client: client, name: peer.uniqueName, promptTimeout: promptTimeout)
        do {
            try provider.openSession()
        } catch {
            tally.note("\(from) (\(peer.shown)) does not answer as a Secret Service: \(error)")
            return 1
        }
        defer { provider.closeSession() }
        var paths: [String]
        do {
            // login first: the keychain the others' defaults and the credential helpers lean on.
            paths = try provider.collections().sorted { a, b in
                let (x, y) = (a.hasSuffix("/login"), b.hasSuffix("/login"))
                return x != y ? x : a < b
            }
        } catch {
            tally.note("cannot list the collections of \(peer.shown): \(error)")
            return 1
        }
        let defaultPath = provider.alias("default")
        let hasLogin = paths.contains { $0.split(separator: "/").last == "login" }
        var defaultTarget: String?
        for path in paths {
            let info: RemoteProvider.CollectionInfo
            do {
                info = try provider.collection(path)
            } catch {
                tally.fail(path, "\(error)")
                continue
            }
            if info.element == SessionCollection.name {
                if !info.items.isEmpty { tally.note("\(path): the session collection (kept only while \(peer.command) runs) is left out") }
                continue
            }
            let isLogin = info.element == "login" || (!hasLogin && path == defaultPath)
            let target = Self.keychain(for: info, login: isLogin)
            if path == defaultPath, !isLogin { defaultTarget = target }
            let store = importCollection(info, into: target, provider: provider, peer: peer, tally: tally)
            if isLogin { importPortalSecrets(provider: provider, collection: info.path, into: store, peer: peer, tally: tally) }
        }
        if let defaultTarget { respectDefault(defaultTarget, peer: peer, tally: tally) }
        tally.summary()
        return tally.failed == 0 ? 0 : 1
    }

    /// One collection into its keychain; the keychain (nil when it could not be opened, or in a
    /// dry run when it does not exist yet).
    @discardableResult
    private func importCollection(
        _ start: RemoteProvider.CollectionInfo, into target: String, provider: RemoteProvider,
        peer: BusClient.Peer, tally: TransferTally
    ) -> KeychainStore? {
        var info = start
        let shown = info.label.isEmpty ? info.element : info.label
        let place = "\(peer.command)'s \u{201C}\(shown)\u{201D}"
        do {
            if info.locked {
                guard try provider.unlock([info.path]) else {
                    tally.fail(place, "locked, and its unlock prompt was dismissed; nothing of it came")
                    return nil
                }
                info = try provider.collection(info.path)
            }
        } catch {
            tally.fail(place, "cannot unlock it: \(error)")
            return nil
        }
        if info.items.isEmpty && !KeychainFile.exists(target) { return nil }
        var items: [RemoteProvider.ItemInfo] = []
        for path in info.items {
            do {
                items.append(try provider.item(path))
            } catch let error as BusCallError where error.isNoSuchObject {
                // gnome-keyring lists its portal's per-app keys among a collection's items, but
                // serves no object for them: they come through its portal (importPortalSecrets).
                tally.skip("\(place): \(path)", "listed, but \(peer.command) serves no such item")
            } catch {
                tally.fail("\(place): \(path)", "\(error)")
            }
        }
        let stillLocked = items.filter(\.locked).map(\.path)
        if !stillLocked.isEmpty { _ = try? provider.unlock(stillLocked) }
        do {
            let secrets = try provider.secrets(items.map(\.path))
            for index in items.indices {
                if let secret = secrets[items[index].path] {
                    items[index].secret = secret.value
                    items[index].contentType = secret.contentType.isEmpty ? KeychainStore.defaultContentType : secret.contentType
                }
            }
        } catch {
            tally.fail(place, "cannot read its secrets: \(error)")
            return nil
        }
        defer { for index in items.indices { items[index].secret?.wipe() } }
        let store: KeychainStore?
        do {
            store = try keychain(target, label: info.label, from: place, tally: tally)
        } catch {
            tally.fail("\(place) -> \(target)", KeychainErrorText.of(error))
            return nil
        }
        func bring(syncsNewItems: Bool? = nil) {
            // One index for the collection: look-alikes (one attribute set, many secrets) are
            // read once, not once for each item that shares their set.
            guard var seen = try? SecretImportIndex() else {
                tally.fail(place, "cannot make a random key")
                return
            }
            for item in items {
                let itemPlace = "\(place): " + (item.label.isEmpty ? item.path : "\u{201C}\(item.label)\u{201D}")
                guard let secret = item.secret else {
                    tally.fail(itemPlace, "locked: its secret could not be read")
                    continue
                }
                guard let store else {
                    tally.count(added: true, itemPlace)
                    continue
                }
                do {
                    if try Self.holds(store, item, secret, index: &seen) {
                        tally.count(added: false, itemPlace)
                    } else {
                        if !dryRun {
                            _ = try store.importSecretItem(
                                label: item.label, attributes: item.attributes, secret: secret, contentType: item.contentType,
                                created: item.created, modified: item.modified, syncsNewItems: syncsNewItems, index: &seen)
                        }
                        tally.count(added: true, itemPlace)
                    }
                } catch {
                    tally.fail(itemPlace, KeychainErrorText.of(error))
                    // SQLite rolled the batch back with it (a full disk): the rest cannot be stored.
                    if store.db.lostItsTransaction { return }
                }
            }
        }
        guard let store, !dryRun else {
            bring()
            return store
        }
        // One transaction for the whole collection (a batch), as for a keyring's file: one commit
        // instead of one per item, and an import that cannot commit leaves none of it. An item that
        // fails is undone alone, said, and the others go on.
        let before = tally.counts
        do {
            // A setting too locked to read now is asked again for each item.
            try store.batch { bring(syncsNewItems: store.readSyncDefault()) }
        } catch {
            // Not committed: every item of it could not come, said once.
            tally.counts = before
            tally.fail("\(place) -> \(target)", "nothing of it was stored: \(KeychainErrorText.of(error))", count: items.count)
        }
        return store
    }

    /// The Flatpak apps of this user: the folders of ~/.var/app named as app ids.
    static func flatpakApps() -> [String] {
        var apps: [String] = []
        guard let folder = opendir(KeychainFile.homeDirectory() + "/.var/app") else { return [] }
        defer { closedir(folder) }
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if !name.hasPrefix("."), Caller.isAppID(name) { apps.append(name) }
        }
        return apps.sorted()
    }

    /// Each Flatpak app's portal secret (the key of its own encrypted store), as the provider's
    /// portal keeps it in its login collection, becomes the app's item in the login keychain, where
    /// this service's portal finds it: the app opens its store after the switch.
    private func importPortalSecrets(
        provider: RemoteProvider, collection: String, into store: KeychainStore?,
        peer: BusClient.Peer, tally: TransferTally
    ) {
        for app in Self.flatpakApps() {
            let attributes = [SecretPortal.appIDAttribute: app]
            guard let found = try? provider.search(collection, attributes), !found.isEmpty else { continue }
            let place = "\(peer.command)'s portal secret of \(app)"
            do {
                var secret = try provider.portalSecret(of: app)
                defer { secret.wipe() }
                guard let store else {
                    tally.count(added: true, place)
                    continue
                }
                if let own = try store.searchSecretItems(attributes, owner: app).unlocked.first(where: { $0.attributes == attributes }) {
                    var kept = try store.secretItem(own.row, includeSecret: true, owner: app).secret ?? []
                    defer { kept.wipe() }
                    if kept == secret {
                        tally.count(added: false, place)
                    } else {
                        tally.fail(place, "the keychain already holds another secret for \(app); it is kept")
                    }
                    continue
                }
                if !dryRun {
                    _ = try store.addSecretItem(
                        label: "Portal secret of \(app)", attributes: attributes, secret: secret,
                        contentType: "application/octet-stream", replace: false, owner: app)
                }
                tally.count(added: true, place)
            } catch {
                tally.fail(place, KeychainErrorText.of(error))
            }
        }
    }

    /// Whether the keychain has the item already. gnome-keyring gives an item stored without an
    /// `xdg:schema` one (org.freedesktop.Secret.Generic) once it has read its file again, so an
    /// item brought before that, without it, is the same item.
    static func holds(_ store: KeychainStore, _ item: RemoteProvider.ItemInfo, _ secret: Bytes, index: inout SecretImportIndex) throws -> Bool {
        if try store.holdsSecretItem(label: item.label, attributes: item.attributes, secret: secret, index: &index) { return true }
        guard item.attributes["xdg:schema"] != nil else { return false }
        var without = item.attributes
        without["xdg:schema"] = nil
        return try store.holdsSecretItem(label: item.label, attributes: without, secret: secret, index: &index)
    }

    /// The keychain at `path`, unlocked, made when missing; nil in a dry run when it is missing
    /// or locked (everything would be added).
    func keychain(_ path: String, label: String, from place: String, tally: TransferTally) throws -> KeychainStore? {
        let name =
            KeychainFile.sameFile(path, KeychainFile.loginPath()) || path == KeychainFile.loginPath()
            ? "login" : String(path.split(separator: "/").last ?? "").replacingSuffix(".keychain-db")
        guard KeychainFile.exists(path) else {
            if dryRun {
                tally.list("would create", "keychain \(path)")
                return nil
            }
            let description =
                name == "login"
                ? "\(place) goes to your login keychain, which is made now. Choose its password: your login password, so that it unlocks when you log in."
                : "\(place) goes to a new keychain \u{201C}\(name)\u{201D}. Choose its password."
            var password = try asker.ask(title: "New keychain", description: description, twice: true)
            defer { password.wipe() }
            let store = try KeychainStore.create(at: path, password: password)
            try? SearchList.add(path)
            if !label.isEmpty && label != name { try? store.setCollectionLabel(label) }
            tally.note("created the keychain \(path)")
            return store
        }
        let store = try KeychainStore.open(at: path, storage: .kernel)
        if !store.status.whenUnlocked {
            if dryRun { return nil }
            try asker.unlock(store, name: name, why: "\(place) is to be brought into it.")
        }
        return store
    }

    /// The provider's default collection, once imported, is the default keychain (the Secret
    /// Service's `default` alias), unless the user chose one already: as `security import-secrets`
    /// does with gnome-keyring's `default` file.
    private func respectDefault(_ path: String, peer: BusClient.Peer, tally: TransferTally) {
        guard KeychainFile.exists(path), !KeychainFile.sameFile(KeychainFile.defaultPath(), path) else { return }
        let chosen = KeychainFile.environment("KEYCHAIN_PATH") != nil || KeychainFile.exists(KeychainFile.defaultChoiceFile())
        if chosen {
            tally.note("\(peer.command)'s default collection is \(path); the default keychain stays \(KeychainFile.defaultPath()), as you chose it")
        } else if dryRun {
            tally.list("would make", "\(path) the default keychain (\(peer.command)'s default collection)")
        } else if (try? KeychainFile.setDefaultPath(path)) != nil {
            tally.note("\(path) is now the default keychain, as its collection was \(peer.command)'s default")
        }
    }
}

/// `keychain-secret-service export --to NAME [--dry-run]`: the way back. Every keychain's Secret
/// Service items go into another running provider: the login keychain into its `login`
/// collection (else the one its `default` alias names), another keychain into the collection of
/// the same label or name, made through the provider's own prompt when missing. An item already
/// there (same label, attributes and secret) is not stored again. Items a sandboxed app stored are
/// left out (the other provider would show them to every program), except the portal's
/// per-app secrets, which gnome-keyring's portal keeps the same way.
package struct BusExport {
    let to: String
    let dryRun: Bool
    let asker: PasswordAsker
    let promptTimeout: Double

    package init(to: String, dryRun: Bool, asker: PasswordAsker, promptTimeout: Double) {
        (self.to, self.dryRun, self.asker, self.promptTimeout) = (to, dryRun, asker, promptTimeout)
    }

    package func run(client: BusClient) -> Int32 {
        let tally = TransferTally(verb: "export", dryRun: dryRun)
        guard let peer = client.peer(to) else {
            tally.note("nothing provides \(to) on the session bus; start the provider first (gnome-keyring-daemon --start --components=secrets)")
            return 1
        }
        guard peer.uid == getuid() else {
            tally.note("\(to) is provided by \(peer.shown) of uid \(peer.uid), not yours; nothing was written")
            return 1
        }
        guard !peer.isKeychainService else {
            tally.note(
                "\(to) is provided by keychain-secret-service (pid \(peer.pid)), which serves these keychains: run `keychain-secret-service disable` first")
            return 1
        }
        // KWallet's entries go back through its own API, folder, key, type and bytes; its Secret
        // Service (on the same connection) takes the other items.
        var kwallet: KWalletDaemon?
        if KWalletDaemon.isKWallet(peer) {
            let service = KWalletDaemon.objectPath(for: to) != nil ? to : KWalletDaemon.service(of: peer)
            guard let path = KWalletDaemon.objectPath(for: service), let named = client.peer(service), named.pid == peer.pid else {
                tally.note("\(to) is provided by \(peer.shown), which does not answer \(KWalletDaemon.service(of: peer)); nothing was written")
                return 1
            }
            kwallet = KWalletDaemon(client: client, name: named.uniqueName, path: path, promptTimeout: promptTimeout)
        }
        var provider = RemoteProvider(client: client, name: peer.uniqueName, promptTimeout: promptTimeout)
        var remote: [RemoteProvider.CollectionInfo]?
        do {
            try provider.openSession()
            remote = try provider.collections().map { try provider.collection($0) }
        } catch {
            if kwallet == nil {
                tally.note("\(to) (\(peer.shown)) does not answer as a Secret Service: \(error)")
                return 1
            }
            tally.note("\(peer.shown) does not answer as a Secret Service (\(error)): only KWallet's entries can go")
        }
        defer { provider.closeSession() }
        let defaultPath = remote == nil ? nil : provider.alias("default")
        for file in KeychainFile.list() {
            exportKeychain(file, remote: remote, defaultPath: defaultPath, provider: provider, kwallet: kwallet, peer: peer, tally: tally)
        }
        tally.summary()
        return tally.failed == 0 ? 0 : 1
    }

    private func exportKeychain(
        _ file: String, remote: [RemoteProvider.CollectionInfo]?, defaultPath: String?, provider: RemoteProvider,
        kwallet: KWalletDaemon?, peer: BusClient.Peer, tally: TransferTally
    ) {
        let isLogin = KeychainFile.sameFile(file, KeychainFile.loginPath())
        let name = isLogin ? "login" : String(file.split(separator: "/").last ?? "").replacingSuffix(".keychain-db")
        let store: KeychainStore
        var items: [SecretItem] = []
        var label = name
        do {
            store = try KeychainStore.open(at: file, storage: .kernel)
            label = (try? store.collectionLabel()) ?? name
            if !store.status.whenUnlocked {
                try asker.unlock(store, name: name, why: "Its items are to be copied into \(peer.command).")
            }
            items = try exportable(store, name: name, tally: tally)
        } catch {
            tally.fail("keychain \(name)", KeychainErrorText.of(error))
            return
        }
        defer { for index in items.indices { items[index].secret?.wipe() } }
        let place = "keychain \(name) -> \(peer.command)"
        if let kwallet {
            exportKWalletEntries(store, wallet: isLogin ? "kdewallet" : name, daemon: kwallet, place: place, tally: tally)
            items.removeAll { KWalletDaemon.isEntryItem($0.attributes) }
        }
        if items.isEmpty { return }
        guard let remote else {
            tally.fail(
                place, "\(peer.command)'s Secret Service is off (kwalletrc: [org.freedesktop.secrets] apiEnabled): these items cannot go", count: items.count)
            return
        }
        var target =
            isLogin
            ? remote.first { $0.element == "login" } ?? remote.first { $0.path == defaultPath }
            : remote.first { $0.label == label || $0.element == ObjectPaths.element(for: name) }
        do {
            if target == nil {
                if dryRun {
                    tally.list("would create", "\(peer.command)'s collection \u{201C}\(label)\u{201D}")
                    for item in items { tally.count(added: true, "\(place): \u{201C}\(item.label)\u{201D}") }
                    return
                }
                guard let made = try provider.createCollection(label: label) else {
                    tally.fail(place, "\(peer.command) made no collection \u{201C}\(label)\u{201D}: its prompt was dismissed")
                    return
                }
                target = try provider.collection(made)
            }
            guard var collection = target else { return }
            if collection.locked {
                guard try provider.unlock([collection.path]) else {
                    tally.fail(place, "\(peer.command)'s \u{201C}\(collection.label)\u{201D} is locked, and its unlock prompt was dismissed")
                    return
                }
                collection = try provider.collection(collection.path)
            }
            var labels: [String: [String]]?
            for item in items {
                let itemPlace = "\(place): \u{201C}\(item.label)\u{201D}"
                guard let secret = item.secret else { continue }
                do {
                    if try holds(provider, collection.path, item, secret, labels: &labels) {
                        tally.count(added: false, itemPlace)
                    } else {
                        if !dryRun {
                            try provider.createItem(
                                in: collection.path, label: item.label, attributes: item.attributes, secret: secret,
                                contentType: item.contentType)
                        }
                        tally.count(added: true, itemPlace)
                    }
                } catch {
                    tally.fail(itemPlace, "\(error)")
                }
            }
        } catch {
            tally.fail(place, "\(error)")
        }
    }

    /// Whether the provider's collection already has the item: the same label and secret, and
    /// every attribute of ours, beside those the provider adds of its own (gnome-keyring an
    /// `xdg:schema` once it has read its file again, KeePassXC Title, UserName, Path, Uuid...).
    /// An item without attributes, which a search cannot single out (KWallet's never returns
    /// one), is known by its label and secret among the collection's items.
    private func holds(
        _ provider: RemoteProvider, _ collection: String, _ item: SecretItem, _ secret: Bytes, labels: inout [String: [String]]?
    ) throws -> Bool {
        var candidates: [String] = []
        if !item.attributes.isEmpty {
            candidates = try provider.search(collection, item.attributes)
        } else {
            if labels == nil {
                var byLabel: [String: [String]] = [:]
                for path in try provider.collection(collection).items {
                    if let info = try? provider.item(path) { byLabel[info.label, default: []].append(path) }
                }
                labels = byLabel
            }
            candidates = labels?[item.label] ?? []
        }
        guard !candidates.isEmpty else { return false }
        var secrets = try provider.secrets(candidates)
        defer { for key in secrets.keys { secrets[key]?.value.wipe() } }
        for path in candidates {
            guard let info = try? provider.item(path), info.label == item.label,
                item.attributes.allSatisfy({ info.attributes[$0.key] == $0.value }),
                let theirs = secrets[path]?.value
            else { continue }
            if theirs == secret { return true }
        }
        return false
    }

    /// The keychain's Secret Service items with their secrets: every generic and internet
    /// password no sandboxed app made, and the portal's per-app secrets. Items that ask for the
    /// user's presence are said and left out.
    private func exportable(_ store: KeychainStore, name: String, tally: TransferTally) throws -> [SecretItem] {
        var rows = Set(try store.secretItemRows())
        var query = Query(itemClass: .genericPassword)
        query.includesAppItems = true
        query.synchronizable = .any
        if let owned = try? store.find(query, limit: nil) { rows.formUnion(owned.map(\.rowID)) }
        var out: [SecretItem] = []
        var appItems = 0
        for row in rows.sorted() {
            do {
                let item = try store.secretItem(row, includeSecret: true)
                // Not an app's: the service's own bookkeeping (KWallet's empty folders).
                if let owner = item.owner, !Caller.isAppID(owner) { continue }
                if let owner = item.owner, item.attributes != [SecretPortal.appIDAttribute: owner] {
                    appItems += 1
                    continue
                }
                out.append(item)
            } catch {
                tally.skip("keychain \(name): item \(row)", KeychainErrorText.of(error))
            }
        }
        if appItems > 0 {
            tally.note("keychain \(name): \(appItems) items stored by sandboxed apps stay here (another provider would show them to every program)")
        }
        return out
    }
}

/// An engine error in one line, with its result code's name.
enum KeychainErrorText {
    static func of(_ error: Error) -> String {
        guard let error = error as? KeychainError else { return "\(error)" }
        return "\(error.description) (\(KeychainError.name(for: error.status)))"
    }
}
