import Glibc
import XCTest

@testable import KeychainCore
@testable import KeychainTPMPolicy

/// `security tpm-enroll --default`: the user's choice, else the machine's file, else off.
final class TPMDefaultTests: XCTestCase {
    var folder = ""
    var saved: String?

    override func setUpWithError() throws {
        var template = Array("/tmp/tpm-default-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp failed") }
        folder = String(cString: made)
        saved = getenv("XDG_CONFIG_HOME").map { String(cString: $0) }
        setenv("XDG_CONFIG_HOME", folder + "/config", 1)
    }

    override func tearDown() {
        if let saved { setenv("XDG_CONFIG_HOME", saved, 1) } else { unsetenv("XDG_CONFIG_HOME") }
        unlink(folder + "/config/keychain/tpm-enroll")
        unlink(folder + "/machine")
        rmdir(folder + "/config/keychain")
        rmdir(folder + "/config")
        rmdir(folder)
    }

    func write(_ text: String, to path: String) {
        let file = fopen(path, "w")
        fputs(text, file)
        fclose(file)
    }

    func testTheUsersChoiceComesBeforeTheMachinesWhichComesBeforeOff() throws {
        let machine = folder + "/machine"
        XCTAssertFalse(TPMEnrolDefault.effective(machineFile: machine), "nothing set: off")
        write("on\n", to: machine)
        XCTAssertTrue(TPMEnrolDefault.effective(machineFile: machine), "the machine's default")
        try TPMEnrolDefault.set(false)
        XCTAssertEqual(TPMEnrolDefault.user(), false)
        XCTAssertFalse(TPMEnrolDefault.effective(machineFile: machine), "the user's off wins over the machine's on")
        try TPMEnrolDefault.set(nil)
        XCTAssertNil(TPMEnrolDefault.user())
        XCTAssertTrue(TPMEnrolDefault.effective(machineFile: machine), "back to the machine's")
        write("off\n", to: machine)
        try TPMEnrolDefault.set(true)
        XCTAssertTrue(TPMEnrolDefault.effective(machineFile: machine), "the user's on wins over the machine's off")
        try TPMEnrolDefault.set(nil)
        write("yes\n", to: machine)
        XCTAssertFalse(TPMEnrolDefault.effective(machineFile: machine), "a word other than on or off is not set")
        try TPMEnrolDefault.set(nil)  // nothing to remove: no error
    }

    func testTheUsersFileIsPrivate() throws {
        try TPMEnrolDefault.set(true)
        var st = stat()
        XCTAssertEqual(stat(TPMEnrolDefault.userFile(), &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(TPMEnrolDefault.userFile(), folder + "/config/keychain/tpm-enroll")
    }
}
