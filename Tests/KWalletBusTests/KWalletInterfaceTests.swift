import Glibc
import KWalletItems
import XCTest

@testable import KWalletBus

/// What KWallet's clients learn of the interface, and the wallet names and defaults they are told.
final class KWalletInterfaceTests: XCTestCase {
    /// Introspect's table and the dispatch name the same methods and signatures (dbus-python calls
    /// by what Introspect says).
    func testIntrospectionMatchesTheDispatch() {
        XCTAssertEqual(Set(KWalletIntrospection.keys), Set(KWalletService.methods.keys))
        XCTAssertEqual(KWalletIntrospection.keys.count, KWalletService.methods.count, "no method listed twice")
        for key in ["open(sxs)", "close(sb)", "close(ibs)", "isOpen(s)", "isOpen(i)", "writeEntry(issayis)", "writeEntry(issays)", "readPassword(isss)"] {
            XCTAssertNotNil(KWalletService.methods[key], key)
        }
    }

    func testIntrospectionXML() {
        let xml = KWalletIntrospection.xml
        XCTAssertTrue(xml.contains("<interface name=\"org.kde.KWallet\">"))
        XCTAssertTrue(xml.contains("<arg direction=\"in\" type=\"x\" name=\"wId\"/>"), "open's window id is an int64")
        XCTAssertTrue(xml.contains("<annotation value=\"QVariantMap\" name=\"org.qtproject.QtDBus.QtTypeName.Out0\"/>"))
        // sync and pamOpen are sent without waiting for an answer.
        XCTAssertEqual(xml.components(separatedBy: "org.freedesktop.DBus.Method.NoReply").count - 1, 2)
        XCTAssertTrue(xml.hasSuffix("</interface>\n</node>\n"))
    }

    /// A wallet name is a keychain's only when open would keep it as it is.
    func testPlainWalletNames() {
        XCTAssertTrue(KWalletService.isPlainName("kdewallet"))
        XCTAssertTrue(KWalletService.isPlainName("work-2_x"))
        XCTAssertTrue(KWalletService.isPlainName("Brieftasche\u{00E4}"))
        XCTAssertFalse(KWalletService.isPlainName(""))
        XCTAssertFalse(KWalletService.isPlainName("my wallet"))
        XCTAssertFalse(KWalletService.isPlainName("../login"))
        XCTAssertFalse(KWalletService.isPlainName("/tmp/x"))
        XCTAssertFalse(KWalletService.isPlainName(String(repeating: "a", count: 201)))
        XCTAssertTrue(KWalletService.isPlainName(String(repeating: "a", count: 200)))
    }

    func testAPasswordEntrysText() {
        XCTAssertEqual(KWalletService.password(KWalletEntry(folder: "f", key: "k", type: .password, value: QtDataStream.string("sécret"))), "sécret")
        XCTAssertEqual(KWalletService.password(KWalletEntry(folder: "f", key: "k", type: .password, value: [1])), "", "not a QString")
    }

    /// kwalletrc's [Wallet] group: the default wallet for both, or a local one of its own.
    func testDefaultWalletsFromKwalletrc() throws {
        var template = Array("/tmp/kwalletrc-XXXXXX".utf8CString)
        let folder = String(cString: try XCTUnwrap(mkdtemp(&template)))
        let saved = getenv("XDG_CONFIG_HOME").map { String(cString: $0) }
        setenv("XDG_CONFIG_HOME", folder, 1)
        defer {
            if let saved { setenv("XDG_CONFIG_HOME", saved, 1) } else { unsetenv("XDG_CONFIG_HOME") }
            _ = Glibc.system("rm -rf '\(folder)'")
        }
        func config(_ text: String?) -> (String, String) {
            unlink(folder + "/kwalletrc")
            if let text {
                let file = fopen(folder + "/kwalletrc", "w")
                fputs(text, file)
                fclose(file)
            }
            let read = KWalletConfig.read()
            return (read.networkWallet, read.localWallet)
        }
        XCTAssertTrue(config(nil) == ("kdewallet", "kdewallet"))
        XCTAssertTrue(config("[Wallet]\nDefault Wallet = mine\n") == ("mine", "mine"))
        XCTAssertTrue(config("[Wallet]\nDefault Wallet=mine\nUse One Wallet=false\nLocal Wallet=here\n") == ("mine", "here"))
        XCTAssertTrue(config("[Wallet]\nUse One Wallet=off\n") == ("kdewallet", "localwallet"))
        XCTAssertTrue(config("[Other]\nDefault Wallet=no\n[Wallet]\nDefault Wallet=\n") == ("kdewallet", "kdewallet"))
    }
}
