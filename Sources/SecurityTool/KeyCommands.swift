import ArgumentParser
import KeychainCore

/// `security find-key`: key items, matched as keychain_find.m's find-key matches them. The
/// application label of an SSH key is the SHA-256 of its public blob, so -a also takes the
/// fingerprint `ssh-add -l` prints (SHA256:...).
struct FindKey: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "find-key", abstract: "Find keys in the keychain.")

    @OptionGroup var attributes: KeyAttributes
    @OptionGroup var target: KeychainListArgument

    func run() throws {
        try perform("find-key") {
            let query = self.query()
            let found = try SearchList.search(target.paths) { path, _ -> [(Item, String)] in
                let store = try KeychainStore.open(at: path, storage: .kernel)
                return try store.find(query, limit: nil).map { ($0, path) }
            }
            for (item, path) in found { Terminal.out(ItemFormat.describe(item, keychain: path)) }
        }
    }

    private func query() -> Query {
        var query = attributes.query
        query.attributes[AttributeKey.applicationLabel] = attributes.applicationLabel.map { .data(Self.applicationLabel($0)) }
        query.synchronizable = .any
        return query
    }

    /// An SSH fingerprint is base64 of the SHA-256 the item keeps; anything else is the label's bytes.
    static func applicationLabel(_ text: String) -> Bytes {
        if text.hasPrefix("SHA256:") {
            var digits = Array(text.dropFirst("SHA256:".count).utf8)
            while digits.count % 4 != 0 { digits.append(UInt8(ascii: "=")) }
            if let digest = PEM.base64(decoding: digits), digest.count == 32 { return digest }
        }
        return Array(text.utf8)
    }
}
