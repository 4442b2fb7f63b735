import KeychainBroker
import XCTest

final class BrokerPathsTests: XCTestCase {
    func testTheSystemSocketIsUnderRun() {
        XCTAssertTrue(BrokerPaths.socket.hasPrefix("/run/keychain-broker/"))
    }
}
