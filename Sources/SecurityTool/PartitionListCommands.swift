import ArgumentParser
import KeychainCore

/// set-key-partition-list and its two siblings. macOS keeps, in each item's access control list,
/// the code-signing "partitions" (apple-tool:, teamid:...) allowed to use it without a prompt; CI
/// scripts set it so that codesign can reach an imported key. Linux has no partitions: every
/// process of the user reaches the items of an unlocked keychain. So these commands do what
/// keychain_find.c's keychain_set_partition_list does but for the ACL edit: unlock the keychain
/// with the password (wrong: the error and status 1, as there), find the items (none: status 1),
/// print each, and change nothing.
enum PartitionList {
    static func apply(_ query: Query, partitions: String?, password: String?, keychain: String?) throws {
        // keychain_parse_args_and_set_partition_list: -S is required (usage), -k is prompted for.
        guard partitions != nil else { throw ValidationError("give the partition list with -S (for example -S apple-tool:,apple:)") }
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
            try store.unlock(password: secret)
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
        for item in items { Terminal.out(ItemFormat.describe(item, keychain: store.path)) }
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
    @Option(name: .customShort("S"), parsing: .unconditional, help: "Comma-separated partition IDs (accepted; Linux has no partitions).")
    var partitions: String?
    @Option(name: .customShort("k"), parsing: .unconditional, help: "The keychain's password (visible to other processes; leave it out to be prompted).")
    var password: String?
    @Argument(help: "Keychain (default: the default keychain).") var keychain: String?
}

struct SetGenericPasswordPartitionList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-generic-password-partition-list",
        abstract: "Check the keychain password and show the generic passwords that match; Linux has no partition lists to set.")
    @OptionGroup var attributes: GenericAttributes
    @OptionGroup var options: PartitionOptions
    func run() throws {
        try PartitionList.apply(attributes.query, partitions: options.partitions, password: options.password, keychain: options.keychain)
    }
}

struct SetInternetPasswordPartitionList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-internet-password-partition-list",
        abstract: "Check the keychain password and show the internet passwords that match; Linux has no partition lists to set.")
    @OptionGroup var attributes: InternetAttributes
    @OptionGroup var options: PartitionOptions
    func run() throws {
        try PartitionList.apply(attributes.query, partitions: options.partitions, password: options.password, keychain: options.keychain)
    }
}

struct SetKeyPartitionList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-key-partition-list",
        abstract:
            "Check the keychain password and show the keys that match; Linux has no partition lists to set (every process of the user may use an unlocked key)."
    )

    @OptionGroup var attributes: KeyAttributes
    @OptionGroup var options: PartitionOptions

    func run() throws {
        try PartitionList.apply(attributes.query, partitions: options.partitions, password: options.password, keychain: options.keychain)
    }
}
