/// The conditions an item's kSecAttrAccessControl sets on its use: Apple's
/// SecAccessControlCreateFlags, with Apple's bit values, as the engine keeps them (attribute `accc`).
package struct AccessConditions: OptionSet, Hashable, Sendable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }

    package static let userPresence = AccessConditions(rawValue: 1 << 0)
    package static let biometryAny = AccessConditions(rawValue: 1 << 1)
    package static let biometryCurrentSet = AccessConditions(rawValue: 1 << 3)
    package static let devicePasscode = AccessConditions(rawValue: 1 << 4)
    package static let companion = AccessConditions(rawValue: 1 << 5)
    package static let or = AccessConditions(rawValue: 1 << 14)
    package static let and = AccessConditions(rawValue: 1 << 15)
    package static let privateKeyUsage = AccessConditions(rawValue: 1 << 30)
    package static let applicationPassword = AccessConditions(rawValue: 1 << 31)

    /// The conditions the presence authorizer answers for (polkit by default: it authenticates
    /// the user through its PAM stack, which decides between password and finger).
    package static let askingAuthorizer: AccessConditions = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode]
    package static let biometry: AccessConditions = [.biometryAny, .biometryCurrentSet]
    /// Every condition that needs someone at the machine.
    package static let needingAPerson: AccessConditions = askingAuthorizer.union([.companion, .applicationPassword])

    /// The conditions of an item, from its `accc` attribute (none when it has no access control).
    package init(of item: Item) {
        let raw = item.attributes[AttributeKey.accessControl]?.intValue ?? 0
        self.init(rawValue: UInt64(bitPattern: raw))
    }

    package var asksAuthorizer: Bool { !isDisjoint(with: .askingAuthorizer) }

    /// `.or` with a condition this machine always has a way to meet.
    private var hasAlternative: Bool { contains(.or) && !isDisjoint(with: [.userPresence, .devicePasscode, .applicationPassword]) }

    /// There is never a companion device: an item that needs one with no alternative can be used
    /// by nobody, whatever stored it (the gate fails closed on it).
    var needsAbsentCompanion: Bool { contains(.companion) && !hasAlternative }
    package var needsAPerson: Bool { !isDisjoint(with: .needingAPerson) }

    /// Refuses, as SecItemAdd does on a device without them, conditions this machine cannot meet:
    /// biometry without a finger enrolled in fprintd for the user, and a companion device (there is
    /// none on Linux). With `.or`, one condition that can be met is enough.
    func checkAvailable(fingersEnrolled: () -> Bool) throws {
        var unavailable: AccessConditions = []
        if contains(.companion) { unavailable.insert(.companion) }
        if !isDisjoint(with: .biometry) && !fingersEnrolled() { unavailable.formUnion(intersection(.biometry)) }
        guard !unavailable.isEmpty else { return }
        if hasAlternative { return }
        let what = unavailable.contains(.companion) ? "a companion device" : "biometry (no finger enrolled in fprintd)"
        throw KeychainError(.notAvailable, "the access control needs \(what), which this machine does not have")
    }
}
