import Glibc
import XCTest

@testable import ProviderSwitch

/// enable's record of what it changed, which disable undoes exactly, and the files it writes.
final class TakeoverStateTests: EnvironmentTestCase {
    func testPathsAreEscapedOneFieldEach() {
        XCTAssertEqual(Takeover.State.escape("/home/a b/%x\n"), "/home/a%20b/%25x%0A")
        XCTAssertEqual(Takeover.State.escape("/é"), "/%C3%A9")
        for path in ["/home/a b/%x", "/plain", "/é/\t", ""] {
            XCTAssertEqual(Takeover.State.unescape(Substring(Takeover.State.escape(path))), path)
        }
        XCTAssertEqual(Takeover.State.unescape("%zz%4"), "%zz%4", "what is no escape stays as it is")
    }

    func testTheStateFileReadsBackAsWritten() throws {
        set("HOME", folder)
        set("XDG_STATE_HOME", folder + "/state")
        XCTAssertEqual(Takeover.stateFile, folder + "/state/keychain/secret-service-enabled")
        XCTAssertNil(Takeover.State.load())
        var state = Takeover.State(since: 1_700_000_000)
        state.kwalletStopped = 1_700_000_123.25
        state.records = [
            .folder(path: folder + "/state/keychain"),
            .file(path: folder + "/config/autostart/gnome-keyring-secrets.desktop", digest: String(repeating: "ab", count: 32)),
            .link(path: folder + "/config/systemd/user/gnome keyring.service", target: "/dev/null"),
            .stopped(components: "secrets,ssh", how: "signal"),
            .saved(path: folder + "/config/kwalletrc", copy: folder + "/state/kwalletrc copy", digest: "00")
        ]
        try state.save()
        let loaded = try XCTUnwrap(Takeover.State.load())
        XCTAssertEqual(loaded.since, state.since)
        XCTAssertEqual(loaded.kwalletStopped, state.kwalletStopped)
        XCTAssertEqual(loaded.records, state.records)
        var st = stat()
        XCTAssertEqual(stat(Takeover.stateFile, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
    }

    /// Unknown and malformed lines are passed over, not taken as something to undo.
    func testMalformedLinesAreSkipped() throws {
        set("XDG_STATE_HOME", folder)
        mkdir(folder + "/keychain", 0o700)
        write(Takeover.stateFile, "# comment\nsince 5\nfile /only-one-field\nremove /everything\nlink /a /b\nstopped x\n")
        let loaded = try XCTUnwrap(Takeover.State.load())
        XCTAssertEqual(loaded.since, 5)
        XCTAssertNil(loaded.kwalletStopped)
        XCTAssertEqual(loaded.records, [.link(path: "/a", target: "/b")])
    }

    func testFilesAreCreatedOnlyWhereNothingIs() throws {
        let path = folder + "/a/b/file"
        XCTAssertEqual(try Files.makeFolder(for: path), [folder + "/a", folder + "/a/b"])
        XCTAssertEqual(try Files.makeFolder(for: path), [])
        try Files.create(path, with: Array("one".utf8), mode: 0o644)
        XCTAssertThrowsError(try Files.create(path, with: Array("two".utf8), mode: 0o644))
        XCTAssertEqual(Files.digest(of: path), Files.sha256(Array("one".utf8)))
        try Files.replace(path, with: Array("two".utf8), mode: 0o600)
        XCTAssertEqual(Files.digest(of: path), Files.sha256(Array("two".utf8)))
        XCTAssertEqual(Files.sha256([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        symlink(path, folder + "/link")
        XCTAssertNil(Files.digest(of: folder + "/link"), "a link is not the file enable wrote")
    }
}
