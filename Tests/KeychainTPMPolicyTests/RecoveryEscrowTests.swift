@testable import KeychainCore
@testable import KeychainTPMPolicy
import KeychainTestSupport
@testable import KeychainTPMClient
import Glibc
import XCTest

/// The recovery escrow (RecoveryEscrow.swift): the way back for a sealed keychain whose recovery
/// key nobody saw, when another user of the TPM cleared it or set its owner authorization.
final class RecoveryEscrowTests: SimulatedTPMTestCase {
    var recipient = Bytes()
    var secret = Bytes()

    override func setUp() {
        super.setUp()
        (recipient, secret) = try! RecoveryEscrow.makeKeyPair()
        RecoveryEscrow.machineFile = scratch.directory + "/no-such-escrow.pub"
    }

    override func tearDown() {
        RecoveryEscrow.machineFile = "/etc/keychain/recovery-escrow.pub"
        super.tearDown()
    }

    /// As pam_keychain's first login does: sealed, its recovery key escrowed and wiped.
    func sealedAtAFirstLogin() throws -> KeychainStore {
        let store = try scratch.create()
        try store.add(generic("portable", secret: "kept"))
        try store.add(generic("portable-c", secret: "kept-c", protection: .afterFirstUnlock))
        var key = try store.sealToTPM(password: pw, tpm: here)
        try store.escrowRecoveryKey(key, to: recipient)
        key.wipe()
        return store
    }

    func testAClearedTPMLosesNothingTheEscrowCannotGiveBack() throws {
        let store = try sealedAtAFirstLogin()
        XCTAssertEqual(store.recoveryEscrowState, .current(recipient: recipient))
        store.lockAll()
        // tpm2_clear: the owner's seed, and with it the storage key, is another.
        tpm = SimulatedTPM(primary: 2)
        XCTAssertStatus(try store.unlock(password: pw), .serviceNotAvailable)
        let envelope = try XCTUnwrap(try RecoveryEscrow.envelope(at: RecoveryEscrow.file(for: store.path)))
        let key = try envelope.open(secret: secret)
        let outcome = try store.recoverFromTPM(recoveryKey: key, newPassword: Array("new".utf8), tpm: here)
        XCTAssertTrue(outcome.sealedAgain)
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
        XCTAssertEqual(try secretString(store, query("portable-c")), "kept-c")
        // The recovery key is unchanged, so the escrow still fits.
        XCTAssertEqual(store.recoveryEscrowState, .current(recipient: recipient))
    }

    func testAnOwnerAuthorizationSetRecoversWithoutTheTPM() throws {
        let store = try sealedAtAFirstLogin()
        store.lockAll()
        // tpm2_changeauth -c o: the storage key cannot be made, to open or to seal again.
        TPMAccess.simulated = { _ in RefusingTPM() }
        XCTAssertStatus(try store.unlock(password: pw), .deviceFailed)
        let key = try XCTUnwrap(try RecoveryEscrow.envelope(at: RecoveryEscrow.file(for: store.path))).open(secret: secret)
        XCTAssertStatus(try store.recoverFromTPM(recoveryKey: key, newPassword: pw, tpm: here), .deviceFailed)
        let outcome = try store.recoverFromTPM(recoveryKey: key, newPassword: Array("new".utf8), tpm: TPMConfiguration(tcti: nil))
        XCTAssertFalse(outcome.sealedAgain)
        store.lockAll()
        try store.unlock(password: Array("new".utf8))
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
    }

    func testTheEscrowOpensWithTheRecipientsKeyAloneAndForItsOwnKeychain() throws {
        let store = try sealedAtAFirstLogin()
        let file = RecoveryEscrow.file(for: store.path)
        let text = try XCTUnwrap(try RecoveryEscrow.readSmall(file, requireRoot: false))
        let (_, otherSecret) = try RecoveryEscrow.makeKeyPair()
        XCTAssertStatus(try RecoveryEscrow.Envelope(parsing: text).open(secret: otherSecret), .authFailed)
        // The box moved into another keychain's escrow file (its uuid outside changed).
        let other = try scratch.create("other")
        _ = try other.sealToTPM(password: pw, tpm: here)
        let otherUUID = other.withLock { other.keybag.uuid.hex }
        let ownUUID = store.withLock { store.keybag.uuid.hex }
        let moved = String(decoding: text, as: UTF8.self).replacingOccurrences(of: ownUUID, with: otherUUID)
        XCTAssertStatus(try RecoveryEscrow.Envelope(parsing: Array(moved.utf8)).open(secret: secret), .decode)
        // Every byte of the box is covered.
        var envelope = try RecoveryEscrow.Envelope(parsing: text)
        envelope.box[envelope.box.count / 2] ^= 1
        XCTAssertStatus(try envelope.open(secret: secret), .authFailed)
        XCTAssertThrowsError(try RecoveryEscrow.Envelope(parsing: Array("keychain-recovery-escrow v1\nbox: AAAA\n".utf8)))
    }

    func testARotationEscrowsTheNewRecoveryKeyToTheSameAdministrator() throws {
        let store = try sealedAtAFirstLogin()
        let key = try XCTUnwrap(try store.rotateKeys(password: pw))
        XCTAssertEqual(store.recoveryEscrowState, .stale(recipient: recipient))
        XCTAssertEqual(try store.escrowRecoveryKeyIfConfigured(key), recipient)
        XCTAssertEqual(store.recoveryEscrowState, .current(recipient: recipient))
        let opened = try XCTUnwrap(try RecoveryEscrow.envelope(at: RecoveryEscrow.file(for: store.path))).open(secret: secret)
        XCTAssertEqual(opened, key)
        store.removeRecoveryEscrow()
        XCTAssertEqual(store.recoveryEscrowState, .none)
    }

    /// A recovery key escrowed to a key someone else put in the file would be theirs.
    func testTheEscrowKeyFileMustBeRootsAlone() throws {
        let folder = scratch.directory + "/etc"
        mkdir(folder, 0o755)
        let file = folder + "/recovery-escrow.pub"
        try PlainFiles.replace(file, with: Array((PEM.base64(recipient) + "\n").utf8), mode: 0o644)
        if geteuid() == 0 {
            XCTAssertEqual(try RecoveryEscrow.recipient(file: file), recipient)
            chown(file, 65534, 65534)
            XCTAssertStatus(try RecoveryEscrow.recipient(file: file), .param)
            chown(file, 0, 0)
        } else {
            XCTAssertStatus(try RecoveryEscrow.recipient(file: file), .param)
        }
        chmod(file, 0o666)
        XCTAssertStatus(try RecoveryEscrow.recipient(file: file), .param)
        chmod(file, 0o644)
        chmod(folder, 0o777)
        XCTAssertStatus(try RecoveryEscrow.recipient(file: file), .param)
        XCTAssertNil(try RecoveryEscrow.recipient(file: folder + "/none"))
    }

    func testTheHierarchyAuthorizationsCrossTheHelpersWire() throws {
        let state = TPMLockoutState(inLockout: false, failures: 0, maximum: 32, interval: 600, permanent: 0x1 | 0x4 | 0x100)
        XCTAssertThrowsError(try TPMHelperWire.readReply(TPMHelperWire.failure(.authorization(state)))) { error in
            XCTAssertEqual(error as? TPMFailure, .authorization(state))
        }
        XCTAssertTrue(state.ownerAuthorizationSet)
        XCTAssertTrue(state.lockoutAuthorizationSet)
        XCTAssertTrue(state.clearDisabled)
        let linux = TPMLockoutState(inLockout: false, failures: 0, maximum: 32, interval: 600, permanent: 0)
        XCTAssertFalse(linux.lockoutAuthorizationSet)
    }
}

/// A TPM whose owner authorization someone set: the storage key cannot be made.
final class RefusingTPM: TPMOperations {
    static let refusal = TPMFailure.failed("its owner authorization is set (`tpm2_changeauth -c o`)")
    func seal(_ secret: Bytes, auth: Bytes) throws -> TPMSealedSecret { throw Self.refusal }
    func unseal(_ record: TPMSealedSecret, auth: Bytes, length: Int) throws -> Bytes { throw Self.refusal }
    func seal(_ secret: Bytes, toPCRs pcrs: [UInt8]) throws -> TPMSealedSecret { throw Self.refusal }
    func unseal(_ record: TPMSealedSecret, pcrs: [UInt8], length: Int) throws -> Bytes { throw Self.refusal }
    func seal(_ secret: Bytes, auth: Bytes, pcrs: [UInt8]) throws -> TPMSealedSecret { throw Self.refusal }
    func unseal(_ record: TPMSealedSecret, auth: Bytes, pcrs: [UInt8], length: Int) throws -> Bytes { throw Self.refusal }
    func counter(_ request: TPMCounterRequest) throws -> TPMCounterAnswer { throw Self.refusal }
    func describe(primaryName: Bytes?) throws -> (TPMDescription, sealedHere: Bool?) { throw Self.refusal }
}

extension RecoveryEscrowTests {
    /// Sealed at a first login by an earlier version (or before the machine had an escrow key):
    /// its recovery key was wiped unseen. The next unlock with the password escrows a new one.
    func testAKeychainSealedBeforeEscrowsGetsAnEscrowedRecoveryKey() throws {
        let store = try scratch.create()
        try store.add(generic("portable", secret: "kept"))
        var unseen = try store.sealToTPM(password: pw, tpm: here)
        unseen.wipe()
        try store.setRecoveryKeyUnshown(true)
        XCTAssertEqual(store.recoveryEscrowState, .none)
        store.lockAll()
        XCTAssertFalse(try store.escrowUnshownRecoveryKey(to: recipient), "locked, its mark cannot be read")
        try store.unlock(password: pw, tpm: here)
        XCTAssertTrue(try store.escrowUnshownRecoveryKey(to: recipient))
        XCTAssertFalse(try store.escrowUnshownRecoveryKey(to: recipient), "once")
        XCTAssertEqual(store.recoveryEscrowState, .current(recipient: recipient))
        store.lockAll()
        tpm = SimulatedTPM(primary: 2)
        let key = try XCTUnwrap(try RecoveryEscrow.envelope(at: RecoveryEscrow.file(for: store.path))).open(secret: secret)
        _ = try store.recoverFromTPM(recoveryKey: key, newPassword: pw, tpm: here)
        XCTAssertEqual(try secretString(store, query("portable")), "kept")
    }
}
