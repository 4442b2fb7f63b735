import XCTest

@testable import KWalletBus

/// readEntryList's wildcards as kwalletd matches them (QRegularExpression's wildcard form): the
/// whole key, `/` included in `*` and `?`.
final class KWalletPatternTests: XCTestCase {
    private func match(_ pattern: String, _ key: String) -> Bool { KWalletPattern.matches(pattern, key) }

    func testStarsAndQuestionMarks() {
        XCTAssertTrue(match("*", ""))
        XCTAssertTrue(match("*", "any/thing"))
        XCTAssertTrue(match("mail*", "mail"))
        XCTAssertTrue(match("mail*", "mail.example.org"))
        XCTAssertFalse(match("mail*", "gmail"))
        XCTAssertTrue(match("*@example.org", "ann@example.org"))
        XCTAssertTrue(match("a?c", "abc"))
        XCTAssertTrue(match("a?c", "a/c"))
        XCTAssertFalse(match("a?c", "ac"))
        XCTAssertTrue(match("a*b*c", "a-x-b-y-c"))
        XCTAssertFalse(match("a*b*c", "a-x-c-y-b"))
        XCTAssertTrue(match("**a**", "bab"))
    }

    func testTheWholeKeyMustMatch() {
        XCTAssertFalse(match("abc", "abcd"))
        XCTAssertFalse(match("abc", "xabc"))
        XCTAssertTrue(match("abc", "abc"))
        XCTAssertFalse(match("", "a"))
        XCTAssertTrue(match("", ""))
    }

    func testSets() {
        XCTAssertTrue(match("[abc]x", "bx"))
        XCTAssertFalse(match("[abc]x", "dx"))
        XCTAssertTrue(match("[a-c]", "b"))
        XCTAssertFalse(match("[a-c]", "d"))
        XCTAssertTrue(match("[!a]", "b"))
        XCTAssertFalse(match("[!a]", "a"))
        XCTAssertTrue(match("[^a]", "b"))
        XCTAssertTrue(match("[]]", "]"), "a `]` first in a set is itself")
        XCTAssertTrue(match("[a-]", "-"))
        // No closing bracket: the `[` is itself.
        XCTAssertTrue(match("[ab", "[ab"))
        XCTAssertFalse(match("[ab", "a"))
    }

    /// Many stars cost pattern x key steps, never an exponential search: this returns.
    func testManyStarsEndWithoutBacktrackingForever() {
        let pattern = String(repeating: "*a", count: 40) + "b"
        XCTAssertFalse(match(pattern, String(repeating: "a", count: 200)))
        XCTAssertTrue(match(pattern, String(repeating: "a", count: 200) + "b"))
    }
}
