@testable import KeychainCore
@_exported import KeychainTestSupport
import Glibc
import XCTest

func secretString(_ store: KeychainStore, _ q: Query) throws -> String {
    String(decoding: try store.find(q, includeSecret: true).first?.secret ?? [], as: UTF8.self)
}

/// The keybag's class key A as wrapped now (under the password, or the password and the TPM).
func wrappedKeyA(_ store: KeychainStore) throws -> Bytes {
    let stmt = try store.db.statement("SELECT value FROM keychain WHERE name = 'wrap.A'")
    defer { stmt.reset() }
    guard try stmt.step() else { return [] }
    return stmt.blob(0)
}

/// Whether the file's raw bytes hold `needle` anywhere, as a thief reading them would find it.
func fileHolds(_ path: String, _ needle: Bytes) -> Bool {
    let bytes = FileManagerless.read(path)
    guard !needle.isEmpty, bytes.count >= needle.count else { return false }
    return (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
}
