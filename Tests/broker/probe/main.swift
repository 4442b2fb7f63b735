// Tests/broker: a client of keychain-broker as the engine will be, for the shell suite (and the
// attacker suite later). Usage: keychain-broker-probe COMMAND [KEYCHAIN [PASSWORD]]
//   create K PW   a keychain (fast KDF) with one item, account "probe", secret "s3cret"
//   unlock K PW | lock K | state K | read K | whoami | log
// Prints one line per result; a failure prints "status N message" and exits 1.
import Glibc
import KeychainBroker
import KeychainCore
import KeychainPresence

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else {
    fputs("usage: keychain-broker-probe COMMAND [KEYCHAIN [PASSWORD]]\n", stderr)
    exit(2)
}

func keybag(_ store: KeychainStore) -> CustodyKeybag {
    var fields: [String: Bytes] = [:]
    for (name, value) in store.keybag.fields { fields[name] = value }
    return CustodyKeybag(uuid: store.keybag.uuid, fields: fields, path: store.path)
}

// The broker the front ends would use (KEYCHAIN_BROKER_SOCKET in the suite).
guard let custodian = BrokerSetup.custodian(answerer: AccessAnswerers.standard()) else {
    fputs("keychain-broker-probe: no broker here\n", stderr)
    exit(1)
}
do {
    switch command {
    case "create":
        let store = try KeychainStore.create(at: arguments[1], password: Array(arguments[2].utf8), scrypt: .fastForTesting, storage: .process)
        // An item of another program's: the probe, its reader, is not on its list (a new item
        // trusts its creator, which would be the probe itself).
        AccessList.creatorEntry = .executable("/usr/bin/another-program")
        _ = try store.add(
            Item(
                itemClass: .genericPassword,
                attributes: [
                    AttributeKey.account: .string("probe"), AttributeKey.service: .string("broker"), AttributeKey.label: .string("probe item")
                ],
                secret: Array("s3cret".utf8)))
        print("created")
    case "unlock":
        try custodian.unlock(keybag(try KeychainStore.open(at: arguments[1], storage: .process)), password: Array(arguments[2].utf8))
        print("unlocked")
    case "lock":
        try custodian.lock(keybag(try KeychainStore.open(at: arguments[1], storage: .process)))
        print("locked")
    case "state":
        let state = try custodian.state(of: keybag(try KeychainStore.open(at: arguments[1], storage: .process)))
        let open = state.open.keys.map(\.letter).sorted().joined(separator: " ")
        print("open: \(open.isEmpty ? "none" : open); settings: \(state.settingsVerified.map { $0 ? "verified" : "damaged" } ?? "locked")")
    case "read":
        let store = try KeychainStore.open(at: arguments[1], storage: .process)
        let stmt = try store.db.statement("SELECT rowid, class, lockclass, metadata, secret FROM items ORDER BY rowid LIMIT 1")
        guard try stmt.step() else { throw KeychainError(.itemNotFound, "no item") }
        var r = ByteReader(stmt.blob(4))
        let wrapped = try r.blob(), body = try r.blob()
        let request = ItemKeyRequest(
            keychain: store.keybag.uuid, rowID: stmt.int(0), itemClass: ItemClass(code: stmt.int(1))!, lockClass: LockClass(rawValue: stmt.int(2))!,
            metadata: stmt.blob(3), wrappedKey: wrapped)
        let interaction: CustodyInteraction = getenv("PROBE_NO_INTERACTION") == nil ? .allowed : .notAllowed
        let unwrapped = try custodian.unwrap(request, interaction: interaction)
        let aad = KeychainStore.additionalData(
            keychain: request.keychain, rowID: request.rowID, itemClass: request.itemClass, lockClass: request.lockClass, field: "secret",
            version: KeychainStore.version(ofMetadata: request.metadata))
        print(
            "secret: \(String(decoding: try Crypto.open(body, key: unwrapped.key, aad: aad), as: UTF8.self))"
                + (unwrapped.alwaysAllow.map { "; always: \($0.text)" } ?? ""))
    case "whoami":
        let caller = try custodian.whoAmI()
        print("caller: \(caller.summary)")
        print("entry: \(caller.entry)")
        for warning in caller.warnings { print("warning: \(warning)") }
    case "log":
        for entry in try custodian.accessLog(since: 0) { print("\(entry.decision) | \(entry.account) | \(entry.caller)") }
    default:
        fputs("unknown command \(command)\n", stderr)
        exit(2)
    }
} catch let error as KeychainError {
    print("status \(error.code.rawValue) \(error.detail)")
    exit(1)
}
