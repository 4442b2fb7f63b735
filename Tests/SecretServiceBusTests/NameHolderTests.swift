import XCTest

@testable import SecretServiceBus

/// Who holds org.freedesktop.secrets, told from its program, and what the user is told to do.
final class NameHolderTests: XCTestCase {
    func testProvidersByProgram() {
        XCTAssertEqual(NameHolder(command: "gnome-keyring-d"), .gnomeKeyring)
        XCTAssertEqual(NameHolder(command: "x", executable: "/usr/bin/gnome-keyring-daemon"), .gnomeKeyring)
        XCTAssertEqual(NameHolder(command: "KeePassXC"), .keePassXC)
        XCTAssertEqual(NameHolder(command: "x", executable: "/usr/bin/keepassxc"), .keePassXC)
        XCTAssertEqual(NameHolder(command: "kwalletd5"), .kwallet)
        XCTAssertEqual(NameHolder(command: "x", executable: "/usr/bin/kwalletd6"), .kwallet)
        XCTAssertEqual(NameHolder(command: "keychain-secret"), .other)
        // The executable's own name counts, not a folder on its path.
        XCTAssertEqual(NameHolder(command: "x", executable: "/opt/kwalletd5/bin/other"), .other)
    }

    func testWhatFreesTheName() {
        XCTAssertTrue(NameHolder.gnomeKeyring.nextStep(replace: false).contains("`keychain-secret-service enable` stops your gnome-keyring-daemon"))
        XCTAssertTrue(NameHolder.keePassXC.nextStep(replace: true).contains("Secret Service Integration"))
        XCTAssertTrue(NameHolder.kwallet.nextStep(replace: false).contains("apiEnabled=false"))
        XCTAssertEqual(NameHolder.other.nextStep(replace: false), "run with --replace to take it over")
        XCTAssertEqual(NameHolder.other.nextStep(replace: true), "it does not let another program take the name")
    }
}
