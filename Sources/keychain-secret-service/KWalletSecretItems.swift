import CredentialHelperSupport
import KWalletItems
import KeychainCore

/// The Secret Service items kwalletd 5.97+ keeps in a wallet: each is a KWallet entry (folder
/// "Secret Service", or the folder its label names before a slash) whose label, attributes,
/// content type and dates live beside the wallet in `<wallet>_attributes.json`, keyed
/// "Folder/key" (kwalletd's kwalletfreedesktopattributes.cpp). `import` brings such an entry once,
/// as the Secret Service item it is, not also as a KWallet entry.
struct KWalletSecretItems {
    struct Item {
        var attributes: [String: String]
        var contentType: String
        var created: UInt64
        var modified: UInt64
    }

    /// By "Folder/key".
    private(set) var items: [String: Item] = [:]

    /// kwalletd's own folder for items stored through its Secret Service without a slash in
    /// their label (FDO_SECRETS_DEFAULT_DIR).
    static let defaultFolder = "Secret Service"

    /// The wallet's attributes file, as kwalletd names it: in its data folder (kwalletd5's, with
    /// the 5 cut off), the wallet's name percent-encoded with ';' for the characters a wallet
    /// file name cannot hold.
    static func path(wallet: String) -> String {
        let data = KeychainFile.environment("XDG_DATA_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? KeychainFile.homeDirectory() + "/.local/share"
        return data + "/kwalletd/" + encode(wallet) + "_attributes.json"
    }

    static func encode(_ wallet: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789^&'@{}[],$=!-#()%.+_\r\n\t\u{0C}\u{0B} ".utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in wallet.utf8 {
            if allowed.contains(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: ";"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The wallet's items; none when it has no attributes file (its Secret Service never stored
    /// one). A file that is not kwalletd's JSON is an error: its items would otherwise come as
    /// plain entries, their attributes lost without a word.
    init(wallet: String) throws {
        let path = Self.path(wallet: wallet)
        guard let bytes = ProcFile.read(path, limit: 64 << 20) else {
            if KeychainFile.exists(path) { throw ServiceError.failed("cannot read \(path)") }
            return
        }
        let root: JSONValue
        do {
            root = try JSON.parse(bytes)
        } catch {
            throw ServiceError.failed("\(path) is not JSON: \(error)")
        }
        guard case .object(let members) = root else { throw ServiceError.failed("\(path) holds no JSON object") }
        for (location, value) in members {
            guard case .object(let parameters) = value else { continue }
            var item = Item(attributes: [:], contentType: "application/octet-stream", created: 0, modified: 0)
            for (name, parameter) in parameters {
                switch (name, parameter) {
                case ("attributes", .object(let pairs)):
                    for case (let key, .string(let text)) in pairs { item.attributes[key] = text }
                case ("$fdo_mime_type", .string(let text)): item.contentType = text
                case ("$fdo_created", .string(let text)): item.created = UInt64(text) ?? 0
                case ("$fdo_modified", .string(let text)): item.modified = UInt64(text) ?? 0
                default: break
                }
            }
            items[location] = item
        }
    }

    func item(folder: String, key: String) -> Item? { items[folder + "/" + key] }

    /// The label kwalletd's Secret Service shows for the entry: its key in the default folder,
    /// else "Folder/key", without the "__N_" that makes a second item of one label unique.
    static func label(folder: String, key: String) -> String {
        var name = key
        if name.hasSuffix("_") {
            let body = name.dropLast()
            let digits = body.reversed().prefix { $0.isASCII && $0.isNumber }.count
            let rest = body.dropLast(digits)
            if digits > 0, rest.hasSuffix("__") { name = String(rest.dropLast(2)) }
        }
        return folder == defaultFolder ? name : folder + "/" + name
    }

    /// The secret as kwalletd's Secret Service serves it: a password as the UTF-8 of its string,
    /// anything else as its bytes.
    static func secret(of entry: KWalletEntry) -> Bytes {
        if entry.type == .password, let text = QtDataStream.readString(entry.value) { return Array(text.utf8) }
        return entry.value
    }
}
