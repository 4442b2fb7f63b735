import ArgumentParser
import KeychainCore

/// Adding, finding and deleting are the same for both password classes but for their attributes.
enum PasswordCommand {
    static func add(_ query: Query, _ options: NewPasswordOptions, _ target: KeychainArgument) throws {
        let nameKey = query.itemClass == .genericPassword ? AttributeKey.service : AttributeKey.server
        // keychain_add.c: an account and a service (or server) are required, else usage (2).
        guard query.attributes[AttributeKey.account] != nil, query.attributes[nameKey] != nil else {
            throw ValidationError("give the account (-a) and the \(query.itemClass == .genericPassword ? "service" : "server") (-s)")
        }
        // keychain_add.c: a -T that names no program is SecTrustedApplicationCreateFromPath's
        // error and status 1, before the keychain is touched.
        let chosen: AccessList?
        do {
            chosen = try options.accessList()
        } catch let error as KeychainError {
            Failure.print(error)
            throw ExitCode(1)
        }
        try perform(context(query.itemClass, "add")) {
            let store = try target.open()
            var secret = try options.secret()
            defer { secret.wipe() }
            var attributes = query.attributes
            // keychain_add.c: the label defaults to the service (or server) name; an internet
            // password's authentication type defaults to "dflt".
            if attributes[AttributeKey.label] == nil { attributes[AttributeKey.label] = attributes[nameKey] }
            if query.itemClass == .internetPassword, attributes[AttributeKey.authenticationType] == nil {
                attributes[AttributeKey.authenticationType] = .string("dflt")
            }
            var item = Item(itemClass: query.itemClass, attributes: attributes, secret: secret)
            item[AttributeKey.accessible] = .string(options.protection!.rawValue)
            if options.synchronizable { item[AttributeKey.synchronizable] = .bool(true) }
            if let conditions = options.conditions { item[AttributeKey.accessControl] = .int(Int64(bitPattern: conditions.rawValue)) }
            let presence = PresenceOptions(askApplicationPassword: {
                try Terminal.readSecret(prompt: "application password for the item: ", confirm: "retype application password: ")
            })
            item[AccessList.attribute] = .string((chosen ?? AccessEntries.securityTool).text)
            if options.update {
                // -U without -A or -T changes the secret and attributes, not who may read them.
                try store.addOrUpdate(item, keepingOld: chosen == nil ? [AccessList.attribute] : [], presence: presence)
            } else {
                try store.add(item, presence: presence)
            }
        }
    }

    static func find(_ query: Query, _ output: FindOutputOptions, _ target: KeychainListArgument) throws {
        // macOS's command has no synchronizable filter; here it finds both kinds.
        var query = query
        query.synchronizable = .any
        try perform(context(query.itemClass, "find")) {
            let wantSecret = output.showPassword || output.passwordOnly
            let presence = asking("\(context(query.itemClass, "find")): reading the password of \(describe(query))")
            let (item, store) = try target.first { try $0.find(query, limit: 1, includeSecret: wantSecret, presence: presence).first }
            if output.passwordOnly {
                Terminal.out(ItemFormat.passwordText(item.secret ?? []))
                return
            }
            Terminal.out(ItemFormat.describe(item, keychain: store.path))
            if output.showAccess { Terminal.out(AccessEntries.describe(AccessList.of(item))) }
            if output.showPassword { Terminal.error("password: " + ItemFormat.passwordValue(item.secret ?? [])) }
        }
    }

    /// Deletes the first matching item, as macOS does, and shows what was deleted.
    static func delete(_ query: Query, _ target: KeychainListArgument) throws {
        // keychain_find.c: with no attribute to match, the first item of the keychain would go;
        // macOS shows the usage instead, and deletes nothing.
        guard !query.attributes.isEmpty else { throw ValidationError("name the item to delete (-a, -s, -l, ...)") }
        var query = query
        query.synchronizable = .any
        try perform(context(query.itemClass, "delete")) {
            let (item, store) = try target.first { try $0.find(query, limit: 1).first }
            var exact = Query(itemClass: item.itemClass)
            exact.rows = [item.rowID]
            exact.synchronizable = .any
            try store.delete(exact, presence: asking("\(context(query.itemClass, "delete")): deleting the item of \(describe(query))"))
            Terminal.out(ItemFormat.describe(item, keychain: store.path))
            Terminal.error("password has been deleted.")
        }
    }

    /// Items that need a person: polkit asks (through pkttyagent on this terminal when no other
    /// agent serves us), and an application password is read from the terminal or standard input.
    static func asking(_ reason: String) -> PresenceOptions {
        PresenceOptions(
            operationPrompt: reason,
            askApplicationPassword: {
                try Terminal.readSecret(prompt: "application password for the item: ")
            })
    }

    /// The item a command names, for the line shown before polkit's agent asks.
    static func describe(_ query: Query) -> String {
        let name = query.itemClass == .genericPassword ? AttributeKey.service : AttributeKey.server
        let parts = [(name, query.itemClass == .genericPassword ? "service" : "server"), (AttributeKey.account, "account"), (AttributeKey.label, "label")]
            .compactMap { key, word in query.attributes[key]?.stringValue.map { "\(word) \($0)" } }
        return parts.isEmpty ? "the first matching item" : parts.joined(separator: ", ")
    }

    static func context(_ itemClass: ItemClass, _ verb: String) -> String {
        "\(verb)-\(itemClass == .genericPassword ? "generic" : "internet")-password"
    }
}

struct AddGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add-generic-password", abstract: "Add a generic password item.")
    @OptionGroup var attributes: GenericAttributes
    @OptionGroup var options: NewPasswordOptions
    @OptionGroup var target: KeychainArgument
    func run() throws { try PasswordCommand.add(attributes.query, options, target) }
}

struct AddInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add-internet-password", abstract: "Add an internet password item.")
    @OptionGroup var attributes: InternetAttributes
    @OptionGroup var options: NewPasswordOptions
    @OptionGroup var target: KeychainArgument
    func run() throws { try PasswordCommand.add(attributes.query, options, target) }
}

struct FindGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "find-generic-password", abstract: "Find a generic password item.")
    @OptionGroup var attributes: GenericAttributes
    @OptionGroup var output: FindOutputOptions
    @OptionGroup var target: KeychainListArgument
    func run() throws { try PasswordCommand.find(attributes.query, output, target) }
}

struct FindInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "find-internet-password", abstract: "Find an internet password item.")
    @OptionGroup var attributes: InternetAttributes
    @OptionGroup var output: FindOutputOptions
    @OptionGroup var target: KeychainListArgument
    func run() throws { try PasswordCommand.find(attributes.query, output, target) }
}

struct DeleteGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete-generic-password", abstract: "Delete a generic password item.")
    @OptionGroup var attributes: GenericAttributes
    @OptionGroup var target: KeychainListArgument
    func run() throws { try PasswordCommand.delete(attributes.query, target) }
}

struct DeleteInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete-internet-password", abstract: "Delete an internet password item.")
    @OptionGroup var attributes: InternetAttributes
    @OptionGroup var target: KeychainListArgument
    func run() throws { try PasswordCommand.delete(attributes.query, target) }
}

struct DumpKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump-keychain", abstract: "Show every item a keychain holds (locked items are counted, not shown).")

    @Flag(name: .customShort("d"), help: "Show the passwords too.") var data = false
    @Flag(name: .customShort("a"), help: "Show each item's access list (the programs it trusts).") var accessControl = false
    @Flag(name: .customShort("i"), help: "As -a (macOS then edits each list interactively; use `security access` here).") var interactive = false
    @Flag(name: .customShort("r"), help: "Accepted for macOS compatibility.") var raw = false
    @OptionGroup var target: KeychainListArgument

    func run() throws {
        for path in target.paths {
            try perform("dump-keychain") { try dump(try KeychainStore.open(at: path, storage: .kernel)) }
        }
    }

    private func dump(_ store: KeychainStore) throws {
        do {
            var shown = 0
            for itemClass in [ItemClass.genericPassword, .internetPassword, .certificate, .key] {
                var query = Query(itemClass: itemClass)
                query.synchronizable = .any
                query.includesAppItems = true
                let items: [Item]
                do {
                    // A certificate's data is public, and its description is made from it.
                    items = try store.find(
                        query, limit: nil, includeSecret: data || itemClass == .certificate,
                        presence: PasswordCommand.asking("dump-keychain -d: showing every password of \(store.path)"))
                } catch let error as KeychainError where error.code == .itemNotFound || error.code == .interactionNotAllowed {
                    continue
                }
                for item in items {
                    Terminal.out(ItemFormat.describe(item, keychain: store.path))
                    // keychain_dump: -i shows the access lists as -a does.
                    if accessControl || interactive { Terminal.out(AccessEntries.describe(AccessList.of(item))) }
                    if data && item.itemClass != .key { Terminal.out("data:\n" + ItemFormat.passwordValue(item.secret ?? [])) }
                    shown += 1
                }
            }
            let total = try store.count()
            if total > shown {
                Terminal.error("security: \(total - shown) item(s) not shown: locked; \(Remedy.unlock)")
            }
        }
    }
}
