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

    /// Qt 5's QDataStream form of a QString: its UTF-16BE length in bytes, then UTF-16BE.
    static func qString(_ s: String) -> Bytes {
        let units = Array(s.utf16)
        return bigEndian(UInt32(units.count * 2)) + units.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    static func bigEndian(_ value: UInt32) -> Bytes {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
