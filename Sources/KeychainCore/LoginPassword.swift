/// After root resets a user's password, the keybag still opens with the old one. The PAM module
/// then keeps the new login password in the user's kernel keyring for a while (never in a file),
/// and the next `security unlock-keychain` with the old password re-keys the keychain to it.
extension KeychainStore {
    private var pendingName: String { "keychain:\(identifier):login" }

    /// Kernel storage only; expires on its own after `seconds`.
    public func rememberLoginPassword(_ password: Bytes, seconds: UInt32 = 3600) throws {
        try KernelKeyring.store(password, description: pendingName)
        KernelKeyring.setTimeout(pendingName, seconds: seconds)
    }

    public var hasRememberedLoginPassword: Bool { KernelKeyring.find(pendingName) != nil }

    /// Re-wraps the keybag from `current` to the remembered login password; false when there is
    /// none, or when it already is the keychain's password.
    @discardableResult
    public func adoptRememberedLoginPassword(current: Bytes) throws -> Bool {
        guard var login = KernelKeyring.read(pendingName) else { return false }
        defer { login.wipe() }
        KernelKeyring.remove(pendingName)
        if constantTimeEqual(login, current) { return false }
        try changePassword(from: current, to: login)
        return true
    }
}
