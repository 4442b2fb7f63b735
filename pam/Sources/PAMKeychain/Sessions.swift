import KeychainCore

/// How many sessions the user has open, counted in the user's persistent kernel keyring so that
/// it lives exactly as long as the unlocked class keys it guards.
enum Sessions {
    static let name = "keychain-sessions"

    static var count: Int {
        guard let bytes = KernelKeyring.read(name) else { return 0 }
        return Int(String(decoding: bytes, as: UTF8.self)) ?? 0
    }

    static func set(_ value: Int) {
        if value <= 0 {
            KernelKeyring.remove(name)
        } else {
            try? KernelKeyring.store(Array(String(value).utf8), description: name)
        }
    }
}
