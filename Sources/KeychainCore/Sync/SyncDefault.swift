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
    package func withSyncDefault(_ item: Item) -> Item {
        guard syncsNewItems, !item.protection.isThisDeviceOnly else { return item }
        var item = item
        item[AttributeKey.synchronizable] = .bool(true)
        return item
    }
}
