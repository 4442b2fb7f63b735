import Glibc
import XCTest

@testable import KeychainPeers

final class ResolvedPathsTests: XCTestCase {
    let writer = FileWriter(uid: 4242, groups: [4242])

    /// A path found safe is walked once; a file put in its place (another inode) or changed
    /// (its ctime moves) is walked again, and what is returned is the file there now.
    func testRememberedUntilTheFileChanges() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path + "/lib.so"
        XCTAssertTrue(FileManagerless.write(path, "one"))
        let memo = ResolvedPaths()
        guard case .file(let first) = memo.resolve(path, for: writer) else { return XCTFail("not found") }
        guard case .file(let again) = memo.resolve(path, for: writer) else { return XCTFail("not found again") }
        XCTAssertEqual(first, again)
        XCTAssertEqual(memo.walks, 1, "the second resolution is one lstat")

        XCTAssertEqual(chmod(path, 0o666), 0)
        guard case .file(let changed) = memo.resolve(path, for: writer) else { return XCTFail("not found after chmod") }
        XCTAssertEqual(changed.mode & 0o777, 0o666, "the facts are the file's now")
        XCTAssertEqual(memo.walks, 2, "a changed ctime is walked again")

        XCTAssertEqual(unlink(path), 0)
        XCTAssertTrue(FileManagerless.write(path, "two"))
        guard case .file(let replaced) = memo.resolve(path, for: writer) else { return XCTFail("not found after replace") }
        XCTAssertEqual(replaced.mode & 0o777, 0o644)
        XCTAssertEqual(memo.walks, 3, "another file in its place is walked again")
    }

    /// What the walk refuses is not remembered: a directory the writer owns stays unsafe, for
    /// this writer, however often it is asked; another writer's answer is its own.
    func testUnsafeIsNeverRemembered() throws {
        let scratch = try ScratchDirectory()
        let folder = scratch.path + "/mine"
        XCTAssertEqual(mkdir(folder, 0o755), 0)
        XCTAssertEqual(chown(folder, writer.uid, writer.uid), 0)
        let path = folder + "/lib.so"
        XCTAssertTrue(FileManagerless.write(path, "x"))
        let memo = ResolvedPaths()
        for _ in 0..<3 { XCTAssertEqual(memo.resolve(path, for: writer), .unsafeDirectory) }
        XCTAssertEqual(memo.walks, 3)
        guard case .file = memo.resolve(path, for: FileWriter(uid: 4343, groups: [4343])) else { return XCTFail("safe for another") }
        XCTAssertEqual(memo.resolve(path, for: writer), .unsafeDirectory)
    }
}

/// A file written with plain calls (no Foundation in these tests).
enum FileManagerless {
    static func write(_ path: String, _ text: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        return Glibc.write(fd, bytes, bytes.count) == bytes.count
    }
}
