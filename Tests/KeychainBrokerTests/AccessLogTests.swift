import KeychainBroker
import XCTest

/// The broker's ring of item keys given out or refused, per uid: every read adds an entry.
final class AccessLogTests: XCTestCase {
    func entry(_ n: Int, uid: UInt32 = 1000) -> AccessLogEntry {
        AccessLogEntry(
            time: UInt64(n), uid: uid, keychain: "/home/u/login.keychain-db", itemClass: "inet", label: "item \(n)", service: "host.example.com",
            account: "user", caller: "git-credential-keychain (pid 1)", chain: "git (pid 0)", decision: "trusted")
    }

    /// A read appends to the ring where it is: a copy of the whole ring on every read (its
    /// strings retained and released) took half the broker's time per read (bench/broker.sh).
    func testRecordingAppendsInPlace() {
        var log = AccessLog(toSyslog: false)
        log.record(entry(0))
        let storage = log.storageAddress(of: 1000)
        XCTAssertNotNil(storage)
        var moved = 0
        for n in 1..<2000 {
            log.record(entry(n))
            if log.storageAddress(of: 1000) != storage { moved += 1 }
        }
        XCTAssertEqual(moved, 0, "records that copied the ring")
    }

    func testKeepsTheNewestEntriesPerUid() {
        var log = AccessLog(toSyslog: false)
        for n in 0..<1000 { log.record(entry(n)) }
        log.record(entry(5, uid: 1001))
        XCTAssertEqual(log.entries(of: 1000, since: 0).map(\.time), (744..<1000).map(UInt64.init))
        XCTAssertEqual(log.entries(of: 1000, since: 990).count, 10)
        XCTAssertEqual(log.entries(of: 1001, since: 0).map(\.label), ["item 5"])
        XCTAssertEqual(log.all.count, AccessLog.perUid + 1)
        var restored = AccessLog(toSyslog: false)
        restored.restore(log.all)
        XCTAssertEqual(restored.entries(of: 1000, since: 0).map(\.time), (744..<1000).map(UInt64.init))
    }
}
