import Glibc
import KeychainCore
@testable import KeychainPresence
import XCTest

/// Review 56: any connection of the session bus could answer the client's calls. `message()` took
/// the first message whose REPLY_SERIAL was the call's serial, of any type (a method call, a
/// signal) and from any sender; the bus forwards a method call carrying that header field. Only
/// the callee's method return or error is a reply now.
final class PortalReplyTests: XCTestCase {
    var directory = ""
    var children: [pid_t] = []

    override func setUp() {
        var template = Array("/tmp/keychain-portal-reply-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }

    override func tearDown() {
        for child in children.reversed() {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        _ = system("rm -rf '\(directory)'")
    }

    func spawn(_ argv: [String], environment: [String]) -> pid_t {
        var pid: pid_t = 0
        var cArgs = argv.map { strdup($0) } + [nil]
        var cEnv = environment.map { strdup($0) } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        XCTAssertEqual(posix_spawn(&pid, argv[0], nil, nil, &cArgs, &cEnv), 0)
        children.append(pid)
        return pid
    }

    func waitFor(_ condition: () -> Bool) {
        let deadline = SystemClock.monotonic() + 30
        while !condition(), SystemClock.monotonic() < deadline { usleep(50_000) }
    }

    func testAnotherConnectionAnswersTheGenuinePortalDialog() throws {
        let backend = "/usr/libexec/xdg-desktop-portal-gtk"
        try XCTSkipUnless(access(backend, X_OK) == 0 && access("/usr/bin/Xvfb", X_OK) == 0, "no portal-gtk or Xvfb")
        try XCTSkipUnless(system("/usr/bin/python3 -c 'import jeepney' 2>/dev/null") == 0, "no jeepney")
        try SystemPrompterTests.writeBusConfig(in: directory)
        let address = "unix:path=\(directory)/bus"
        _ = spawn(["/usr/bin/dbus-daemon", "--config-file=\(directory)/bus.conf", "--nofork"], environment: [])
        waitFor { access(directory + "/bus", F_OK) == 0 }
        // A display number of this run's own: other suites run Xvfb too.
        let display = 300 + Int(getpid() % 600)
        _ = spawn(["/usr/bin/Xvfb", ":\(display)", "-nolisten", "tcp"], environment: [])
        waitFor { access("/tmp/.X11-unix/X\(display)", F_OK) == 0 }
        let env = ["DISPLAY=:\(display)", "DBUS_SESSION_BUS_ADDRESS=\(address)", "PATH=/usr/bin:/bin", "HOME=\(directory)", "GDK_BACKEND=x11"]
        _ = spawn([backend, "--verbose"], environment: env)
        waitFor {
            system(
                "DBUS_SESSION_BUS_ADDRESS='\(address)' /usr/bin/dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetNameOwner string:org.freedesktop.impl.portal.desktop.gtk >/dev/null 2>&1"
            ) == 0
        }

        // The attacker: owns no name; sends, to each new connection, a method call that carries
        // REPLY_SERIAL 5 (Hello 1, GetNameOwner 2, GetConnectionCredentials 3, GetNameOwner 4,
        // AccessDialog 5), once the dialog shows, and the body of a grant with "Always allow" ticked.
        let ready = directory + "/ready"
        let script = """
            import sys, time
            from jeepney import DBusAddress, new_method_call, MatchRule
            from jeepney.bus_messages import message_bus
            from jeepney.low_level import HeaderFields
            from jeepney.io.blocking import open_dbus_connection
            conn = open_dbus_connection(bus=sys.argv[1])
            conn.send_and_get_reply(message_bus.AddMatch(MatchRule(type='signal', member='NameOwnerChanged')))
            open(sys.argv[2], 'w').close()
            while True:
                msg = conn.receive()
                if msg.header.fields.get(HeaderFields.member) != 'NameOwnerChanged': continue
                name, old, new = msg.body
                if not name.startswith(':') or old != '' or new != name: continue
                time.sleep(1)  # the dialog is up and waits for the person: AccessDialog (5) is sent
                for serial in (5,):
                    m = new_method_call(DBusAddress('/x', bus_name=name, interface='x.y'), 'z', 'ua{sv}',
                                        (0, {'choices': ('a(ss)', [('always', 'true')])}))
                    m.header.fields[HeaderFields.reply_serial] = serial
                    conn.send(m)
            """
        _ = spawn(["/usr/bin/python3", "-c", script, address, ready], environment: env)
        waitFor { access(ready, F_OK) == 0 }

        let dialog = PortalAccessDialog(address: address, name: "org.freedesktop.impl.portal.desktop.gtk", timeout: 5)
        let started = SystemClock.monotonic()
        let answer = dialog.ask(title: "Allow access to a keychain item?", subtitle: "review 56", body: "nobody clicks")
        let took = SystemClock.monotonic() - started
        // Nobody clicked: the dialog must time out (nil, after 5 s) or be refused, never be granted.
        XCTAssertNil(answer, "granted without a click after \(took) s: \(String(describing: answer))")
    }
}
