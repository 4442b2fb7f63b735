import Glibc
import KeychainCore

// The process Tests/stress/crash.py kills. Reads the keychain's password from stdin, then changes
// the keychain as fast as it can, announcing each change before it starts ("try ...") and after
// it returned success ("ok"), so the killer knows which writes were acknowledged.
//
//   keychain-stress-writer create PATH    make PATH (fast KDF) with the password on stdin
//   keychain-stress-writer write PATH SEED  random adds, updates, deletes and password changes
//                                         (half of them with a key rotation)
//   keychain-stress-writer dump PATH      every generic password as `account value`, sorted;
//                                         exit 51 if the password on stdin does not unlock

func say(_ line: String) {
    fputs(line + "\n", stdout)
    fflush(stdout)
}

func fail(_ message: String, _ status: Int32 = 2) -> Never {
    fputs("keychain-stress-writer: \(message)\n", stderr)
    exit(status)
}

/// How a value is announced and dumped: its tag and length, so the pipe carries little.
func token(_ value: Bytes) -> String {
    let tag = value.prefix { $0 != UInt8(ascii: "-") }
    return "\(String(decoding: tag, as: UTF8.self))/\(value.count)"
}

func query(_ account: String) -> Query {
    Query(itemClass: .genericPassword, attributes: [AttributeKey.service: .string("stress"), AttributeKey.account: .string(account)])
}

func present(_ account: String, in store: KeychainStore) throws -> Bool {
    do {
        return try !store.find(query(account)).isEmpty
    } catch let error as KeychainError where error.code == .itemNotFound {
        return false
    }
}

/// Opened in-process: the kernel keyring is not under test here, the file is.
func open(_ path: String, password: String) -> KeychainStore {
    do {
        let store = try KeychainStore.open(at: path, storage: .process)
        try store.unlock(password: Array(password.utf8))
        return store
    } catch let error as KeychainError where error.code == .authFailed {
        fail("wrong password", 51)
    } catch { fail("cannot open \(path): \(error)") }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let password = readLine(strippingNewline: true) else {
    fail("usage: keychain-stress-writer create|write|dump PATH [SEED] < password")
}
let path = arguments[2]

switch arguments[1] {
case "create":
    do { _ = try KeychainStore.create(at: path, password: Array(password.utf8), scrypt: .fastForTesting, storage: .process) } catch { fail("\(error)") }
case "dump":
    let store = open(path, password: password)
    do {
        let items = try store.find(Query(itemClass: .genericPassword, attributes: [AttributeKey.service: .string("stress")]), limit: nil, includeSecret: true)
        let lines = items.map { "\($0[AttributeKey.account]?.stringValue ?? "?") \(token($0.secret ?? []))" }
        for line in lines.sorted() { say(line) }
    } catch let error as KeychainError where error.code == .itemNotFound {
    } catch { fail("dump: \(error)") }
case "write" where arguments.count == 4:
    var random = SystemRandomNumberGenerator()
    var seed = UInt64(arguments[3]) ?? 1
    let store = open(path, password: password)
    var current = password
    while true {
        seed &+= 1
        let account = "k\(Int.random(in: 0..<40, using: &random))"
        // Values of very different sizes, so some writes span many pages.
        let value = Array(("v\(seed)-" + String(repeating: "x", count: Int.random(in: 0..<6000, using: &random))).utf8)
        do {
            let exists = try present(account, in: store)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<3:
                let next = "pw-\(seed)"
                say("try passwd \(next)")
                // Half of them rotate the class keys too: every row re-sealed in the same
                // transaction, so a kill leaves all rows under the old keys or all under the new.
                try store.changePassword(
                    from: Array(current.utf8), to: Array(next.utf8), scrypt: .fastForTesting,
                    rotatingKeys: Bool.random(using: &random))
                current = next
            case 3..<30 where exists:
                say("try delete \(account)")
                _ = try store.delete(query(account))
            case _ where exists:
                say("try update \(account) \(token(value))")
                _ = try store.update(query(account), attributes: [:], secret: value)
            default:
                say("try add \(account) \(token(value))")
                var item = Item(itemClass: .genericPassword, attributes: query(account).attributes, secret: value)
                item.attributes[AttributeKey.accessible] = .string("ak")
                try store.add(item)
            }
            say("ok")
        } catch let error as KeychainError where error.code == .itemNotFound {
            fail("an item vanished: \(error)", 3)
        } catch { fail("write failed: \(error)", 3) }
    }
default:
    fail("usage: keychain-stress-writer create|write|dump PATH [SEED] < password")
}
