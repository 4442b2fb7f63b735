import Glibc
@testable import KeychainBroker
import KeychainCore
import KeychainTestSupport
import XCTest

/// No flood of dialogs: three refusals within a minute, and the caller is not asked for a minute.
final class QuestionLimitTests: XCTestCase {
    func testThreeRefusalsWithinAMinuteStopTheQuestionsForAMinute() {
        var limit = QuestionLimit()
        XCTAssertTrue(limit.allows("exe:/usr/bin/a", uid: 1000, now: 0))
        limit.refused("exe:/usr/bin/a", uid: 1000, now: 0)
        limit.refused("exe:/usr/bin/a", uid: 1000, now: 30)
        XCTAssertTrue(limit.allows("exe:/usr/bin/a", uid: 1000, now: 40))
        limit.refused("exe:/usr/bin/a", uid: 1000, now: 50)
        XCTAssertFalse(limit.allows("exe:/usr/bin/a", uid: 1000, now: 50))
        // A minute from the last refusal, not from the first.
        XCTAssertFalse(limit.allows("exe:/usr/bin/a", uid: 1000, now: 109))
        XCTAssertTrue(limit.allows("exe:/usr/bin/a", uid: 1000, now: 110))
        // Another program, or the same one for another user, is asked meanwhile.
        XCTAssertTrue(limit.allows("exe:/usr/bin/b", uid: 1000, now: 60))
        XCTAssertTrue(limit.allows("exe:/usr/bin/a", uid: 1001, now: 60))
    }

    func testRefusalsFurtherApartThanAMinuteDoNotAddUp() {
        var limit = QuestionLimit()
        for time in [0.0, 40, 80, 120, 160] {
            limit.refused("exe:/usr/bin/a", uid: 1000, now: time)
            XCTAssertTrue(limit.allows("exe:/usr/bin/a", uid: 1000, now: time), "\(time)")
        }
    }

    func testAnUnidentifiedCallerIsNamedWithoutItsPids() {
        XCTAssertEqual(QuestionLimit.key(entry: "exe:/usr/bin/git", summary: "git (pid 4)", chain: []), "exe:/usr/bin/git")
        let first = QuestionLimit.key(entry: nil, summary: "/home/u/copy (pid 12)", chain: ["/usr/bin/bash (pid 10)"])
        let again = QuestionLimit.key(entry: nil, summary: "/home/u/copy (pid 13)", chain: ["/usr/bin/bash (pid 10)"])
        XCTAssertEqual(first, "/home/u/copy < /usr/bin/bash")
        XCTAssertEqual(first, again)
    }

    func testTheCallersKeptAreBounded() {
        var limit = QuestionLimit()
        limit.capacity = 2
        for (time, caller) in [(0.0, "a"), (1, "b"), (2, "c")] {
            for _ in 0..<3 { limit.refused(caller, uid: 1, now: time) }
        }
        XCTAssertTrue(limit.allows("a", uid: 1, now: 3))
        XCTAssertFalse(limit.allows("b", uid: 1, now: 3))
        XCTAssertFalse(limit.allows("c", uid: 1, now: 3))
    }
}

extension CustodyTests {
    /// The broker, not the client (the caller itself), holds a caller back after three denials.
    func testACallerDeniedThreeTimesIsNotAskedForAMinute() throws {
        _ = try store.add(generic("bob", secret: "hidden"))
        let (request, _) = try lastRow()
        let broker = service(stranger)
        _ = try broker.handle(.unlock(keybag(store), password: Array("pw".utf8)), from: me)
        func ask() throws -> BrokerReply { try broker.handle(.unwrap(request, interaction: .allowed, answer: .none, password: []), from: me) }
        for _ in 0..<3 {
            guard case .question = try ask() else { return XCTFail("not asked") }
            assertCode(.authFailed) { try broker.handle(.unwrap(request, interaction: .allowed, answer: .deny, password: []), from: self.me) }
        }
        assertCode(.authFailed) { try ask() }
        // Not even with the password: nobody was asked.
        assertCode(.authFailed) { try broker.handle(.unwrap(request, interaction: .allowed, answer: .once, password: Array("pw".utf8)), from: self.me) }
        XCTAssertEqual(broker.state.log.entries(of: 1000, since: 0).suffix(2).map(\.decision), ["denied: asked too often", "denied: asked too often"])
        // A request that may not ask is refused as such: nobody would have been asked anyway.
        assertCode(.interactionNotAllowed) {
            try broker.handle(.unwrap(request, interaction: .notAllowed, answer: .none, password: []), from: self.me)
        }
        now += 60
        guard case .question = try ask() else { return XCTFail("not asked after a minute") }
    }
}
