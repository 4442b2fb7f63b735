import Glibc
import KeychainCore
@testable import KeychainPresence
import XCTest

/// The desktop portal's access dialog as the keychain calls it: which backend a desktop names,
/// the call's arguments on the wire, and the reply read; Tests/dialog shows the real
/// xdg-desktop-portal-gtk's dialog, answered.
final class PortalAccessDialogTests: XCTestCase {
    var directory = ""

    override func setUp() {
        var template = Array("/tmp/keychain-portal-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        mkdir(directory + "/portals", 0o755)
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    func write(_ name: String, _ text: String) throws { try PlainFiles.write(directory + "/" + name, Array(text.utf8)) }

    /// Debian 12's portal files: the backend whose UseIn names the desktop and that lists Access.
    func testDebian12PicksTheBackendByUseIn() throws {
        try write(
            "portals/gnome.portal",
            "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.gnome\nInterfaces=org.freedesktop.impl.portal.Screenshot;\nUseIn=gnome\n")
        try write(
            "portals/gtk.portal",
            "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.gtk\nInterfaces=org.freedesktop.impl.portal.FileChooser;org.freedesktop.impl.portal.Access;\nUseIn=gnome\n"
        )
        try write(
            "portals/kde.portal", "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.kde\nInterfaces=org.freedesktop.impl.portal.Access;\nUseIn=KDE\n")
        let backends = PortalBackends(directory: directory)
        XCTAssertEqual(backends.serving(PortalAccessDialog.interface, for: ["GNOME"]), ["org.freedesktop.impl.portal.desktop.gtk"])
        XCTAssertEqual(backends.serving(PortalAccessDialog.interface, for: ["KDE"]), ["org.freedesktop.impl.portal.desktop.kde"])
        XCTAssertEqual(backends.serving(PortalAccessDialog.interface, for: ["ubuntu", "GNOME"]), ["org.freedesktop.impl.portal.desktop.gtk"])
        XCTAssertEqual(backends.serving(PortalAccessDialog.interface, for: ["XFCE"]), [])
    }

    /// Debian 13's: DESKTOP-portals.conf decides, the interface's own key before `default`, and a
    /// backend still serves only what it lists.
    func testDebian13PicksTheBackendByPortalsConf() throws {
        try write("portals/gnome.portal", "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.gnome\nInterfaces=org.freedesktop.impl.portal.Access;\n")
        try write("portals/gtk.portal", "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.gtk\nInterfaces=org.freedesktop.impl.portal.Access;\n")
        try write("gnome-portals.conf", "[preferred]\ndefault=gnome;gtk;\norg.freedesktop.impl.portal.Secret=gnome-keyring;\n")
        let backends = PortalBackends(directory: directory)
        XCTAssertEqual(
            backends.serving(PortalAccessDialog.interface, for: ["GNOME"]),
            ["org.freedesktop.impl.portal.desktop.gnome", "org.freedesktop.impl.portal.desktop.gtk"])
        try write("gnome-portals.conf", "[preferred]\ndefault=gnome;\norg.freedesktop.impl.portal.Access=gtk\n")
        XCTAssertEqual(backends.serving(PortalAccessDialog.interface, for: ["GNOME"]), ["org.freedesktop.impl.portal.desktop.gtk"])
        try write("gnome-portals.conf", "[preferred]\norg.freedesktop.impl.portal.Access=none\n")
        XCTAssertEqual(backends.serving(PortalAccessDialog.interface, for: ["GNOME"]), [])
    }

    func testNoDesktopNoDialog() {
        let environment: [String: String] = ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nowhere", "DISPLAY": ":9"]
        XCTAssertNil(PortalAccessDialog.forDesktop(environment: { environment[$0] }, portals: directory, timeout: 1))
    }

    /// The arguments, read back as the backend reads them (osssssa{sv}).
    func testTheCallsArgumentsAreWellFormed() throws {
        let bytes = PortalAccessDialog.arguments(
            handle: "/org/freedesktop/portal/desktop/request/1_7/keychain1", title: "Allow access?", subtitle: "secret-tool wants to read",
            body: "Started by: bash")
        var reader = BusReader(bytes, bigEndian: false)
        XCTAssertEqual(try reader.string(), "/org/freedesktop/portal/desktop/request/1_7/keychain1")
        XCTAssertEqual(
            try [reader.string(), reader.string(), reader.string(), reader.string(), reader.string()],
            ["", "", "Allow access?", "secret-tool wants to read", "Started by: bash"])
        var options: [String: String] = [:]
        var choices: [[String]] = []
        try reader.array(alignment: 8) { entry in
            let key = try entry.string()
            let type = try entry.signature()
            if type == "s" {
                options[key] = try entry.string()
                return
            }
            XCTAssertEqual(key, "choices")
            XCTAssertEqual(type, "a(ssa(ss)s)")
            try entry.array(alignment: 8) { choice in
                let id = try choice.string(), label = try choice.string()
                var none = 0
                try choice.array(alignment: 8) { _ in none += 1 }
                XCTAssertEqual(none, 0)
                choices.append([id, label, try choice.string()])
            }
        }
        XCTAssertEqual(reader.offset, bytes.count)
        XCTAssertEqual(options, ["grant_label": "Allow", "deny_label": "Deny"])
        XCTAssertEqual(choices, [["always", "Always allow", "false"]])
    }

    /// A reply with "choices" as `type`, holding always = `value`.
    func reply(response: UInt32, type: String, always value: String) -> [UInt8] {
        var writer = BusWriter()
        writer.uint32(response)
        writer.array(alignment: 8) { results in
            results.structure()
            results.string("other")
            results.variant("u") { $0.uint32(7) }
            results.structure()
            results.string("choices")
            results.variant(type) { choices in
                choices.array(alignment: 8) { entry in
                    entry.structure()
                    entry.string("always")
                    if type == "a{sv}" {
                        entry.variant("s") { $0.string(value) }
                    } else {
                        entry.string(value)
                    }
                }
            }
        }
        return writer.bytes
    }

    func testTheReplyIsReadInEveryShapeOfChoices() throws {
        for type in ["a(ss)", "a{ss}", "a{sv}"] {
            var ticked = BusReader(reply(response: 0, type: type, always: "true"), bigEndian: false)
            XCTAssertEqual(try PortalAccessDialog.answer(&ticked), .allowed(always: true), type)
            var unticked = BusReader(reply(response: 0, type: type, always: "false"), bigEndian: false)
            XCTAssertEqual(try PortalAccessDialog.answer(&unticked), .allowed(always: false), type)
        }
        for response: UInt32 in [1, 2] {
            var denied = BusReader(reply(response: response, type: "a(ss)", always: "true"), bigEndian: false)
            XCTAssertEqual(try PortalAccessDialog.answer(&denied), .denied)
        }
        var short = BusReader(Array(reply(response: 0, type: "a(ss)", always: "true").dropLast(3)), bigEndian: false)
        XCTAssertThrowsError(try PortalAccessDialog.answer(&short))
    }

    func testOnlyAPortalBackendOfRootsServesTheDialog() {
        XCTAssertTrue(PortalAccessDialog.isPortalBackend("exe:/usr/libexec/xdg-desktop-portal-gtk"))
        XCTAssertTrue(PortalAccessDialog.isPortalBackend("exe:/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde"))
        XCTAssertFalse(PortalAccessDialog.isPortalBackend("exe:/usr/bin/python3.11"))
        XCTAssertFalse(PortalAccessDialog.isPortalBackend("exe:/home/u/xdg-desktop-portal-gtk"))
        XCTAssertFalse(PortalAccessDialog.isPortalBackend("flatpak:org.example.App"))
        XCTAssertEqual(PortalAccessDialog.pathElement(":1.42"), "1_42")
    }
}
