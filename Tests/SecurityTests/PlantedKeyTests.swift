import KeychainCore
import Security
import XCTest

/// Through Apple's API: a key another process of the user plants in the kernel for a locked
/// keychain must not receive a new WhenUnlocked item.
final class PlantedKeyTests: XCTestCase {
    func testSecItemAddRefusesAPlantedKeyAndRemovesIt() throws {
        do { _ = try KernelKeyring.persistent() } catch { throw XCTSkip("kernel keyring unavailable: \(error)") }
        let kc = try TestKeychain(storage: .kernel)
        defer { kc.tearDown() }
        kc.keychain.lock()
        let name = "keychain:\(kc.keychain.store.identifier):A"
        var generator = SystemRandomNumberGenerator()
        try KernelKeyring.store((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }, description: name)

        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a", kSecAttrService as String: "s",
            kSecValueData as String: Data("for the planter".utf8)
        ]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecInteractionNotAllowed)
        XCTAssertNil(KernelKeyring.find(name), "the planted key was removed")
        XCTAssertFalse(kc.keychain.status.whenUnlocked)

        try kc.keychain.unlock(password: TestKeychain.password)
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)
    }
}
