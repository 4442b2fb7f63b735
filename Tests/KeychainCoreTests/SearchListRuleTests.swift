@testable import KeychainCore
import XCTest

/// SearchList.search: the one rule every front end follows over several keychains.
final class SearchListRuleTests: XCTestCase {
    private let locked = KeychainError.locked()

    func testFindsInOrderUpToTheLimit() throws {
        let found = try SearchList.search(["a", "b", "c"], limit: 3) { name, remaining -> [String] in
            Array(repeating: name, count: min(remaining ?? 2, 2))
        }
        XCTAssertEqual(found, ["a", "a", "b"])
    }

    func testAKeychainThatCannotBeSearchedIsPassedOver() throws {
        let found = try SearchList.search(["a", "b"]) { name, _ -> [String] in
            if name == "a" { throw locked }
            return [name]
        }
        XCTAssertEqual(found, ["b"])
    }

    func testNothingFoundIsTheFirstFailureElseNotFound() {
        XCTAssertThrowsError(
            try SearchList.search(["a", "b", "c"]) { name, _ -> [String] in
                if name == "a" { throw KeychainError(.itemNotFound) }
                if name == "b" { throw KeychainError(.decode, "b") }
                throw locked
            }
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .decode) }
        XCTAssertThrowsError(try SearchList.search(["a", "b"]) { _, _ -> [String] in [] }) {
            XCTAssertEqual(($0 as? KeychainError)?.code, .itemNotFound)
        }
    }

    func testThePersonsAnswerEndsTheSearch() {
        var searched: [String] = []
        XCTAssertThrowsError(
            try SearchList.search(["a", "b"]) { name, _ -> [String] in
                searched.append(name)
                throw KeychainError.presence(.userCanceled, "dismissed")
            }
        ) { XCTAssertEqual(($0 as? KeychainError)?.code, .userCanceled) }
        XCTAssertEqual(searched, ["a"])
    }
}
