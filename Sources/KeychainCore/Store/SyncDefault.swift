/// `security sync default on|off`: whether the items that programs store without choosing
/// (git-credential-keychain, docker-credential-keychain, the Secret Service's unconfined clients)
/// are synchronizable. Kept in the keychain as a hidden ThisDeviceOnly item, like the sync state,
/// so each machine decides for itself. A setting of the store, read by every writer; the exchange
/// itself is KeychainSync's.
extension KeychainStore {
    package var syncsNewItems: Bool { readSyncDefault() ?? false }

    /// The setting, or nil when the keychain is too locked to say: a batch that reads it once
    /// then leaves each item to ask again, rather than take "off" for all of them.
    package func readSyncDefault() -> Bool? {
        do {
            return try hiddenSecret("default") == [1]
        } catch {
            return nil
        }
    }

    package func setSyncsNewItems(_ on: Bool) throws {
        if on { try setHiddenSecret("default", [1]) } else { try removeHiddenSecret("default") }
    }

    /// `item` marked synchronizable when this keychain says so (and its class allows it).
    /// `known` is `syncsNewItems` as a bulk writer read it once inside its batch, where nothing
    /// else can change it (asking costs a lookup, as much as a third of storing an item).
    package func withSyncDefault(_ item: Item, known: Bool? = nil) -> Item {
        guard !item.protection.isThisDeviceOnly, known ?? syncsNewItems else { return item }
        var item = item
        item[AttributeKey.synchronizable] = .bool(true)
        return item
    }
}
