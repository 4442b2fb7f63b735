@testable import KeychainCore
import Glibc
import XCTest

/// A private folder per test, removed afterwards with every key the test left in the kernel.
final class Scratch {
    let directory: String
    private var stores: [KeychainStore] = []

    init() {
        var template = Array("/tmp/keychain-core-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }

    func path(_ name: String = "test") -> String { directory + "/keychains/\(name).keychain-db" }

    func create(_ name: String = "test", password: String = "pw", storage: KeyStorage = .process) throws -> KeychainStore {
        let store = try KeychainStore.create(at: path(name), password: Array(password.utf8), scrypt: .fastForTesting, storage: storage)
        stores.append(store)
        return store
    }

    func open(_ name: String = "test", storage: KeyStorage = .process) throws -> KeychainStore {
        let store = try KeychainStore.open(at: path(name), storage: storage)
        stores.append(store)
        return store
    }

    func remove() {
        for store in stores { store.lockAll() }
        stores.removeAll()
        _ = system("rm -rf '\(directory)'")
    }
}

/// A test case with a fresh keychain (password "pw") in its own scratch folder.
class StoreTestCase: XCTestCase {
    var scratch: Scratch!
    var store: KeychainStore!

    override func setUpWithError() throws {
        scratch = Scratch()
        store = try scratch.create()
    }

    override func tearDown() { scratch.remove() }
}

func generic(_ account: String, service: String = "svc", secret: String = "pw", protection: Protection = .whenUnlocked) -> Item {
    Item(
        itemClass: .genericPassword,
        attributes: [AttributeKey.account: .string(account), AttributeKey.service: .string(service), AttributeKey.accessible: .string(protection.rawValue)],
        secret: Array(secret.utf8))
}

func query(_ account: String? = nil, service: String? = nil) -> Query {
    var q = Query(itemClass: .genericPassword)
    if let account { q.attributes[AttributeKey.account] = .string(account) }
    if let service { q.attributes[AttributeKey.service] = .string(service) }
    return q
}

func XCTAssertStatus<T>(
    _ expression: @autoclosure () throws -> T, _ code: KeychainError.Code,
    _ message: String = "", file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssertThrowsError(try expression(), message, file: file, line: line) { error in
        XCTAssertEqual((error as? KeychainError)?.code, code, "\(message) \(error)", file: file, line: line)
    }
}

func secretString(_ store: KeychainStore, _ q: Query) throws -> String {
    String(decoding: try store.find(q, includeSecret: true).first?.secret ?? [], as: UTF8.self)
}

/// The keybag's class key A as wrapped now (under the password, or the password and the TPM).
func wrappedKeyA(_ store: KeychainStore) throws -> Bytes {
    let stmt = try store.db.statement("SELECT value FROM keychain WHERE name = 'wrap.A'")
    defer { stmt.reset() }
    guard try stmt.step() else { return [] }
    return stmt.blob(0)
}

/// Whether the file's raw bytes hold `needle` anywhere, as a thief reading them would find it.
func fileHolds(_ path: String, _ needle: Bytes) -> Bool {
    let bytes = FileManagerless.read(path)
    guard !needle.isEmpty, bytes.count >= needle.count else { return false }
    return (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
}
