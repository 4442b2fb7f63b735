/// `security sync default on|off`: whether the items that programs store without choosing
/// (git-credential-keychain, docker-credential-keychain, the Secret Service's unconfined clients)
/// are synchronizable. Kept in the keychain as a hidden ThisDeviceOnly item, like the sync state,
/// so each machine decides for itself.
extension KeychainStore {
    package var syncsNewItems: Bool { ((try? syncSecret("default")) ?? nil) == [1] }

    package func setSyncsNewItems(_ on: Bool) throws {
        if on { try setSyncSecret("default", [1]) } else { try removeSyncSecret("default") }
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
