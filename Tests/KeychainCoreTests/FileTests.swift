@testable import KeychainCore
import Glibc
import XCTest

final class FileTests: XCTestCase {
    var scratch: Scratch!

    override func setUp() { scratch = Scratch() }
    override func tearDown() { scratch.remove() }

    private func mode(_ path: String) -> mode_t {
        var st = stat()
        stat(path, &st)
        return st.st_mode & 0o7777
    }

    func testFileIs0600AndFolder0700WhateverTheUmask() throws {
        let old = umask(0)
        defer { umask(old) }
        let store = try scratch.create()
        try store.add(generic("a"))
        XCTAssertEqual(mode(store.path), 0o600)
        XCTAssertEqual(mode(KeychainFile.parent(of: store.path)), 0o700)
        for suffix in ["-wal", "-shm"] where KeychainFile.exists(store.path + suffix) {
            XCTAssertEqual(mode(store.path + suffix) & 0o077, 0, suffix)
        }
    }

    /// A checkpointed write-ahead log is cut back only past what it holds at a checkpoint: cut
    /// below that, a long-lived writer allocates the same pages again after every checkpoint.
    func testCheckpointedLogIsNotCutBelowItsCheckpointSize() throws {
        let store = try scratch.create()
        func pragma(_ name: String) throws -> Int64 {
            let stmt = try store.db.statement("PRAGMA \(name)")
            defer { stmt.reset() }
            XCTAssertTrue(try stmt.step())
            return stmt.int(0)
        }
        let pages = try pragma("wal_autocheckpoint"), pageSize = try pragma("page_size")
        XCTAssertEqual(pages, Int64(KeychainStore.walCheckpointPages))
        let walHeader: Int64 = 32, frameHeader: Int64 = 24
        XCTAssertGreaterThanOrEqual(try pragma("journal_size_limit"), walHeader + pages * (pageSize + frameHeader))
    }

    func testGroupOrWorldWritableIsRefused() throws {
        let store = try scratch.create()
        chmod(store.path, 0o620)
        XCTAssertStatus(try scratch.open(), .param)
        chmod(store.path, 0o602)
        XCTAssertStatus(try scratch.open(), .param)
        chmod(store.path, 0o600)
        chmod(KeychainFile.parent(of: store.path), 0o770)
        XCTAssertStatus(try scratch.open(), .param)
        chmod(KeychainFile.parent(of: store.path), 0o700)
        XCTAssertNoThrow(try scratch.open())
    }

    func testFileOfAnotherUserIsRefused() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root to give a file away") }
        let store = try scratch.create()
        chown(store.path, 65534, 65534)
        XCTAssertStatus(try scratch.open(), .param)
        chown(store.path, 0, 0)
        chown(KeychainFile.parent(of: store.path), 65534, 65534)
        XCTAssertStatus(try scratch.open(), .param)
    }

    func testSymlinkPlantedByAnotherUserIsRefused() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root to plant a link as another user") }
        let store = try scratch.create()
        let link = scratch.path("planted")
        symlink(store.path, link)
        lchown(link, 65534, 65534)
        XCTAssertStatus(try KeychainStore.open(at: link, storage: .process), .param)
        lchown(link, 0, 0)
        XCTAssertNoThrow(try KeychainStore.open(at: link, storage: .process), "the user's own link is followed")
    }

    func testMissingKeychain() {
        XCTAssertStatus(try KeychainStore.open(at: scratch.path("absent"), storage: .process), .noSuchKeychain)
    }

    /// A stolen file tells nothing: neither secrets nor which servers and accounts it holds.
    func testFileHoldsNoSecretAndNoAttributeValue() throws {
        let store = try scratch.create()
        let needles = [
            "git.secret-server.example", "alice-the-account", "hunter2-password-xyzzy",
            "my-generic-service", "a-label-nobody-sees", "/path/of/repo.git", "comment-text-here"
        ]
        try store.add(
            Item(
                itemClass: .internetPassword,
                attributes: [
                    AttributeKey.server: .string(needles[0]), AttributeKey.account: .string(needles[1]), AttributeKey.path: .string(needles[5]),
                    AttributeKey.label: .string(needles[4]), AttributeKey.comment: .string(needles[6]), AttributeKey.protocol: .string("htps")
                ], secret: Array(needles[2].utf8)))
        try store.add(
            Item(
                itemClass: .genericPassword, attributes: [AttributeKey.service: .string(needles[3]), AttributeKey.account: .string(needles[1])],
                secret: Array(needles[2].utf8)))
        try store.add(
            Item(
                itemClass: .genericPassword,
                attributes: [
                    AttributeKey.service: .string(needles[3]), AttributeKey.account: .string("always-\(needles[1])"),
                    AttributeKey.accessible: .string("dk")
                ], secret: Array(needles[2].utf8)))
        // Both the main file and the write-ahead log are read, as a thief would copy them.
        var raw = FileManagerless.read(store.path)
        raw += FileManagerless.read(store.path + "-wal")
        XCTAssertGreaterThan(raw.count, 4096)
        for needle in needles {
            for variant in [needle, needle.uppercased()] {
                XCTAssertFalse(contains(raw, Array(variant.utf8)), "\(variant) is readable in the file")
                XCTAssertFalse(contains(raw, Array(variant.utf16).flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] }), "\(variant) as UTF-16")
            }
        }
        // And the search does work, so the items really are in there.
        XCTAssertEqual(try store.find(Query(itemClass: .internetPassword, attributes: [AttributeKey.server: .string(needles[0])])).count, 1)
    }

    private func contains(_ haystack: Bytes, _ needle: Bytes) -> Bool {
        guard needle.count <= haystack.count else { return false }
        let first = needle[0]
        var i = 0
        while i <= haystack.count - needle.count {
            if haystack[i] == first, Array(haystack[i..<(i + needle.count)]) == needle { return true }
            i += 1
        }
        return false
    }
}
