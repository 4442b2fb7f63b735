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

/// kwalletd's `WALLET_attributes.json`: what its Secret Service keeps of each item beside the
/// wallet's entry, by the entry's "Folder/key" (kwalletfreedesktopattributes.cpp). The `.kwl`
/// importers and the D-Bus importer read it alike.
package struct KWalletSecretAttributes: Sendable {
    package struct Fields: Sendable {
        package var attributes: [String: String] = [:]
        package var contentType = "application/octet-stream"
        /// Seconds since 1970; 0 when the file does not say.
        package var created: UInt64 = 0
        package var modified: UInt64 = 0
    }

    /// The attributes file kwalletd writes is a few hundred bytes per item.
    package static let maximumFileSize = 16 << 20

    private var byLocation: [String: Fields] = [:]

    /// A file that is not kwalletd's JSON object is an error: its items would otherwise come over
    /// as entries without their attributes.
    package init(file: Bytes) throws {
        guard file.count <= Self.maximumFileSize else {
            throw KWalletFileError.malformed("the Secret Service attributes file is larger than \(Self.maximumFileSize >> 20) MiB")
        }
        guard case .object(let pairs)? = try? JSON.parse(file) else {
            throw KWalletFileError.malformed("the Secret Service attributes file is not kwalletd's JSON object")
        }
        for case (let location, .object(let parameters)) in pairs {
            var fields = Fields()
            for (name, parameter) in parameters {
                switch (name, parameter) {
                case ("attributes", .object(let values)):
                    fields.attributes = [:]
                    for case (let name, .string(let value)) in values { fields.attributes[name] = value }
                case ("$fdo_mime_type", .string(let text)): fields.contentType = text
                case ("$fdo_created", .string(let text)): fields.created = UInt64(text) ?? 0
                case ("$fdo_modified", .string(let text)): fields.modified = UInt64(text) ?? 0
                default: break
                }
            }
            byLocation[location] = fields
        }
    }

    /// The item kept as this entry, if it is one.
    package func fields(folder: String, key: String) -> Fields? { byLocation[folder + "/" + key] }

    /// kwalletd's FdoUniqueLabel: the key without the "__N_" it adds to tell same-labelled items
    /// apart, and the folder in front unless it is "Secret Service".
    package static func label(folder: String, key: String) -> String {
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
    package static func secret(of entry: KWalletEntry) -> Bytes {
        guard entry.type == .password, let text = QtDataStream.readString(entry.value) else { return entry.value }
        return Array(text.utf8)
    }
}

extension KWalletContents {
    package static let maximumAttributesFileSize = KWalletSecretAttributes.maximumFileSize

    /// The wallet's entries split into kwalletd's Secret Service items (the entries its
    /// attributes file names) and KWallet's own entries. Without the file (nil), every entry is
    /// KWallet's own.
    package func splitSecretServiceItems(attributesFile: Bytes?) throws -> (items: [KWalletSecretItem], entries: [KWalletEntry]) {
        guard let attributesFile else { return ([], entries) }
        let kept = try KWalletSecretAttributes(file: attributesFile)
        var items: [KWalletSecretItem] = []
        var native: [KWalletEntry] = []
        for entry in entries {
            guard let fields = kept.fields(folder: entry.folder, key: entry.key) else {
                native.append(entry)
                continue
            }
            items.append(
                KWalletSecretItem(
                    entry: entry, label: KWalletSecretAttributes.label(folder: entry.folder, key: entry.key), attributes: fields.attributes,
                    secret: KWalletSecretAttributes.secret(of: entry), contentType: fields.contentType, created: fields.created,
                    modified: fields.modified))
        }
        return (items, native)
    }
}
