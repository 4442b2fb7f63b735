/// The five item classes of Keychain Services, by Apple's raw values.
package enum ItemClass: String, CaseIterable, Sendable {
    case genericPassword = "genp"
    case internetPassword = "inet"
    case certificate = "cert"
    case key = "keys"
    case identity = "idnt"

    /// Stored in the `class` column; numbers never change once a file exists.
    package var code: Int64 {
        switch self {
        case .genericPassword: return 1
        case .internetPassword: return 2
        case .certificate: return 3
        case .key: return 4
        case .identity: return 5
        }
    }

    /// Whether items of this class have the attribute `key`.
    package func has(_ key: String) -> Bool { AttributeSchema.kind(key, for: self) != nil }

    /// `value` checked and converted as the engine stores it for `key` (errSecParam if it cannot be).
    package func normalize(_ key: String, _ value: AttributeValue) throws -> AttributeValue {
        try AttributeSchema.normalize(key, value, for: self)
    }

    package init?(code: Int64) {
        // A switch, not a search of allCases: every row read asks, and allCases is a new array.
        switch code {
        case 1: self = .genericPassword
        case 2: self = .internetPassword
        case 3: self = .certificate
        case 4: self = .key
        case 5: self = .identity
        default: return nil
        }
    }
}

/// kSecAttrAccessible values. ThisDeviceOnly variants lock like their siblings; they differ in export.
package enum Protection: String, CaseIterable, Sendable {
    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    case always = "dk"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"
    case alwaysThisDeviceOnly = "dku"
    case whenPasscodeSetThisDeviceOnly = "akpu"

    package var lockClass: LockClass {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: return .whenUnlocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: return .afterFirstUnlock
        case .always, .alwaysThisDeviceOnly: return .always
        }
    }

    package var isThisDeviceOnly: Bool { rawValue.hasSuffix("u") }
}

/// The three states a class key can be in, as Apple's data-protection classes A, C and D.
package enum LockClass: Int64, CaseIterable, Sendable {
    /// Key in the kernel from unlock until lock.
    case whenUnlocked = 1
    /// Key in the kernel from the first unlock until reboot.
    case afterFirstUnlock = 2
    /// Key in the file: protected by file permissions only (Apple deprecated these).
    case always = 3
    /// In a keychain sealed to a TPM, the keys of WhenUnlocked and AfterFirstUnlock ThisDeviceOnly
    /// items: locked and unlocked with A and C, wrapped under the TPM-tangled key only (the
    /// recovery key does not open them; see TPMBinding.swift).
    case whenUnlockedThisDeviceOnly = 4
    case afterFirstUnlockThisDeviceOnly = 5

    package var letter: String {
        switch self {
        case .whenUnlocked: return "A"
        case .afterFirstUnlock: return "C"
        case .always: return "D"
        case .whenUnlockedThisDeviceOnly: return "Au"
        case .afterFirstUnlockThisDeviceOnly: return "Cu"
        }
    }
}
