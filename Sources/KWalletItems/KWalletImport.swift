import KeychainCore
import SecretServiceItems

extension KWalletContents {
    /// The folders that hold no entry: KWallet keeps them ("Passwords", "Form Data" in a new
    /// wallet), and so does an import.
    package var emptyFolders: [String] {
        let used = Set(entries.map(\.folder))
        return folders.filter { !used.contains($0) }
    }
}

/// A wallet's entries into a keychain, as `security import-secrets --kwallet` and the first-login
/// import bring them: idempotent, and never over what the keychain holds.
extension KeychainStore {
    /// Why an entry did not come: said by every importer of wallets.
    package static let kwalletEntryKept = "the keychain already holds another value under this folder and key; it is kept"

    /// Whether the keychain holds this entry already (the same type and bytes); errSecDuplicateItem
    /// when it holds another value under the same folder and key: an import never replaces what is
    /// in the keychain, and says so.
    package func holdsKWalletEntry(_ entry: KWalletEntry) throws -> Bool {
        guard var existing = try kwalletEntry(folder: entry.folder, key: entry.key, owner: nil) else { return false }
        defer { existing.value.wipe() }
        guard existing.type == entry.type, existing.value == entry.value else {
            throw KeychainError(.duplicateItem, Self.kwalletEntryKept)
        }
        return true
    }

    package func importKWalletEntry(_ entry: KWalletEntry) throws -> ImportOutcome {
        if try holdsKWalletEntry(entry) { return .alreadyThere }
        try writeKWalletEntry(entry, owner: nil)
        return .added
    }

    package func holdsKWalletFolder(_ folder: String) throws -> Bool { try kwalletFolders(owner: nil).contains(folder) }

    package func importKWalletFolder(_ folder: String) throws -> ImportOutcome {
        try createKWalletFolder(folder, owner: nil) ? .added : .alreadyThere
    }
}
