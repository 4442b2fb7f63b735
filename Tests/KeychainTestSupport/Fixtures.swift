import Glibc
import KeychainCore
import XCTest

// What the engine's test targets share: a scratch folder with its keychains, a test case with a
// fresh keychain, small item and query builders, and the status assertion. Only the engine's
// package API, so the target also builds where tests are not (make release builds every target).

/// A private folder per test, removed afterwards with every key the test left in the kernel.
package final class Scratch {
    package let directory: String
    private var stores: [KeychainStore] = []

    package init() {
        var template = Array("/tmp/keychain-core-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }

    package func path(_ name: String = "test") -> String { directory + "/keychains/\(name).keychain-db" }

    package func create(_ name: String = "test", password: String = "pw", storage: KeyStorage = .process) throws -> KeychainStore {
        let store = try KeychainStore.create(at: path(name), password: Array(password.utf8), scrypt: .fastForTesting, storage: storage)
        stores.append(store)
        return store
    }

    package func open(_ name: String = "test", storage: KeyStorage = .process) throws -> KeychainStore {
        let store = try KeychainStore.open(at: path(name), storage: storage)
        stores.append(store)
        return store
    }

    package func remove() {
        for store in stores { store.lockAll() }
        stores.removeAll()
        _ = system("rm -rf '\(directory)'")
    }
}

/// A test case with a fresh keychain (password "pw") in its own scratch folder.
open class StoreTestCase: XCTestCase {
    package var scratch: Scratch!
    package var store: KeychainStore!

    override open func setUpWithError() throws {
        scratch = Scratch()
        store = try scratch.create()
    }

    override open func tearDown() { scratch.remove() }
}

package func generic(_ account: String, service: String = "svc", secret: String = "pw", protection: Protection = .whenUnlocked) -> Item {
    Item(
        itemClass: .genericPassword,
        attributes: [AttributeKey.account: .string(account), AttributeKey.service: .string(service), AttributeKey.accessible: .string(protection.rawValue)],
        secret: Array(secret.utf8))
}

package func query(_ account: String? = nil, service: String? = nil) -> Query {
    var q = Query(itemClass: .genericPassword)
    if let account { q.attributes[AttributeKey.account] = .string(account) }
    if let service { q.attributes[AttributeKey.service] = .string(service) }
    return q
}

package func XCTAssertStatus<T>(
    _ expression: @autoclosure () throws -> T, _ code: KeychainError.Code,
    _ message: String = "", file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssertThrowsError(try expression(), message, file: file, line: line) { error in
        XCTAssertEqual((error as? KeychainError)?.code, code, "\(message) \(error)", file: file, line: line)
    }
}

package func secretString(_ store: KeychainStore, _ q: Query) throws -> String {
    String(decoding: try store.find(q, includeSecret: true).first?.secret ?? [], as: UTF8.self)
}

/// The keybag's class key A as wrapped now (under the password, or the password and the TPM).
package func wrappedKeyA(_ store: KeychainStore) throws -> Bytes {
    let stmt = try store.db.statement("SELECT value FROM keychain WHERE name = 'wrap.A'")
    defer { stmt.reset() }
    guard try stmt.step() else { return [] }
    return stmt.blob(0)
}

/// Whether the file's raw bytes hold `needle` anywhere, as a thief reading them would find it.
package func fileHolds(_ path: String, _ needle: Bytes) -> Bool {
    let bytes = FileManagerless.read(path)
    guard !needle.isEmpty, bytes.count >= needle.count else { return false }
    return (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
}

package enum FileManagerless {
    package static func write(_ path: String, _ bytes: Bytes) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    package static func read(_ path: String) -> Bytes {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var out = Bytes()
        var buffer = Bytes(repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return out
    }
}
