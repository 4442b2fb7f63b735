import XCTest

@testable import ProviderSwitch

/// kwalletrc with kwalletd's Secret Service turned off, every other byte of the user's kept.
final class KwalletrcTests: XCTestCase {
    private func off(_ text: String) -> String? { Takeover.disablingSecrets(text) }

    func testANewGroupWhereThereIsNone() {
        XCTAssertEqual(off(""), "[org.freedesktop.secrets]\napiEnabled=false\n")
        XCTAssertEqual(off("[Wallet]\nEnabled=true\n"), "[Wallet]\nEnabled=true\n\n[org.freedesktop.secrets]\napiEnabled=false\n")
        XCTAssertEqual(off("[Wallet]\nEnabled=true"), "[Wallet]\nEnabled=true\n\n[org.freedesktop.secrets]\napiEnabled=false\n", "no final newline")
    }

    func testTheKeyInTheGroupIsSetOrAdded() {
        XCTAssertEqual(
            off("[org.freedesktop.secrets]\napiEnabled = true\n[Wallet]\nEnabled=true\n"),
            "[org.freedesktop.secrets]\napiEnabled=false\n[Wallet]\nEnabled=true\n")
        XCTAssertEqual(off("[Wallet]\nx=1\n[org.freedesktop.secrets]\nother=2\n"), "[Wallet]\nx=1\n[org.freedesktop.secrets]\napiEnabled=false\nother=2\n")
        // KConfig's last line wins: that is the one set.
        XCTAssertEqual(
            off("[org.freedesktop.secrets]\napiEnabled=false\napiEnabled=true\n"), "[org.freedesktop.secrets]\napiEnabled=false\napiEnabled=false\n")
        // The same key in another group is not this one.
        XCTAssertEqual(off("[Other]\napiEnabled=true\n"), "[Other]\napiEnabled=true\n\n[org.freedesktop.secrets]\napiEnabled=false\n")
    }

    func testNothingWhenItIsOffAlready() {
        XCTAssertNil(off("[org.freedesktop.secrets]\napiEnabled=false\n"))
        XCTAssertNil(off("[Wallet]\n[org.freedesktop.secrets]\n  apiEnabled =  false  \n"))
    }
}
