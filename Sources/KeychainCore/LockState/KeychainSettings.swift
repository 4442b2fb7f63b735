/// `security set-keychain-settings`: how long WhenUnlocked stays open, and whether it closes with
/// the user's last session. Stored in the keybag under a MAC keyed from class key A.
package struct KeychainSettings: Equatable, Sendable {
    /// Seconds without use after which the WhenUnlocked key expires; 0 means never.
    package var idleTimeout: UInt32 = 0
    package var lockOnSessionEnd = true

    /// What a new keychain gets, and what is in force when the stored settings fail their MAC.
    package static let safeDefaults = KeychainSettings()

    package init(idleTimeout: UInt32 = 0, lockOnSessionEnd: Bool = true) {
        self.idleTimeout = idleTimeout
        self.lockOnSessionEnd = lockOnSessionEnd
    }

    package init(bytes: Bytes) throws {
        var r = ByteReader(bytes)
        idleTimeout = try r.u32()
        let flag = try r.u8()
        guard flag <= 1, r.isAtEnd else { throw KeychainError.decode("the keybag settings are damaged") }
        lockOnSessionEnd = flag == 1
    }

    /// These settings lock less than `current`: lock at logout turned off, or an idle timeout
    /// longer than the one in force, or none where there was one. A custodian asks for the
    /// password for such a change, not only an unlocked keychain (review 55).
    package func locksLess(than current: KeychainSettings) -> Bool {
        if current.lockOnSessionEnd, !lockOnSessionEnd { return true }
        return current.idleTimeout != 0 && (idleTimeout == 0 || idleTimeout > current.idleTimeout)
    }

    package var bytes: Bytes {
        var w = ByteWriter()
        w.u32(idleTimeout)
        w.u8(lockOnSessionEnd ? 1 : 0)
        return w.bytes
    }
}

/// Whether the settings in force could be checked against their MAC.
package enum SettingsIntegrity: Equatable, Sendable {
    /// The MAC verified under class key A.
    case verified
    /// The MAC did not verify: the settings were changed without the key; the safe defaults are
    /// in force until `set-keychain-settings` writes new ones.
    case damaged
    /// WhenUnlocked is locked, so the MAC cannot be checked; the stored settings are shown, and
    /// nothing acts on them until the next unlock checks them.
    case unverified
}
