internal import CLinux
import Glibc

/// The user's persistent keyring (keyrings(7), persistent-keyring(7)): it outlives sessions and is
/// forgotten at reboot, which is exactly the lifetime of an AfterFirstUnlock class key.
package struct KernelKeyring: Sendable {
    // From <linux/keyctl.h>.
    private static let keyctlSetPerm: Int32 = 5
    private static let keyctlDescribe: Int32 = 6
    private static let keyctlLink: Int32 = 8
    private static let keyctlUnlink: Int32 = 9
    private static let keyctlSearch: Int32 = 10
    private static let keyctlRead: Int32 = 11
    private static let keyctlSetTimeout: Int32 = 15
    private static let keyctlInvalidate: Int32 = 21
    private static let keyctlGetPersistent: Int32 = 22
    private static let processKeyring: Int32 = -2
    private static let serials = SerialCache()

    /// The keyring's serial, or an error saying in one line why the kernel refused it.
    package static func persistent() throws -> Int32 {
        let id = clinux_keyctl(keyctlGetPersistent, UInt(bitPattern: -1), UInt(bitPattern: Int(processKeyring)), 0, 0)
        guard id >= 0 else {
            throw KeychainError(.notAvailable, "the kernel keyring is not available here (\(String(cString: strerror(errno)))); unlock in-process instead")
        }
        return Int32(id)
    }

    /// Stores (or replaces) a user key in the persistent keyring.
    package static func store(_ payload: Bytes, description: String) throws {
        let ring = try persistent()
        let id = clinux_add_key("user", description, payload, payload.count, ring)
        serials.forget(description)
        guard id >= 0 else {
            let reason = errno == EDQUOT ? "key quota exceeded" : String(cString: strerror(errno))
            throw KeychainError(.notAvailable, "cannot store a key in the kernel keyring: \(reason)")
        }
    }

    /// The key's serial if it is present and not expired.
    package static func find(_ description: String) -> Int32? {
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
    package static func read(_ description: String) -> Bytes? { readEntry(description)?.key }

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

    private static func read(serial id: Int32, capacity: Int = 64) -> Bytes? {
        var buffer = Bytes(repeating: 0, count: capacity)
        let n = buffer.withUnsafeMutableBytes { raw in
            clinux_keyctl(keyctlRead, UInt(id), UInt(bitPattern: raw.baseAddress), UInt(raw.count), 0)
        }
        guard n >= 0, n <= buffer.count else {
            buffer.wipe()
            return nil
        }
        // Shortened in place: a copy would leave one more heap block with the key in it. The
        // kernel wrote only the first n bytes; the rest are the zeros the buffer began with.
        buffer.removeSubrange(n...)
        return buffer
    }

    /// Invalidation removes the key from every keyring at once, not only from this one.
    package static func remove(_ description: String) {
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
    package static func setTimeout(_ description: String, seconds: UInt32) {
        guard let id = find(description) else { return }
        _ = clinux_keyctl(keyctlSetTimeout, UInt(id), UInt(seconds), 0, 0)
    }
}

// MARK: Keys that root leaves for a user

extension KernelKeyring {
    /// Who owns a key, from KEYCTL_DESCRIBE ("type;uid;gid;perm;description").
    package struct KeyInfo: Sendable, Equatable {
        package var serial: Int32
        package var type: String
        package var uid: uid_t
        package var description: String
    }

    package static func describe(serial: Int32) -> KeyInfo? {
        var buffer = Bytes(repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { raw in
            clinux_keyctl(keyctlDescribe, UInt(bitPattern: Int(serial)), UInt(bitPattern: raw.baseAddress), UInt(raw.count), 0)
        }
        guard n > 0, n <= buffer.count else { return nil }
        // The kernel counts the terminating NUL; the description may itself hold ';'.
        let fields = buffer[0..<(n - 1)].split(separator: UInt8(ascii: ";"), maxSplits: 4, omittingEmptySubsequences: false)
        guard fields.count == 5, let uid = UInt32(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return KeyInfo(
            serial: serial, type: String(decoding: fields[0], as: UTF8.self), uid: uid,
            description: String(decoding: fields[4], as: UTF8.self))
    }

    /// The keys linked directly in the caller's persistent keyring (not in keyrings nested in it,
    /// where a search would also look).
    package static func members() -> [KeyInfo] {
        guard let ring = try? persistent() else { return [] }
        return serials(in: Int(ring)).compactMap { describe(serial: $0) }
    }

    private static func serials(in ring: Int) -> [Int32] {
        // A user may hold at most 200 keys (kernel.keys.maxkeys).
        var serials = [Int32](repeating: 0, count: 1024)
        let n = serials.withUnsafeMutableBytes { raw in
            clinux_keyctl(keyctlRead, UInt(bitPattern: ring), UInt(bitPattern: raw.baseAddress), UInt(raw.count), 0)
        }
        return n < 0 ? [] : Array(serials.prefix(min(n, serials.count * 4) / 4))
    }

    /// A key's payload by serial, up to `capacity` bytes.
    package static func read(_ key: KeyInfo, capacity: Int) -> Bytes? { read(serial: key.serial, capacity: capacity) }

    /// Invalidation removes the key from every keyring at once.
    package static func invalidate(_ key: KeyInfo) {
        _ = clinux_keyctl(keyctlInvalidate, UInt(bitPattern: Int(key.serial)), 0, 0, 0)
    }

    /// Root only: the payload of the `user` key owned by root named `description` in `uid`'s
    /// persistent keyring (as `storeOwnedByRoot` left it), if it is still there.
    package static func readOwnedByRoot(description: String, forUser uid: uid_t, capacity: Int) -> Bytes? {
        guard geteuid() == 0 else { return nil }
        let ring = clinux_keyctl(keyctlGetPersistent, UInt(uid), UInt(bitPattern: Int(processKeyring)), 0, 0)
        guard ring >= 0 else { return nil }
        defer { _ = clinux_keyctl(keyctlUnlink, UInt(ring), UInt(bitPattern: Int(processKeyring)), 0, 0) }
        for serial in serials(in: ring) {
            guard let key = describe(serial: serial), key.type == "user", key.uid == 0, key.description == description else { continue }
            return read(serial: serial, capacity: capacity)
        }
        return nil
    }

    /// Root only: puts a `user` key owned by root (uid 0) in `uid`'s persistent keyring. The user's
    /// processes possess it there and may read it, search it and invalidate it, but cannot change
    /// its payload, its permissions or its timeout; nor can they make a key of their own that looks
    /// like it, because the kernel sets a key's owner from its creator and only CAP_SYS_ADMIN may
    /// chown a key. Replaces any key of that description already there, whoever made it.
    package static func storeOwnedByRoot(_ payload: Bytes, description: String, forUser uid: uid_t, seconds: UInt32) throws {
        guard geteuid() == 0 else { throw KeychainError(.notAvailable, "only root can leave a key owned by root") }
        func failure(_ what: String) -> KeychainError {
            KeychainError(.notAvailable, "cannot leave a key for uid \(uid): \(what): \(String(cString: strerror(errno)))")
        }
        // Made and sealed in this process's own keyring, out of the user's reach, then linked:
        // the user never sees the key while it is still writable.
        let key = clinux_add_key("user", description, payload, payload.count, processKeyring)
        guard key >= 0 else { throw failure("add_key") }
        defer { _ = clinux_keyctl(keyctlUnlink, UInt(key), UInt(bitPattern: Int(processKeyring)), 0, 0) }
        let possessorViewReadSearch: UInt = 0x0b00_0000
        let ownerViewReadSearchLink: UInt = 0x001b_0000
        guard clinux_keyctl(keyctlSetTimeout, UInt(key), UInt(seconds), 0, 0) == 0,
            clinux_keyctl(keyctlSetPerm, UInt(key), possessorViewReadSearch | ownerViewReadSearchLink, 0, 0) == 0
        else {
            _ = clinux_keyctl(keyctlInvalidate, UInt(key), 0, 0, 0)
            throw failure("sealing the key")
        }
        let ring = clinux_keyctl(keyctlGetPersistent, UInt(uid), UInt(bitPattern: Int(processKeyring)), 0, 0)
        guard ring >= 0 else { throw failure("the user's persistent keyring") }
        defer { _ = clinux_keyctl(keyctlUnlink, UInt(ring), UInt(bitPattern: Int(processKeyring)), 0, 0) }
        for old in serials(in: ring) where describe(serial: old)?.description == description {
            _ = clinux_keyctl(keyctlInvalidate, UInt(bitPattern: Int(old)), 0, 0, 0)
        }
        guard clinux_keyctl(keyctlLink, UInt(key), UInt(ring), 0, 0) == 0 else {
            _ = clinux_keyctl(keyctlInvalidate, UInt(key), 0, 0, 0)
            throw failure("linking the key")
        }
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
