import CSDBus
import Glibc
import KWalletItems
import KeychainCore
import SecretServiceBus
import SessionBus

/// KWallet's daemon (kwalletd5 or kwalletd6) as KDE's programs see it: `org.kde.KWallet` at
/// `/modules/kwalletd5` (or 6), one call at a time. `import` reads every wallet through it and
/// `export` writes KWallet's entries back through it, folder, key, type and bytes as they are.
struct KWalletDaemon {
    static let interface = "org.kde.KWallet"
    /// The application name kwalletd records for our handles (its "Auto Allow" lists use it).
    static let appID = "keychain-secret-service"

    let client: BusClient
    /// The unique name of the daemon's connection.
    let name: String
    let path: String
    /// How long opening a wallet may take: kwalletd asks for a closed wallet's password in a
    /// dialog of its own.
    let promptTimeout: Double

    /// org.kde.kwalletd5 or org.kde.kwalletd6, as the object path says.
    var service: String { "org.kde." + String(path.split(separator: "/").last ?? "kwalletd5") }

    /// `org.kde.kwalletd5` or `org.kde.kwalletd6` (the object path follows the name), or nil
    /// for another name.
    static func objectPath(for service: String) -> String? {
        guard service == "org.kde.kwalletd5" || service == "org.kde.kwalletd6" else { return nil }
        return "/modules/" + String(service.split(separator: ".").last!)
    }

    /// Whether a peer is KWallet's daemon (its Secret Service shares the connection).
    static func isKWallet(_ peer: BusClient.Peer) -> Bool {
        peer.command.hasPrefix("kwalletd") || peer.executable.map { $0.hasSuffix("/kwalletd5") || $0.hasSuffix("/kwalletd6") } == true
    }

    /// The KWallet name a kwalletd peer serves: kwalletd6 for kwalletd6, else kwalletd5.
    static func service(of peer: BusClient.Peer) -> String {
        peer.command.hasPrefix("kwalletd6") || peer.executable?.hasSuffix("/kwalletd6") == true ? "org.kde.kwalletd6" : "org.kde.kwalletd5"
    }

    private func call(_ member: String, timeout: Double = 0, _ body: (MessageWriter) throws -> Void = { _ in }) throws -> BusReply {
        try client.call(name, path, Self.interface, member, timeout: timeout, body)
    }

    func wallets() throws -> [String] {
        try strings(try call("wallets"))
    }

    /// A handle on the wallet (kwalletd's own dialog asks for its password when it is closed);
    /// throws when kwalletd answers -1 (no such wallet, a wrong password, the dialog dismissed).
    func open(_ wallet: String) throws -> Int32 {
        let reply = try call("open", timeout: promptTimeout) { w in
            try w.string(wallet)
            try append(w, "x", Int64(0))
            try w.string(Self.appID)
        }
        let handle = try int32(reply)
        guard handle >= 0 else { throw ServiceError.failed("kwalletd did not open it (it answered \(handle))") }
        return handle
    }

    /// Gives our handle back; the wallet stays open for the others that hold it.
    func close(_ handle: Int32) {
        _ = try? call("close") { w in
            try append(w, "i", handle)
            try w.bool(false)
            try w.string(Self.appID)
        }
    }

    func folders(_ handle: Int32) throws -> [String] {
        try strings(
            try call("folderList") { w in
                try append(w, "i", handle)
                try w.string(Self.appID)
            })
    }

    func keys(_ handle: Int32, folder: String) throws -> [String] {
        try strings(
            try call("entryList") { w in
                try append(w, "i", handle)
                try w.string(folder)
                try w.string(Self.appID)
            })
    }

    /// The entry as kwalletd keeps it: its type, and its value's bytes (readEntry answers a
    /// password as Qt's QString serialization and a map as its QMap's, as the backend holds them).
    func entry(_ handle: Int32, folder: String, key: String) throws -> KWalletEntry {
        let typeReply = try call("entryType") { w in
            try append(w, "i", handle)
            try w.string(folder)
            try w.string(key)
            try w.string(Self.appID)
        }
        let number = try int32(typeReply)
        let valueReply = try call("readEntry") { w in
            try append(w, "i", handle)
            try w.string(folder)
            try w.string(key)
            try w.string(Self.appID)
        }
        let value = try bytes(valueReply)
        guard let type = KWalletEntryType(rawValue: number) else {
            throw ServiceError.failed("kwalletd gave it the type \(number), which KWallet does not have")
        }
        // kwalletd answers an entry that is gone with type 0 and no bytes.
        if type == .unknown, value.isEmpty, try !has(handle, folder: folder, key: key) {
            throw ServiceError.failed("listed, but kwalletd has no such entry")
        }
        return KWalletEntry(folder: folder, key: key, type: type, value: value)
    }

    func has(_ handle: Int32, folder: String, key: String) throws -> Bool {
        try bool(
            try call("hasEntry") { w in
                try append(w, "i", handle)
                try w.string(folder)
                try w.string(key)
                try w.string(Self.appID)
            })
    }

    func hasFolder(_ handle: Int32, _ folder: String) throws -> Bool {
        try bool(
            try call("hasFolder") { w in
                try append(w, "i", handle)
                try w.string(folder)
                try w.string(Self.appID)
            })
    }

    func createFolder(_ handle: Int32, _ folder: String) throws {
        guard
            try bool(
                try call("createFolder") { w in
                    try append(w, "i", handle)
                    try w.string(folder)
                    try w.string(Self.appID)
                })
        else { throw ServiceError.failed("kwalletd did not make the folder") }
    }

    /// writeEntry(handle, folder, key, value, entryType, appid): the overload that keeps the type.
    func write(_ handle: Int32, _ entry: KWalletEntry) throws {
        let rc = try int32(
            try call("writeEntry") { w in
                try append(w, "i", handle)
                try w.string(entry.folder)
                try w.string(entry.key)
                try w.bytes(entry.value)
                try append(w, "i", entry.type.rawValue)
                try w.string(Self.appID)
            })
        guard rc == 0 else { throw ServiceError.failed("kwalletd did not store it (it answered \(rc))") }
    }

    /// Writes the wallet's file now, not at kwalletd's next timer.
    func sync(_ handle: Int32) {
        _ = try? call("sync") { w in
            try append(w, "i", handle)
            try w.string(Self.appID)
        }
    }

    /// Closes every wallet, each written to its file first: kwalletd writes a change about 5 s
    /// after it, and a SIGTERM before then loses it.
    func closeAllWallets() throws {
        _ = try call("closeAllWallets")
    }

    /// Whether the wallet surely has no such entry: kwalletd answers from the wallet file's
    /// index, the wallet open or not, without asking for its password.
    func keyDoesNotExist(wallet: String, folder: String, key: String) throws -> Bool {
        try bool(
            try call("keyDoesNotExist") { w in
                try w.string(wallet)
                try w.string(folder)
                try w.string(key)
            })
    }

    // MARK: The wire

    // Each takes the reply itself, not its reader: the reply frees the message when it goes.
    private func strings(_ reply: BusReply) throws -> [String] {
        let reader = reply.reader
        defer { withExtendedLifetime(reply) {} }
        var out: [String] = []
        _ = try reader.enter(BusType.array, "s")
        while true {
            var pointer: UnsafePointer<CChar>?
            let rc = sd_bus_message_read_basic(reader.message, BusType.string, &pointer)
            guard rc >= 0 else { throw ServiceError.invalidArgs("kwalletd's answer is not a list of names") }
            guard rc > 0, let pointer else { break }
            out.append(String(cString: pointer))
        }
        try reader.exit()
        return out
    }

    private func int32(_ reply: BusReply) throws -> Int32 {
        var value: Int32 = 0
        guard sd_bus_message_read_basic(reply.message, CChar(UInt8(ascii: "i")), &value) > 0 else {
            throw ServiceError.invalidArgs("kwalletd's answer is not a number")
        }
        return value
    }

    private func bool(_ reply: BusReply) throws -> Bool {
        try withExtendedLifetime(reply) { try reply.reader.bool() }
    }

    private func bytes(_ reply: BusReply) throws -> Bytes {
        try withExtendedLifetime(reply) { try reply.reader.bytes() }
    }

    private func append<T: BitwiseCopyable>(_ writer: MessageWriter, _ type: Character, _ value: T) throws {
        var value = value
        try writer.verify(sd_bus_message_append_basic(writer.message, CChar(UInt8(ascii: Unicode.Scalar(String(type))!)), &value))
    }
}
