@testable import KeychainCore
@testable import KeychainTPMPolicy
import KeychainTestSupport
@testable import KeychainTPMClient
@testable import KeychainTPM
import Glibc
import XCTest

/// An in-memory TPM: it keeps each sealed secret with its authorization, counts wrong ones and
/// locks out past `maximum`, and names itself by `primary` (another "machine" has another).
/// `lying` makes it answer a different secret than it sealed, as a malicious TPM or TCTI could.
final class SimulatedTPM: TPMOperations {
    var primary: Bytes
    var sealed: [Bytes: (secret: Bytes, auth: Bytes)] = [:]
    var failures: UInt32 = 0
    var maximum: UInt32 = 3
    var lying = false
    var unseals = 0

    init(primary: UInt8 = 1) { self.primary = [0, 0x0b] + Bytes(repeating: primary, count: 32) }

    func seal(_ secret: Bytes, auth: Bytes) throws -> TPMSealedSecret {
        let handle = Bytes((0..<16).map { _ in UInt8.random(in: 0...255) })
        sealed[handle] = (secret, auth)
        return TPMSealedSecret(primaryName: primary, sealedPublic: [1, 2, 3], sealedPrivate: handle)
    }

    func unseal(_ record: TPMSealedSecret, auth: Bytes, length: Int) throws -> Bytes {
        unseals += 1
        guard record.primaryName == primary, let entry = sealed[record.sealedPrivate] else {
            throw TPMFailure.foreign("not this TPM's")
        }
        guard failures < maximum else { throw TPMFailure.lockout(state) }
        guard entry.auth == auth else {
            failures += 1
            throw TPMFailure.authorization(state)
        }
        return lying ? Bytes(repeating: 0x5a, count: length) : entry.secret
    }

    /// PCR values (SHA-256 bank) by index; absent: zeros.
    var pcrValues: [UInt8: Bytes] = [:]
    var pcrSealed: [Bytes: (secret: Bytes, pcrs: [UInt8], values: [Bytes])] = [:]

    func values(_ pcrs: [UInt8]) -> [Bytes] { pcrs.map { pcrValues[$0] ?? Bytes(repeating: 0, count: 32) } }

    func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes] { values(pcrs) }

    func seal(_ secret: Bytes, toPCRs pcrs: [UInt8]) throws -> TPMSealedSecret {
        let handle = Bytes((0..<16).map { _ in UInt8.random(in: 0...255) })
        pcrSealed[handle] = (secret, pcrs, values(pcrs))
        return TPMSealedSecret(primaryName: primary, sealedPublic: [4, 5, 6], sealedPrivate: handle)
    }

    func unseal(_ record: TPMSealedSecret, pcrs: [UInt8], length: Int) throws -> Bytes {
        unseals += 1
        guard record.primaryName == primary, let entry = pcrSealed[record.sealedPrivate] else { throw TPMFailure.foreign("not this TPM's") }
        // The policy is in the object: PCRs named differently in the record fail as a change would.
        guard entry.pcrs == pcrs, entry.values == values(pcrs) else { throw TPMFailure.bootState("PCR changed") }
        return lying ? Bytes(repeating: 0x5a, count: length) : entry.secret
    }

    /// Sealed to PCR values and an authorization value (`tpm-enroll --pcrs`): the policy is
    /// checked first, and a mismatch counts nothing; a wrong authorization counts as above.
    var authPCRSealed: [Bytes: (secret: Bytes, auth: Bytes, pcrs: [UInt8], values: [Bytes])] = [:]

    func seal(_ secret: Bytes, auth: Bytes, pcrs: [UInt8]) throws -> TPMSealedSecret {
        let handle = Bytes((0..<16).map { _ in UInt8.random(in: 0...255) })
        authPCRSealed[handle] = (secret, auth, pcrs, values(pcrs))
        return TPMSealedSecret(primaryName: primary, sealedPublic: [7, 8, 9], sealedPrivate: handle, pcrs: pcrs)
    }

    func unseal(_ record: TPMSealedSecret, auth: Bytes, pcrs: [UInt8], length: Int) throws -> Bytes {
        unseals += 1
        guard record.primaryName == primary, let entry = authPCRSealed[record.sealedPrivate] else { throw TPMFailure.foreign("not this TPM's") }
        guard failures < maximum else { throw TPMFailure.lockout(state) }
        guard entry.pcrs == pcrs, entry.values == values(pcrs) else { throw TPMFailure.bootState("PCR changed") }
        guard entry.auth == auth else {
            failures += 1
            throw TPMFailure.authorization(state)
        }
        return lying ? Bytes(repeating: 0x5a, count: length) : entry.secret
    }

    /// NV counters by index: their authorization and value. Counters start at the highest value
    /// any counter had, as a TPM's do.
    var counters: [UInt32: (auth: Bytes, value: UInt64)] = [:]
    var highest: UInt64 = 0
    var increments = 0

    /// Counter answers off by this much (a TPM or TCTI that lies about the count).
    var counterSkew: UInt64 = 0

    func counter(_ request: TPMCounterRequest) throws -> TPMCounterAnswer {
        var answer = try honestCounter(request)
        if answer.index != 0 { answer.value &+= counterSkew }
        return answer
    }

    func honestCounter(_ request: TPMCounterRequest) throws -> TPMCounterAnswer {
        switch request.action {
        case .find:
            for index in request.candidates {
                if let entry = counters[index], entry.auth == request.auth { return TPMCounterAnswer(index: index, value: entry.value) }
            }
            return .none
        case .create:
            guard let index = request.candidates.first(where: { counters[$0] == nil }) else { throw TPMFailure.failed("no free index") }
            highest += 1
            increments += 1
            counters[index] = (request.auth, highest)
            return TPMCounterAnswer(index: index, value: highest)
        case .increment(let index, let expected):
            guard let entry = counters[index], entry.auth == request.auth else { throw TPMFailure.failed("not ours") }
            guard entry.value == expected else { return TPMCounterAnswer(index: index, value: entry.value) }
            counters[index]!.value += 1
            increments += 1
            highest = max(highest, counters[index]!.value)
            return TPMCounterAnswer(index: index, value: counters[index]!.value)
        case .remove(let index):
            if let entry = counters[index], entry.auth == request.auth { counters[index] = nil }
            return .none
        case .findMatching:
            return try honestCounter(TPMCounterRequest(.find, auth: request.auth, candidates: request.candidates))
        case .migrate:
            // No platform hierarchy here: counters stay as they are.
            return .none
        }
    }

    var state: TPMLockoutState { TPMLockoutState(inLockout: failures >= maximum, failures: failures, maximum: maximum, interval: 600) }

    func describe(primaryName: Bytes?) throws -> (TPMDescription, sealedHere: Bool?) {
        (TPMDescription(tcti: "simulated", manufacturer: "SIM", lockout: state), primaryName.map { $0 == primary })
    }
}

/// A keychain's tests against the in-memory TPM, with the policy the front ends install, as
/// unlock and the calls without an explicit configuration find them.
class SimulatedTPMTestCase: XCTestCase {
    var scratch: Scratch!
    var tpm: SimulatedTPM!
    let here = TPMConfiguration(tcti: "simulated")
    let pw = Array("pw".utf8)

    override func setUp() {
        scratch = Scratch()
        tpm = SimulatedTPM()
        TPMAccess.simulated = { [unowned self] _ in self.tpm }
        TPMAccess.policy = RollbackAndPasswordlessPolicy()
        setenv("KEYCHAIN_TPM_TCTI", "simulated", 1)
    }

    override func tearDown() {
        TPMAccess.simulated = nil
        TPMAccess.policy = nil
        unsetenv("KEYCHAIN_TPM_TCTI")
        scratch.remove()
    }
}

final class TPMTests: SimulatedTPMTestCase {

    /// The engine knows a sealed keychain's rollback counter only through the installed policy: a
    /// program without it refuses to unlock or re-key the keychain rather than skip the counter.
    func testWithoutThePolicyASealedKeychainStaysLockedAndUnchanged() throws {
        let (store, _) = try sealed()
        store.lockAll()
        let before = try wrappedKeyA(store)
        TPMAccess.policy = nil
        XCTAssertStatus(try store.unlock(password: pw), .serviceNotAvailable)
        XCTAssertFalse(store.status.whenUnlocked)
        XCTAssertStatus(try store.rotateKeys(password: pw), .serviceNotAvailable)
        XCTAssertEqual(try wrappedKeyA(store), before)
        TPMAccess.policy = RollbackAndPasswordlessPolicy()
        try store.unlock(password: pw)
        XCTAssertEqual(try secretString(store, query("device")), "bound")
    }

    func sealed(items: Bool = true) throws -> (KeychainStore, RecoveryKey) {
        let store = try scratch.create()
        if items {
            try store.add(generic("portable", secret: "kept"))
            try store.add(generic("portable-c", secret: "kept-c", protection: .afterFirstUnlock))
            try store.add(generic("device", secret: "bound", protection: .whenUnlockedThisDeviceOnly))
            try store.add(generic("device-c", secret: "bound-c", protection: .afterFirstUnlockThisDeviceOnly))
            try store.add(generic("device-always", secret: "always", protection: .alwaysThisDeviceOnly))
        }
        let key = try store.sealToTPM(password: pw, tpm: here)
        return (store, key)
    }

    func lockClasses(_ store: KeychainStore) throws -> [Int64] {
        let stmt = try store.db.statement("SELECT lockclass FROM items ORDER BY rowid")
        defer { stmt.reset() }
        var out: [Int64] = []
        while try stmt.step() { out.append(stmt.int(0)) }
        return out
    }

    // MARK: Recovery key

    func testRecoveryKeyFormatsAsEightGroupsOfSixDigitsAndParsesBack() throws {
        for _ in 0..<200 {
            let key = try RecoveryKey.generate()
            let text = key.formatted
            XCTAssertEqual(text.count, 8 * 6 + 7)
            let groups = text.split(separator: "-")
            XCTAssertEqual(groups.count, 8)
            for group in groups {
                XCTAssertEqual(group.count, 6)
                XCTAssertEqual(Int(group)! % 11, 0)
            }
            XCTAssertEqual(try RecoveryKey(parsing: Array(text.utf8)), key)
            // Spaces, no separators, a trailing newline: the same key.
            XCTAssertEqual(try RecoveryKey(parsing: Array((text.replacingOccurrences(of: "-", with: " ") + "\n").utf8)), key)
            XCTAssertEqual(try RecoveryKey(parsing: Array(text.replacingOccurrences(of: "-", with: "").utf8)), key)
        }
    }

    func testRecoveryKeyKnownEncoding() throws {
        let key = RecoveryKey(bytes: [0x00, 0x00, 0xff, 0xff, 0x12, 0x34, 0x00, 0x01, 0x80, 0x00, 0x7f, 0xff, 0xab, 0xcd, 0x00, 0x0b])
        // 0*11, 65535*11, 0x1234*11 = 4660*11, 1*11, 32768*11, 32767*11, 43981*11, 11*11
        XCTAssertEqual(key.formatted, "000000-720885-051260-000011-360448-360437-483791-000121")
        XCTAssertEqual(try RecoveryKey(parsing: Array(key.formatted.utf8)), key)
    }

    func testEveryMistypedDigitAndSwappedNeighboursAreCaughtInTheirGroup() throws {
        let text = Array(try RecoveryKey.generate().formatted.utf8)
        for (i, byte) in text.enumerated() where byte != UInt8(ascii: "-") {
            for digit in UInt8(ascii: "0")...UInt8(ascii: "9") where digit != byte {
                var typo = text
                typo[i] = digit
                XCTAssertThrowsError(try RecoveryKey(parsing: typo)) { error in
                    XCTAssertEqual((error as? KeychainError)?.detail, "group \(i / 7 + 1) of the recovery key is mistyped")
                }
            }
            if i + 1 < text.count, text[i + 1] != UInt8(ascii: "-"), text[i + 1] != byte {
                var swapped = text
                swapped.swapAt(i, i + 1)
                XCTAssertStatus(try RecoveryKey(parsing: swapped), .param, "swapped digits at \(i)")
            }
        }
    }

    func testMalformedRecoveryKeysAreRefused() {
        for bad in [
            "", "123", "000000-720885-051172-000011-360448-360437-483791", "000000-720885-051172-000011-360448-360437-483791-000121-000000",
            "000000-720885-051172-000011-360448-360437-483791-00012a", "720896-000000-000000-000000-000000-000000-000000-000000",
            "999999-000000-000000-000000-000000-000000-000000-000000"
        ] {
            XCTAssertStatus(try RecoveryKey(parsing: Array(bad.utf8)), .param, bad)
        }
    }

    // MARK: Derivations

    func testAuthorizationValueHasNoTrailingZeroAndTheKeyNeedsBothHalves() {
        let uuid = Bytes(repeating: 9, count: 16)
        for n in 0..<2000 {
            let s = Crypto.sha256(Array("s\(n)".utf8))
            XCTAssertNotEqual(TPMSealedSecret.authValue(stretched: s, uuid: uuid).last, 0)
        }
        let s = Bytes(repeating: 1, count: 32), t = Bytes(repeating: 2, count: 32)
        let kek = TPMSealedSecret.kek(stretched: s, sealed: t, uuid: uuid)
        XCTAssertNotEqual(kek, TPMSealedSecret.kek(stretched: Bytes(repeating: 3, count: 32), sealed: t, uuid: uuid))
        XCTAssertNotEqual(kek, TPMSealedSecret.kek(stretched: s, sealed: Bytes(repeating: 3, count: 32), uuid: uuid))
        XCTAssertNotEqual(kek, TPMSealedSecret.kek(stretched: s, sealed: t, uuid: Bytes(repeating: 8, count: 16)))
        // What the TPM sees is neither half of the key nor the key.
        let auth = TPMSealedSecret.authValue(stretched: s, uuid: uuid)
        XCTAssertNotEqual(auth, kek)
        XCTAssertNotEqual(auth, s)
    }

    func testTPMResponseCodes() {
        XCTAssertEqual(TPMConstant.code(0x98E), TPMConstant.rcAuthFail)  // session 1
        XCTAssertEqual(TPMConstant.code(0x8E), TPMConstant.rcAuthFail)
        XCTAssertEqual(TPMConstant.code(0x921), TPMConstant.rcLockout)
        XCTAssertEqual(TPMConstant.code(0x0B_0921), TPMConstant.rcLockout)  // through a resource manager
        XCTAssertEqual(TPMConstant.code(0x1DF), 0x9F)  // TPM_RC_INTEGRITY of parameter 1
        XCTAssertNil(TPMConstant.code(0x07_0001))  // ESAPI's own
        if case .authorization = TPMConnection.failure(0x98E, "x") {} else { XCTFail("AUTH_FAIL") }
        if case .lockout = TPMConnection.failure(0x921, "x") {} else { XCTFail("LOCKOUT") }
        if case .failed = TPMConnection.failure(0xA000A, "x") {} else { XCTFail("TCTI") }
    }

    func testConfigurationFromTheEnvironment() {
        setenv("KEYCHAIN_TPM_TCTI", "none", 1)
        XCTAssertNil(TPMConfiguration.current.tcti)
        setenv("KEYCHAIN_TPM_TCTI", "", 1)
        XCTAssertNil(TPMConfiguration.current.tcti)
        setenv("KEYCHAIN_TPM_TCTI", "swtpm:host=127.0.0.1,port=9", 1)
        XCTAssertEqual(TPMConfiguration.current.tcti, "swtpm:host=127.0.0.1,port=9")
        unsetenv("KEYCHAIN_TPM_TCTI")
        var st = stat()
        XCTAssertEqual(TPMConfiguration.current.tcti, stat("/dev/tpmrm0", &st) == 0 ? "device:/dev/tpmrm0" : nil)
    }

    // MARK: Keybag versions

    func testAKeychainNeverSealedStaysVersion2WithNoBindingFields() throws {
        let store = try scratch.create()
        XCTAssertEqual(store.keybag.version, 2)
        XCTAssertFalse(store.isSealedToTPM)
        let names = try store.db.statement("SELECT count(*) FROM keychain WHERE name IN ('tpm', 'recovery', 'wrap.Au', 'wrap.Cu', 'check.Au', 'check.Cu')")
        XCTAssertTrue(try names.step())
        XCTAssertEqual(names.int(0), 0)
    }

    func testSealingWritesVersion3ThatReloadsAndUnsealingGoesBackTo2() throws {
        let (store, _) = try sealed()
        let bag = try Keybag.load(from: store.db)
        XCTAssertEqual(bag.version, 3)
        XCTAssertEqual(bag.binding, store.keybag.binding)
        XCTAssertEqual(try lockClasses(store), [1, 2, 4, 5, 3], "ThisDeviceOnly items moved under Au and Cu; AlwaysThisDeviceOnly stays under D")

        try store.unsealFromTPM(password: pw, tpm: here)
        let back = try Keybag.load(from: store.db)
        XCTAssertEqual(back.version, 2)
        XCTAssertNil(back.binding)
        XCTAssertEqual(try lockClasses(store), [1, 2, 1, 2, 3])
        let names = try store.db.statement("SELECT count(*) FROM keychain WHERE name IN ('tpm', 'recovery', 'wrap.Au', 'wrap.Cu', 'check.Au', 'check.Cu')")
        XCTAssertTrue(try names.step())
        XCTAssertEqual(names.int(0), 0)
        // The TPM is not asked any more.
        TPMAccess.simulated = nil
        let reopened = try scratch.open()
        try reopened.unlock(password: pw)
        XCTAssertEqual(try secretString(reopened, query("device")), "bound")
        XCTAssertEqual(try secretString(reopened, query("portable")), "kept")
    }

    /// The keybag from before the seal opens with the password alone, where guesses cost no TPM
    /// try: no copy of it stays in the write-ahead log or the file.
    func testSealingLeavesNoPasswordOnlyKeybagInTheFiles() throws {
        let store = try scratch.create()
        try store.add(generic("portable", secret: "kept"))
        let passwordOnly = try wrappedKeyA(store)
        _ = try store.sealToTPM(password: pw, tpm: here)
        XCTAssertNotEqual(try wrappedKeyA(store), passwordOnly)
        for file in [store.path, store.path + "-wal"] {
            XCTAssertFalse(fileHolds(file, passwordOnly), "the password-only wrapped key A is in \(file)")
        }
    }

    func testEveryBindingFieldIsCoveredByTheChecksumOrTheTags() throws {
        let (store, _) = try sealed(items: false)
        for name in TPMBinding.fieldNames {
            let original = try value(store, name)
            for index in [0, original.count / 2, original.count - 1] {
                var changed = original
                changed[index] ^= 0x01
                try set(store, name, changed)
                XCTAssertStatus(try Keybag.load(from: store.db), .decode, "\(name)[\(index)]")
            }
            try set(store, name, original)
        }
        XCTAssertNoThrow(try Keybag.load(from: store.db))
        try store.db.statement("DELETE FROM keychain WHERE name = 'recovery'").run([])
        XCTAssertStatus(try Keybag.load(from: store.db), .decode)
    }

    func testASwappedSealedObjectOpensNothing() throws {
        // Someone who can write the file swaps in the sealed object of another keybag (and fixes
        // the checksum): its authorization is another keybag's, so the TPM refuses (and counts).
        let (store, _) = try sealed(items: false)
        let other = try scratch.create("other")
        _ = try other.sealToTPM(password: pw, tpm: here)
        try set(store, "tpm", try value(other, "tpm"))
        try fixChecksum(store)
        XCTAssertStatus(try Keybag.load(from: store.db).open(password: pw), .authFailed)
        // Even one that accepts this password's authorization (as if its author had seen it)
        // releases a secret that is not T: the key opens nothing, and the keychain says so.
        let bag = try Keybag.load(from: store.db)
        let stretched = try Crypto.scrypt(password: pw, salt: bag.salt, parameters: bag.scrypt)
        let forged = try tpm.seal(Crypto.random(32), auth: TPMSealedSecret.authValue(stretched: stretched, uuid: bag.uuid))
        try set(store, "tpm", forged.bytes)
        try fixChecksum(store)
        XCTAssertStatus(try Keybag.load(from: store.db).open(password: pw), .decode)
    }

    func value(_ store: KeychainStore, _ name: String) throws -> Bytes {
        let stmt = try store.db.statement("SELECT value FROM keychain WHERE name = ?")
        stmt.bind([.text(name)])
        defer { stmt.reset() }
        XCTAssertTrue(try stmt.step())
        return stmt.blob(0)
    }

    func set(_ store: KeychainStore, _ name: String, _ value: Bytes) throws {
        try store.db.statement("UPDATE keychain SET value = ? WHERE name = ?").run([.blob(value), .text(name)])
    }

    func fixChecksum(_ store: KeychainStore) throws {
        let fields =
            try ["uuid", "kdf", "wrap.A", "wrap.C", "check.A", "check.C", "key.D"].map { try value(store, $0) }
            + TPMBinding.fieldNames.map { try value(store, $0) }
        try set(store, "checksum", Keybag.checksum(fields))
    }

    // MARK: Unlocking through the TPM

    func testTheRightPasswordUnlocksThroughTheTPMAndEveryItemReads() throws {
        let (store, _) = try sealed()
        store.lockAll()
        XCTAssertStatus(try store.find(query("portable"), includeSecret: true), .interactionNotAllowed)
        try store.unlock(password: pw)
        for (account, secret) in [("portable", "kept"), ("portable-c", "kept-c"), ("device", "bound"), ("device-c", "bound-c"), ("device-always", "always")] {
            XCTAssertEqual(try secretString(store, query(account)), secret, account)
        }
        // New ThisDeviceOnly items go under the TPM-bound keys.
        try store.add(generic("device-new", secret: "new", protection: .whenPasscodeSetThisDeviceOnly))
        XCTAssertEqual(try lockClasses(store).last, 4)
        // Locking WhenUnlocked locks its ThisDeviceOnly sibling too.
        store.lock()
        XCTAssertStatus(try store.find(query("device"), includeSecret: true), .interactionNotAllowed)
        XCTAssertEqual(try secretString(store, query("device-c")), "bound-c")
    }

    func testWrongPasswordsAreCountedByTheTPMAndLockoutRefusesTheRightOne() throws {
        let (store, _) = try sealed(items: false)
        store.lockAll()
        for n in 1...3 {
            XCTAssertThrowsError(try store.unlock(password: Array("wrong\(n)".utf8))) { error in
                let error = error as? KeychainError
                XCTAssertEqual(error?.code, .authFailed)
                XCTAssertTrue(error?.detail.contains("the TPM counted the attempt") == true, error?.detail ?? "")
            }
        }
        XCTAssertEqual(tpm.failures, 3)
        XCTAssertThrowsError(try store.unlock(password: pw)) { error in
            let error = error as? KeychainError
            XCTAssertEqual(error?.code, .quotaExceeded)
            XCTAssertTrue(error?.detail.contains("lockout") == true, error?.detail ?? "")
        }
        XCTAssertFalse(store.status.whenUnlocked)
        tpm.failures = 0
        try store.unlock(password: pw)
        XCTAssertTrue(store.status.whenUnlocked)
    }

    func testEachGuessGoesToTheTPM() throws {
        let (store, _) = try sealed(items: false)
        tpm.maximum = 1000
        let before = tpm.unseals
        for n in 0..<20 { XCTAssertStatus(try store.verify(password: Array("guess\(n)".utf8)), .authFailed) }
        XCTAssertEqual(tpm.unseals - before, 20)
    }

    func testATPMThatAnswersAWrongSecretUnlocksNothing() throws {
        let (store, _) = try sealed()
        store.lockAll()
        tpm.lying = true
        XCTAssertStatus(try store.unlock(password: pw), .decode)
        XCTAssertFalse(store.status.whenUnlocked)
        XCTAssertFalse(store.status.afterFirstUnlock)
    }

    func testACopyOnAnotherMachineCannotBeOpenedWithThePasswordButWithTheRecoveryKey() throws {
        let (store, key) = try sealed()
        store.lockAll()
        let elsewhere = scratch.path("elsewhere")
        try store.db.execute("VACUUM INTO '\(elsewhere)'")
        tpm = SimulatedTPM(primary: 2)
        let copy = try scratch.open("elsewhere")
        XCTAssertStatus(try copy.unlock(password: pw), .serviceNotAvailable)
        XCTAssertEqual(tpm.failures, 0, "another TPM gets no authorization at all")
        XCTAssertStatus(try copy.recoverFromTPM(recoveryKey: RecoveryKey.generate(), newPassword: pw, tpm: here), .authFailed)
        let outcome = try copy.recoverFromTPM(recoveryKey: key, newPassword: Array("new".utf8), tpm: here)
        XCTAssertEqual(outcome.deviceOnlyItemsLost, 2)
        XCTAssertTrue(outcome.sealedAgain)
        XCTAssertEqual(try secretString(copy, query("portable")), "kept")
        XCTAssertEqual(try secretString(copy, query("portable-c")), "kept-c")
        XCTAssertEqual(try secretString(copy, query("device-always")), "always")
        XCTAssertStatus(try copy.find(query("device"), includeSecret: true), .itemNotFound)
        XCTAssertStatus(try copy.find(query("device-c"), includeSecret: true), .itemNotFound)
        // Sealed to the new TPM with the new password; the recovery key stays valid.
        copy.lockAll()
        XCTAssertStatus(try copy.unlock(password: pw), .authFailed)
        try copy.unlock(password: Array("new".utf8))
        XCTAssertEqual(try Keybag.load(from: copy.db).binding?.sealed.primaryName, tpm.primary)
        XCTAssertNoThrow(try copy.keybag.unwrap(recovery: key))
    }

    func testRecoveryWithoutATPMLeavesAPasswordOnlyKeychain() throws {
        let (store, key) = try sealed()
        let outcome = try store.recoverFromTPM(recoveryKey: key, newPassword: Array("new".utf8), tpm: TPMConfiguration(tcti: nil))
        XCTAssertFalse(outcome.sealedAgain)
        XCTAssertEqual(store.keybag.version, 2)
        TPMAccess.simulated = nil
        store.lockAll()
        try store.unlock(password: Array("new".utf8))
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
        XCTAssertStatus(try store.find(query("device"), includeSecret: true), .itemNotFound)
    }

    /// The recovery record is the policy's, not the keybag's: one that is no record (written with
    /// the checksum made again, as anyone with write access can) costs the recovery, not the
    /// keychain, which its password still opens.
    func testARecoveryFieldThatIsNoRecordLeavesThePasswordWorking() throws {
        let (store, key) = try sealed()
        store.lockAll()
        try store.db.statement("UPDATE keychain SET value = ? WHERE name = 'recovery'").run([.blob([1, 2, 3])])
        var fields: [String: Bytes] = [:]
        let select = try store.db.statement("SELECT name, value FROM keychain")
        while try select.step() { fields[select.text(0)] = select.blob(1) }
        select.reset()
        let summed = ["uuid", "kdf", "wrap.A", "wrap.C", "check.A", "check.C", "key.D"].map { fields[$0] ?? [] }
        let sum = Keybag.checksum(summed + TPMBinding.checksummed(fields, version: 3))
        try store.db.statement("UPDATE keychain SET value = ? WHERE name = 'checksum'").run([.blob(sum)])
        try store.unlock(password: pw)
        XCTAssertEqual(try secretString(store, query("device")), "bound")
        XCTAssertFalse(store.tpmStatus(tpm: here).recoveryKeyCurrent)
        XCTAssertStatus(try store.recoverFromTPM(recoveryKey: key, newPassword: Array("new".utf8), tpm: here), .decode)
    }

    func testTheRecoveryKeyNeverOpensTheThisDeviceOnlyKeys() throws {
        let (store, key) = try sealed()
        let bag = try Keybag.load(from: store.db)
        let (a, c) = try bag.unwrap(recovery: key)
        let recovered = ClassKeys([.whenUnlocked: Subkeys(classKey: a), .afterFirstUnlock: Subkeys(classKey: c)], separatesDeviceOnly: true)
        XCTAssertFalse(recovered.has(.whenUnlockedThisDeviceOnly))
        // Every wrapping of the device keys is under the TPM-tangled key: neither A, C nor the
        // recovery key's wrapping key opens them.
        let wrapping = key.wrappingKey(uuid: bag.uuid, salt: try RecoveryRecord(bytes: bag.binding!.recovery).salt)
        for candidate in [a, c, wrapping] {
            XCTAssertNil(try? Crypto.open(bag.binding!.wrappedAu, key: candidate, aad: bag.aad(.whenUnlockedThisDeviceOnly)))
            XCTAssertNil(try? Crypto.open(bag.binding!.wrappedCu, key: candidate, aad: bag.aad(.afterFirstUnlockThisDeviceOnly)))
        }
    }

    func testPasswordChangeAndRotationKeepTheBinding() throws {
        let (store, key) = try sealed()
        try store.changePassword(from: pw, to: Array("two".utf8))
        store.lockAll()
        XCTAssertStatus(try store.unlock(password: pw), .authFailed)
        try store.unlock(password: Array("two".utf8))
        XCTAssertEqual(try secretString(store, query("device")), "bound")
        XCTAssertNoThrow(try store.keybag.unwrap(recovery: key), "a password change keeps the recovery key")

        let newKey = try XCTUnwrap(try store.changePassword(from: Array("two".utf8), to: Array("three".utf8), rotatingKeys: true))
        XCTAssertStatus(try Keybag.load(from: store.db).unwrap(recovery: key), .authFailed, "a rotation makes a new recovery key")
        XCTAssertNoThrow(try Keybag.load(from: store.db).unwrap(recovery: newKey))
        store.lockAll()
        try store.unlock(password: Array("three".utf8))
        XCTAssertEqual(try secretString(store, query("device")), "bound")
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
        XCTAssertEqual(try lockClasses(store), [1, 2, 4, 5, 3])
    }

    // MARK: PCR binding (tpm-enroll --pcrs)

    func testAPCRBindingRefusesAnotherBootChainWithoutCountingAndTheRecoveryKeyOpensIt() throws {
        let store = try scratch.create()
        try store.add(generic("portable", secret: "kept"))
        let key = try store.sealToTPM(password: pw, pcrs: [16], tpm: here)
        XCTAssertEqual(try Keybag.load(from: store.db).binding?.sealed.pcrs, [16])
        XCTAssertEqual(store.tpmStatus(tpm: here).pcrs, [16])
        XCTAssertEqual(tpm.authPCRSealed.count, 1, "sealed with a PCR policy and the password's authorization value")
        XCTAssertTrue(tpm.sealed.isEmpty)
        store.lockAll()
        try store.unlock(password: pw)
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
        // Another boot chain: refused as such, not as a wrong password, and nothing counted.
        tpm.pcrValues[16] = Bytes(repeating: 1, count: 32)
        store.lockAll()
        for password in [pw, Array("wrong".utf8)] {
            XCTAssertThrowsError(try store.unlock(password: password)) { error in
                let error = error as? KeychainError
                XCTAssertEqual(error?.code, .serviceNotAvailable)
                XCTAssertTrue(error?.detail.contains("PCR 16") == true, error?.detail ?? "")
                XCTAssertTrue(error?.detail.contains("tpm-recover") == true, error?.detail ?? "")
            }
        }
        XCTAssertEqual(tpm.failures, 0)
        XCTAssertFalse(store.status.whenUnlocked)
        // The boot chain back: the password opens it; a wrong one is counted still.
        tpm.pcrValues[16] = nil
        XCTAssertStatus(try store.unlock(password: Array("wrong".utf8)), .authFailed)
        XCTAssertEqual(tpm.failures, 1)
        try store.unlock(password: pw)
        XCTAssertTrue(store.status.whenUnlocked)
        // A password change and a rotation keep the PCRs.
        let rotated = try XCTUnwrap(try store.changePassword(from: pw, to: Array("two".utf8), rotatingKeys: true))
        XCTAssertEqual(try Keybag.load(from: store.db).binding?.sealed.pcrs, [16])
        // Changed again, the (rotated) recovery key opens it, every portable item there.
        tpm.pcrValues[16] = Bytes(repeating: 2, count: 32)
        store.lockAll()
        XCTAssertStatus(try store.unlock(password: Array("two".utf8)), .serviceNotAvailable)
        XCTAssertStatus(try store.recoverFromTPM(recoveryKey: key, newPassword: pw, tpm: here), .authFailed, "the rotation made a new recovery key")
        _ = try store.recoverFromTPM(recoveryKey: rotated, newPassword: pw, tpm: here)
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
        XCTAssertEqual(tpm.failures, 1)
    }

    /// A boot event log (crypto-agile, SHA-256 only) of `events` (PCR, digest), as firmware writes it.
    static func eventLog(_ events: [(UInt8, Bytes)]) -> Bytes {
        func u16(_ v: Int) -> Bytes { [UInt8(v & 0xff), UInt8(v >> 8 & 0xff)] }
        func u32(_ v: Int) -> Bytes { u16(v & 0xffff) + u16(v >> 16) }
        let spec = Bytes("Spec ID Event03".utf8) + [0] + u32(0) + [0, 2, 0, 2] + u32(1) + u16(0x0B) + u16(32) + [0]
        var log = u32(0) + u32(3) + Bytes(repeating: 0, count: 20) + u32(spec.count) + spec
        for (pcr, digest) in events { log += u32(Int(pcr)) + u32(0x8000_0001) + u32(1) + u16(0x0B) + digest + u32(1) + [0x2a] }
        return log
    }

    func testAPCRExtendedAfterBootIsToldApartFromAChangedBootChain() throws {
        let booted = Crypto.sha256(Array("secure boot db".utf8)), extra = Crypto.sha256(Array("another user".utf8))
        tpm.pcrValues[16] = Crypto.sha256(Bytes(repeating: 0, count: 32) + booted)
        var config = here
        config.bootLog = Self.eventLog([(16, booted)])
        let store = try scratch.create()
        _ = try store.sealToTPM(password: pw, pcrs: [16], tpm: config)
        store.lockAll()
        try store.unlock(password: pw, tpm: config)
        // Extended after boot: the log does not account for the value now.
        tpm.pcrValues[16] = Crypto.sha256(tpm.pcrValues[16]! + extra)
        store.lockAll()
        XCTAssertThrowsError(try store.unlock(password: pw, tpm: config)) { error in
            let detail = (error as? KeychainError)?.detail ?? ""
            XCTAssertEqual((error as? KeychainError)?.code, .serviceNotAvailable)
            XCTAssertTrue(detail.hasPrefix("PCR 16 was extended after boot"), detail)
            XCTAssertFalse(detail.contains("boot chain changed"), detail)
        }
        // A log that measured that value too: the boot chain changed.
        config.bootLog = Self.eventLog([(16, booted), (16, extra)])
        XCTAssertThrowsError(try store.unlock(password: pw, tpm: config)) { error in
            XCTAssertTrue((error as? KeychainError)?.detail.hasPrefix("the boot chain changed: PCR 16") == true, "\(error)")
        }
        // A log cut short, or of another format: it cannot tell, and says so.
        for log in [Array(Self.eventLog([(16, booted)]).dropLast(3)), Bytes(repeating: 0, count: 64)] {
            config.bootLog = log
            XCTAssertNil(BootEventLog.replay([16], log: log))
            XCTAssertThrowsError(try store.unlock(password: pw, tpm: config)) { error in
                let detail = (error as? KeychainError)?.detail ?? ""
                XCTAssertTrue(detail.hasPrefix("PCR 16 differs from the sealed value: the boot chain changed or a PCR was extended since boot"), detail)
            }
        }
        XCTAssertEqual(tpm.failures, 0)
    }

    func testRecoveryResealsWithoutPCRsUnlessAskedAndEnrolAgainBindsThem() throws {
        let store = try scratch.create()
        try store.add(generic("portable", secret: "kept"))
        let key = try store.sealToTPM(password: pw, pcrs: [16], tpm: here)
        tpm.pcrValues[16] = Bytes(repeating: 1, count: 32)
        store.lockAll()
        XCTAssertStatus(try store.unlock(password: pw), .serviceNotAvailable)
        _ = try store.recoverFromTPM(recoveryKey: key, newPassword: pw, tpm: here)
        XCTAssertEqual(try Keybag.load(from: store.db).binding?.sealed.pcrs, [])
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
        // Bound again to the boot chain as it is now: it opens in it, and not in another.
        try store.resealToTPM(password: pw, pcrs: [16], tpm: here)
        XCTAssertEqual(try Keybag.load(from: store.db).binding?.sealed.pcrs, [16])
        XCTAssertNoThrow(try Keybag.load(from: store.db).unwrap(recovery: key), "the recovery key is unchanged")
        store.lockAll()
        try store.unlock(password: pw)
        tpm.pcrValues[16] = nil
        store.lockAll()
        XCTAssertStatus(try store.unlock(password: pw), .serviceNotAvailable)
        // Recovery asked for PCRs: sealed to them as they are now.
        _ = try store.recoverFromTPM(recoveryKey: key, newPassword: pw, pcrs: [7, 16], tpm: here)
        XCTAssertEqual(try Keybag.load(from: store.db).binding?.sealed.pcrs, [7, 16])
        store.lockAll()
        try store.unlock(password: pw)
        // And `--pcrs none`: sealed again to none; a change then refuses nothing.
        try store.resealToTPM(password: pw, pcrs: [], tpm: here)
        tpm.pcrValues[16] = Bytes(repeating: 3, count: 32)
        store.lockAll()
        try store.unlock(password: pw)
        XCTAssertTrue(store.status.whenUnlocked)
    }

    func testThePCRListIsInTheRecordAndCannotBeStripped() throws {
        let store = try scratch.create()
        _ = try store.sealToTPM(password: pw, pcrs: [16], tpm: here)
        let record = try TPMSealedSecret(bytes: try value(store, "tpm"))
        XCTAssertEqual(record.pcrs, [16])
        XCTAssertEqual(try TPMSealedSecret(bytes: record.bytes), record)
        // The same object recorded without its PCRs (or with others): the wrapped keys' tags
        // cover the record, so nothing opens, even for a TPM that would release the secret.
        for pcrs: [UInt8] in [[], [7]] {
            var stripped = record
            stripped.pcrs = pcrs
            if pcrs.isEmpty {
                tpm.sealed[stripped.sealedPrivate] = (tpm.authPCRSealed[stripped.sealedPrivate]!.secret, tpm.authPCRSealed[stripped.sealedPrivate]!.auth)
            }
            try set(store, "tpm", stripped.bytes)
            try fixChecksum(store)
            store.lockAll()
            XCTAssertThrowsError(try store.unlock(password: pw), "PCRs \(pcrs)")
            XCTAssertFalse(store.status.whenUnlocked)
        }
        // A record without PCRs keeps format 2's bytes (a keybag written before stays valid).
        var plain = record
        plain.pcrs = []
        XCTAssertEqual(Array(plain.bytes.prefix(4)), [0, 0, 0, 2])
        XCTAssertEqual(Array(record.bytes.prefix(4)), [0, 0, 0, 3])
    }

    func testNoTPMReachableLeavesTheKeychainAsItWas() throws {
        TPMAccess.simulated = nil
        let store = try scratch.create()
        try store.add(generic("device", secret: "bound", protection: .whenUnlockedThisDeviceOnly))
        let before = try Keybag.load(from: store.db)
        // No helper beside the test runner, or a closed port for the helper's tpm2-tss.
        let closed = TPMConfiguration(tcti: "swtpm:host=127.0.0.1,port=1")
        XCTAssertStatus(try store.sealToTPM(password: pw, tpm: closed), .serviceNotAvailable)
        XCTAssertThrowsError(try LocalTPM(configuration: closed).describe(primaryName: nil)) { error in
            guard case .unavailable? = error as? TPMFailure else { return XCTFail("\(error)") }
        }
        XCTAssertStatus(try store.sealToTPM(password: pw, tpm: TPMConfiguration(tcti: nil)), .serviceNotAvailable)
        let after = try Keybag.load(from: store.db)
        XCTAssertEqual(after.version, 2)
        XCTAssertEqual(after.wrappedA, before.wrappedA)
        XCTAssertEqual(try lockClasses(store), [1])
        let status = store.tpmStatus(tpm: TPMConfiguration(tcti: nil))
        XCTAssertFalse(status.sealed)
        XCTAssertNil(status.tpm)
        XCTAssertNotNil(status.problem)
    }

    func testAWrongPasswordAtEnrolmentChangesNothing() throws {
        let store = try scratch.create()
        XCTAssertStatus(try store.sealToTPM(password: Array("nope".utf8), tpm: here), .authFailed)
        XCTAssertEqual(try Keybag.load(from: store.db).version, 2)
        XCTAssertTrue(tpm.sealed.isEmpty)
        _ = try store.sealToTPM(password: pw, tpm: here)
        XCTAssertStatus(try store.sealToTPM(password: pw, tpm: here), .param, "sealed already")
    }

    // MARK: The helper's wire format

    func testHelperAnswersRoundTripAndGarbageIsAnErrorNotACrash() throws {
        let state = TPMLockoutState(inLockout: false, failures: 2, maximum: 32, interval: 600)
        for failure in [TPMFailure.unavailable("u"), .authorization(state), .authorization(nil), .lockout(state), .foreign("f"), .failed("x")] {
            XCTAssertThrowsError(try TPMHelperWire.readReply(TPMHelperWire.failure(failure))) { error in
                XCTAssertEqual(error as? TPMFailure, failure)
            }
        }
        var generator = SystemRandomNumberGenerator()
        for n in 0..<2000 {
            let garbage = (0..<Int.random(in: 0...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            do {
                var reply = try TPMHelperWire.readReply(garbage)
                _ = try? reply.blob()
            } catch is TPMFailure {
            } catch {
                XCTFail("garbage \(n) gave \(error)")
            }
            XCTAssertThrowsError(try TPMHelperService.serve(garbage) { LocalTPM(configuration: $0) })
        }
    }
}

/// The passwordless unlock (Passwordless.swift): its key needs the TPM's PCR-sealed half and the
/// half only the machine's key opens, for this user and this keychain alone.
final class PasswordlessTests: SimulatedTPMTestCase {
    var machinePublic = Bytes(repeating: 0, count: 32)
    var machineSecret = Bytes(repeating: 0, count: 32)

    override func setUp() {
        super.setUp()
        (machinePublic, machineSecret) = try! MachineKey.makePair()
    }

    func enrolled(uid: UInt32 = 1000, pcrs: [UInt8] = [7]) throws -> KeychainStore {
        let store = try scratch.create()
        try store.add(generic("portable", secret: "kept"))
        try store.add(generic("device", secret: "bound", protection: .whenUnlockedThisDeviceOnly))
        _ = try store.sealToTPM(password: pw, tpm: here)
        try store.enrolPasswordless(password: pw, machineKey: machinePublic, uid: uid, pcrs: pcrs, tpm: here)
        return store
    }

    /// What root does in the PAM module: opens the box with the machine's key.
    func opened(_ store: KeychainStore) throws -> Bytes {
        let box = try XCTUnwrap(try store.passwordlessBox())
        return try XCTUnwrap(MachineKey.open(box, public: machinePublic, secret: machineSecret))
    }

    func testTheBoxAndTheTPMUnlockEveryClassAndNothingElseDoes() throws {
        let store = try enrolled()
        XCTAssertEqual(store.passwordless, PasswordlessStatus(pcrs: [7], current: true, machineKey: machinePublic))
        XCTAssertEqual(PasswordlessRecord.owner(ofOpened: try opened(store)), 1000)
        store.lockAll()
        try store.unlockPasswordless(opened: try opened(store), uid: 1000, tpm: here)
        XCTAssertTrue(store.status.whenUnlocked)
        XCTAssertTrue(store.status.afterFirstUnlock)
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
        XCTAssertEqual(try secretString(store, query("device")), "bound")
    }

    func testAnotherUsersOrAnotherKeychainsBoxIsRefused() throws {
        let store = try enrolled(uid: 1000)
        store.lockAll()
        XCTAssertStatus(try store.unlockPasswordless(opened: try opened(store), uid: 1001, tpm: here), .decode)
        // Another keychain's box, opened by root for the right user: not this keychain's.
        let other = try scratch.create("other")
        _ = try other.sealToTPM(password: pw, tpm: here)
        try other.enrolPasswordless(password: pw, machineKey: machinePublic, uid: 1000, tpm: here)
        XCTAssertStatus(try store.unlockPasswordless(opened: try opened(other), uid: 1000, tpm: here), .decode)
        XCTAssertFalse(store.status.whenUnlocked)
        // A box sealed to another machine's key does not open with this one.
        let (otherPublic, otherSecret) = try MachineKey.makePair()
        XCTAssertNil(MachineKey.open(try XCTUnwrap(try store.passwordlessBox()), public: otherPublic, secret: otherSecret))
    }

    func testAChangedPCRRefusesAndThePasswordStillOpens() throws {
        let store = try enrolled(pcrs: [7])
        store.lockAll()
        tpm.pcrValues[7] = Bytes(repeating: 1, count: 32)
        XCTAssertStatus(try store.unlockPasswordless(opened: try opened(store), uid: 1000, tpm: here), .authFailed)
        XCTAssertFalse(store.status.whenUnlocked)
        try store.unlock(password: pw)
        XCTAssertTrue(store.status.whenUnlocked)
        // Enrolled again in the new state, it opens.
        try store.enrolPasswordless(password: pw, machineKey: machinePublic, uid: 1000, tpm: here)
        store.lockAll()
        try store.unlockPasswordless(opened: try opened(store), uid: 1000, tpm: here)
        XCTAssertTrue(store.status.whenUnlocked)
    }

    func testATPMThatAnswersAWrongSecretUnlocksNothing() throws {
        let store = try enrolled()
        store.lockAll()
        tpm.lying = true
        XCTAssertStatus(try store.unlockPasswordless(opened: try opened(store), uid: 1000, tpm: here), .decode)
        XCTAssertFalse(store.status.whenUnlocked)
        XCTAssertFalse(store.status.afterFirstUnlock)
    }

    func testEveryByteOfTheRecordIsCoveredAndRotationRemovesIt() throws {
        let store = try enrolled()
        let opened = try opened(store)
        let stmt = try store.db.statement("SELECT value FROM keychain WHERE name = 'passwordless'")
        XCTAssertTrue(try stmt.step())
        let record = stmt.blob(0)
        stmt.reset()
        store.lockAll()
        // A flipped byte anywhere: refused (malformed, or a tag that fails), never unlocked.
        for index in stride(from: 0, to: record.count, by: 7) {
            var changed = record
            changed[index] ^= 0x01
            try store.db.statement("UPDATE keychain SET value = ? WHERE name = 'passwordless'").run([.blob(changed)])
            XCTAssertThrowsError(try store.unlockPasswordless(opened: opened, uid: 1000, tpm: here), "byte \(index)")
            XCTAssertFalse(store.status.whenUnlocked, "byte \(index)")
        }
        try store.db.statement("UPDATE keychain SET value = ? WHERE name = 'passwordless'").run([.blob(record)])
        try store.unlockPasswordless(opened: opened, uid: 1000, tpm: here)
        XCTAssertTrue(store.status.whenUnlocked)
        // A rotation: new keys, so the copy goes; the password unseals, the box opens nothing.
        _ = try store.changePassword(from: pw, to: pw, rotatingKeys: true)
        XCTAssertNil(store.passwordless)
        XCTAssertNil(try store.passwordlessBox())
        XCTAssertTrue(try store.removePasswordless() == false)
    }

    func testPCRListsAreParsedStrictly() {
        XCTAssertEqual(PCRSelection.parse("7"), [7])
        XCTAssertEqual(PCRSelection.parse("7,0,2,7"), [0, 2, 7])
        for bad in ["", "24", "-1", "7,", "a", "0,1,2,3,4,5,6,7,8"] { XCTAssertNil(PCRSelection.parse(bad), bad) }
    }

    func testWithoutABindingEnrolmentIsRefused() throws {
        let store = try scratch.create()
        XCTAssertStatus(try store.enrolPasswordless(password: pw, machineKey: machinePublic, uid: 1000, tpm: here), .param)
        XCTAssertNil(store.passwordless)
    }
}

/// The rollback counter (RollbackCounter.swift): an older copy of a sealed keychain's file put
/// back is noticed at the next unlock.
final class RollbackCounterTests: SimulatedTPMTestCase {

    func copyFile(_ store: KeychainStore, to name: String) throws -> String {
        let path = scratch.path(name)
        unlink(path)
        try store.db.execute("VACUUM INTO '\(path)'")
        return path
    }

    func testAnOlderCopyPutBackIsRefusedUntilAccepted() throws {
        let store = try scratch.create()
        try store.add(generic("kept", secret: "one"))
        _ = try store.sealToTPM(password: pw, tpm: here)
        XCTAssertEqual(store.rollbackStatus?.fileCount, 1)
        let old = try copyFile(store, to: "old")
        // Changes, and an unlock that moves the counter.
        try store.delete(query("kept"))
        store.lockAll()
        try store.unlock(password: pw)
        XCTAssertEqual(store.rollbackStatus?.fileCount, 2)
        XCTAssertEqual(tpm.counters.values.first?.value, 2)
        // The older copy put back in the keychain's place: the deleted item would come back.
        store.lockAll()
        let path = store.path
        unlink(path + "-wal")
        unlink(path + "-shm")
        XCTAssertEqual(rename(old, path), 0)
        let restored = try KeychainStore.open(at: path, storage: .process)
        XCTAssertThrowsError(try restored.unlock(password: pw)) { error in
            let error = error as? KeychainError
            XCTAssertEqual(error?.code, .invalidKeychain)
            XCTAssertTrue(error?.detail.contains("older copy") == true, error?.detail ?? "")
            XCTAssertTrue(error?.detail.contains("--accept-older-copy") == true, error?.detail ?? "")
        }
        XCTAssertFalse(restored.status.whenUnlocked)
        XCTAssertEqual(tpm.counters.values.first?.value, 2, "a refused unlock moves nothing")
        // Accepted: it opens, and is the current one from now on.
        try restored.unlock(password: pw, acceptingOlderCopy: true)
        XCTAssertEqual(try secretString(restored, query("kept")), "one")
        restored.lockAll()
        try restored.unlock(password: pw)
        XCTAssertEqual(restored.rollbackStatus?.fileCount, tpm.counters.values.first?.value)
    }

    func testTheCounterMovesOncePerUnlockAndNeverPerWrite() throws {
        let store = try scratch.create()
        _ = try store.sealToTPM(password: pw, tpm: here)
        let before = tpm.increments
        for n in 0..<100 { try store.add(generic("item\(n)", secret: "s")) }
        for n in 0..<50 { try store.delete(query("item\(n)")) }
        XCTAssertEqual(tpm.increments, before, "writes do not wear the TPM")
        for _ in 0..<5 {
            store.lockAll()
            try store.unlock(password: pw)
        }
        XCTAssertEqual(tpm.increments - before, 5)
        // A wrong password moves nothing.
        store.lockAll()
        XCTAssertThrowsError(try store.unlock(password: Array("wrong".utf8)))
        XCTAssertEqual(tpm.increments - before, 5)
    }

    func testARemovedOrForgedRecordOrACounterGoneIsRefused() throws {
        let store = try scratch.create()
        _ = try store.sealToTPM(password: pw, tpm: here)
        store.lockAll()
        // The record removed from the file: the TPM still has the counter.
        let saved = try XCTUnwrap(try rowValue(store))
        try store.db.execute("DELETE FROM keychain WHERE name = 'counter'")
        XCTAssertStatus(try store.unlock(password: pw), .invalidKeychain)
        // A count raised in the file without the key: its MAC fails.
        var forged = saved
        forged[7] ^= 0x01
        try store.db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES ('counter', ?)").run([.blob(forged)])
        XCTAssertStatus(try store.unlock(password: pw), .invalidKeychain)
        try store.db.statement("INSERT OR REPLACE INTO keychain(name, value) VALUES ('counter', ?)").run([.blob(saved)])
        try store.unlock(password: pw)
        // The counter removed from the TPM (anyone with the owner's empty authorization can).
        store.lockAll()
        tpm.counters.removeAll()
        XCTAssertStatus(try store.unlock(password: pw), .invalidKeychain)
        XCTAssertFalse(store.status.whenUnlocked)
        try store.unlock(password: pw, acceptingOlderCopy: true)
        XCTAssertEqual(tpm.counters.count, 1)
    }

    /// The evil maid: the file's record deleted with plain SQL and the TPM's counter undefined
    /// read as a keychain sealed before counters, unless the binding says it was counted; and
    /// that, in the wrapped keys' additional data, cannot be cleared without the keys.
    func testACountedKeychainWithRecordAndCounterBothGoneIsRefused() throws {
        let store = try scratch.create()
        _ = try store.sealToTPM(password: pw, tpm: here)
        XCTAssertTrue(store.tpmStatus(tpm: here).counted)
        store.lockAll()
        try store.db.execute("DELETE FROM keychain WHERE name = 'counter'")
        tpm.counters.removeAll()
        XCTAssertStatus(try store.unlock(password: pw), .invalidKeychain)
        XCTAssertFalse(store.status.whenUnlocked)
        // The flag cleared in the file (the checksum recomputed: it is unkeyed): nothing opens.
        let original = try Keybag.load(from: store.db)
        var forged = original
        forged.binding!.sealed.counted = false
        try forged.save(to: store.db)
        XCTAssertStatus(try store.unlock(password: pw), .decode)
        try original.save(to: store.db)
        // Accepted: a new counter, and the binding still says counted.
        try store.unlock(password: pw, acceptingOlderCopy: true)
        XCTAssertEqual(tpm.counters.count, 1)
        store.lockAll()
        try store.unlock(password: pw)
        XCTAssertTrue(store.tpmStatus(tpm: here).counted)
    }

    /// A record written before the flag (format 1) reads as never counted: today's behaviour.
    func testAFormat1TPMRecordReadsAsNotCounted() throws {
        let name = Bytes(repeating: 1, count: 34)
        var w = ByteWriter()
        w.u32(1)
        w.u32(TPMSealedSecret.primaryTemplate)
        for field in [name, [2, 3], [4, 5]] { w.blob(field) }
        let old = try TPMSealedSecret(bytes: w.bytes)
        XCTAssertFalse(old.counted)
        XCTAssertEqual(old.sealedPrivate, [4, 5])
        let counted = TPMSealedSecret(primaryName: name, sealedPublic: [2, 3], sealedPrivate: [4, 5], counted: true)
        XCTAssertEqual(try TPMSealedSecret(bytes: counted.bytes), counted)
        XCTAssertThrowsError(try TPMSealedSecret(bytes: Array(counted.bytes.dropLast(4))))
    }

    func testAnUnlockInterruptedBetweenFileAndTPMIsFinishedNotRefused() throws {
        let store = try scratch.create()
        _ = try store.sealToTPM(password: pw, tpm: here)
        store.lockAll()
        // The file one ahead: what a crash after the file's write and before the TPM's increment leaves.
        let index = try XCTUnwrap(tpm.counters.keys.first)
        tpm.counters[index]!.value -= 1
        try store.unlock(password: pw)
        XCTAssertEqual(tpm.counters[index]!.value, store.rollbackStatus?.fileCount)
    }

    func testRotationAndUnenrolmentLeaveNoCounterBehind() throws {
        let store = try scratch.create()
        _ = try store.sealToTPM(password: pw, tpm: here)
        _ = try store.changePassword(from: pw, to: pw, rotatingKeys: true)
        XCTAssertEqual(tpm.counters.count, 1, "the old keys' counter is removed, a new one made")
        store.lockAll()
        try store.unlock(password: pw)
        try store.unsealFromTPM(password: pw, tpm: here)
        XCTAssertEqual(tpm.counters.count, 0)
        XCTAssertNil(store.rollbackStatus)
    }

    func rowValue(_ store: KeychainStore) throws -> Bytes? {
        let stmt = try store.db.statement("SELECT value FROM keychain WHERE name = 'counter'")
        defer { stmt.reset() }
        return try stmt.step() ? stmt.blob(0) : nil
    }
}

extension PasswordlessTests {
    func testADamagedRecordUnlocksNothingAndCanBeRemoved() throws {
        let store = try enrolled()
        let opened = try opened(store)
        try store.db.statement("UPDATE keychain SET value = ? WHERE name = 'passwordless'").run([.blob([1, 2, 3])])
        store.lockAll()
        XCTAssertThrowsError(try store.unlockPasswordless(opened: opened, uid: 1000, tpm: here))
        XCTAssertFalse(store.status.whenUnlocked)
        XCTAssertNil(store.passwordless)
        XCTAssertTrue(try store.removePasswordless())
        XCTAssertFalse(try store.removePasswordless())
    }
}

extension RollbackCounterTests {
    func testACounterThatAnswersWronglyLeavesTheKeychainLocked() throws {
        let store = try scratch.create()
        try store.add(generic("kept", secret: "one"))
        _ = try store.sealToTPM(password: pw, tpm: here)
        store.lockAll()
        for skew in [UInt64(1), 2, 1000, UInt64.max] {
            tpm.counterSkew = skew
            XCTAssertThrowsError(try store.unlock(password: pw), "skew \(skew)")
            XCTAssertFalse(store.status.whenUnlocked, "skew \(skew)")
            XCTAssertFalse(store.status.afterFirstUnlock, "skew \(skew)")
        }
        // Answering honestly again, it opens: nothing was moved by the wrong answers.
        tpm.counterSkew = 0
        try store.unlock(password: pw)
        XCTAssertEqual(try secretString(store, query("kept")), "one")
    }
}
