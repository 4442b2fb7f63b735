import CLinux
import Glibc

/// The user's persistent keyring (keyrings(7), persistent-keyring(7)): it outlives sessions and is
/// forgotten at reboot, which is exactly the lifetime of an AfterFirstUnlock class key.
public struct KernelKeyring: Sendable {
    // From <linux/keyctl.h>.
    private static let keyctlUnlink: Int32 = 9
    private static let keyctlSearch: Int32 = 10
    private static let keyctlRead: Int32 = 11
    private static let keyctlSetTimeout: Int32 = 15
    private static let keyctlInvalidate: Int32 = 21
    private static let keyctlGetPersistent: Int32 = 22
    private static let processKeyring: Int32 = -2
    private static let serials = SerialCache()

    /// The keyring's serial, or an error saying in one line why the kernel refused it.
    public static func persistent() throws -> Int32 {
        let id = clinux_keyctl(keyctlGetPersistent, UInt(bitPattern: -1), UInt(bitPattern: Int(processKeyring)), 0, 0)
        guard id >= 0 else {
            throw KeychainError(.notAvailable, "the kernel keyring is not available here (\(String(cString: strerror(errno)))); unlock in-process instead")
        }
        return Int32(id)
    }

    /// Stores (or replaces) a user key in the persistent keyring.
    public static func store(_ payload: Bytes, description: String) throws {
        let ring = try persistent()
        let id = clinux_add_key("user", description, payload, payload.count, ring)
        serials.forget(description)
        guard id >= 0 else {
            let reason = errno == EDQUOT ? "key quota exceeded" : String(cString: strerror(errno))
            throw KeychainError(.notAvailable, "cannot store a key in the kernel keyring: \(reason)")
        }
    }

    /// The key's serial if it is present and not expired.
    public static func find(_ description: String) -> Int32? {
        guard let ring = try? persistent() else { return nil }
        let id = description.withCString { desc in
            "user".withCString { type in
                clinux_keyctl(keyctlSearch, UInt(bitPattern: Int(ring)), UInt(bitPattern: type), UInt(bitPattern: desc), 0)
            }
        }
        guard id >= 0 else {
            serials.forget(description)
            return nil
        }
        serials.remember(description, Int32(id))
        return Int32(id)
    }

    /// The key's payload. Every call asks the kernel, since another process may have locked the
    /// keychain a moment ago; a serial found earlier makes that one KEYCTL_READ instead of three
    /// calls, and an invalidated, revoked or expired key fails that read, which sends us back to
    /// the search.
    public static func read(_ description: String) -> Bytes? { readEntry(description)?.key }

    /// The key's payload and the serial it was read from, so that a key found wrong can be
    /// removed without touching one stored under the same name a moment later.
    static func readEntry(_ description: String) -> (serial: Int32, key: Bytes)? {
        if let id = serials.serial(of: description) {
            if let key = read(serial: id) { return (id, key) }
            serials.forget(description)
        }
        guard let id = find(description), let key = read(serial: id) else { return nil }
        return (id, key)
    }

    private static func read(serial id: Int32) -> Bytes? {
        var buffer = Bytes(repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { raw in
            clinux_keyctl(keyctlRead, UInt(id), UInt(bitPattern: raw.baseAddress), UInt(raw.count), 0)
        }
        guard n >= 0, n <= buffer.count else {
            buffer.wipe()
            return nil
        }
        let key = Array(buffer[0..<n])
        buffer.wipe()
        return key
    }

    /// Invalidation removes the key from every keyring at once, not only from this one.
    public static func remove(_ description: String) {
        defer { serials.forget(description) }
        while let id = find(description) {
            if clinux_keyctl(keyctlInvalidate, UInt(id), 0, 0, 0) < 0 {
                if let ring = try? persistent() {
                    _ = clinux_keyctl(keyctlUnlink, UInt(id), UInt(bitPattern: Int(ring)), 0, 0)
                }
                return
            }
        }
    }

    /// Invalidates one key by serial: a key of the same name stored since is left alone.
    static func remove(serial id: Int32, description: String) {
        serials.forget(description)
        if clinux_keyctl(keyctlInvalidate, UInt(id), 0, 0, 0) < 0, let ring = try? persistent() {
            _ = clinux_keyctl(keyctlUnlink, UInt(id), UInt(bitPattern: Int(ring)), 0, 0)
        }
    }

    /// Seconds until the kernel forgets the key; 0 clears the timeout.
    public static func setTimeout(_ description: String, seconds: UInt32) {
        guard let id = find(description) else { return }
        _ = clinux_keyctl(keyctlSetTimeout, UInt(id), UInt(seconds), 0, 0)
    }
}

/// Serials of keys this process has found, by description. Only ever a shortcut to a KEYCTL_READ
/// the kernel still checks; dropped whenever the effective uid changes (the PAM module switches
/// identity) so one user's serial is never tried for another.
private final class SerialCache: @unchecked Sendable {
    private let mutex = Mutex()
    private var serials: [String: Int32] = [:]
    private var uid = geteuid()

    func serial(of description: String) -> Int32? {
        mutex.withLock {
            forgetAllIfIdentityChanged()
            return serials[description]
        }
    }

    func remember(_ description: String, _ serial: Int32) {
        mutex.withLock {
            forgetAllIfIdentityChanged()
            serials[description] = serial
        }
    }

    private func forgetAllIfIdentityChanged() {
        guard uid != geteuid() else { return }
        serials.removeAll()
        uid = geteuid()
    }

    func forget(_ description: String) { mutex.withLock { _ = serials.removeValue(forKey: description) } }
}
