/// The recovery key of a keychain sealed to a TPM: 128 random bits that open its class keys A and C
/// without the TPM (a dead TPM, a new machine, a forgotten password). Shown once, at enrolment,
/// as BitLocker shows its own: eight groups of six digits, each group a multiple of 11 holding 16
/// bits (so a mistyped or swapped digit is caught, and the group named, before anything is
/// tried; RecoveryKeyText.swift in KeychainTPMPolicy). High entropy needs no stretching: the key
/// is expanded with HMAC-SHA-256 only.
package struct RecoveryKey: Equatable, Sendable {
    package static let byteCount = 16

    package private(set) var bytes: Bytes

    package init(bytes: Bytes) {
        precondition(bytes.count == Self.byteCount)
        self.bytes = bytes
    }

    package static func generate() throws -> RecoveryKey { RecoveryKey(bytes: try Crypto.random(byteCount)) }

    package mutating func wipe() { bytes.wipe() }
}
