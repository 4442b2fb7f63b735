import Glibc
import KeychainCore
import SecretServiceItems
import Security

// In-process figures for `make bench`: SecItem calls on a throwaway keychain whose class keys are
// in the kernel keyring, as in real use. Prints `name value` lines for bench/run.sh to tabulate.
//
//   keychain-bench items N     add N internet passwords, then time lookup/update/delete among them,
//                              N bare SQLite inserts of the same shape one transaction each, and a
//                              bare SQLite lookup in a table of N rows (the floors)
//   keychain-bench scrypt PATH the time of one key derivation with PATH's parameters
//   keychain-bench fill PATH N create PATH (password on stdin, KDF tuned as `security` does)
//                              holding N internet passwords as git-credential-keychain stores them;
//                              BENCH_TRUSTED=PATH: their list trusts that program (else this one)
//   keychain-bench reads N     N items made by this program, then SecItemCopyMatching returning
//                              data (the median per call) and all N read once in a row; custody
//                              is the kernel keyring, or keychain-broker where KEYCHAIN_BROKER_SOCKET
//                              names one (Security's front-end setup installs it)
//   keychain-bench profile OP N CALLS
//                              N items (added in one transaction), then CALLS of OP (lookup,
//                              engine-lookup, add, update, delete, ss-lookup and ss-store:
//                              the engine's part of the Secret Service's lookup and CreateItem):
//                              run under `perf stat -e
//                              instructions` or callgrind with CALLS 0 and CALLS > 0, the
//                              difference over CALLS is one call's instructions

func emit(_ name: String, _ value: Double) {
    print(name, value)
    fflush(stdout)
}

func fail(_ message: String) -> Never {
    fputs("keychain-bench: \(message)\n", stderr)
    exit(2)
}

func server(_ i: Int) -> String { "host\(i).example.com" }
func account(_ i: Int) -> String { "user\(i)" }

func itemQuery(_ i: Int) -> [String: Any] {
    [
        kSecClass as String: kSecClassInternetPassword,
        kSecAttrServer as String: server(i),
        kSecAttrAccount as String: account(i),
        kSecAttrProtocol as String: kSecAttrProtocolHTTPS as String
    ]
}

func expect(_ status: OSStatus, _ what: String) {
    if status != errSecSuccess { fail("\(what): \(SecCopyErrorMessageString(status, nil) as String? ?? "\(status)")") }
}

func benchItems(count: Int) {
    var template = Array("/tmp/keychain-bench-XXXXXX".utf8CString)
    guard let dir = mkdtemp(&template) else { fail("mkdtemp") }
    let directory = String(cString: dir)
    defer { _ = system("rm -rf '\(directory)'") }
    let keychain: SecKeychain
    do {
        keychain = try SecKeychain.create(at: directory + "/bench.keychain-db", password: "bench", storage: .kernel, scrypt: .fastForTesting)
    } catch { fail("cannot create a keychain: \(error)") }
    SecKeychain.setDefault(keychain)
    defer { keychain.store.lockAll() }

    let secret = Array("a password of a usual length, 40 bytes..".utf8)
    let start = SystemClock.monotonic()
    for i in 0..<count {
        var attributes = itemQuery(i)
        attributes[kSecValueData as String] = Data(secret)
        attributes[kSecAttrPath as String] = "/"
        expect(SecItemAdd(attributes as CFDictionary, nil), "SecItemAdd")
    }
    let addTotal = SystemClock.monotonic() - start
    emit("add_total_s", addTotal)
    emit("add_per_item_us", addTotal / Double(count) * 1e6)

    var random = SeededGenerator(state: UInt64(count))
    let picks = (0..<4096).map { _ in Int.random(in: 0..<count, using: &random) }
    // The lookup and its floor, the bare select, in alternate batches: their ratio is a bar.
    let floor = SQLiteFloor(path: directory + "/floor.sqlite", count: count)
    defer { floor.close() }
    var checksum = 0
    let lookups = alternatingMedianMicroseconds(
        perBatch: 400,
        [
            { n in
                var query = itemQuery(picks[n % picks.count])
                query[kSecReturnData as String] = true
                var result: CFTypeRef?
                expect(SecItemCopyMatching(query as CFDictionary, &result), "SecItemCopyMatching")
            },
            { n in checksum &+= floor.lookup(picks[n % picks.count]) }
        ])
    if checksum < 0 { fail("floor lookups missed") }
    emit("lookup_us", lookups[0])
    emit("floor_us", lookups[1])
    if getenv("BENCH_BREAKDOWN") != nil {
        let store = keychain.store
        emit("breakdown_status_us", medianMicroseconds(perBatch: 400) { _ in _ = store.status })
        emit(
            "breakdown_engine_find_us",
            medianMicroseconds(perBatch: 400) { n in
                let i = picks[n % picks.count]
                let query = Query(
                    itemClass: .internetPassword,
                    attributes: [
                        AttributeKey.server: .string(server(i)), AttributeKey.account: .string(account(i)), AttributeKey.protocol: .string("htps")
                    ])
                _ = try! store.find(query, includeSecret: true)
            })
    }
    // Each update and delete acts on a different item, so none of them finds a warm, changed row.
    let updated = Array("another password".utf8)
    emit(
        "update_us",
        medianMicroseconds(batches: 9, perBatch: 100) { n in
            expect(SecItemUpdate(itemQuery(n) as CFDictionary, [kSecValueData as String: Data(updated)] as CFDictionary), "SecItemUpdate")
        })
    emit(
        "delete_us",
        medianMicroseconds(batches: 9, perBatch: 100) { n in
            expect(SecItemDelete(itemQuery(count - 1 - n) as CFDictionary), "SecItemDelete")
        })

    let insertFloor = SQLiteInsertFloor.seconds(path: directory + "/insert-floor.sqlite", count: count)
    emit("add_floor_total_s", insertFloor)
}

/// What the process-level figures look up: host<i>.example.com, user<i>, pass<i>.
/// `synchronizable`: the items of the sync figures (bench/sync.sh), which only such items travel.
func fill(path: String, count: Int, synchronizable: Bool = false) {
    guard let password = readLine(strippingNewline: true), !password.isEmpty else { fail("fill: a password on stdin") }
    // The helper's own copy, as it would have listed itself, so that its reads through the broker
    // are silent whichever program started it.
    if let trusted = getenv("BENCH_TRUSTED") { AccessList.creatorEntry = .executable(String(cString: trusted)) }
    do {
        let store = try KeychainStore.create(at: path, password: Array(password.utf8))
        for i in 0..<count {
            var item = Item(
                itemClass: .internetPassword,
                attributes: [
                    AttributeKey.server: .string(server(i)), AttributeKey.protocol: .string("htps"), AttributeKey.account: .string(account(i)),
                    AttributeKey.label: .string(server(i))
                ], secret: Array("pass\(i)".utf8))
            if synchronizable {
                // As `security add-internet-password` makes them, so that `-U` there changes one.
                item[AttributeKey.synchronizable] = .bool(true)
                item[AttributeKey.authenticationType] = .string("dflt")
            }
            try store.add(item)
        }
    } catch { fail("fill: \(error)") }
}

/// A keychain in a fresh folder under /tmp, its keys in the kernel; removed by `done`.
func throwawayKeychain() -> (SecKeychain, done: () -> Void) {
    var template = Array("/tmp/keychain-bench-XXXXXX".utf8CString)
    guard let dir = mkdtemp(&template) else { fail("mkdtemp") }
    let directory = String(cString: dir)
    do {
        let keychain = try SecKeychain.create(
            at: directory + "/bench.keychain-db", password: "bench", storage: .kernel,
            scrypt: .fastForTesting)
        return (
            keychain,
            {
                keychain.store.lockAll(); _ = system("rm -rf '\(directory)'")
            }
        )
    } catch { fail("cannot create a keychain: \(error)") }
}

/// SecItemCopyMatching returning data, in whichever custody this process is in: the median per
/// call over random items, then every item read once in a row (the program that made them reads
/// them, so a broker gives each key without asking).
func benchReads(count: Int) {
    let (keychain, done) = throwawayKeychain()
    defer { done() }
    SecKeychain.setDefault(keychain)
    let broker = getenv("KEYCHAIN_BROKER_SOCKET") != nil
    // A broker named but not in use would measure the kernel keyring under the broker's name.
    guard (keychain.store.storage == .broker) == broker else { fail("reads: custody is not what KEYCHAIN_BROKER_SOCKET says") }
    print("custody", broker ? "broker" : "kernel")
    do {
        try keychain.store.add(
            (0..<count).map { i in
                Item(
                    itemClass: .internetPassword,
                    attributes: [
                        AttributeKey.server: .string(server(i)), AttributeKey.account: .string(account(i)),
                        AttributeKey.protocol: .string("htps"), AttributeKey.path: .string("/")
                    ], secret: Array("pass\(i)".utf8))
            })
    } catch { fail("fill: \(error)") }
    func read(_ i: Int) {
        var query = itemQuery(i)
        query[kSecReturnData as String] = true
        var result: CFTypeRef?
        expect(SecItemCopyMatching(query as CFDictionary, &result), "SecItemCopyMatching")
        guard let data = result as? Data, data.elementsEqual("pass\(i)".utf8) else { fail("item \(i) read back wrong") }
    }
    var random = SeededGenerator(state: UInt64(count))
    let picks = (0..<4096).map { _ in Int.random(in: 0..<count, using: &random) }
    emit("lookup_us", medianMicroseconds(perBatch: 400) { n in read(picks[n % picks.count]) })
    let start = SystemClock.monotonic()
    for i in 0..<count { read(i) }
    let total = SystemClock.monotonic() - start
    emit("reads_total_s", total)
    emit("reads_per_item_us", total / Double(count) * 1e6)
}

/// For instruction counts: the same setup with and without the calls, so the difference is theirs.
func profile(_ op: String, count: Int, calls: Int) {
    let (keychain, done) = throwawayKeychain()
    defer { done() }
    SecKeychain.setDefault(keychain)
    let secret = Array("a password of a usual length, 40 bytes..".utf8)
    do {
        try keychain.store.add(
            (0..<count).map { i in
                Item(
                    itemClass: .internetPassword,
                    attributes: [
                        AttributeKey.server: .string(server(i)), AttributeKey.account: .string(account(i)),
                        AttributeKey.protocol: .string("htps"), AttributeKey.path: .string("/")
                    ], secret: secret)
            })
    } catch { fail("fill: \(error)") }
    var random = SeededGenerator(state: UInt64(count))
    let picks = (0..<max(calls, 1)).map { _ in Int.random(in: 0..<count, using: &random) }
    let start = SystemClock.monotonic()
    profiledCalls(op, keychain: keychain, count: count, calls: calls, picks: picks, secret: secret)
    if calls > 0 { fputs("\(op) \((SystemClock.monotonic() - start) / Double(calls) * 1e6) us per call\n", stderr) }
}

/// The calls alone (callgrind: --toggle-collect='*profiledCalls*').
@inline(never)
func profiledCalls(_ op: String, keychain: SecKeychain, count: Int, calls: Int, picks: [Int], secret: [UInt8]) {
    for n in 0..<calls {
        switch op {
        case "lookup":
            var query = itemQuery(picks[n])
            query[kSecReturnData as String] = true
            var result: CFTypeRef?
            expect(SecItemCopyMatching(query as CFDictionary, &result), "SecItemCopyMatching")
        case "query-only":
            // What the caller spends building and bridging the lookup's query, without the call.
            var query = itemQuery(picks[n])
            query[kSecReturnData as String] = true
            let bridged = query as CFDictionary
            if bridged.count == 0 { fail("empty query") }
        case "engine-lookup":
            let i = picks[n]
            let query = Query(
                itemClass: .internetPassword,
                attributes: [
                    AttributeKey.server: .string(server(i)), AttributeKey.account: .string(account(i)), AttributeKey.protocol: .string("htps")
                ])
            _ = try! keychain.store.find(query, includeSecret: true)
        case "ss-lookup":
            // The engine's part of the Secret Service's lookup: SearchItems, then GetSecrets.
            let i = picks[n]
            let found = try! keychain.store.searchSecretItems(["server": server(i), "protocol": "https"])
            guard let row = found.unlocked.first?.row, (try? keychain.store.secret(row)) != nil else {
                fail("ss-lookup: nothing found for \(server(i))")
            }
        case "ss-store":
            // The engine's part of CreateItem with replace, as a client storing many items makes it.
            _ = try! keychain.store.addSecretItem(
                label: "bench", attributes: ["application": "keychain-bench-many", "bench-item": String(n)], secret: secret,
                contentType: "text/plain", replace: true)
        case "ss-replace":
            // CreateItem with replace of an item that is there (the first ten calls make them):
            // what a client saving the same few secrets again makes, changed in place.
            _ = try! keychain.store.addSecretItem(
                label: "bench", attributes: ["application": "keychain-bench-many", "bench-item": String(n % 10)], secret: secret,
                contentType: "text/plain", replace: true)
        case "add":
            var attributes = itemQuery(count + n)
            attributes[kSecValueData as String] = Data(secret)
            attributes[kSecAttrPath as String] = "/"
            expect(SecItemAdd(attributes as CFDictionary, nil), "SecItemAdd")
        case "update":
            expect(
                SecItemUpdate(itemQuery(n % count) as CFDictionary, [kSecValueData as String: Data(secret.reversed())] as CFDictionary),
                "SecItemUpdate")
        case "delete":
            expect(SecItemDelete(itemQuery(n % count) as CFDictionary), "SecItemDelete")
        default:
            fail("profile: unknown operation \(op)")
        }
    }
}

let arguments = CommandLine.arguments
switch arguments.count >= 3 ? arguments[1] : "" {
case "fill" where arguments.count == 4:
    guard let count = Int(arguments[3]), count >= 0 else { fail("fill: a count") }
    fill(path: arguments[2], count: count)
case "fill" where arguments.count == 5 && arguments[4] == "sync":
    guard let count = Int(arguments[3]), count >= 0 else { fail("fill: a count") }
    fill(path: arguments[2], count: count, synchronizable: true)
case "items" where arguments.count == 3:
    guard let count = Int(arguments[2]), count > 1000 || count == 1000 else { fail("items: a count of at least 1000") }
    benchItems(count: count)
case "reads" where arguments.count == 3:
    guard let count = Int(arguments[2]), count > 0 else { fail("reads: a count") }
    benchReads(count: count)
case "profile" where arguments.count == 5:
    guard let count = Int(arguments[3]), count > 0, let calls = Int(arguments[4]), calls >= 0 else { fail("profile: OP N CALLS") }
    profile(arguments[2], count: count, calls: calls)
case "scrypt" where arguments.count == 3:
    do {
        let store = try KeychainStore.open(at: arguments[2])
        emit("scrypt_s", store.scryptParameters.secondsPerGuess())
    } catch { fail("cannot open \(arguments[2]): \(error)") }
default:
    fail("usage: keychain-bench items N | reads N | scrypt PATH | fill PATH N [sync] | profile OP N CALLS")
}
