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
