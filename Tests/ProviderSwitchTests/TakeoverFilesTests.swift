import Glibc
import SessionBus
import XCTest

@testable import ProviderSwitch

/// What enable reads of systemd's and the desktop's files, and what it writes into them.
final class TakeoverFilesTests: EnvironmentTestCase {
    func testWantedByFromAUnitsInstallSection() {
        write(folder + "/a.service", "[Unit]\nWantedBy=not-this.target\n[Install]\nWantedBy=graphical-session-pre.target  default.target\nWantedBy=x.target\n")
        XCTAssertEqual(Takeover.wantedBy(folder + "/a.service"), ["graphical-session-pre.target", "default.target", "x.target"])
        write(folder + "/b.service", "[Service]\nExecStart=/bin/true\n")
        XCTAssertEqual(Takeover.wantedBy(folder + "/b.service"), [])
        XCTAssertEqual(Takeover.wantedBy(folder + "/none.service"), [])
    }

    /// $SYSTEMD_UNIT_PATH as systemd takes it: an empty element stands for the usual folders.
    func testUnitFolders() {
        set("HOME", folder)
        set("XDG_RUNTIME_DIR", "/run/user/1000")
        set("XDG_DATA_HOME", nil)
        set("SYSTEMD_UNIT_PATH", nil)
        let usual = Takeover.systemUnitFolders()
        XCTAssertEqual(usual.first, "/etc/systemd/user")
        XCTAssertTrue(usual.contains("/run/user/1000/systemd/user"))
        XCTAssertTrue(usual.contains(folder + "/.local/share/systemd/user"))
        XCTAssertEqual(usual.last, "/usr/lib/systemd/user")
        set("SYSTEMD_UNIT_PATH", "/a:/b")
        XCTAssertEqual(Takeover.systemUnitFolders(), ["/a", "/b"])
        set("SYSTEMD_UNIT_PATH", "/a::/b")
        XCTAssertEqual(Takeover.systemUnitFolders(), ["/a"] + usual + ["/b"])
        mkdir(folder + "/units", 0o755)
        write(folder + "/units/x.service", "")
        set("SYSTEMD_UNIT_PATH", "/nowhere:" + folder + "/units")
        XCTAssertEqual(Takeover.unitFile("x.service"), folder + "/units/x.service")
        XCTAssertNil(Takeover.unitFile("y.service"))
    }

    func testWhatEnableWrites() {
        set("HOME", folder)
        set("XDG_CONFIG_HOME", nil)
        set("XDG_DATA_HOME", "relative/is/ignored")
        XCTAssertEqual(Takeover.autostartFile, folder + "/.config/autostart/gnome-keyring-secrets.desktop")
        XCTAssertEqual(Takeover.activationFile, folder + "/.local/share/dbus-1/services/org.freedesktop.secrets.service")
        XCTAssertTrue(Takeover.autostartContents().contains("\nHidden=true\n"))
        XCTAssertTrue(Takeover.sshAutostartContents().contains("\nHidden=true\n"))
        XCTAssertTrue(Takeover.kwalletAutostartContents().contains("\nHidden=true\n"))
        let plain = Takeover.activationContents(kwallet: false)
        XCTAssertTrue(plain.hasPrefix("[D-BUS Service]\nName=org.freedesktop.secrets\nExec=/"))
        XCTAssertTrue(plain.contains("\nSystemdService=keychain-secret-service.service\n"))
        XCTAssertFalse(plain.contains("--kwallet"))
        XCTAssertTrue(Takeover.activationContents(kwallet: true).contains(" --kwallet\n"))
        XCTAssertTrue(Takeover.kwalletActivationContents("org.kde.kwalletd6").contains("Name=org.kde.kwalletd6\n"))
        XCTAssertFalse(Takeover.kwalletActivationContents("org.kde.kwalletd6").contains("SystemdService"))
        XCTAssertTrue(Takeover.unitDropInContents().contains("\nExecStart=\nExecStart=/"))
    }

    /// A daemon started for the user runs as a transient unit of the user manager, not in the
    /// caller's login scope.
    func testDaemonsRunUnderTheUserManager() {
        set("GNOME_KEYRING_CONTROL", nil)
        XCTAssertEqual(
            Takeover.underUserManager(["gnome-keyring-daemon", "--start"], oneshot: true),
            [
                "systemd-run", "--user", "--quiet", "--collect", "--description=gnome-keyring-daemon --start", "--property=Type=oneshot",
                "--property=RemainAfterExit=yes", "--", "gnome-keyring-daemon", "--start"
            ])
        set("GNOME_KEYRING_CONTROL", "/run/user/1/keyring")
        XCTAssertEqual(
            Takeover.underUserManager(["x"], oneshot: false),
            ["systemd-run", "--user", "--quiet", "--collect", "--description=x", "--setenv=GNOME_KEYRING_CONTROL", "--", "x"])
    }

    func testKDEIsToldByTheDesktopOrItsFiles() {
        set("HOME", folder)
        set("XDG_CONFIG_HOME", nil)
        set("XDG_DATA_HOME", nil)
        set("XDG_CURRENT_DESKTOP", "GNOME")
        XCTAssertNil(Takeover.kdeReason(client: nil))
        set("XDG_CURRENT_DESKTOP", "ubuntu:kde")
        XCTAssertEqual(Takeover.kdeReason(client: nil), "XDG_CURRENT_DESKTOP is KDE")
        set("XDG_CURRENT_DESKTOP", nil)
        mkdir(folder + "/.config", 0o700)
        write(folder + "/.config/kwalletrc", "")
        XCTAssertEqual(Takeover.kdeReason(client: nil), folder + "/.config/kwalletrc is there")
    }

    func testProcessFacts() {
        XCTAssertEqual(Takeover.realUID(of: getpid()), getuid())
        XCTAssertNil(Takeover.realUID(of: -1))
        XCTAssertEqual(Takeover.date(0), "1970-01-01 00:00:00 UTC")
        XCTAssertEqual(Takeover.date(1_700_000_000), "2023-11-14 22:13:20 UTC")
        XCTAssertEqual(Takeover.program(), ProcFile.link("/proc/self/exe"))
    }

    func testSpawnedProgramsOutputAndStatus() throws {
        let result = try XCTUnwrap(Spawn.run(["sh", "-c", "echo out; echo err >&2; exit 3"]))
        XCTAssertEqual(result.status, 3)
        XCTAssertEqual(result.output, "out\nerr\n")
        XCTAssertEqual(Spawn.run(["sh", "-c", "read x; echo \"[$x]\""])?.output, "[]\n", "stdin is /dev/null")
        XCTAssertNil(Spawn.run(["/no/such/program"]))
        // Past its time it is killed: 124, as timeout(1) says.
        XCTAssertEqual(Spawn.run(["sleep", "30"], seconds: 0.2)?.status, 124)
    }
}
