import CredentialHelperSupport
import KeychainCore

/// An item kwalletd's own Secret Service stored in a wallet: kept there as an entry ("Secret
/// Service/LABEL", or "FOLDER/LABEL" for a label with a slash), with its attributes, content
/// type and dates in `WALLET_attributes.json` beside the `.kwl` (kwalletfreedesktopattributes.cpp).
/// It comes over as the Secret Service item it was, not as a KWallet entry.
package struct KWalletSecretItem: Sendable, Equatable {
    /// Where kwalletd kept it, for messages.
    package var entry: KWalletEntry
    package var label: String
    package var attributes: [String: String]
    package var secret: Bytes
    package var contentType: String
    /// Seconds since 1970; 0 when the file does not say.
    package var created: UInt64
    package var modified: UInt64
}

extension KWalletContents {
    /// The attributes file kwalletd writes is a few hundred bytes per item.
    package static let maximumAttributesFileSize = 16 << 20

    /// The wallet's entries split into kwalletd's Secret Service items (the entries its
    /// attributes file names) and KWallet's own entries. Without the file (nil), every entry is
    /// KWallet's own. A file that is not kwalletd's JSON object is an error: its items would
    /// otherwise come over as entries without their attributes.
    package func splitSecretServiceItems(attributesFile: Bytes?) throws -> (items: [KWalletSecretItem], entries: [KWalletEntry]) {
        guard let attributesFile else { return ([], entries) }
        guard attributesFile.count <= Self.maximumAttributesFileSize else {
            throw KWalletFileError.malformed("the Secret Service attributes file is larger than \(Self.maximumAttributesFileSize >> 20) MiB")
        }
        guard case .object(let pairs)? = try? JSON.parse(attributesFile) else {
            throw KWalletFileError.malformed("the Secret Service attributes file is not kwalletd's JSON object")
        }
        var parameters: [String: [(String, JSONValue)]] = [:]
        for case (let location, .object(let fields)) in pairs { parameters[location] = fields }
        var items: [KWalletSecretItem] = []
        var native: [KWalletEntry] = []
        for entry in entries {
            guard let fields = parameters[entry.folder + "/" + entry.key] else {
                native.append(entry)
                continue
            }
            func string(_ name: String) -> String? {
                fields.last { $0.0 == name }.flatMap { if case .string(let s) = $0.1 { return s } else { return nil } }
            }
            var attributes: [String: String] = [:]
            if case .object(let values)? = fields.last(where: { $0.0 == "attributes" })?.1 {
                for case (let name, .string(let value)) in values { attributes[name] = value }
            }
            items.append(
                KWalletSecretItem(
                    entry: entry, label: Self.label(folder: entry.folder, key: entry.key), attributes: attributes,
                    secret: Self.secret(of: entry), contentType: string("$fdo_mime_type") ?? "application/octet-stream",
                    created: string("$fdo_created").flatMap(UInt64.init) ?? 0, modified: string("$fdo_modified").flatMap(UInt64.init) ?? 0))
        }
        return (items, native)
    }

    /// kwalletd's FdoUniqueLabel: the key without the "__N_" it adds to tell same-labelled items
    /// apart, and the folder in front unless it is "Secret Service".
    static func label(folder: String, key: String) -> String {
        // Its pattern, "(^.*)__(\\d+)_$", on UTF-16 as a QString is matched; the number a Qt int.
        var label = key
        let units = Array(key.utf16)
        if units.last == 0x5F {
            let digits = units.dropLast().reversed().prefix { (0x30...0x39).contains($0) }
            let end = units.count - 1 - digits.count
            if !digits.isEmpty, end >= 2, units[end - 2] == 0x5F, units[end - 1] == 0x5F,
                Int32(String(decoding: digits.reversed(), as: UTF16.self)) != nil
            {
                label = String(decoding: units[..<(end - 2)], as: UTF16.self)
            }
        }
        return folder == "Secret Service" ? label : folder + "/" + label
    }

    /// What kwalletd's GetSecret answers: a password entry's text in UTF-8, another's bytes.
    static func secret(of entry: KWalletEntry) -> Bytes {
        guard entry.type == .password, let text = QtDataStream.readString(entry.value) else { return entry.value }
        return Array(text.utf8)
    }
}
