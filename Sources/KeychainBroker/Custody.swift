import Glibc
import KeychainCore

/// One keychain's class keys as the broker holds them for one uid: A while WhenUnlocked is open,
/// C from the first unlock until reboot, and the keybag they came from (answers are checked
/// against its password).
package struct Custody {
    package var uid: UInt32
    package var uuid: Bytes
    package var path: String
    package var fields: [String: Bytes]
    package var a: Bytes?
    package var c: Bytes?
    /// Wall-clock seconds of the last use (state, unwrap, wrap): the idle timeout counts from it.
    package var lastUse: UInt64

    package var keybag: Keybag? { try? Keybag(fields: fields) }

    package func classKey(_ lockClass: LockClass) -> Bytes? {
        switch lockClass {
        case .whenUnlocked: return a
        case .afterFirstUnlock: return c
        default: return nil
        }
    }

    /// The subkeys a client may hold for the open classes.
    package var subkeys: [LockClass: ClientSubkeys] {
        var open: [LockClass: ClientSubkeys] = [:]
        for lockClass in [LockClass.whenUnlocked, .afterFirstUnlock] {
            guard let key = classKey(lockClass) else { continue }
            open[lockClass] = ClientSubkeys(
                metadata: Crypto.deriveKey(key, purpose: "metadata"), index: Crypto.deriveKey(key, purpose: "index"))
        }
        return open
    }

    package mutating func lock() {
        a?.wipe()
        a = nil
    }

    package mutating func wipe() {
        a?.wipe()
        c?.wipe()
        a = nil
        c = nil
    }
}

/// The key of the custody table.
package struct CustodyID: Hashable, Sendable {
    package var uid: UInt32
    package var uuid: Bytes

    package init(uid: UInt32, uuid: Bytes) {
        self.uid = uid
        self.uuid = uuid
    }
}

/// The keybag the broker first unlocked at a path for a uid (trust on first use): another keybag
/// there is refused until this one is forgotten with its own password.
package struct Pin: Equatable, Sendable {
    package var uuid: Bytes
    package var fields: [String: Bytes]

    package init(uuid: Bytes, fields: [String: Bytes]) {
        self.uuid = uuid
        self.fields = fields
    }
}

/// Wrong passwords per uid: at most `limit` in `window` seconds, after which every password of
/// that uid is refused unchecked (no scrypt run) until the oldest ages out.
package struct PasswordRateLimit: Sendable {
    package var limit = 5
    package var window: Double = 60
    private var failures: [UInt32: [Double]] = [:]

    package init() {}

    package mutating func allows(_ uid: UInt32, now: Double) -> Bool {
        let recent = (failures[uid] ?? []).filter { now - $0 < window }
        failures[uid] = recent.isEmpty ? nil : recent
        return recent.count < limit
    }

    package mutating func failed(_ uid: UInt32, now: Double) {
        failures[uid, default: []].append(now)
    }
}
