@testable import KeychainCore
import Glibc
import XCTest

/// Issue 20, point 3: another user must not be able to choose the keychain's folder or plant
/// the files SQLite opens beside the keychain (`-wal`, `-shm`, `-journal`), which would let them
/// read every page written (the keybag's clear key D, all ciphertexts) or inject frames.
/// Point 10 (SQLite half): the file's schema cannot run anything or be rewritten.
final class FolderAttackTests: XCTestCase {
    var scratch: Scratch!
    let nobody: uid_t = 65534

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    private func requireRoot() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root to make files of another user") }
    }

    /// A keychain made and closed, so that SQLite has removed its -wal and -shm.
    private func closedKeychain(at path: String) throws {
        try KeychainFile.prepareDirectory(for: path)
        let store = try KeychainStore.create(at: path, password: Array("pw".utf8), scrypt: .fastForTesting, storage: .process)
        _ = try store.add(generic("alice"))
    }

    private func write(_ path: String, _ bytes: Bytes = [], mode: mode_t = 0o600, owner: uid_t) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        XCTAssertGreaterThanOrEqual(fd, 0, path)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        fchmod(fd, mode)
        fchown(fd, owner, owner)
        close(fd)
    }

    func testAStickyWorldWritableFolderIsNeverTheKeychainsOwn() throws {
        try requireRoot()
        // A shared folder as /tmp is: sticky, world-writable, another user's.
        let shared = scratch.directory + "/shared"
        XCTAssertEqual(mkdir(shared, 0o755), 0)
        chmod(shared, 0o1777)
        chown(shared, nobody, nobody)
        XCTAssertStatus(
            try KeychainStore.create(
                at: shared + "/new.keychain-db", password: Array("pw".utf8),
                scrypt: .fastForTesting, storage: .process), .param)
        XCTAssertFalse(KeychainFile.exists(shared + "/new.keychain-db"), "nothing was created there")

        // A keychain moved into it is refused too.
        let elsewhere = scratch.path("moved")
        try closedKeychain(at: elsewhere)
        XCTAssertEqual(rename(elsewhere, shared + "/moved.keychain-db"), 0)
        XCTAssertStatus(try KeychainStore.open(at: shared + "/moved.keychain-db", storage: .process), .param)

        // The same folder as an ancestor is fine: the keychain's own folder is then ours, 0700.
        let below = shared + "/mine/keychains/ok.keychain-db"
        try closedKeychain(at: below)
        XCTAssertNoThrow(try KeychainStore.open(at: below, storage: .process))
        var st = stat()
        XCTAssertEqual(stat(KeychainFile.parent(of: below), &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
    }

    func testTmpItselfIsRefusedAsTheKeychainsFolder() throws {
        let path = "/tmp/keychain-attack-\(getpid()).keychain-db"
        XCTAssertStatus(
            try KeychainStore.create(at: path, password: Array("pw".utf8), scrypt: .fastForTesting, storage: .process),
            .param)
        XCTAssertFalse(KeychainFile.exists(path))
    }

    func testPlantedWriteAheadLogAndSharedMemoryAreRefused() throws {
        try requireRoot()
        let path = scratch.path("planted")
        try closedKeychain(at: path)
        for suffix in KeychainFile.sidecarSuffixes {
            let planted = path + suffix
            // Another user's file: refused, and left exactly as it was (nothing read or written).
            write(planted, Array("frames".utf8), owner: nobody)
            XCTAssertStatus(try KeychainStore.open(at: path, storage: .process), .param, "\(suffix) of another user")
            var st = stat()
            XCTAssertEqual(stat(planted, &st), 0)
            XCTAssertEqual(st.st_size, 6, "\(suffix) untouched")
            // The user's own, but readable by others: every page written would leak.
            write(planted, owner: 0)
            chmod(planted, 0o644)
            XCTAssertStatus(try KeychainStore.open(at: path, storage: .process), .param, "\(suffix) readable by others")
            // A link, even the user's own, to a file the attacker can read.
            unlink(planted)
            write(scratch.directory + "/outside", owner: nobody)
            symlink(scratch.directory + "/outside", planted)
            XCTAssertStatus(try KeychainStore.open(at: path, storage: .process), .param, "\(suffix) as a link")
            unlink(planted)
        }
        let store = try KeychainStore.open(at: path, storage: .process)
        try store.unlock(password: Array("pw".utf8))
        XCTAssertEqual(try secretString(store, query("alice")), "pw", "without the planted files the keychain opens")
    }

    func testTheSchemaCannotBeRewrittenOrTrusted() throws {
        let store = try scratch.create()
        XCTAssertThrowsError(
            try store.db.execute(
                """
                PRAGMA writable_schema=ON;
                UPDATE sqlite_master SET sql = 'CREATE TABLE items (x)' WHERE name = 'items'
                """), "defensive mode: sqlite_master is read-only")
        let trusted = try store.db.statement("PRAGMA trusted_schema")
        XCTAssertTrue(try trusted.step())
        XCTAssertEqual(trusted.int(0), 0)
        trusted.reset()
    }
}
