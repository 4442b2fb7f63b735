import Glibc

/// A login password that root set without the old one (`passwd USER` as root: PAM's chauthtok
/// with no old password). The keybag still opens with the old password only, so the PAM module,
/// as root, leaves the new login password in the user's persistent kernel keyring, in a key
/// owned by root (see `KernelKeyring.storeOwnedByRoot`): the user's processes can read it, but
/// none of them can make one, since only a root process can own a key. The next
/// `security unlock-keychain` that proves the keychain's current password re-keys it to the
/// login password. Nothing else ever leads to a re-key: a login whose password does not open the
/// keychain only logs.
///
/// A MAC would not do here: a key that the user's processes can compute without the keychain's
/// password, a process running as the user can compute as well, and root at reset time has no
/// class key to MAC with. The kernel's record of who created the key is what cannot be forged.
package struct LoginPasswordReset: Sendable {
    /// How long the new login password waits in the kernel for the keychain's owner.
    package static let lifetime: UInt32 = 86_400
    private static let magic = "keychain-login-reset 1"

    /// The keychain it is meant for (`KeychainStore.identifier`, from the keybag's uuid).
    package let keychain: String
    /// When root reset the password, in seconds since 1970.
    package let time: Int
    private(set) var password: Bytes

    package init(password: Bytes, keychain: String, time: Int = Int(SystemClock.now())) {
        self.password = password
        self.keychain = keychain
        self.time = time
    }

    static func description(keychain: String) -> String { "keychain:\(keychain):login-reset" }

    private var payload: Bytes { Array("\(Self.magic)\n\(time)\n\(keychain)\n".utf8) + password }

    private init?(payload: Bytes) {
        let parts = payload.split(separator: UInt8(ascii: "\n"), maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, String(decoding: parts[0], as: UTF8.self) == Self.magic,
            let time = Int(String(decoding: parts[1], as: UTF8.self)),
            !parts[3].isEmpty, !parts[3].contains(0)
        else { return nil }
        self.init(password: Array(parts[3]), keychain: String(decoding: parts[2], as: UTF8.self), time: time)
    }

    /// Root only, in the PAM module's own process (never its worker, which runs as the user).
    package func remember(forUser uid: uid_t) throws {
        var bytes = payload
        defer { bytes.wipe() }
        try KernelKeyring.storeOwnedByRoot(bytes, description: Self.description(keychain: keychain), forUser: uid, seconds: Self.lifetime)
    }

    /// Root only: the reset root left for `keychain` in `uid`'s persistent keyring, if any.
    package static func left(forUser uid: uid_t, keychain: String) -> LoginPasswordReset? {
        guard var bytes = KernelKeyring.readOwnedByRoot(description: description(keychain: keychain), forUser: uid, capacity: 4096)
        else { return nil }
        defer { bytes.wipe() }
        guard var reset = LoginPasswordReset(payload: bytes) else { return nil }
        guard reset.keychain == keychain else {
            reset.wipe()
            return nil
        }
        return reset
    }

    /// Whether `password` is the one root set, compared in constant time.
    package func isPassword(_ password: Bytes) -> Bool { constantTimeEqual(self.password, password) }

    /// The reset waiting for `keychain` in the caller's persistent keyring, if one was left by root,
    /// names this keychain and is less than `lifetime` old. Keys of that name the user's own
    /// processes made are ignored.
    static func pending(keychain: String, now: Int = Int(SystemClock.now())) -> LoginPasswordReset? {
        let name = description(keychain: keychain)
        for key in KernelKeyring.members() where key.type == "user" && key.uid == 0 && key.description == name {
            guard var bytes = KernelKeyring.read(key, capacity: 4096) else { continue }
            defer { bytes.wipe() }
            guard var reset = LoginPasswordReset(payload: bytes) else { continue }
            guard reset.keychain == keychain, reset.time <= now + 60, now - reset.time <= Int(lifetime) else {
                reset.wipe()
                continue
            }
            return reset
        }
        return nil
    }

    /// Drops every key of this name, whoever made it.
    static func discard(keychain: String) {
        let name = description(keychain: keychain)
        for key in KernelKeyring.members() where key.description == name { KernelKeyring.invalidate(key) }
    }

    package mutating func wipe() { password.wipe() }

    /// "2026-11-22 14:05:03 UTC"
    package var timeDescription: String {
        var t = time_t(time)
        var parts = tm()
        var buffer = [CChar](repeating: 0, count: 64)
        guard gmtime_r(&t, &parts) != nil, strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S UTC", &parts) > 0 else { return "\(time)" }
        return String(cString: buffer)
    }
}

extension KeychainStore {
    /// The login password root set for this keychain's owner, if one is waiting (see `LoginPasswordReset`).
    package var pendingLoginPasswordReset: LoginPasswordReset? { LoginPasswordReset.pending(keychain: identifier) }

    package var hasPendingLoginPasswordReset: Bool {
        guard var reset = pendingLoginPasswordReset else { return false }
        reset.wipe()
        return true
    }

    /// Re-wraps the keybag from `current` (just proven by an unlock) to the login password root set,
    /// and drops the record. `announce` receives one line saying what is about to happen, before
    /// anything changes. False when no reset is waiting or it already is the keychain's password.
    @discardableResult
    package func adoptLoginPasswordReset(current: Bytes, announce: (String) -> Void) throws -> Bool {
        guard var reset = pendingLoginPasswordReset else { return false }
        defer { reset.wipe() }
        if reset.isPassword(current) {
            discardLoginPasswordReset()
            return false
        }
        announce("the login password was reset by root at \(reset.timeDescription); this keychain is re-keyed from its current password to it")
        try changePassword(from: current, to: reset.password)
        discardLoginPasswordReset()
        return true
    }

    /// Forgets a waiting reset, e.g. once the login password is seen to open the keychain.
    package func discardLoginPasswordReset() { LoginPasswordReset.discard(keychain: identifier) }
}
