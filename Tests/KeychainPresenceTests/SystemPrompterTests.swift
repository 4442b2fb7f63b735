import Glibc
import KeychainCore
@testable import KeychainPresence
import XCTest

/// Whoever owns gcr's prompter name is shown the broker's question only when it is root's
/// prompter program (review 55); Tests/dialog shows a real gcr-prompter accepted.
final class SystemPrompterTests: XCTestCase {
    var directory = ""
    var busPid: pid_t = 0

    override func setUp() {
        var template = Array("/tmp/keychain-prompter-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
    }

    override func tearDown() {
        if busPid > 0 { kill(busPid, SIGTERM) }
        _ = system("rm -rf '\(directory)'")
    }

    /// A bus of its own with no service to start: its address.
    func privateBus() throws -> String {
        try XCTSkipUnless(access("/usr/bin/dbus-daemon", X_OK) == 0, "no dbus-daemon")
        try Self.writeBusConfig(in: directory)
        let out = directory + "/bus.out"
        XCTAssertEqual(system("/usr/bin/dbus-daemon --config-file='\(directory)/bus.conf' --fork --print-address=1 --print-pid=1 > '\(out)'"), 0)
        let lines = String(decoding: PlainFiles.read(out) ?? [], as: UTF8.self).split(separator: "\n")
        busPid = lines.count > 1 ? pid_t(lines[1]) ?? 0 : 0
        return try XCTUnwrap(lines.first.map(String.init))
    }

    /// DIRECTORY/bus.conf: a session bus listening on DIRECTORY/bus, open to every connection.
    static func writeBusConfig(in directory: String) throws {
        let config = """
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(directory)/bus</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        try PlainFiles.write(directory + "/bus.conf", Array(config.utf8))
    }

    func testOnlyAUnixSocketIsReached() {
        XCTAssertEqual(BusDaemonConnection.unixAddress("unix:path=/run/user/1000/bus"), Array("/run/user/1000/bus".utf8))
        XCTAssertEqual(BusDaemonConnection.unixAddress("unix:abstract=/tmp/dbus-a%2cb,guid=12"), [0] + Array("/tmp/dbus-a,b".utf8))
        XCTAssertEqual(BusDaemonConnection.unixAddress("tcp:host=localhost,port=1;unix:path=/b"), Array("/b".utf8))
        XCTAssertNil(BusDaemonConnection.unixAddress("unix:tmpdir=/tmp"))
        XCTAssertNil(BusDaemonConnection.unixAddress("unix:path=/a%00b"))
        XCTAssertNil(BusDaemonConnection.unixAddress("autolaunch:"))
    }

    func testNoBusIsARefusal() {
        XCTAssertNotNil(SystemPrompter(address: "unix:path=\(directory)/nobody").refusal())
        XCTAssertNotNil(SystemPrompter(address: "tcp:host=127.0.0.1,port=9").refusal())
        // A connection that fails midway keeps no descriptor.
        func descriptors() -> Int {
            guard let folder = opendir("/proc/self/fd") else { return -1 }
            defer { closedir(folder) }
            var count = 0
            while readdir(folder) != nil { count += 1 }
            return count
        }
        let before = descriptors()
        for _ in 0..<20 { _ = SystemPrompter(address: "unix:path=\(directory)/nobody").refusal() }
        XCTAssertEqual(descriptors(), before)
    }

    /// Nobody owns the name and the bus cannot start gcr-prompter: nobody is asked.
    func testAnUnownedNameTheBusCannotStartIsARefusal() throws {
        let refusal = try XCTUnwrap(SystemPrompter(address: try privateBus()).refusal())
        XCTAssertTrue(refusal.contains("cannot start it"), refusal)
    }

    /// The attacker's review: a script of the user's owns the name first.
    func testAProcessOfTheUsersOwningTheNameIsRefused() throws {
        let address = try privateBus()
        try XCTSkipUnless(system("/usr/bin/python3 -c 'import jeepney' 2>/dev/null") == 0, "python3-jeepney is not installed")
        let ready = directory + "/owned"
        let script = """
            import sys, time
            from jeepney.bus_messages import message_bus
            from jeepney.io.blocking import open_dbus_connection
            conn = open_dbus_connection(bus=sys.argv[1])
            conn.send_and_get_reply(message_bus.RequestName('\(SystemPrompter.name)', 4))
            open(sys.argv[2], 'w').close()
            time.sleep(60)
            """
        var squatter: pid_t = 0
        let argv = ["/usr/bin/python3", "-c", script, address, ready]
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&squatter, argv[0], nil, nil, &cArgs, environ), 0)
        defer {
            kill(squatter, SIGKILL)
            var status: Int32 = 0
            waitpid(squatter, &status, 0)
        }
        let deadline = SystemClock.monotonic() + 30
        while access(ready, F_OK) != 0, SystemClock.monotonic() < deadline { usleep(20_000) }
        let refusal = try XCTUnwrap(SystemPrompter(address: address).refusal())
        XCTAssertTrue(refusal.contains("/usr/bin/python3"), refusal)
        XCTAssertTrue(refusal.contains("(pid \(squatter)"), refusal)
    }

    /// pinentry-gnome3, as the desktop's dialog or as Debian's `pinentry`, is checked on the bus
    /// it is given.
    func testPinentryGnome3IsCheckedOnItsBus() throws {
        try XCTSkipUnless(access(AccessAnswerers.gcrPinentry, X_OK) == 0, "pinentry-gnome3 is not installed")
        let values = ["DISPLAY": ":1", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"]
        XCTAssertEqual(AccessAnswerers.desktop { values[$0] }?.prompter?.address, "unix:path=/x")
        let gnome = AccessAnswerers.pinentry { $0 == "KEYCHAIN_PINENTRY" ? AccessAnswerers.gcrPinentry : values[$0] }
        XCTAssertEqual(gnome?.prompter?.address, "unix:path=/x")
        XCTAssertNil(AccessAnswerers.pinentry { $0 == "KEYCHAIN_PINENTRY" ? "/usr/bin/true" : values[$0] }?.prompter)
        XCTAssertNil(AccessAnswerers.pinentry { $0 == "KEYCHAIN_PINENTRY" ? AccessAnswerers.gcrPinentry : nil }?.prompter)
    }
}
