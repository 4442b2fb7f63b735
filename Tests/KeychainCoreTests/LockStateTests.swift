@testable import KeychainCore
import XCTest

/// Lock states held by the kernel: these tests use the real persistent keyring, each under its
/// own keychain identifier, and remove their keys when done.
final class LockStateTests: XCTestCase {
    var scratch: Scratch!

    override func setUpWithError() throws {
        scratch = Scratch()
        do { _ = try KernelKeyring.persistent() } catch { throw XCTSkip("kernel keyring unavailable: \(error)") }
    }

    override func tearDown() { scratch.remove() }

    func kernelHas(_ store: KeychainStore, _ letter: String) -> Bool {
        KernelKeyring.find("keychain:\(store.identifier):\(letter)") != nil
    }

    func testLockRefusesWhenUnlockedAndServesAfterFirstUnlock() throws {
        let store = try scratch.create(storage: .kernel)
        XCTAssertTrue(kernelHas(store, "A"))
        XCTAssertTrue(kernelHas(store, "C"))
        try store.add(generic("wu", secret: "s-wu"))
        try store.add(generic("afu", secret: "s-afu", protection: .afterFirstUnlock))
        try store.add(generic("always", secret: "s-always", protection: .always))
        try store.add(generic("wu-tdo", secret: "s-wu-tdo", protection: .whenUnlockedThisDeviceOnly))

        store.lock()
        XCTAssertFalse(kernelHas(store, "A"), "lock removes the WhenUnlocked key from the kernel")
        XCTAssertTrue(kernelHas(store, "C"), "AfterFirstUnlock stays until reboot")
        XCTAssertEqual(store.status.whenUnlocked, false)
        XCTAssertEqual(store.status.afterFirstUnlock, true)

        XCTAssertStatus(try store.find(query("wu"), includeSecret: true), .interactionNotAllowed)
        XCTAssertStatus(try store.find(query("wu-tdo"), includeSecret: true), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("afu")), "s-afu")
        XCTAssertEqual(try secretString(store, query("always")), "s-always")
        XCTAssertStatus(try store.find(query("nothing-here")), .itemNotFound, "a miss is still a miss while locked")
        XCTAssertStatus(try store.add(generic("new")), .interactionNotAllowed)
        XCTAssertNoThrow(try store.add(generic("new-afu", protection: .afterFirstUnlock)))
        XCTAssertStatus(try store.update(query("wu"), attributes: [AttributeKey.label: .string("x")]), .interactionNotAllowed)
        XCTAssertStatus(try store.delete(query("wu")), .interactionNotAllowed)
        XCTAssertStatus(try store.delete(query()), .interactionNotAllowed, "a delete must not remove only the unlocked part")
        XCTAssertEqual(try store.count(), 5)

        // Another process (here: another connection) sees the same state: it lives in the kernel.
        let other = try scratch.open(storage: .kernel)
        XCTAssertStatus(try other.find(query("wu")), .interactionNotAllowed)
        XCTAssertEqual(try secretString(other, query("afu")), "s-afu")

        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(other, query("wu")), "s-wu", "an unlock by one process serves all")
    }

    func testRebootLocksEverythingButAlways() throws {
        let store = try scratch.create(storage: .kernel)
        try store.add(generic("wu"))
        try store.add(generic("afu", protection: .afterFirstUnlock))
        try store.add(generic("always", secret: "d", protection: .always))
        store.lockAll()
        XCTAssertFalse(kernelHas(store, "C"))
        XCTAssertStatus(try store.find(query("afu")), .interactionNotAllowed)
        XCTAssertStatus(try store.find(query("wu")), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("always")), "d")
    }

    func testWrongPasswordIsAuthFailedAndLeavesStateAlone() throws {
        let store = try scratch.create(storage: .kernel)
        store.lockAll()
        XCTAssertStatus(try store.unlock(password: Array("wrong".utf8)), .authFailed)
        XCTAssertFalse(kernelHas(store, "A"))
        XCTAssertStatus(try store.unlock(password: []), .authFailed)
        try store.unlock(password: Array("pw".utf8))
        XCTAssertTrue(kernelHas(store, "A"))
    }

    func testIdleTimeoutIsSetOnTheKernelKey() throws {
        let store = try scratch.create(storage: .kernel)
        try store.setSettings(KeychainSettings(idleTimeout: 1, lockOnSessionEnd: true))
        try store.add(generic("wu"))
        XCTAssertEqual(try store.find(query("wu")).count, 1)
        // The kernel expires the key on its own; no process has to be running.
        var waited = 0
        while kernelHas(store, "A"), waited < 50 {
            usleep(100_000)
            waited += 1
        }
        XCTAssertFalse(kernelHas(store, "A"), "the WhenUnlocked key expired")
        XCTAssertStatus(try store.find(query("wu")), .interactionNotAllowed)
        XCTAssertEqual(try scratch.open(storage: .kernel).settings.idleTimeout, 1, "settings persist in the file")
    }

    /// A same-uid process plants a key of its choosing under the kernel name of a locked
    /// keychain's class key, hoping new items get sealed under it. The key does not fit the
    /// keybag's check value: the keychain stays locked and the planted key is removed.
    func testAKeyPlantedInTheKernelIsNotTrusted() throws {
        let store = try scratch.create(storage: .kernel)
        try store.add(generic("wu", secret: "s-wu"))
        try store.add(generic("afu", secret: "s-afu", protection: .afterFirstUnlock))
        store.lockAll()
        let planted = try Crypto.random(32)
        try KernelKeyring.store(planted, description: "keychain:\(store.identifier):A")
        let other = try scratch.open(storage: .kernel)
        XCTAssertStatus(try other.add(generic("new", secret: "for the planter")), .interactionNotAllowed)
        XCTAssertFalse(kernelHas(store, "A"), "the planted key is gone")
        XCTAssertFalse(other.status.whenUnlocked)

        try KernelKeyring.store(planted, description: "keychain:\(store.identifier):C")
        XCTAssertStatus(try other.add(generic("new-afu", protection: .afterFirstUnlock)), .interactionNotAllowed)
        XCTAssertFalse(kernelHas(store, "C"))
        try KernelKeyring.store(planted, description: "keychain:\(store.identifier):C")
        XCTAssertStatus(try other.find(query("afu"), includeSecret: true), .interactionNotAllowed)
        XCTAssertFalse(kernelHas(store, "C"))
        XCTAssertEqual(try other.count(), 2, "nothing was sealed under the planted key")

        // A key that is not this keychain's own, even one of another keychain, fits no check value.
        let neighbour = try scratch.create("neighbour", storage: .kernel)
        let foreign = KernelKeyring.read("keychain:\(neighbour.identifier):A")!
        try KernelKeyring.store(foreign, description: "keychain:\(store.identifier):A")
        XCTAssertStatus(try other.add(generic("new")), .interactionNotAllowed)
        XCTAssertFalse(kernelHas(store, "A"))

        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(other, query("wu")), "s-wu")
        try other.add(generic("new", secret: "ok"))
    }

    func testEmbeddedModeNeverTouchesTheKernel() throws {
        let store = try scratch.create(storage: .process)
        XCTAssertFalse(kernelHas(store, "A"))
        XCTAssertFalse(kernelHas(store, "C"))
        try store.add(generic("a"))
        store.lock()
        XCTAssertStatus(try store.find(query("a")), .interactionNotAllowed)
        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try store.find(query("a")).count, 1)
        XCTAssertFalse(kernelHas(store, "A"))
    }
}
