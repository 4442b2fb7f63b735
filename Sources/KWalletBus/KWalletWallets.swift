import CSDBus
import Glibc
import KWalletItems
import KeychainCore
import SecretServiceBus
import SessionBus

/// Opening and closing wallets: which keychain a wallet name is, handles, the application ids
/// holding them, and the keychain's own prompt where a wallet is locked or missing.
extension KWalletService {
    /// KWallet's default wallet: the login keychain.
    package static let loginWallet = "kdewallet"

    /// The keychain file a wallet stands for and its collection if it exists; nil for a name that
    /// is no keychain's (a path, for open; another folder's file, for openPath).
    func target(_ name: String, byPath: Bool) -> (file: String, collection: Collection?)? {
        let file: String
        if byPath {
            guard name.hasPrefix("/"), name.hasSuffix(".keychain-db") || name.hasSuffix(".keychain") else { return nil }
            file = name
        } else if name == Self.loginWallet {
            file = KeychainFile.loginPath()
        } else {
            guard Self.isPlainName(name) else { return nil }
            file = KeychainFile.resolve(name)
        }
        return (file, service.collections.all.first { !$0.isSession && KeychainFile.sameFile($0.file, file) })
    }

    /// A name a new keychain keeps as it is (CreateCollection names the file after the label, with
    /// every other character replaced).
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 200
            && name.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" }
    }

    /// The wallet name of a collection: the login keychain is `kdewallet`; a keychain outside the
    /// keychains folder or with a name open would not take back is none.
    func walletName(_ collection: Collection) -> String? {
        if KeychainFile.sameFile(collection.file, KeychainFile.loginPath()) { return Self.loginWallet }
        guard !collection.isSession, Self.isPlainName(collection.name), collection.name != Self.loginWallet,
            KeychainFile.sameFile(collection.file, KeychainFile.resolve(collection.name))
        else { return nil }
        return collection.name
    }

    func openWallet(named name: String) -> OpenWallet? {
        guard let collection = target(name, byPath: name.hasPrefix("/"))?.collection else { return nil }
        return wallets.values.first { $0.collection === collection }
    }

    // MARK: open, openPath, openAsync, openPathAsync

    func open(_ call: Call, byPath: Bool, async: Bool) throws {
        let r = call.reader
        let name = try r.string()
        _ = try r.int64()  // the window id: pinentry places its own dialog
        let appid = try r.string()
        if async { _ = try r.bool() }  // handleSession: a handle is the connection's in any case
        let finish: (Int32) -> Void
        if async {
            lastTransaction = lastTransaction == Int32.max ? 1 : lastTransaction + 1
            let transaction = lastTransaction
            try service.reply(call) { try $0.int32(transaction) }
            finish = { [weak self] handle in
                self?.emit("walletAsyncOpened") { w in
                    try w.int32(transaction)
                    try w.int32(handle)
                }
            }
        } else {
            let reply = DelayedReply(call.message)
            finish = { handle in reply.send { try $0.int32(handle) } }
        }
        open(name, byPath: byPath, call, appid: appid, finish)
    }

    /// Opens the wallet for the caller, unlocking its keychain through the prompt, or making it
    /// (a name that is no keychain yet, for an unconfined program): `finish` gets the handle, or -1.
    private func open(_ name: String, byPath: Bool, _ call: Call, appid: String, _ finish: @escaping (Int32) -> Void) {
        guard let target = target(name, byPath: byPath) else { return finish(-1) }
        let (connection, owner) = (call.sender, call.owner)
        if let collection = target.collection {
            guard collection.isLocked else { return finish(opened(name, collection, connection, appid, owner: owner, created: false)) }
            prompt(.unlock([(collection.path, collection)]), call) { [weak self] dismissed in
                guard let self, !dismissed else { return finish(-1) }
                finish(self.opened(name, collection, connection, appid, owner: owner, created: false))
            }
            return
        }
        // A sandboxed app cannot make keychains (as through CreateCollection); nor is a keychain
        // made at a path.
        guard !byPath, !call.caller.isConfined else { return finish(-1) }
        let label = name == Self.loginWallet ? "login" : name
        prompt(.create(label: label, alias: ""), call) { [weak self] dismissed in
            guard let self, !dismissed, let collection = self.target(name, byPath: false)?.collection, !collection.isLocked else {
                return finish(-1)
            }
            finish(self.opened(name, collection, connection, appid, owner: owner, created: true))
        }
    }

    /// The keychain's prompt, within the Secret Service's limits per client and per sandboxed app
    /// (beyond them, dismissed at once: a program calling open in a loop raises no flood of
    /// dialogs).
    private func prompt(_ action: Prompt.Action, _ call: Call, completion: @escaping (_ dismissed: Bool) -> Void) {
        guard let path = try? service.makePrompt(action, for: call),
            let prompt = service.prompts[String(path.dropFirst(ObjectPaths.prompts.count))]
        else { return completion(true) }
        prompt.completion = completion
        prompt.request()
        service.startWaitingPrompts()
    }

    /// The wallet's handle (made on its first open), now also held by this connection and appid.
    private func opened(
        _ name: String, _ collection: Collection, _ connection: String, _ appid: String, owner: String?, created: Bool
    ) -> Int32 {
        giveDefaultFolders(collection, owner: owner)
        let handle: Int32
        if let open = wallets.values.first(where: { $0.collection === collection }) {
            handle = open.handle
        } else {
            handle = newHandle()
            wallets[handle] = OpenWallet(name: name, handle: handle, collection: collection)
            if created {
                emit("walletCreated") { try $0.string(name) }
                emit("walletListDirty") { _ in }
            }
            emit("walletOpened") { try $0.string(name) }
        }
        let session = KWalletSession(connection: connection, appid: appid, handle: handle)
        if !sessions.contains(session) {
            // Each appid a connection names is a hold kept until it leaves the bus: bounded, so
            // one client cannot grow the list every call is looked up in.
            guard sessions.count(where: { $0.connection == connection }) < Self.holdsPerConnection else { return -1 }
            sessions.append(session)
        }
        return handle
    }

    /// A wallet new to KWallet (for this caller: a sandboxed app's view starts empty) gets the two
    /// folders kwalletd gives every wallet it creates; kwallet-query and KDE's programs write into
    /// "Passwords" and "Form Data" without making them.
    func giveDefaultFolders(_ collection: Collection, owner: String?) {
        guard let store = try? collection.store(), (try? store.kwalletFolders(owner: owner))?.isEmpty == true else { return }
        for folder in Self.defaultFolders { _ = try? store.createKWalletFolder(folder, owner: owner) }
    }

    /// KWallet::Wallet::PasswordFolder() and FormDataFolder().
    static let defaultFolders = ["Passwords", "Form Data"]
    /// The appids one connection may hold wallets under at once (KDE programs use one or two).
    static let holdsPerConnection = 256

    /// A positive handle no open wallet has, not guessable from the last (kwalletd's are random).
    private func newHandle() -> Int32 {
        while true {
            let handle = Int32.random(in: 1...Int32.max)
            if wallets[handle] == nil { return handle }
        }
    }

    // MARK: close, isOpen, and the wallet-wide methods

    /// close(wallet, force): 0 closed, 1 left open (kwalletd leaves wallets open unless forced,
    /// its "Leave Open" default), -1 not open.
    func closeWallet(_ call: Call) throws {
        let r = call.reader
        let (name, force) = (try r.string(), try r.bool())
        var rc: Int32 = -1
        if let open = openWallet(named: name) {
            rc = 1
            if force, !call.caller.isConfined {
                close(open)
                rc = 0
            }
        }
        try service.reply(call) { try $0.int32(rc) }
    }

    /// close(handle, force, appid): the caller's hold on the handle goes; 0 when the wallet closed,
    /// 1 when it stays open (or the caller held no such handle), -1 for no open wallet. A sandboxed
    /// app's force closes nothing for the others, as with close(wallet, force).
    func closeHandle(_ call: Call) throws {
        let r = call.reader
        let (handle, force, appid) = (try r.int32(), try r.bool(), try r.string())
        var rc: Int32 = -1
        if let open = wallets[handle] {
            rc = 1
            let session = KWalletSession(connection: call.sender, appid: appid, handle: handle)
            if sessions.contains(session) {
                sessions.removeAll { $0 == session }
                if force, !call.caller.isConfined {
                    close(open)
                    rc = 0
                }
            }
        }
        try service.reply(call) { try $0.int32(rc) }
    }

    /// Closes a wallet for every client (the keychain stays as it is: a wallet's handles are this
    /// service's, the keychain's lock is the user's).
    func close(_ open: OpenWallet) {
        wallets[open.handle] = nil
        sessions.removeAll { $0.handle == open.handle }
        emit("walletClosed") { try $0.int32(open.handle) }
        emit("walletClosedId") { try $0.int32(open.handle) }
        emit("walletClosed") { try $0.string(open.name) }
        if wallets.isEmpty { emit("allWalletsClosed") { _ in } }
    }

    func isOpenWallet(_ call: Call) throws {
        let name = try call.reader.string()
        try service.reply(call) { try $0.bool(openWallet(named: name) != nil) }
    }

    func isOpenHandle(_ call: Call) throws {
        let handle = try call.reader.int32()
        try service.reply(call) { try $0.bool(handle != 0 && wallets[handle] != nil) }
    }

    func listWallets(_ call: Call) throws {
        let names = Set(service.collections.all.compactMap(walletName)).sorted()
        try service.reply(call) { try $0.strings(names) }
    }

    func users(_ call: Call) throws {
        let name = try call.reader.string()
        var appids: [String] = []
        if let open = openWallet(named: name) {
            // A sandboxed app learns only its own holds, not which other programs use the wallet.
            for session in sessions where session.handle == open.handle && !appids.contains(session.appid) {
                if call.caller.isConfined, service.caller(session.connection).owner != call.owner { continue }
                appids.append(session.appid)
            }
        }
        try service.reply(call) { try $0.strings(appids) }
    }

    func disconnectApplication(_ call: Call) throws {
        let r = call.reader
        let (name, application) = (try r.string(), try r.string())
        var done = false
        if !call.caller.isConfined, let open = openWallet(named: name),
            sessions.contains(where: { $0.handle == open.handle && $0.appid == application })
        {
            sessions.removeAll { $0.handle == open.handle && $0.appid == application }
            done = true
        }
        try service.reply(call) { try $0.bool(done) }
        if done {
            emit("applicationDisconnected") { w in
                try w.string(name); try w.string(application)
            }
        }
    }

    func closeAllWallets(_ call: Call) throws {
        try service.reply(call)
        guard !call.caller.isConfined else { return }
        for open in wallets.values.sorted(by: { $0.handle < $1.handle }) { close(open) }
    }

    /// deleteWallet: -1 for the login or default keychain, a sandboxed caller, or no such wallet;
    /// another keychain is deleted once its own password is given, as through the Secret Service.
    func deleteWallet(_ call: Call) throws {
        let name = try call.reader.string()
        guard name != Self.loginWallet, !call.caller.isConfined, let collection = target(name, byPath: false)?.collection,
            !service.collections.isLoginOrDefault(collection)
        else {
            return try service.reply(call) { try $0.int32(-1) }
        }
        let reply = DelayedReply(call.message)
        prompt(.delete(collection), call) { [weak self] dismissed in
            reply.send { try $0.int32(dismissed ? -1 : 0) }
            guard let self, !dismissed else { return }
            if let open = self.wallets.values.first(where: { $0.collection === collection }) { self.close(open) }
            self.emit("walletDeleted") { try $0.string(name) }
            self.emit("walletListDirty") { _ in }
        }
    }

    /// Accepted and answered: a keychain's password changes with `security set-keychain-password`
    /// (the prompt here has no dialog for an old and a new password).
    func changePassword(_ call: Call) throws {
        let name = try call.reader.string()
        SecretService.log("KWallet changePassword(\(name)): change the keychain's password with `security set-keychain-password`")
        try service.reply(call)
    }

    /// pam_kwallet's call at login: accepted without an answer (it asks for none); pam_keychain
    /// unlocks the keychain with the login password itself.
    func pamOpen(_ call: Call) throws {
        if sd_bus_message_get_expect_reply(call.message) > 0 { try service.reply(call) }
    }

    /// folderDoesNotExist and keyDoesNotExist answer without a handle and without unlocking, as
    /// kwalletd does from a closed wallet's index: KDE's programs (kpasswdserver, the form wallet)
    /// ask them so as not to raise the wallet's prompt for nothing. A locked keychain answers from
    /// its attribute index; before the first unlock since boot it cannot say, so "it may exist".
    func folderDoesNotExist(_ call: Call) throws {
        let r = call.reader
        let (name, folder) = (try r.string(), try r.string())
        let absent = doesNotExist(name, call) { try $0.kwalletFolderIsAbsent(folder, owner: $1) }
        try service.reply(call) { try $0.bool(absent) }
    }

    func keyDoesNotExist(_ call: Call) throws {
        let r = call.reader
        let (name, folder, key) = (try r.string(), try r.string(), try r.string())
        let absent = doesNotExist(name, call) { try $0.kwalletEntryIsAbsent(folder: folder, key: key, owner: $1) }
        try service.reply(call) { try $0.bool(absent) }
    }

    private func doesNotExist(_ name: String, _ call: Call, _ absent: (KeychainStore, String?) throws -> Bool?) -> Bool {
        guard let collection = target(name, byPath: false)?.collection else { return true }
        guard let store = try? collection.store() else { return false }
        // An error, or nil (no unlock since boot): "it may exist".
        return (try? absent(store, call.owner)) ?? false
    }

    // MARK: What the service tells

    /// A connection left the bus: its holds on handles go (the wallets stay open, as kwalletd's).
    package func connectionLeft(_ name: String) {
        sessions.removeAll { $0.connection == name }
    }

    /// A keychain locked behind the service's back (`security lock-keychain`, the screen locker):
    /// its wallet closes, as kwalletd's do, so KDE's programs open it again through the prompt.
    package func noticeLocks() {
        for open in wallets.values.sorted(by: { $0.handle < $1.handle }) where open.collection.isLocked { close(open) }
    }
}

/// What kwalletrc says about the default wallets (KWallet::Wallet::LocalWallet/NetworkWallet).
struct KWalletConfig {
    var networkWallet = KWalletService.loginWallet
    var localWallet = KWalletService.loginWallet

    static func read() -> KWalletConfig {
        var config = KWalletConfig()
        let home = getenv("HOME").map { String(cString: $0) } ?? ""
        let base = getenv("XDG_CONFIG_HOME").map { String(cString: $0) }.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        guard let text = readText(base + "/kwalletrc") else { return config }
        var group = ""
        var values: [String: String] = [:]
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingSpaces
            if line.hasPrefix("[") {
                group = line
            } else if group == "[Wallet]", let equals = line.firstIndex(of: "=") {
                values[String(line[..<equals]).trimmingSpaces] = String(line[line.index(after: equals)...]).trimmingSpaces
            }
        }
        let defaultWallet = values["Default Wallet"].flatMap { $0.isEmpty ? nil : $0 } ?? KWalletService.loginWallet
        config.networkWallet = defaultWallet
        let oneWallet = values["Use One Wallet"].map { !["false", "0", "no", "off"].contains($0.lowercased()) } ?? true
        config.localWallet = oneWallet ? defaultWallet : (values["Local Wallet"].flatMap { $0.isEmpty ? nil : $0 } ?? "localwallet")
        return config
    }

    private static func readText(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = fread(&buffer, 1, buffer.count, file)
            if n == 0 { break }
            bytes += buffer[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
