import KWalletItems
import XCTest

final class KWalletEntryTests: XCTestCase {
    /// KWallet's numbers travel on the bus (entryType, writeEntry): they must not drift.
    func testEntryTypesKeepKWalletsNumbers() {
        XCTAssertEqual(KWalletEntryType.allCases.map(\.rawValue), [0, 1, 2, 3])
        XCTAssertEqual(KWalletEntryType(rawValue: 3), .map)
        XCTAssertNil(KWalletEntryType(rawValue: 4))
    }
}
