import XCTest

@testable import KeychainPeers

/// The pure parts of the broker's reading of a caller: what a maps line, a status file and a
/// file's facts are taken to say.
final class CallerPredicateTests: XCTestCase {
    func testMapsLines() throws {
        let program = "55d090a0a000-55d090a10000 r-xp 00002000 fe:00 254163                     /usr/bin/head"
        guard case .executable(let mapping) = ExecutableMappings.parse(Array(program.utf8)[...]) else { return XCTFail(program) }
        XCTAssertEqual(mapping.path, "/usr/bin/head")
        XCTAssertEqual(mapping.inode, 254163)
        XCTAssertEqual(mapping.device, ExecutableMappings.device(major: 0xfe, minor: 0))
        let spaced = "7f00-7f10 r-xp 00000000 08:01 12 /home/u/my lib.so (deleted)"
        guard case .executable(let deleted) = ExecutableMappings.parse(Array(spaced.utf8)[...]) else { return XCTFail(spaced) }
        XCTAssertEqual(deleted.path, "/home/u/my lib.so (deleted)")
        // Data, anonymous and pseudo mappings are not files that run.
        for line in [
            "55d090a08000-55d090a0a000 r--p 00000000 fe:00 254163 /usr/bin/head",
            "7ffd000-7ffe000 r-xp 00000000 00:00 0                          [vdso]",
            "7f000-7f100 rwxp 00000000 00:00 0 "
        ] {
            XCTAssertEqual(ExecutableMappings.parse(Array(line.utf8)[...]), .other, line)
        }
        for line in ["", "garbage", "1-2 r-xp 0 zz:00 12 /x", "1-2 r-x 0 08:01 12 /x", "1-2 r-xp 0 08:01 -1 /x"] {
            XCTAssertNil(ExecutableMappings.parse(Array(line.utf8)[...]), line)
        }
        // makedev as glibc and stat have it, large numbers included.
        XCTAssertEqual(ExecutableMappings.device(major: 8, minor: 1), 0x801)
        XCTAssertEqual(ExecutableMappings.device(major: 259, minor: 300), (259 << 8) | (300 & 0xff) | ((300 & ~0xff) << 12))
    }

    /// PROCMAP_QUERY (Linux 6.11) finds what the maps' text names, the same way: this process's
    /// files and a child's, a deleted one included.
    func testQueriedMappingsAreTheTextsOwn() throws {
        let maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        defer { close(maps) }
        guard case .found = ExecutableMappings.queried(maps) else { throw XCTSkip("no PROCMAP_QUERY in this kernel") }
        let scratch = try ScratchDirectory()
        let copy = scratch.path + "/sleep copy\nline"
        try scratch.copy("/usr/bin/sleep", to: copy)
        let child = try ChildProcess([copy, "1000"])
        defer { child.reap() }
        try child.waitForExec(of: copy)
        XCTAssertEqual(unlink(copy), 0)
        for path in ["/proc/self/maps", "/proc/\(child.pid)/maps"] {
            let queried = try XCTUnwrap(ExecutableMappings.read(path))
            XCTAssertEqual(queried, try XCTUnwrap(ExecutableMappings.read(path, querying: false)), path)
            XCTAssertGreaterThan(queried.count, 1, path)
        }
        let childs = try XCTUnwrap(ExecutableMappings.read("/proc/\(child.pid)/maps"))
        XCTAssertTrue(childs.contains { $0.path == copy.replacingOccurrences(of: "\n", with: "\\012") + " (deleted)" }, "\(childs)")
    }

    func testOwnMapsAreRead() throws {
        let mappings = try XCTUnwrap(ExecutableMappings.read("/proc/self/maps"))
        let program = try XCTUnwrap(ProcessLineage.executable(of: getpid()))
        XCTAssertTrue(mappings.contains { $0.path == program })
        XCTAssertEqual(Set(mappings.map { [$0.device, $0.inode] }).count, mappings.count)
    }

    func testStatusLines() {
        let text = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1001\t1000\t1000\nTracerPid:\t42\nGroups:\t27 100 \n"
        XCTAssertEqual(ProcessStatus.parse(Array(text.utf8)), ProcessStatus(tracer: 42, groups: [1000, 1001, 1000, 1000, 27, 100]))
        XCTAssertEqual(ProcessStatus.parse(Array("Gid:\t0\t0\t0\t0\nTracerPid:\t0\nGroups:\t\n".utf8))?.tracer, 0)
        XCTAssertNil(ProcessStatus.parse(Array("Gid:\t0\t0\t0\t0\nGroups:\t\n".utf8)))
        XCTAssertNotNil(ProcessStatus.read(of: getpid()))
    }

    /// The tracer as every request's check reads it (`ProcessStatus.tracer`): the number `parse`
    /// finds, without parsing the rest; nil without a number there.
    func testTheTracerAloneIsTheParsedOne() throws {
        let text = "Name:\tTracerPid: 7\nGid:\t1000\t1000\t1000\t1000\nTracerPid:\t42\nGroups:\t27 100 \n"
        XCTAssertEqual(ProcessStatus.tracer(in: Array(text.utf8)), 42)
        XCTAssertEqual(ProcessStatus.tracer(in: Array("TracerPid:\t0".utf8)), 0)
        XCTAssertEqual(ProcessStatus.tracer(in: Array("TracerPid:  2147483647\n".utf8)), Int32.max)
        for bad in ["Gid:\t0\n", "TracerPid:\t\n", "TracerPid:\t-1\n", "TracerPid:\t2147483648\n", "TracerPid:\t4x\n", ""] {
            XCTAssertNil(ProcessStatus.tracer(in: Array(bad.utf8)), bad)
        }
        let own = try XCTUnwrap(ProcessStatus.read(of: getpid()))
        XCTAssertEqual(CallerHandle(pid: getpid(), pidfd: nil).tracer, own.tracer)
    }

    func testFilePredicates() {
        func file(_ mode: UInt32, owner: UInt32 = 0, group: UInt32 = 0) -> FileFacts {
            FileFacts(device: 1, inode: 2, owner: owner, group: group, mode: mode, links: 1)
        }
        let user = FileWriter(uid: 1000, groups: [1000, 27])
        let root = FileWriter(uid: 0, groups: [0])
        XCTAssertTrue(FileTrust.isRootsOwn(file(0o100755)))
        XCTAssertFalse(FileTrust.isRootsOwn(file(0o100775)))
        XCTAssertFalse(FileTrust.isRootsOwn(file(0o100757)))
        XCTAssertFalse(FileTrust.isRootsOwn(file(0o100755, owner: 1000)))
        XCTAssertTrue(FileTrust.isSafeDirectory(file(0o040755), for: user))
        XCTAssertFalse(FileTrust.isSafeDirectory(file(0o100755), for: user), "not a directory")
        XCTAssertFalse(FileTrust.isSafeDirectory(file(0o041777), for: user), "sticky or not, anyone's")
        XCTAssertFalse(FileTrust.isSafeDirectory(file(0o040555, owner: 1000), for: user), "its owner can chmod")
        XCTAssertFalse(FileTrust.isSafeDirectory(file(0o040775, group: 27), for: user), "its group")
        XCTAssertTrue(FileTrust.isSafeDirectory(file(0o040775, group: 50), for: user), "another group")
        XCTAssertTrue(FileTrust.isSafeDirectory(file(0o040755, owner: 1001), for: user), "another user's: not this one's to change")
        XCTAssertTrue(FileTrust.isSafeDirectory(file(0o040755), for: root))
        XCTAssertFalse(FileTrust.isSafeDirectory(file(0o040777), for: root))
    }

    func testResolveWalksWithoutFollowingLinks() {
        let writer = FileWriter(uid: 65534, groups: [65534])
        guard case .file(let sleep) = FileTrust.resolve("/usr/bin/sleep", for: writer) else { return XCTFail("/usr/bin/sleep") }
        XCTAssertTrue(sleep.isRegularFile)
        XCTAssertEqual(FileTrust.resolve("/proc/self/exe", for: nil), .missing, "a link")
        XCTAssertEqual(FileTrust.resolve("/usr/bin/../bin/sleep", for: writer), .missing)
        XCTAssertEqual(FileTrust.resolve("usr/bin/sleep", for: writer), .missing)
        XCTAssertEqual(FileTrust.resolve("/usr//bin/sleep", for: writer), .missing)
        XCTAssertEqual(FileTrust.resolve("/tmp/anything", for: writer), .unsafeDirectory)
    }

    func testDisplayAndSummary() {
        XCTAssertEqual(Caller.displayable("/tmp/a\nb\u{202e}c"), "/tmp/a\\u{a}b\\u{202e}c")
        var caller = Caller(pid: 7, uid: 1000, entry: "exe:/usr/bin/python3.11", executable: "/usr/bin/python3.11")
        caller.chain = ["/usr/bin/bash (pid 6)", "/usr/sbin/sshd (pid 5)", "? (pid 4)"]
        caller.warnings = [.interpreter]
        XCTAssertEqual(caller.summary, "python3.11 (/usr/bin/python3.11: interpreter) ← bash ← sshd ← ?")
        XCTAssertFalse(caller.canMatchSilently)
        caller.warnings = []
        XCTAssertTrue(caller.canMatchSilently)
        XCTAssertEqual(Caller(pid: 9, uid: 0, warnings: [.unidentified]).summary, "pid 9 (?: unidentified)")
    }

    func testEntriesOfRealPaths() {
        XCTAssertEqual(CallerTrust.entry(forRealPath: "/usr/bin/git"), .entry("exe:/usr/bin/git"))
        XCTAssertEqual(CallerTrust.entry(forRealPath: "/snap/firefox/4173/usr/lib/firefox/firefox"), .entry("snap:firefox"))
        XCTAssertEqual(
            CallerTrust.entry(forRealPath: "/var/lib/flatpak/app/org.example.App/x86_64/stable/abc/files/bin/app"), .entry("flatpak:org.example.App"))
        XCTAssertEqual(CallerTrust.entry(forRealPath: "/var/lib/flatpak/runtime/org.gnome.Platform/x86_64/45/abc/files/bin/python3"), .unknown)
    }

    func testInterpreterNames() {
        let list = CallerTrust.defaultInterpreters
        for name in ["python3", "python3.11", "bash", "dash", "sh", "perl", "perl5.36.0", "node", "lua5.4", "ld-linux-x86-64.so.2", "busybox", "gdb"] {
            XCTAssertTrue(CallerTrust.isInterpreter(name, in: list), name)
        }
        for name in ["git", "ssh", "sleep", "python", "pythonista", "shred", "bashful"] where name != "python" {
            XCTAssertFalse(CallerTrust.isInterpreter(name, in: list), name)
        }
        XCTAssertTrue(CallerTrust.isInterpreter("python", in: list))
        XCTAssertFalse(CallerTrust.isInterpreter("python3", in: ["python"]))
    }
}
