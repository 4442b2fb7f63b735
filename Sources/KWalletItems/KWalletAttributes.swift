import KeychainCore
import SecretServiceItems

/// What a KWallet entry is as a Secret Service item: the attributes that name it, and its secret
/// in the form the Secret Service shows (a password as text, as KWallet's own Secret Service
/// shows it), kept so that the entry's KWallet bytes come back exactly.
enum KWalletAttributes {
    static let folder = "kwallet.folder"
    static let key = "kwallet.key"
    static let type = "kwallet.type"
    /// "1": a password kept as KWallet's bytes, since they are not exactly one QString that
    /// re-serializes to the same bytes (a null QString, trailing bytes): byte for byte wins.
    static let raw = "kwallet.raw"
    static let textType = "text/plain"
    static let binaryType = "application/octet-stream"

    static func name(of type: KWalletEntryType) -> String {
        switch type {
        case .unknown: return "unknown"
        case .password: return "password"
        case .stream: return "stream"
        case .map: return "map"
        }
    }

    static func type(named name: String?) -> KWalletEntryType {
        KWalletEntryType.allCases.first { self.name(of: $0) == name } ?? .unknown
    }

    /// The item's label: KWallet's own Secret Service shows an entry as "Folder/key".
    static func label(folder: String, key: String) -> String { folder + "/" + key }

    /// The attributes of an entry's item; `service` and `username` so that
    /// `security find-generic-password -s Folder -a key` and libsecret's lookups find a password.
    static func attributes(of entry: KWalletEntry, raw: Bool) -> [String: String] {
        var attributes = [
            folder: entry.folder, key: entry.key, type: name(of: entry.type),
            "service": entry.folder, "username": entry.key
        ]
        if raw { attributes[Self.raw] = "1" }
        return attributes
    }

    /// The item an entry is stored as: its attributes, secret and content type.
    static func item(of entry: KWalletEntry) -> (attributes: [String: String], secret: Bytes, contentType: String) {
        if entry.type == .password, let text = QtDataStream.readString(entry.value), QtDataStream.string(text) == entry.value {
            return (attributes(of: entry, raw: false), Array(text.utf8), textType)
        }
        return (attributes(of: entry, raw: entry.type == .password), entry.value, binaryType)
    }

    /// The entry an item holds, its value back in KWallet's form; nil for an item that is no entry.
    static func entry(of item: SecretItem, secret: Bytes) -> KWalletEntry? {
        guard let folder = item.attributes[folder], let key = item.attributes[key] else { return nil }
        let type = type(named: item.attributes[type])
        let value = type == .password && item.attributes[raw] != "1" ? QtDataStream.string(String(decoding: secret, as: UTF8.self)) : secret
        return KWalletEntry(folder: folder, key: key, type: type, value: value)
    }

    /// The owner of the marker items that keep a folder while it holds no entry: never an app id
    /// (those have no space, Caller.isAppID), so no app's or unconfined view lists them as items.
    static func folderOwner(_ owner: String?) -> String { "kwallet folders" + (owner.map { " " + $0 } ?? "") }

    /// KWallet orders folders and keys as a QMap does: by UTF-16 code units.
    static func precedes(_ a: String, _ b: String) -> Bool { a.utf16.lexicographicallyPrecedes(b.utf16) }
}
