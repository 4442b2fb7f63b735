import KeychainCore

/// What one import has learned of a keychain's Secret Service items: for each attribute set it
/// met, a digest of the label and secret of every item with exactly that set. Each set is read
/// from the keychain once, at its first item, and the items the import adds are noted as they
/// come, so that "already there?" costs a look-up, not a read of every earlier item. gnome-keyring
/// stores look-alikes (one attribute set, other secrets) as items of their own: a keyring of n of
/// them made each check decrypt the n earlier ones (4,000 items took two minutes).
///
/// Valid while nothing else writes to the keychain: inside the import's batch only the import
/// writes; outside one (the first-login import), an item another program adds meanwhile is at
/// worst added twice, as it could be between a check and its add before.
package struct SecretImportIndex {
    private var known: [[String: String]: Set<Bytes>] = [:]
    /// A key of this index alone: the digests say nothing of the secrets once it is gone.
    private let key: Crypto.HMACKey

    package init() throws {
        var bytes = try Crypto.random(32)
        defer { bytes.wipe() }
        key = Crypto.HMACKey(bytes)
    }

    fileprivate func digest(label: String, secret: Bytes) -> Bytes {
        let name = Array(label.utf8)
        var count = UInt64(name.count).bigEndian
        var message = withUnsafeBytes(of: &count) { Bytes($0) } + name + secret
        defer { message.wipe() }
        return key.mac(message)
    }

    fileprivate func holds(_ attributes: [String: String], _ digest: Bytes) -> Bool? {
        known[attributes].map { $0.contains(digest) }
    }

    fileprivate mutating func note(_ attributes: [String: String], _ digests: Set<Bytes>) {
        known[attributes, default: []].formUnion(digests)
    }
}

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
        var index = try SecretImportIndex()
        return try holdsSecretItem(label: label, attributes: attributes, secret: secret, index: &index)
    }

    /// `holdsSecretItem`, answered from `index`, which reads this attribute set from the keychain
    /// at its first item.
    package func holdsSecretItem(label: String, attributes: [String: String], secret: Bytes, index: inout SecretImportIndex) throws -> Bool {
        let digest = index.digest(label: label, secret: secret)
        if let held = index.holds(attributes, digest) { return held }
        var stored: Set<Bytes> = []
        for item in try searchSecretItems(attributes).unlocked where item.attributes == attributes {
            guard var secret = (try? secretItem(item.row, includeSecret: true))?.secret else { continue }
            defer { secret.wipe() }
            stored.insert(index.digest(label: item.label, secret: secret))
        }
        index.note(attributes, stored)
        return stored.contains(digest)
    }

    /// Adds the item unless it is already here; it keeps its dates (0: unknown, dated now). A
    /// look-alike (same attributes, another secret) is added beside the existing item, never over
    /// it: nothing already in the keychain is replaced by an import. `index` is the import's: one
    /// for all the items of a file.
    package func importSecretItem(
        label: String, attributes: [String: String], secret: Bytes, contentType: String = KeychainStore.defaultContentType,
        created: UInt64, modified: UInt64, syncsNewItems: Bool? = nil, index: inout SecretImportIndex
    ) throws -> ImportOutcome {
        if try holdsSecretItem(label: label, attributes: attributes, secret: secret, index: &index) { return .alreadyThere }
        _ = try addSecretItem(
            label: label, attributes: attributes, secret: secret, contentType: contentType,
            replace: false, created: Double(created), modified: Double(modified), syncsNewItems: syncsNewItems)
        index.note(attributes, [index.digest(label: label, secret: secret)])
        return .added
    }

    /// One item alone: `importSecretItem` with an index of its own.
    package func importSecretItem(
        label: String, attributes: [String: String], secret: Bytes,
        created: UInt64, modified: UInt64, syncsNewItems: Bool? = nil
    ) throws -> ImportOutcome {
        var index = try SecretImportIndex()
        return try importSecretItem(
            label: label, attributes: attributes, secret: secret, created: created, modified: modified, syncsNewItems: syncsNewItems,
            index: &index)
    }
}
