import Glibc
import XCTest

@testable import SecretServiceBus

/// The kernel's word on the keychains folder: a change is seen, nothing is not, and a path it
/// cannot watch faithfully (a symbolic link in it) is left to the stamps.
final class FolderWatchTests: XCTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/keychain-watch-XXXXXX".utf8CString)
        folder = String(cString: try XCTUnwrap(mkdtemp(&template)))
    }

    override func tearDown() {
        _ = Glibc.system("rm -rf '\(folder)'")
    }

    func testAChangeInTheFolderIsSeen() {
        let watch = FolderWatch()
        XCTAssertTrue(watch.arm([(folder + "/login.keychain-db", false)]))
        XCTAssertTrue(watch.isArmed)
        XCTAssertFalse(watch.changed())
        let fd = open(folder + "/new.keychain-db", O_CREAT | O_WRONLY, 0o600)
        close(fd)
        XCTAssertTrue(watch.changed())
        XCTAssertFalse(watch.isArmed, "the caller rescans and arms again")
    }

    /// A folder that does not exist yet is watched through the nearest one that does.
    func testAFolderMadeLaterIsSeen() {
        let watch = FolderWatch()
        XCTAssertTrue(watch.arm([(folder + "/Library/Keychains/login.keychain-db", false)]))
        XCTAssertFalse(watch.changed())
        mkdir(folder + "/Library", 0o700)
        XCTAssertTrue(watch.changed())
    }

    func testASymbolicLinkOnThePathIsNotWatched() {
        mkdir(folder + "/real", 0o700)
        symlink(folder + "/real", folder + "/link")
        let watch = FolderWatch()
        XCTAssertFalse(watch.arm([(folder + "/link/login.keychain-db", false)]))
        XCTAssertFalse(watch.isArmed)
        XCTAssertTrue(watch.changed(), "not armed: it cannot tell, so a rescan")
    }

    func testLocalFilesystems() {
        XCTAssertTrue(FolderWatch.isLocal(folder))
        XCTAssertFalse(FolderWatch.isLocal(folder + "/no/such/folder"))
    }
}
