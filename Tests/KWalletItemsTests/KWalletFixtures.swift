import Foundation
import KWalletItems
import KeychainCore

/// The wallets in Tests/kde/kwl-fixtures: written by the real kwalletd5 (and, for the kinds it no
/// longer writes, by an independent writer from its source), by Tests/kde/make-kwl-fixtures.sh.
enum KWalletFixtures {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../kde/kwl-fixtures").standardized

    /// The passwords make-kwl-fixtures.sh gave them.
    static let kdewalletPassword = "kwl fixture pässword"
    static let workPassword = "work password"

    static func bytes(_ name: String) throws -> Bytes {
        Bytes(try Data(contentsOf: folder.appendingPathComponent(name)))
    }
}
