import KWalletItems
import KeychainCore
import SecretServiceBus
import SessionBus

/// The folder and entry methods: each answers through a handle the caller holds, and as kwalletd
/// does, with an empty value (or -1) rather than an error when it does not hold it or the keychain
/// cannot answer (locked since).
extension KWalletService {
    typealias Method = (KWalletService, Call) throws -> Void

    /// Every method, by member and signature (`close`, `isOpen` and `writeEntry` are overloaded).
    static let methods: [String: Method] = [
        "isEnabled()": { service, call in try service.service.reply(call) { try $0.bool(true) } },
        "open(sxs)": { try $0.open($1, byPath: false, async: false) },
        "openPath(sxs)": { try $0.open($1, byPath: true, async: false) },
        "openAsync(sxsb)": { try $0.open($1, byPath: false, async: true) },
        "openPathAsync(sxsb)": { try $0.open($1, byPath: true, async: true) },
        "close(sb)": { try $0.closeWallet($1) },
        "close(ibs)": { try $0.closeHandle($1) },
        "isOpen(s)": { try $0.isOpenWallet($1) },
        "isOpen(i)": { try $0.isOpenHandle($1) },
        "wallets()": { try $0.listWallets($1) },
        "users(s)": { try $0.users($1) },
        "deleteWallet(s)": { try $0.deleteWallet($1) },
        "changePassword(sxs)": { try $0.changePassword($1) },
        "disconnectApplication(ss)": { try $0.disconnectApplication($1) },
        "closeAllWallets()": { try $0.closeAllWallets($1) },
        "sync(is)": { service, call in try service.service.reply(call) },
        "reconfigure()": { service, call in try service.service.reply(call) },
        "pamOpen(sayi)": { try $0.pamOpen($1) },
        "localWallet()": { service, call in try service.service.reply(call) { try $0.string(KWalletConfig.read().localWallet) } },
        "networkWallet()": { service, call in try service.service.reply(call) { try $0.string(KWalletConfig.read().networkWallet) } },
        "folderDoesNotExist(ss)": { try $0.folderDoesNotExist($1) },
        "keyDoesNotExist(sss)": { try $0.keyDoesNotExist($1) },

        "folderList(is)": { try $0.folderList($1) },
        "hasFolder(iss)": { try $0.hasFolder($1) },
        "createFolder(iss)": { try $0.changeFolder($1, create: true) },
        "removeFolder(iss)": { try $0.changeFolder($1, create: false) },
        "entryList(iss)": { try $0.entryList($1) },
        "readEntry(isss)": { try $0.readOne($1, only: nil) },
        "readMap(isss)": { try $0.readOne($1, only: .map) },
        "readPassword(isss)": { try $0.readOne($1, only: .password) },
        "readEntryList(isss)": { try $0.readList($1, pattern: true, only: nil) },
        "readMapList(isss)": { try $0.readList($1, pattern: true, only: .map) },
        "readPasswordList(isss)": { try $0.readList($1, pattern: true, only: .password) },
        "entriesList(iss)": { try $0.readList($1, pattern: false, only: nil) },
        "mapList(iss)": { try $0.readList($1, pattern: false, only: .map) },
        "passwordList(iss)": { try $0.readList($1, pattern: false, only: .password) },
        "writeEntry(issayis)": { try $0.write($1, type: nil) },
        "writeEntry(issays)": { try $0.write($1, type: .stream) },
        "writeMap(issays)": { try $0.write($1, type: .map) },
        "writePassword(issss)": { try $0.write($1, type: .password) },
        "hasEntry(isss)": { try $0.hasEntry($1) },
        "entryType(isss)": { try $0.entryType($1) },
        "removeEntry(isss)": { try $0.removeEntry($1) },
        "renameEntry(issss)": { try $0.renameEntry($1) }
    ]

    /// The store and owner behind a handle this connection holds under `appid`; nil otherwise.
    func access(_ call: Call, _ handle: Int32, _ appid: String) -> (store: KeychainStore, owner: String?, wallet: OpenWallet)? {
        guard handle != 0, let wallet = wallets[handle],
            sessions.contains(KWalletSession(connection: call.sender, appid: appid, handle: handle)),
            let store = try? wallet.collection.store()
        else { return nil }
        return (store, call.owner, wallet)
    }

    /// `body`'s answer, or `otherwise` where kwalletd would answer with nothing.
    func answer<T>(
        _ call: Call, _ handle: Int32, _ appid: String, otherwise: T, _ body: (KeychainStore, String?, OpenWallet) throws -> T
    ) -> T {
        guard let (store, owner, wallet) = access(call, handle, appid) else { return otherwise }
        do {
            return try body(store, owner, wallet)
        } catch let error as KeychainError where error.code == .interactionNotAllowed {
            return otherwise
        } catch {
            SecretService.log("KWallet \(wallet.name): \(ServiceError(error).message)")
            return otherwise
        }
    }

    func folderList(_ call: Call) throws {
        let r = call.reader
        let (handle, appid) = (try r.int32(), try r.string())
        let folders = answer(call, handle, appid, otherwise: []) { store, owner, _ in try store.kwalletFolders(owner: owner) }
        try service.reply(call) { try $0.strings(folders) }
    }

    func hasFolder(_ call: Call) throws {
        let r = call.reader
        let (handle, folder, appid) = (try r.int32(), try r.string(), try r.string())
        let has = answer(call, handle, appid, otherwise: false) { store, owner, _ in try store.kwalletFolders(owner: owner).contains(folder) }
        try service.reply(call) { try $0.bool(has) }
    }

    func changeFolder(_ call: Call, create: Bool) throws {
        let r = call.reader
        let (handle, folder, appid) = (try r.int32(), try r.string(), try r.string())
        var changed: OpenWallet?
        let done = answer(call, handle, appid, otherwise: false) { store, owner, open in
            changed = open
            return create ? try store.createKWalletFolder(folder, owner: owner) : try store.removeKWalletFolder(folder, owner: owner)
        }
        try service.reply(call) { try $0.bool(done) }
        if let changed {
            emit("folderListUpdated", seenBy: call.owner, in: changed) { try $0.string(changed.name) }
            if !create { itemsChanged(changed) }
        }
    }

    /// A folder's entries changed: kwalletd's signal, and the Secret Service's (`itemsChanged`).
    private func folderUpdated(_ open: OpenWallet, _ folder: String, _ call: Call) {
        emit("folderUpdated", seenBy: call.owner, in: open) { w in
            try w.string(open.name)
            try w.string(folder)
        }
        itemsChanged(open)
    }

    /// The wallet's keychain holds other items now: its collection's Items, by name only (as for
    /// any change, each Secret Service client reads its own view), so that libsecret's caches
    /// read them again.
    private func itemsChanged(_ open: OpenWallet) {
        service.emitPropertiesChanged(open.collection.path, Interface.collection, ["Items"])
    }

    func entryList(_ call: Call) throws {
        let r = call.reader
        let (handle, folder, appid) = (try r.int32(), try r.string(), try r.string())
        let keys = answer(call, handle, appid, otherwise: []) { store, owner, _ in try store.kwalletEntryKeys(folder: folder, owner: owner) }
        try service.reply(call) { try $0.strings(keys) }
    }

    /// readEntry (any type's bytes), readMap (a map's), readPassword (a password's text).
    func readOne(_ call: Call, only type: KWalletEntryType?) throws {
        let r = call.reader
        let (handle, folder, key, appid) = (try r.int32(), try r.string(), try r.string(), try r.string())
        let entry = answer(call, handle, appid, otherwise: nil) { store, owner, _ in
            try service.readingSecrets(for: call) { try store.kwalletEntry(folder: folder, key: key, owner: owner) }
        }
        let found = entry.flatMap { type == nil || $0.type == type ? $0 : nil }
        try service.reply(call) { w in
            if type == .password {
                try w.string(found.map(Self.password) ?? "")
            } else {
                try w.bytes(found?.value ?? [])
            }
        }
    }

    /// The list forms: every entry of a folder, or those whose key matches a wildcard pattern
    /// (readEntryList and friends), of one type or any.
    func readList(_ call: Call, pattern: Bool, only type: KWalletEntryType?) throws {
        let r = call.reader
        let handle = try r.int32()
        let folder = try r.string()
        let key = pattern ? try r.string() : nil
        let appid = try r.string()
        let entries = answer(call, handle, appid, otherwise: []) { store, owner, _ in
            try service.readingSecrets(for: call) {
                try store.kwalletEntries(folder: folder, owner: owner).filter { entry in
                    (type == nil || entry.type == type) && (key.map { KWalletPattern.matches($0, entry.key) } ?? true)
                }
            }
        }
        try service.reply(call) { w in
            if type == .password {
                try w.variantMap(entries.map { ($0.key, Self.password($0)) }, "s") { try w.string($0) }
            } else {
                try w.variantMap(entries.map { ($0.key, $0.value) }, "ay") { try w.bytes($0) }
            }
        }
    }

    /// A password entry's text, as KWallet's Entry::password() reads it.
    static func password(_ entry: KWalletEntry) -> String { QtDataStream.readString(entry.value) ?? "" }

    /// writeEntry (with a type, or binary), writeMap, writePassword: 0, or -1.
    func write(_ call: Call, type fixed: KWalletEntryType?) throws {
        let r = call.reader
        let (handle, folder, key) = (try r.int32(), try r.string(), try r.string())
        let value = fixed == .password ? QtDataStream.string(try r.string()) : try r.bytes()
        let type = try fixed ?? KWalletEntryType(rawValue: r.int32()) ?? .unknown
        let appid = try r.string()
        var changed: OpenWallet?
        // A new entry trusts the program that stores it, and so does one it writes over without
        // being on its list (the engine's rule, for the client rather than the service).
        let access = service.storedAccess(for: call)
        let rc: Int32 = answer(call, handle, appid, otherwise: -1) { store, owner, open in
            _ = try service.storing(for: call, access: access) {
                try store.writeKWalletEntry(KWalletEntry(folder: folder, key: key, type: type, value: value), owner: owner, access: access)
            }
            changed = open
            return 0
        }
        try service.reply(call) { try $0.int32(rc) }
        if let changed { folderUpdated(changed, folder, call) }
    }

    func hasEntry(_ call: Call) throws {
        let r = call.reader
        let (handle, folder, key, appid) = (try r.int32(), try r.string(), try r.string(), try r.string())
        let has = answer(call, handle, appid, otherwise: false) { store, owner, _ in
            try store.kwalletEntryType(folder: folder, key: key, owner: owner) != nil
        }
        try service.reply(call) { try $0.bool(has) }
    }

    func entryType(_ call: Call) throws {
        let r = call.reader
        let (handle, folder, key, appid) = (try r.int32(), try r.string(), try r.string(), try r.string())
        let type = answer(call, handle, appid, otherwise: KWalletEntryType.unknown) { store, owner, _ in
            try store.kwalletEntryType(folder: folder, key: key, owner: owner) ?? .unknown
        }
        try service.reply(call) { try $0.int32(type.rawValue) }
    }

    /// 0 when removed or when the folder does not exist, -3 when the folder has no such key, -1
    /// for a handle the caller does not hold: kwalletd's codes.
    func removeEntry(_ call: Call) throws {
        let r = call.reader
        let (handle, folder, key, appid) = (try r.int32(), try r.string(), try r.string(), try r.string())
        var changed: OpenWallet?
        let rc: Int32 = answer(call, handle, appid, otherwise: -1) { store, owner, open in
            guard try store.kwalletFolders(owner: owner).contains(folder) else { return 0 }
            changed = open
            return try store.removeKWalletEntry(folder: folder, key: key, owner: owner) ? 0 : -3
        }
        try service.reply(call) { try $0.int32(rc) }
        if let changed { folderUpdated(changed, folder, call) }
    }

    /// 0, or -1 when there is no entry `oldName` or one named `newName` exists (kwalletd's backend
    /// refuses to overwrite).
    func renameEntry(_ call: Call) throws {
        let r = call.reader
        let (handle, folder, from, to, appid) = (try r.int32(), try r.string(), try r.string(), try r.string(), try r.string())
        var changed: OpenWallet?
        let rc: Int32 = answer(call, handle, appid, otherwise: -1) { store, owner, open in
            changed = open
            return try store.renameKWalletEntry(folder: folder, from: from, to: to, owner: owner) ? 0 : -1
        }
        try service.reply(call) { try $0.int32(rc) }
        if let changed { folderUpdated(changed, folder, call) }
    }
}

/// The wildcard patterns of readEntryList and friends, as kwalletd matches them
/// (QRegularExpression::wildcardToRegularExpression, `/` included in `*` and `?`): `*` any run,
/// `?` any one character, `[...]` a set (`[!...]` or `[^...]` its complement), anything else
/// itself; the whole key must match.
enum KWalletPattern {
    static func matches(_ pattern: String, _ key: String) -> Bool {
        match(Array(pattern), 0, Array(key), 0)
    }

    private static func match(_ p: [Character], _ pi: Int, _ k: [Character], _ ki: Int) -> Bool {
        var (pi, ki) = (pi, ki)
        // The last `*` seen and where in the key it stands: backtracking goes only there, so a
        // pattern of many stars costs pattern x key steps, never an exponential search.
        var star: (pattern: Int, key: Int)?
        while ki < k.count {
            if pi < p.count, p[pi] == "*" {
                star = (pi, ki)
                pi += 1
                continue
            }
            if pi < p.count, let next = single(p, pi, k[ki]) {
                pi = next
                ki += 1
                continue
            }
            guard let s = star else { return false }
            pi = s.pattern + 1
            ki = s.key + 1
            star = (s.pattern, s.key + 1)
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    /// Where the pattern goes on when its element at `pi` matches `c`; nil when it does not.
    private static func single(_ p: [Character], _ pi: Int, _ c: Character) -> Int? {
        switch p[pi] {
        case "?": return pi + 1
        case "[":
            var i = pi + 1
            let negated = i < p.count && (p[i] == "!" || p[i] == "^")
            if negated { i += 1 }
            var found = false
            var first = true
            while i < p.count, p[i] != "]" || first {
                if i + 2 < p.count, p[i + 1] == "-", p[i + 2] != "]" {
                    if p[i] <= c && c <= p[i + 2] { found = true }
                    i += 3
                } else {
                    if p[i] == c { found = true }
                    i += 1
                }
                first = false
            }
            // No closing bracket: the `[` is itself.
            guard i < p.count else { return c == "[" ? pi + 1 : nil }
            return found != negated ? i + 1 : nil
        default:
            return p[pi] == c ? pi + 1 : nil
        }
    }
}
