internal import Glibc
package import KeychainCore

/// Keys kept for good: key items in the user's keychain (kSecClassKey, private, label = the
/// comment, application label = SHA-256 of the public blob, data = OpenSSH's private
/// serialization), so `security dump-keychain`, backups and sync see them like other items.
///
/// A locked keychain opens neither an item's data nor its attributes (both are sealed under the
/// class key), yet the agent must still list the public keys. Those are public by nature, so a
/// copy of each key's public blob, comment and constraints is kept beside the keychain in a 0600
/// file that the agent rewrites whenever it reads the keychain unlocked. The file only serves
/// listing; what signs, and under which constraints, is always read from the keychain item.
package final class SSHKeyVault: @unchecked Sendable {
    package struct Entry: Equatable {
        package var publicBlob: Bytes
        package var comment: String
        package var confirm: Bool
        /// restrict-destination-v00@openssh.com's payload, empty when unconstrained.
        package var destinations: Bytes
        package var isTPMResident: Bool
    }

    /// The programs a kept key signs for without a question (the broker judges the agent's
    /// client against it). Any other program is asked.
    package static let defaultAccess = AccessList(AccessList.sshClients)

    private let store: KeychainStore
    private let protection: Protection
    package let publicListPath: String
    private static let tagPrefix = Array("openssh-agent:".utf8)

    package init(store: KeychainStore, protection: Protection = .whenUnlocked, publicListPath: String? = nil) {
        self.store = store
        self.protection = protection
        self.publicListPath = publicListPath ?? store.path + KeychainFile.sshPublicListSuffix
    }

    /// Adds or replaces the key's item.
    package func save(_ key: SSHPrivateKey, comment: String, confirm: Bool, destinations: Bytes) throws {
        let entry = Entry(publicBlob: key.publicBlob, comment: comment, confirm: confirm, destinations: destinations, isTPMResident: key.isTPMResident)
        let item = Item(
            itemClass: .key,
            attributes: [
                AttributeKey.keyType: .int(OpenSSHKeyItem.keyType), AttributeKey.label: .string(comment),
                AttributeKey.applicationLabel: .data(Crypto.sha256(key.publicBlob)), AttributeKey.applicationTag: .data(Self.tag(of: entry)),
                AttributeKey.accessible: .string(protection.rawValue), AttributeKey.keySizeInBits: .int(Int64(key.bits)),
                AttributeKey.effectiveKeySize: .int(Int64(key.bits)), AccessList.attribute: .string(Self.defaultAccess.text)
            ],
            secret: key.serialized())
        try store.addOrUpdate(item, matching: Self.query(for: key.publicBlob))
        _ = entries()
    }

    /// The kept keys, read from the keychain when it opens, else from the public list.
    package func entries() -> [Entry] {
        do {
            let items = try store.find(Self.query(for: nil), limit: nil)
            let entries = items.compactMap { Self.entry(of: $0) }
            writePublicList(entries)
            return entries
        } catch let error as KeychainError where error.code == .itemNotFound {
            writePublicList([])
            return []
        } catch {
            return readPublicList()
        }
    }

    /// The private key and its entry; throws (the keychain's own error) while the keychain is
    /// locked.
    package func privateKey(for publicBlob: Bytes) throws -> (SSHPrivateKey, Entry) {
        guard let item = try store.find(Self.query(for: publicBlob), limit: 1, includeSecret: true).first, var secret = item.secret,
            let entry = Self.entry(of: item)
        else { throw SSHKeyError("no such key in the keychain") }
        defer { secret.wipe() }
        let key = try SSHPrivateKey(serialized: secret)
        guard key.publicBlob == publicBlob else { throw SSHKeyError("the keychain item holds another key") }
        return (key, entry)
    }

    /// Deletes the key's item for good (`security delete-ssh-key`; the agent only unloads keys);
    /// false when the keychain holds none.
    @discardableResult
    package func remove(_ publicBlob: Bytes) throws -> Bool {
        let removed = try deleting(Self.query(for: publicBlob))
        _ = entries()
        return removed
    }

    @discardableResult
    private func deleting(_ query: Query) throws -> Bool {
        do {
            return try store.delete(query) > 0
        } catch let error as KeychainError where error.code == .itemNotFound {
            return false
        }
    }

    private static func query(for publicBlob: Bytes?) -> Query {
        var query = Query(itemClass: .key, attributes: [AttributeKey.keyType: .int(OpenSSHKeyItem.keyType)])
        if let publicBlob { query.attributes[AttributeKey.applicationLabel] = .data(Crypto.sha256(publicBlob)) }
        return query
    }

    // MARK: The constraints in the application tag, and the public list

    /// The constraints that must outlive the agent: "openssh-agent:" then (bool confirm, string
    /// destinations, bool TPM-resident, string public blob).
    private static func tag(of entry: Entry) -> Bytes { tagPrefix + record(of: entry) }

    private static func record(of entry: Entry) -> Bytes {
        var record = ByteWriter()
        record.bool(entry.confirm)
        record.blob(entry.destinations)
        record.bool(entry.isTPMResident)
        record.blob(entry.publicBlob)
        return record.bytes
    }

    private static func entry(record: Bytes, comment: String) -> Entry? {
        var reader = ByteReader(record)
        guard let confirm = try? reader.bool(), let destinations = try? reader.blob(), let isTPM = try? reader.bool(),
            let publicBlob = try? reader.blob(), reader.isAtEnd
        else { return nil }
        return Entry(publicBlob: publicBlob, comment: comment, confirm: confirm, destinations: destinations, isTPMResident: isTPM)
    }

    private static func entry(of item: Item) -> Entry? {
        guard case .data(let tag)? = item[AttributeKey.applicationTag], tag.starts(with: tagPrefix),
            let entry = entry(record: Array(tag.dropFirst(tagPrefix.count)), comment: item[AttributeKey.label]?.stringValue ?? ""),
            item[AttributeKey.applicationLabel] == .data(Crypto.sha256(entry.publicBlob))
        else { return nil }
        return entry
    }

    /// One line per key: the record in hex, then the comment.
    private func writePublicList(_ entries: [Entry]) {
        let text = entries.map { Self.record(of: $0).hex + " " + $0.comment.filter { $0 != "\n" } + "\n" }.joined()
        if PlainFiles.read(publicListPath) == Array(text.utf8) { return }
        let temporary = publicListPath + ".new"
        guard (try? PlainFiles.write(temporary, Array(text.utf8))) != nil else { return }
        if rename(temporary, publicListPath) != 0 { unlink(temporary) }
    }

    private func readPublicList() -> [Entry] {
        guard let text = PlainFiles.read(publicListPath) else { return [] }
        return text.split(separator: UInt8(ascii: "\n")).compactMap { line -> Entry? in
            let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 1, omittingEmptySubsequences: false)
            guard let record = Bytes(hexDigits: fields[0]) else { return nil }
            return Self.entry(record: record, comment: fields.count > 1 ? String(decoding: fields[1], as: UTF8.self) : "")
        }
    }
}
