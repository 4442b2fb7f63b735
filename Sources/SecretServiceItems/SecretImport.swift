import KeychainCore

/// Items brought from another store (gnome-keyring's keyring files) as Secret Service items, so
/// that keychain-secret-service shows the label and attributes they had there. Importing is
/// idempotent: an item this keychain already holds with the same label, attributes and secret
/// is not added again, so a second run adds and changes nothing.
extension KeychainStore {
    package enum ImportOutcome: Sendable, Equatable {
        case added, alreadyThere
    }

    /// Whether an unlocked Secret Service item has exactly this label, these attributes and this
    /// secret. Items needing the user's presence are not read, so never count as the same.
    package func holdsSecretItem(label: String, attributes: [String: String], secret: Bytes) throws -> Bool {
        for item in try searchSecretItems(attributes).unlocked where item.label == label && item.attributes == attributes {
            guard var stored = (try? secretItem(item.row, includeSecret: true))?.secret else { continue }
            defer { stored.wipe() }
            if Crypto.equal(stored, secret) { return true }
        }
        return false
    }

    /// Adds the item unless it is already here; it keeps its dates (0: unknown, dated now). A
    /// look-alike (same attributes, another secret) is added beside the existing item, never over
    /// it: nothing already in the keychain is replaced by an import.
    package func importSecretItem(
        label: String, attributes: [String: String], secret: Bytes,
        created: UInt64, modified: UInt64, syncsNewItems: Bool? = nil
    ) throws -> ImportOutcome {
        if try holdsSecretItem(label: label, attributes: attributes, secret: secret) { return .alreadyThere }
        _ = try addSecretItem(
            label: label, attributes: attributes, secret: secret, contentType: Self.defaultContentType,
            replace: false, created: Double(created), modified: Double(modified), syncsNewItems: syncsNewItems)
        return .added
    }
}
