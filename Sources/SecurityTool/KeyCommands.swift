import ArgumentParser
import KeychainCore

/// `security find-key`: key items, matched as keychain_find.m's find-key matches them. The
/// application label of an SSH key is the SHA-256 of its public blob, so -a also takes the
/// fingerprint `ssh-add -l` prints (SHA256:...).
struct FindKey: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "find-key", abstract: "Find keys in the keychain.")

    @Option(name: .customShort("a"), help: "Match the application label (text, or an SSH key's SHA256:... fingerprint).") var applicationLabel: String?
    @Option(name: .customShort("c"), help: "Match the creator (four-character code).") var creator: String?
    @Option(name: .customShort("D"), help: "Match the description.") var keyDescription: String?
    @Option(name: .customShort("j"), help: "Match the comment.") var comment: String?
    @Option(name: .customShort("l"), help: "Match the label.") var label: String?
    @Option(name: .customShort("t"), help: "Type of key to find: symmetric, public or private.") var keyClass: String?
    @Flag(name: .customShort("d"), help: "Match keys that can decrypt.") var decrypt = false
    @Flag(name: .customShort("e"), help: "Match keys that can encrypt.") var encrypt = false
    @Flag(name: .customShort("r"), help: "Match keys that can derive.") var derive = false
    @Flag(name: .customShort("s"), help: "Match keys that can sign.") var sign = false
    @Flag(name: .customShort("u"), help: "Match keys that can unwrap.") var unwrap = false
    @Flag(name: .customShort("v"), help: "Match keys that can verify.") var verify = false
    @Flag(name: .customShort("w"), help: "Match keys that can wrap.") var wrap = false
    @OptionGroup var target: KeychainListArgument

    func run() throws {
        try perform("find-key") {
            let query = try self.query()
            let found = try SearchList.search(target.paths) { path, _ -> [(Item, String)] in
                let store = try KeychainStore.open(at: path, storage: .kernel)
                return try store.find(query, limit: nil).map { ($0, path) }
            }
            for (item, path) in found { Terminal.out(ItemFormat.describe(item, keychain: path)) }
        }
    }

    private func query() throws -> Query {
        var attributes: [String: AttributeValue] = [:]
        if let applicationLabel { attributes[AttributeKey.applicationLabel] = .data(Self.applicationLabel(applicationLabel)) }
        attributes[AttributeKey.creator] = creator.map(AttributeValue.string)
        if let keyDescription { attributes[AttributeKey.description] = .string(keyDescription) }
        if let comment { attributes[AttributeKey.comment] = .string(comment) }
        if let label { attributes[AttributeKey.label] = .string(label) }
        if let keyClass {
            let classes: [String: KeyClass] = ["symmetric": .symmetric, "public": .public, "private": .private]
            guard let named = classes[keyClass] else { throw ValidationError("-t takes symmetric, public or private") }
            attributes[AttributeKey.keyClass] = .int(named.rawValue)
        }
        let usages = [
            (decrypt, AttributeKey.canDecrypt), (encrypt, AttributeKey.canEncrypt), (derive, AttributeKey.canDerive),
            (sign, AttributeKey.canSign), (unwrap, AttributeKey.canUnwrap), (verify, AttributeKey.canVerify), (wrap, AttributeKey.canWrap)
        ]
        for (wanted, key) in usages where wanted { attributes[key] = .int(1) }
        var query = Query(itemClass: .key, attributes: attributes)
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
