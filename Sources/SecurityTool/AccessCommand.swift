import ArgumentParser
import KeychainBroker
import KeychainCore

/// Writing an item's access list: an update of that one item through the engine, like any other
/// change to it (so it is asked for as a read of its secret would be, where that is asked).
enum AccessEdit {
    static func write(_ list: AccessList, to item: Item, in store: KeychainStore, reason: String) throws {
        var exact = Query(itemClass: item.itemClass)
        exact.rows = [item.rowID]
        exact.synchronizable = .any
        exact.includesAppItems = true
        try store.update(exact, attributes: [AccessList.attribute: .string(list.text)], presence: PasswordCommand.asking(reason))
    }

    /// The list an edit starts from. An item made before lists existed (or imported) is given by
    /// the broker to the front end its kind names (`AccessDecision.impliedList`, with the
    /// installed programs' paths): its first list keeps that.
    static func current(_ item: Item) -> AccessList {
        AccessList.of(item) ?? AccessDecision().impliedList(itemClass: item.itemClass, attributes: item.attributes)
    }
}

/// `security access`: show or change which programs may read an item without being asked, or
/// (--program) find and revoke one program's entries across every item.
struct Access: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "access",
        abstract: "Show or change which programs an item trusts (its access list), or one program's entries everywhere.")

    @OptionGroup var common: CommonAttributes
    @Option(name: .customShort("s"), parsing: .unconditional, help: "Service (generic) or server (internet).") var service: String?
    @Option(name: .customShort("G"), parsing: .unconditional, help: "Generic attribute value (generic passwords).") var generic: String?
    @Option(name: .customShort("d"), parsing: .unconditional, help: "Security domain (internet passwords).") var securityDomain: String?
    @Option(name: .customShort("p"), parsing: .unconditional, help: "Path (internet passwords).") var path: String?
    @Option(name: .customShort("P"), parsing: .unconditional, help: "Port (internet passwords).") var port: Int?
    @Option(name: .customShort("r"), parsing: .unconditional, help: "Protocol (internet passwords).") var protocolCode: String?
    @Option(name: .customShort("t"), parsing: .unconditional, help: "Authentication type (internet passwords).") var authenticationType: String?
    @Flag(name: .customLong("internet"), help: "Select an internet password (implied by -d, -p, -P, -r, -t).") var internet = false
    @Option(name: .customLong("grant"), help: "Add an entry: a program's path, or any, exe:/path, flatpak:ID, snap:NAME, apple-tool:, apple:, teamid:ID.")
    var grant: String?
    // `--revoke ENTRY` reaches the parser as --revoke-entry, a bare `--revoke` (after --program)
    // as the flag (CommandSpec.optionalValues).
    @Option(name: .customLong("revoke-entry"), help: "Remove an entry (--revoke ENTRY; a path removes every entry naming that program).")
    var revoke: String?
    @Flag(name: .customLong("revoke"), help: "With --program: remove its entries from every item.") var revokeProgram = false
    @Flag(name: .customLong("list"), help: "Show the list (the default).") var list = false
    @Flag(name: .customLong("interpreter"), help: "With --grant of an interpreter's path: trust it (an interpreter: entry).") var interpreter = false
    @Option(name: .customLong("program"), help: "Every item whose list names this program: --list them or --revoke its entries.")
    var program: String?
    @OptionGroup var target: KeychainListArgument

    func validate() throws {
        if [grant != nil, revoke != nil || revokeProgram, list].filter({ $0 }).count > 1 {
            throw ValidationError("give one of --grant, --revoke and --list")
        }
        if revokeProgram && program == nil { throw ValidationError("--revoke takes the entry to remove") }
        if program != nil {
            if grant != nil { throw ValidationError("--program takes --list or --revoke; grant items one by one") }
            if !selectors.attributes.isEmpty { throw ValidationError("--program looks at every item: no item options with it") }
        } else if selectors.attributes.isEmpty {
            throw ValidationError("name the item (-a, -s, -l, ...), or give --program PATH")
        }
        if interpreter && grant == nil { throw ValidationError("--interpreter goes with --grant") }
    }

    /// The item the options name: -s is a server, and the item an internet password, where an
    /// option only internet passwords have is given (or --internet).
    var selectors: Query {
        let internetOnly = [securityDomain, path, protocolCode, authenticationType].contains { $0 != nil } || port != nil
        guard internet || internetOnly else { return GenericAttributes.query(common.attributes, service: service, generic: generic) }
        return InternetAttributes.query(
            common.attributes, server: service, securityDomain: securityDomain, path: path, port: port, protocolCode: protocolCode,
            authenticationType: authenticationType)
    }

    func run() throws {
        if let program {
            try perform("access") { try acrossItems(program) }
            return
        }
        try perform("access") { try oneItem() }
    }

    /// The first matching item, as find-*-password finds it.
    private func oneItem() throws {
        var query = selectors
        query.synchronizable = .any
        let (item, store) = try target.first { try $0.find(query, limit: 1).first }
        var list = AccessEdit.current(item)
        let reason = "access: changing which programs may read the item of \(PasswordCommand.describe(query))"
        if let grant {
            list.add(try AccessEntries.granted(grant, asInterpreter: interpreter, option: "--grant"))
            try AccessEdit.write(list, to: item, in: store, reason: reason)
        } else if let revoke {
            let before = list.entries.count
            let removed = try Self.removing(revoke, from: &list)
            guard list.entries.count < before else {
                Terminal.error("security: access: \(removed) was not in the item's list; nothing changed")
                return
            }
            try AccessEdit.write(list, to: item, in: store, reason: reason)
        }
        let shown = grant == nil && revoke == nil ? AccessList.of(item) : list
        Terminal.out(ItemFormat.describe(item, keychain: store.path))
        Terminal.out(AccessEntries.describe(shown))
    }

    /// Removes what `given` names: every entry naming a program given by path, else the entry.
    /// Returns how the entry reads, for the message when nothing matched.
    static func removing(_ given: String, from list: inout AccessList) throws -> String {
        guard let entry = AccessList.Entry(given) else {
            guard given.contains("/") else { throw KeychainError.param("--revoke \(given): not a program's path nor an entry") }
            let path = AccessEntries.resolvedIfPresent(given)
            list.entries.removeAll { AccessEntries.names($0, program: path) }
            return path
        }
        list.remove(entry)
        if case .executable(let path) = entry {
            // exe:/path also means the entry whatever its path resolves to.
            list.remove(.executable(AccessEntries.resolvedIfPresent(path)))
        }
        return entry.text
    }

    /// Every readable item of the keychains (the search list by default) whose list names the
    /// program: shown, or (--revoke) its entries removed, item by item.
    private func acrossItems(_ given: String) throws {
        let path = AccessEntries.resolvedIfPresent(given)
        // After --program, --revoke takes no value: what the command line gave it is the first keychain.
        let revoking = revokeProgram || revoke != nil
        let named = (revoke.map { [$0] } ?? []) + target.keychains
        let paths = named.isEmpty ? target.paths : named.map(KeychainFile.resolve)
        var changed = 0
        for store in try paths.map({ try KeychainStore.open(at: $0, storage: .kernel) }) {
            for itemClass in [ItemClass.genericPassword, .internetPassword, .key, .certificate] {
                var query = Query(itemClass: itemClass)
                query.synchronizable = .any
                query.includesAppItems = true
                let items: [Item]
                do {
                    items = try store.find(query, limit: nil)
                } catch let error as KeychainError where error.code == .itemNotFound || error.code == .interactionNotAllowed {
                    continue
                }
                for item in items {
                    guard var list = AccessList.of(item), list.entries.contains(where: { AccessEntries.names($0, program: path) }) else { continue }
                    if revoking {
                        list.entries.removeAll { AccessEntries.names($0, program: path) }
                        try AccessEdit.write(
                            list, to: item, in: store, reason: "access: revoking \(path) from the item \"\(item[AttributeKey.label]?.stringValue ?? "")\"")
                        changed += 1
                    }
                    Terminal.out(ItemFormat.describe(item, keychain: store.path))
                    Terminal.out(AccessEntries.describe(list))
                }
            }
        }
        if revoking { Terminal.error("security: access: \(path) removed from \(changed) item(s)") }
    }
}
