import ArgumentParser
import KeychainCore

/// set-key-partition-list and its two siblings. macOS keeps, in each item's access control list,
/// the code-signing "partitions" (apple-tool:, teamid:...) allowed to use it without a prompt; CI
/// scripts set it so that codesign can reach an imported key. Here the partition list and the
/// -T list are one list, the item's access list (AccessList): these commands replace it, as
/// keychain_find.c's keychain_set_partition_list replaces the partition list. As there: the
/// password (-k, or prompted) is checked (wrong: SecKeychainUnlock's error, status 1), the items
/// are found (none: status 1), and each changed item is printed.
enum PartitionList {
    static func apply(_ query: Query, partitions: String?, password: String?, keychain: String?) throws {
        // keychain_parse_args_and_set_partition_list: -S is required (usage), -k is prompted for.
        guard let partitions else { throw ValidationError("give the partition list with -S (for example -S apple-tool:,apple:)") }
        let list: AccessList
        do {
            list = try AccessEntries.partitions(partitions)
        } catch let error as KeychainError {
            throw Failure.report(error)
        }
        let target = KeychainArgument(keychain: keychain)
        let store: KeychainStore
        do {
            store = try target.open()
        } catch let error as KeychainError {
            throw Failure.report(error, context: "couldn't open \"\(keychain ?? target.path)\"")
        }
        var secret =
            try password.map { Array($0.utf8) }
            ?? Terminal.readSecret(prompt: "password to unlock \(keychain ?? "default"): ")
        defer { secret.wipe() }
        do {
            // The password is checked even when the keychain is open: it is what makes this
            // command the person's, since it widens who may read the items without asking.
            try store.verify(password: secret)
            if !store.status.whenUnlocked { try store.unlock(password: secret) }
        } catch let error as KeychainError {
            Failure.print(error, context: "SecKeychainUnlock")
            throw ExitCode(1)
        }
        var query = query
        query.synchronizable = .any
        let items: [Item]
        do {
            items = try store.find(query, limit: nil)
        } catch let error as KeychainError {
            Failure.print(error, context: "SecItemCopyMatching")
            throw ExitCode(1)
        }
        for item in items {
            do {
                try AccessEdit.write(list, to: item, in: store, reason: "set-partition-list: changing which programs may use \(item.itemClass.rawValue) items")
            } catch let error as KeychainError {
                // keychain_set_partition_list's call for each item, and its status 1.
                Failure.print(error, context: "SecKeychainItemSetAccessWithPassword")
                throw ExitCode(1)
            }
            Terminal.out(ItemFormat.describe(item, keychain: store.path))
        }
    }
}

extension KeychainArgument {
    init(keychain: String?) {
        self.init()
        self.keychain = keychain
    }
}

/// -S and -k, which the three commands share.
struct PartitionOptions: ParsableArguments {
    @Option(
        name: .customShort("S"), parsing: .unconditional,
        help: "Comma-separated partition ids: the item's new access list (apple-tool:, apple:, teamid:ID, exe:/path, flatpak:ID, snap:NAME).")
    var partitions: String?
    @Option(name: .customShort("k"), parsing: .unconditional, help: "The keychain's password (visible to other processes; leave it out to be prompted).")
    var password: String?
    @Argument(help: "Keychain (default: the default keychain).") var keychain: String?
}

struct SetGenericPasswordPartitionList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-generic-password-partition-list",
        abstract: "Set the access list (partition list) of the generic passwords that match.")
    @OptionGroup var attributes: GenericAttributes
    @OptionGroup var options: PartitionOptions
    func run() throws {
        try PartitionList.apply(attributes.query, partitions: options.partitions, password: options.password, keychain: options.keychain)
    }
}

struct SetInternetPasswordPartitionList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-internet-password-partition-list",
        abstract: "Set the access list (partition list) of the internet passwords that match.")
    @OptionGroup var attributes: InternetAttributes
    @OptionGroup var options: PartitionOptions
    func run() throws {
        try PartitionList.apply(attributes.query, partitions: options.partitions, password: options.password, keychain: options.keychain)
    }
}

struct SetKeyPartitionList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-key-partition-list",
        abstract: "Set the access list (partition list) of the keys that match.")

    @OptionGroup var attributes: KeyAttributes
    @OptionGroup var options: PartitionOptions

    func run() throws {
        try PartitionList.apply(attributes.query, partitions: options.partitions, password: options.password, keychain: options.keychain)
    }
}
