@testable import KeychainCore
import Glibc
import XCTest

/// Issue 54: a keychain in a custodian's keeping (`KeyStorage.broker`). The engine reads and
/// searches with the subkeys the custodian hands out, and every item key goes through it: the
/// custodian decides who reads a secret, and this process never holds a class key or the key
/// that wraps item keys.
final class BrokerModeTests: XCTestCase {
    var scratch: Scratch!
    var custodian: FakeCustodian!

    override func setUp() {
        scratch = Scratch()
        custodian = FakeCustodian()
        KeychainStore.custodian = custodian
    }

    override func tearDown() {
        scratch.remove()
        KeychainStore.custodian = nil
        AccessList.creatorEntry = nil
    }

    /// A keychain made with a custodian installed: in its keeping.
    private func create() throws -> KeychainStore {
        let store = try scratch.create(storage: .kernel)
        XCTAssertEqual(store.storage, .broker)
        return store
    }

    private func columns(_ store: KeychainStore, row: Int64) throws -> (metadata: Bytes, secret: Bytes) {
        let stmt = try store.db.statement("SELECT metadata, secret FROM items WHERE rowid = ?")
        stmt.bind([.int(row)])
        defer { stmt.reset() }
        XCTAssertTrue(try stmt.step())
        return (stmt.blob(0), stmt.blob(1))
    }

    /// Always-class items are sealed under key D, which is in the file (outside the custodian's
    /// boundary): they are read, changed and checked here, and the custodian, which has no D, is
    /// never asked about them (before, their secret asked it and failed as "no key of this class").
    func testAlwaysItemsNeverGoToTheCustodian() throws {
        let store = try create()
        custodian.decision = .deny
        try store.add(generic("always", secret: "d-secret", protection: .always))
        let before = (custodian.unwraps, custodian.wraps, custodian.bindingChecks)
        XCTAssertEqual(try secretString(store, query("always")), "d-secret")
        XCTAssertEqual(try store.find(query("always")).count, 1)
        XCTAssertEqual(try store.update(query("always"), attributes: [AttributeKey.label: .string("changed")]), 1)
        XCTAssertEqual(try secretString(store, query("always")), "d-secret")
        XCTAssertEqual(custodian.unwraps, before.0)
        XCTAssertEqual(custodian.wraps, before.1)
        XCTAssertEqual(custodian.bindingChecks, before.2)
    }

    /// The review's planted list: new data over an item whose list does not trust the writer, or
    /// lets in any program or an interpreter, gets the writer's own list; a writer the list names
    /// keeps it.
    func testNewDataOverAPlantedListGetsTheWritersList() throws {
        let store = try create()
        let writer = try XCTUnwrap(AccessList.creatorAttribute)
        for planted in ["any", "interpreter:/usr/bin/python3\n" + (writer.stringValue ?? ""), "exe:/usr/bin/other"] {
            var item = generic("planted", secret: "old")
            item.attributes[AccessList.attribute] = .string(planted)
            try store.add(item)
            // The writer is trusted only by the list that names it alone.
            custodian.decision = planted == "exe:/usr/bin/other" ? .ask : .allow
            XCTAssertEqual(try store.update(query("planted"), attributes: [:], secret: Array("new".utf8)), 1)
            custodian.decision = .allow
            let found = try XCTUnwrap(store.find(query("planted")).first)
            XCTAssertEqual(found.attributes[AccessList.attribute], writer, planted)
            try store.delete(query("planted"))
        }
        var owned = generic("owned", secret: "old")
        owned.attributes[AccessList.attribute] = .string("exe:/usr/bin/git")
        try store.add(owned)
        custodian.decision = .allow
        XCTAssertEqual(try store.update(query("owned"), attributes: [:], secret: Array("new".utf8)), 1)
        XCTAssertEqual(try XCTUnwrap(store.find(query("owned")).first).attributes[AccessList.attribute], .string("exe:/usr/bin/git"))
    }

    /// Issue 54: the class keys of a keychain made where a custodian runs are drawn there; the
    /// engine writes the keybag it returns, and the file opens with the password anywhere.
    func testANewKeychainsClassKeysAreMadeInTheCustodian() throws {
        let store = try create()
        XCTAssertEqual(custodian.created, [store.keybag.uuid], "the custodian made the keybag")
        XCTAssertEqual(custodian.unlocks, 0, "no keys made here and handed over with the password")
        XCTAssertNil(KernelKeyring.find(store.kernelName(.whenUnlocked)))
        XCTAssertNil(KernelKeyring.find(store.kernelName(.afterFirstUnlock)))
        XCTAssertTrue(store.processKeys.isEmpty)
        // Left unlocked, as a new keychain is, and usable at once.
        try store.add(generic("alice", secret: "made"))
        XCTAssertEqual(try secretString(store, query("alice")), "made")

        // A portable file: without the custodian, the password opens it in the kernel keyring.
        KeychainStore.custodian = nil
        let elsewhere = try scratch.open(storage: .kernel)
        XCTAssertEqual(elsewhere.storage, .kernel)
        XCTAssertEqual(elsewhere.keybag.uuid, store.keybag.uuid)
        try elsewhere.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(elsewhere, query("alice")), "made")

        // The Secret Service's session collection stays in its process, custodian or not.
        KeychainStore.custodian = custodian
        let session = try KeychainStore.createEphemeral(at: scratch.directory + "/session.keychain-db")
        XCTAssertEqual(session.storage, .process)
        XCTAssertEqual(custodian.created.count, 1)
    }

    // (a)
    func testItemsRoundTripThroughTheCustodianWithoutAWrappingKeyHere() throws {
        let store = try create()
        let item = try store.add(generic("alice", secret: "first"))
        XCTAssertEqual(try secretString(store, query("alice")), "first")
        XCTAssertEqual(try store.update(query("alice"), attributes: [AttributeKey.label: .string("renamed")], secret: Array("second".utf8)), 1)
        let found = try XCTUnwrap(store.find(query("alice"), includeSecret: true).first)
        XCTAssertEqual(found.secret, Array("second".utf8))
        XCTAssertEqual(found.attributes[AttributeKey.label], .string("renamed"))
        XCTAssertEqual(found.rowID, item.rowID)
        XCTAssertEqual(try store.delete(query("alice")), 1)
        XCTAssertStatus(try store.find(query("alice")), .itemNotFound)

        XCTAssertGreaterThan(custodian.wraps, 0)
        XCTAssertGreaterThan(custodian.unwraps, 0)
        let keys = try store.currentKeys()
        XCTAssertNil(keys.wrappingKey(.whenUnlocked))
        XCTAssertNil(keys.wrappingKey(.afterFirstUnlock))
        XCTAssertNil(keys.settingsKey)
        XCTAssertNil(store.heldClassKey(.whenUnlocked))
        XCTAssertNil(KernelKeyring.find(store.kernelName(.whenUnlocked)), "nothing went to the kernel keyring")
        let classKeys = custodian.classKeys(store.keybag.uuid)
        XCTAssertEqual(classKeys.count, 2)
        for key in classKeys {
            for secret in [key, Crypto.deriveKey(key, purpose: "item-keys"), Keybag.settingsKey(a: key)] {
                XCTAssertFalse(custodian.handedOut.contains(secret), "the custodian handed out a class key or a wrapping key")
            }
        }
    }

    // (b)
    func testADeniedUnwrapGivesAuthFailedAndNoDataWhileAttributesStillRead() throws {
        let store = try create()
        try store.add(generic("alice", secret: "hidden"))
        custodian.decision = .deny
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .authFailed)
        let checks = custodian.bindingChecks
        XCTAssertStatus(try store.secret(of: try XCTUnwrap(store.find(query("alice")).first)), .authFailed)
        let found = try XCTUnwrap(store.find(query("alice")).first)
        XCTAssertNil(found.secret)
        XCTAssertEqual(found.attributes[AttributeKey.account], .string("alice"))
        XCTAssertEqual(custodian.bindingChecks, checks + 1, "an attribute read checks the binding in the custodian, once")
    }

    /// An update or delete asks the custodian about the rows it acts on, not every candidate.
    func testAChangeChecksTheBindingOfItsMatchesOnly() throws {
        let store = try create()
        for name in ["a", "b", "c"] { try store.add(generic(name)) }
        try store.add(Item(itemClass: .genericPassword, attributes: [AttributeKey.account: .string("d"), AttributeKey.label: .string("old")], secret: []))
        var byLabel = Query(itemClass: .genericPassword)
        byLabel.attributes[AttributeKey.label] = .string("old")
        let checks = custodian.bindingChecks
        XCTAssertEqual(try store.delete(byLabel), 1)
        XCTAssertEqual(custodian.bindingChecks, checks + 1)
        XCTAssertEqual(try store.find(query(), limit: nil).count, 3)
    }

    /// A data read with the custodian's state kept from the read before is one call (the unwrap,
    /// carrying the state's generation), not two (state, then unwrap).
    func testADataReadWithAKeptStateIsOneCustodianCall() throws {
        let store = try create()
        try store.add(generic("alice", secret: "one"))
        XCTAssertEqual(try secretString(store, query("alice")), "one")
        let calls = custodian.calls, states = custodian.stateCalls
        XCTAssertEqual(try secretString(store, query("alice")), "one")
        XCTAssertEqual(custodian.calls, calls + 1, "one round trip")
        XCTAssertEqual(custodian.stateCalls, states, "no state call")
        // An attribute read of a format-2 row: its binding check alone.
        XCTAssertNotNil(try store.find(query("alice")).first)
        XCTAssertEqual(custodian.calls, calls + 2)
    }

    /// A row's binding is checked by the custodian once while the row is the same, byte for
    /// byte; a row written again is checked again.
    func testABindingIsCheckedOncePerRowAsStored() throws {
        let store = try create()
        try store.add(generic("alice", secret: "one"))
        let checks = custodian.bindingChecks
        XCTAssertNotNil(try store.find(query("alice")).first)
        XCTAssertNotNil(try store.find(query("alice")).first)
        XCTAssertEqual(custodian.bindingChecks, checks + 1)
        XCTAssertEqual(try store.update(query("alice"), attributes: [AttributeKey.label: .string("changed")]), 1)
        let rewritten = custodian.bindingChecks
        XCTAssertNotNil(try store.find(query("alice")).first)
        XCTAssertEqual(custodian.bindingChecks, rewritten + 1, "the row written again is checked again")
    }

    /// Told of every change of its keys (the broker's notices), a process reads attributes with
    /// no call at all once a row's binding was checked, and a search that finds nothing needs
    /// none either; a lock elsewhere still fails the very next read.
    func testAttributeReadsNeedNoCallWhileNoChangeIsTold() throws {
        custodian.tellsChanges = true
        let store = try create()
        try store.add(generic("alice", secret: "one"))
        XCTAssertNotNil(try store.find(query("alice")).first)
        let calls = custodian.calls
        XCTAssertNotNil(try store.find(query("alice")).first)
        XCTAssertStatus(try store.find(query("nobody")), .itemNotFound)
        XCTAssertTrue(store.status.whenUnlocked)
        XCTAssertEqual(custodian.calls, calls, "no round trip")
        XCTAssertEqual(try secretString(store, query("alice")), "one")
        XCTAssertEqual(custodian.calls, calls + 1, "the unwrap alone")
        custodian.lockElsewhere(store.keybag.uuid)
        XCTAssertStatus(try store.find(query("alice")), .interactionNotAllowed)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .interactionNotAllowed)
        XCTAssertFalse(store.status.whenUnlocked)
    }

    /// A lock by another process (the custodian's keys change) fails the very next read, of
    /// attributes or of data, though this process kept the state from before it.
    func testALockElsewhereFailsTheNextReadThoughAStateWasKept() throws {
        let store = try create()
        try store.add(generic("alice", secret: "one"))
        try store.add(generic("carol", secret: "three", protection: .afterFirstUnlock))
        XCTAssertEqual(try secretString(store, query("alice")), "one")
        custodian.lockElsewhere(store.keybag.uuid)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("carol")), "three", "AfterFirstUnlock stays open")

        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(store, query("alice")), "one")
        custodian.lockElsewhere(store.keybag.uuid)
        XCTAssertStatus(try store.find(query("alice")), .interactionNotAllowed)
        XCTAssertNotNil(try store.find(query("carol")).first)
    }

    /// A search that finds nothing asks for the state before saying so: the keychain may have
    /// been locked since the state kept, and then the answer is "locked", as before.
    func testNotFoundIsConfirmedWithTheState() throws {
        let store = try create()
        try store.add(generic("alice", secret: "one"))
        XCTAssertEqual(try secretString(store, query("alice")), "one")
        let states = custodian.stateCalls
        XCTAssertStatus(try store.find(query("nobody"), includeSecret: true), .itemNotFound)
        XCTAssertEqual(custodian.stateCalls, states + 1, "not found is confirmed")
        // Locked since: the confirming state shows it, and the search runs again on that state
        // (AfterFirstUnlock still open: nothing there either). Then a WhenUnlocked item's read
        // is refused as locked, and that too is confirmed.
        custodian.lockElsewhere(store.keybag.uuid)
        XCTAssertStatus(try store.find(query("nobody")), .itemNotFound)
        XCTAssertEqual(custodian.stateCalls, states + 2)
        XCTAssertStatus(try store.find(query("alice")), .interactionNotAllowed)
        XCTAssertEqual(custodian.stateCalls, states + 3)
    }

    // (c)
    func testALockThroughTheCustodianLocksWhenUnlockedItems() throws {
        let store = try create()
        try store.add(generic("wu", secret: "a"))
        try store.add(generic("afu", secret: "c", protection: .afterFirstUnlock))
        try store.lockReportingFailure()
        XCTAssertFalse(store.status.whenUnlocked)
        XCTAssertTrue(store.status.afterFirstUnlock)
        XCTAssertEqual(store.status.storage, .broker)
        XCTAssertStatus(try store.find(query("wu"), includeSecret: true), .interactionNotAllowed)
        XCTAssertStatus(try store.add(generic("new")), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("afu")), "c")
        XCTAssertStatus(try store.unlock(password: Array("wrong".utf8)), .authFailed)
        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(store, query("wu")), "a")
    }

    // (d)
    func testAlwaysAllowRewritesTheListOnce() throws {
        let store = try create()
        let item = try store.add(generic("alice", secret: "s"))
        let creator = try XCTUnwrap(AccessList.of(item))
        let other = AccessList.Entry.executable("/usr/bin/other-program")
        custodian.decision = .alwaysAllow(other)

        let before = try columns(store, row: item.rowID)
        XCTAssertEqual(try secretString(store, query("alice")), "s")
        let after = try columns(store, row: item.rowID)
        XCTAssertNotEqual(before.metadata, after.metadata, "the row was sealed again with the new list")
        XCTAssertNotEqual(before.secret, after.secret)
        let read = try XCTUnwrap(store.find(query("alice")).first)
        XCTAssertEqual(AccessList.of(read)?.entries, creator.entries + [other])
        XCTAssertEqual(read.attributes[AttributeKey.modificationDate], item.attributes[AttributeKey.modificationDate])

        XCTAssertEqual(try secretString(store, query("alice")), "s")
        let again = try columns(store, row: item.rowID)
        XCTAssertEqual(after.metadata, again.metadata, "a list that names the caller is not written again")
        XCTAssertEqual(custodian.lastList?.entries, creator.entries + [other], "the custodian read the new list")
    }

    // (e)
    func testMetadataSwappedForOtherMetadataFailsInTheCustodian() throws {
        let store = try create()
        let item = try store.add(generic("alice", secret: "pw"))
        let before = try columns(store, row: item.rowID)
        XCTAssertEqual(try store.update(query("alice"), attributes: [AttributeKey.label: .string("renamed")]), 1)
        let after = try columns(store, row: item.rowID)
        // The older metadata opens here (same row, same key): only its binding to the secret fails.
        try store.db.statement("UPDATE items SET metadata = ? WHERE rowid = ?").run([.blob(before.metadata), .int(item.rowID)])
        XCTAssertStatus(try store.find(query("alice")), .decode)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true), .decode)

        let row = Row(
            rowID: item.rowID, itemClass: .genericPassword, lockClass: .whenUnlocked, space: .protected, metadata: before.metadata, secret: after.secret)
        let request = store.itemKeyRequest(row, wrappedKey: try store.wrappedKey(of: row))
        XCTAssertStatus(try custodian.checkBinding(request), .decode)
        XCTAssertStatus(try custodian.unwrap(request, interaction: .allowed), .decode)
    }

    // (f) Issue 54: a rotation in the custodian's keeping is made there: new A, C and D, every row
    // sealed again by the custodian (no secret and no class key comes here), indexed here.
    func testARotationInTheCustodiansKeepingIsMadeThere() throws {
        let store = try create()
        try store.add(generic("alice", secret: "wu"))
        try store.add(generic("carol", secret: "afu", protection: .afterFirstUnlock))
        try store.add(generic("dave", secret: "always", protection: .always))
        try store.add(Item(itemClass: .genericPassword, attributes: [AttributeKey.account: .string("none")], secret: nil))
        let uuid = store.keybag.uuid, oldD = store.keybag.keyD
        let oldKeys = custodian.classKeys(uuid)
        let before = try columns(store, row: 1)
        let unwraps = custodian.unwraps

        try store.changePassword(from: Array("pw".utf8), to: Array("new".utf8), rotatingKeys: true)
        XCTAssertEqual(custodian.rotatedRows, 4)
        XCTAssertEqual(custodian.unwraps, unwraps, "no item key came here")
        XCTAssertEqual(store.keybag.uuid, uuid)
        XCTAssertNotEqual(store.keybag.keyD, oldD)
        let newKeys = custodian.classKeys(uuid)
        XCTAssertEqual(newKeys.count, 2)
        for key in newKeys { XCTAssertFalse(oldKeys.contains(key)) }
        let after = try columns(store, row: 1)
        XCTAssertNotEqual(before.metadata, after.metadata)
        XCTAssertNotEqual(before.secret, after.secret)
        // (Always items, outside the custodian's keeping, are read below where no custodian is.)
        for (account, secret) in [("alice", "wu"), ("carol", "afu")] {
            XCTAssertEqual(try secretString(store, query(account)), secret, account)
        }
        let none = try XCTUnwrap(store.find(query("none"), includeSecret: true).first)
        XCTAssertNil(none.secret)
        XCTAssertStatus(try store.verify(password: Array("pw".utf8)), .authFailed)
        try store.verify(password: Array("new".utf8))
        XCTAssertEqual(store.status.settingsIntegrity, .verified)
        for key in newKeys {
            for secret in [key, Crypto.deriveKey(key, purpose: "item-keys"), Keybag.settingsKey(a: key)] {
                XCTAssertFalse(custodian.handedOut.contains(secret), "the custodian handed out a class key or a wrapping key")
            }
        }

        // A portable file still: without the custodian, the new password opens it here.
        KeychainStore.custodian = nil
        let elsewhere = try scratch.open(storage: .kernel)
        try elsewhere.unlock(password: Array("new".utf8))
        XCTAssertEqual(try secretString(elsewhere, query("alice")), "wu")
        XCTAssertEqual(try secretString(elsewhere, query("dave")), "always")
    }

    /// A rotation is cut into batches that fit the custodian's messages.
    func testRotationBatchesFitTheCustodiansMessages() {
        func row(_ size: Int) -> Row {
            Row(rowID: 1, itemClass: .genericPassword, lockClass: .whenUnlocked, space: .protected, metadata: [], secret: Bytes(repeating: 0, count: size))
        }
        let limit = KeychainStore.rotationBatchBytes
        XCTAssertEqual(KeychainStore.rotationBatches([]).count, 0)
        XCTAssertEqual(KeychainStore.rotationBatches([row(10), row(10)]).map(\.count), [2])
        XCTAssertEqual(KeychainStore.rotationBatches([row(limit / 2), row(limit / 2), row(10)]).map(\.count), [1, 2])
        XCTAssertEqual(KeychainStore.rotationBatches([row(2 * limit), row(10)]).map(\.count), [1, 1])
    }

    /// kSecUseAuthenticationUI and an LAContext's interactionNotAllowed reach the custodian.
    func testInteractionIsCarriedToTheCustodian() throws {
        let store = try create()
        try store.add(generic("alice", secret: "s"))
        custodian.decision = .ask
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true, presence: PresenceOptions(interaction: .fail)), .interactionNotAllowed)
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true, presence: PresenceOptions(interaction: .skip)), .itemNotFound)
        let context = AuthenticationContext()
        context.interactionNotAllowed = true
        XCTAssertStatus(try store.find(query("alice"), includeSecret: true, presence: PresenceOptions(context: context)), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("alice")), "s")
        XCTAssertEqual(custodian.interactions, [.notAllowed, .notAllowed, .notAllowed, .allowed])
    }

    /// A change that needs the person's answer (new attributes, the same secret sealed again)
    /// gets it outside its write transaction: other processes' writers do not wait on a person.
    func testAChangeAsksThePersonOutsideItsTransaction() throws {
        let store = try create()
        try store.add(generic("alice", secret: "s"))
        custodian.decision = .ask
        var askedInTransaction: [Bool] = []
        custodian.onUnwrap = { interaction in
            if interaction == .allowed { askedInTransaction.append(store.db.inTransaction) }
        }
        XCTAssertStatus(
            try store.update(query("alice"), attributes: [AttributeKey.label: .string("no")], presence: PresenceOptions(interaction: .fail)),
            .interactionNotAllowed)
        XCTAssertEqual(try store.update(query("alice"), attributes: [AttributeKey.label: .string("yes")]), 1)
        XCTAssertEqual(askedInTransaction, [false])
        XCTAssertEqual(custodian.interactions, [.notAllowed, .notAllowed, .allowed])
        let found = try XCTUnwrap(store.find(query("alice")).first)
        XCTAssertEqual(found.attributes[AttributeKey.label], .string("yes"))

        // "Always allow" given for a change goes into the list that change writes.
        let other = AccessList.Entry.executable("/usr/bin/other-program")
        custodian.decision = .alwaysAllow(other)
        XCTAssertEqual(try store.update(query("alice"), attributes: [AttributeKey.label: .string("again")]), 1)
        XCTAssertEqual(AccessList.of(try XCTUnwrap(store.find(query("alice")).first))?.entries.last, other)
        XCTAssertEqual(try secretString(store, query("alice")), "s")
    }

    func testPasswordAndSettingsChangeThroughTheCustodian() throws {
        let store = try create()
        try store.add(generic("alice", secret: "s"))
        try store.changePassword(from: Array("pw".utf8), to: Array("new".utf8))
        XCTAssertStatus(try store.verify(password: Array("pw".utf8)), .authFailed)
        try store.verify(password: Array("new".utf8))
        try store.lockReportingFailure()
        try store.unlock(password: Array("new".utf8))
        XCTAssertEqual(try secretString(store, query("alice")), "s")

        try store.setSettings(KeychainSettings(idleTimeout: 300, lockOnSessionEnd: false))
        XCTAssertEqual(store.status.settings.idleTimeout, 300)
        XCTAssertEqual(store.status.settingsIntegrity, .verified)
        let reopened = try scratch.open(storage: .kernel)
        XCTAssertEqual(reopened.storage, .broker)
        XCTAssertEqual(reopened.status.settings.idleTimeout, 300)
    }

    /// Without a custodian that keeps it, a keychain stays in the kernel; with one, no setting of
    /// the user's environment brings it back there (the next unlock would put the class keys where
    /// every process of the user reads them).
    func testTheKernelStaysWhereNoCustodianKeepsTheKeychain() throws {
        let store = try create()
        store.lock()
        custodian.keepsKeychains = false
        XCTAssertEqual(try scratch.open(storage: .kernel).storage, .kernel)
        custodian.keepsKeychains = true
        setenv("KEYCHAIN_BROKER", "off", 1)
        defer { unsetenv("KEYCHAIN_BROKER") }
        XCTAssertEqual(try scratch.open(storage: .kernel).storage, .broker)
        XCTAssertEqual(try scratch.open(storage: .process).storage, .process)
    }

    /// Every new item names the program that made it; a restored one keeps what it had.
    func testNewItemsCarryTheirCreatorsEntry() throws {
        let store = try scratch.create()
        let made = try store.add(generic("alice"))
        let exe = try XCTUnwrap(realpath("/proc/self/exe", nil))
        defer { free(exe) }
        XCTAssertEqual(AccessList.of(made)?.entries, [.executable(String(cString: exe))])
        AccessList.creatorEntry = .executableUnder("/usr/bin/git-credential-keychain", parents: ["/usr/bin/git"])
        let helper = try store.add(generic("bob"))
        XCTAssertEqual(try store.find(query("bob")).first.flatMap(AccessList.of)?.entries, AccessList.of(helper)?.entries)
        XCTAssertEqual(AccessList.of(helper)?.text, "exe:/usr/bin/git-credential-keychain</usr/bin/git")
        let restored = try store.add(generic("carol"), keepingDates: true)
        XCTAssertNil(AccessList.of(restored), "a restored item keeps the list it had: none")
    }
}
