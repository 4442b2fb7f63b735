@testable import KeychainCore
@testable import KeychainTPMPolicy
import KeychainTestSupport
import Glibc
import XCTest

extension TPMTests {
    /// What `security lock-keychain` does to one class key, from a process of its own.
    private func invalidateFromAnotherProcess(_ name: String) {
        let command = "keyctl session - sh -c 'keyctl invalidate \"$(keyctl search \"$(keyctl get_persistent @s)\" user \(name))\"' >/dev/null 2>&1"
        XCTAssertEqual(system(command), 0, command)
    }

    /// The ThisDeviceOnly classes of a keychain sealed to a TPM, with its keys in the kernel: a
    /// lock of Au alone, then of A (which locks Au's items too), then of C, each by another
    /// process, is seen on this store's next lookup; AlwaysThisDeviceOnly stays readable.
    func testThisDeviceOnlyClassesFollowLocksByAnotherProcess() throws {
        do { _ = try KernelKeyring.persistent() } catch { throw XCTSkip("kernel keyring unavailable: \(error)") }
        guard system("command -v keyctl >/dev/null 2>&1") == 0 else { throw XCTSkip("keyctl (keyutils) is not installed") }
        let store = try scratch.create(storage: .kernel)
        try store.add(generic("device", secret: "bound", protection: .whenUnlockedThisDeviceOnly))
        try store.add(generic("device-c", secret: "bound-c", protection: .afterFirstUnlockThisDeviceOnly))
        try store.add(generic("device-always", secret: "always", protection: .alwaysThisDeviceOnly))
        _ = try store.sealToTPM(password: pw, tpm: here)
        try store.unlock(password: pw)
        let all = [("device", "bound"), ("device-c", "bound-c"), ("device-always", "always")]
        for _ in 0..<2 {
            for (account, secret) in all { XCTAssertEqual(try secretString(store, query(account)), secret, account) }
        }
        invalidateFromAnotherProcess(store.kernelName(.whenUnlockedThisDeviceOnly))
        XCTAssertStatus(try store.find(query("device"), includeSecret: true), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("device-c")), "bound-c")
        try store.unlock(password: pw)
        XCTAssertEqual(try secretString(store, query("device")), "bound")
        invalidateFromAnotherProcess(store.kernelName(.whenUnlocked))
        XCTAssertStatus(try store.find(query("device"), includeSecret: true), .interactionNotAllowed, "Au follows A")
        XCTAssertEqual(try secretString(store, query("device-c")), "bound-c")
        invalidateFromAnotherProcess(store.kernelName(.afterFirstUnlock))
        XCTAssertStatus(try store.find(query("device-c"), includeSecret: true), .interactionNotAllowed, "Cu follows C")
        XCTAssertEqual(try secretString(store, query("device-always")), "always")
        try store.unlock(password: pw)
        for (account, secret) in all { XCTAssertEqual(try secretString(store, query(account)), secret, account) }
    }
}
