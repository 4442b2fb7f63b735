/// Whoever holds a keychain's class keys when this process must not: `keychain-broker`, a system
/// service the user's processes cannot read, trace or replace (KeychainBroker's client is the
/// implementation; each front end installs it at start, as with the TPM and presence seams).
///
/// What crosses this seam is what a caller may hold: the subkeys that read and search attributes
/// (metadata, index), never a class key or its wrapping subkey. An item's key comes back only for
/// a caller its access list (`AccessList`, in the metadata the custodian opens itself) trusts, or
/// that the person let in. Every call may throw KeychainError; errSecInteractionNotAllowed when
/// the person would have to answer and cannot, errSecAuthFailed when they refused.
package protocol KeyCustodian: AnyObject, Sendable {
    /// Whether this custodian keeps the keys of `keybag`'s keychain. A keychain it does not keep
    /// (one sealed to a TPM, in this version) stays in the kernel keyring as before. Asked with
    /// no uuid and no fields before a keychain is made: whether it would keep a new one there.
    func keeps(_ keybag: CustodyKeybag) -> Bool

    /// The subkeys of the classes that are open now, what the custodian found of the keybag's
    /// settings (their MAC is under class key A), and the generation of the keys it holds. Each
    /// call restarts the idle clock.
    func state(of keybag: CustodyKeybag) throws -> CustodyState

    /// Whether the keys the custodian holds for this uid are still as they were when it gave a
    /// state marked `mark` (`CustodyState.mark`): a read of attributes alone then needs no
    /// `state` call to know that a lock elsewhere did not come in between. False when it
    /// cannot tell.
    func isUnchanged(since mark: UInt64) -> Bool

    /// A new keychain's keybag, made in the custodian: class keys A and C drawn there, wrapped
    /// under `password` and kept there unlocked (as a keychain is left after it is made), and
    /// `path` pinned to it. The engine writes the returned fields into the new file: no process
    /// of the user ever holds the new class keys.
    func create(password: Bytes, scrypt: ScryptParameters, path: String) throws -> [String: Bytes]

    /// Derives the keys from `password` in the custodian and keeps them: WhenUnlocked until a
    /// lock, the idle timeout or the end of the user's last session; AfterFirstUnlock until reboot.
    /// True when the custodian had never kept this keychain at this path: its class keys were
    /// then in the user's reach before (the kernel keyring), and a rotation replaces them.
    @discardableResult
    func unlock(_ keybag: CustodyKeybag, password: Bytes) throws -> Bool

    /// Checks a password without changing any state.
    func verify(_ keybag: CustodyKeybag, password: Bytes) throws

    /// Forgets WhenUnlocked (and its ThisDeviceOnly key).
    func lock(_ keybag: CustodyKeybag) throws

    /// The keybag's fields wrapped under `new`: a password change, made in the custodian.
    func changePassword(_ keybag: CustodyKeybag, from old: Bytes, to new: Bytes, scrypt: ScryptParameters) throws -> [String: Bytes]

    /// Starts a rotation (`security set-keychain-password --rotate-keys`): with the keys
    /// `password` opens, the custodian makes new class keys A, C and D and holds them aside,
    /// returning the new keybag's fields (wrapped under `newPassword`, else `password`) and the
    /// new classes' subkeys, to index the rows with. Nothing changes until `commitRotation`.
    func beginRotation(_ keybag: CustodyKeybag, password: Bytes, newPassword: Bytes?, scrypt: ScryptParameters) throws -> CustodyRotation

    /// `rows` (as stored) sealed again under the new keys of the rotation begun for `keychain`:
    /// new metadata and secret columns, at the same row ids. No secret leaves the custodian.
    func rotate(_ rows: [Row], keychain: Bytes) throws -> [Row]

    /// The new keys take the old ones' place, unlocked, once the engine wrote every row and the
    /// new keybag (`keybag`: its fields) in its transaction.
    func commitRotation(_ keybag: CustodyKeybag) throws

    /// The MAC of `settings` under class key A (held, or from `password`).
    func settingsMAC(_ keybag: CustodyKeybag, settings: Bytes, password: Bytes?) throws -> Bytes

    /// Wraps a new item's key for the row `request` names (its metadata already sealed under the
    /// metadata subkey): nothing is read, so nobody is asked.
    func wrap(_ itemKey: Bytes, for request: ItemKeyRequest) throws -> Bytes

    /// The row's item key, for a caller its access list trusts or the person let in. Like
    /// `checkBinding` and `wrap`, throws `CustodyGenerationChanged` when the request's generation
    /// (nonzero) is not that of the keys held now.
    func unwrap(_ request: ItemKeyRequest, interaction: CustodyInteraction) throws -> UnwrappedItemKey

    /// Whether the row's item key opens under its metadata (format 2's binding), without giving
    /// the key out: attribute-only reads check a row this way, and nobody is asked.
    func checkBinding(_ request: ItemKeyRequest) throws
}

/// A keychain as a custodian is shown it: its keybag's stored fields (the custodian parses and
/// checks them itself, and trusts none it did not check) and its file, for messages and the log.
package struct CustodyKeybag: Sendable {
    package var uuid: Bytes
    package var fields: [String: Bytes]
    package var path: String

    package init(uuid: Bytes, fields: [String: Bytes], path: String) {
        self.uuid = uuid
        self.fields = fields
        self.path = path
    }
}

/// The subkeys a caller may hold for one open class: enough to read and search attributes.
package struct ClientSubkeys: Sendable {
    package var metadata: Bytes
    package var index: Bytes

    package init(metadata: Bytes, index: Bytes) {
        self.metadata = metadata
        self.index = index
    }
}

package struct CustodyState: Sendable {
    /// The open classes' subkeys (A, C; Au, Cu in a later version).
    package var open: [LockClass: ClientSubkeys]
    /// nil while WhenUnlocked is locked; else whether the keybag's settings MAC verified under A.
    package var settingsVerified: Bool?
    /// Changes whenever the keys the custodian holds for this keychain change (an unlock, a lock,
    /// an idle timeout, a rotation, a forget), never back to an earlier value: a client that keeps
    /// this state sends it with each item request instead of asking for the state again, and is
    /// told when it no longer holds (`CustodyGenerationChanged`). 0: the custodian keeps none.
    package var generation: UInt64
    /// Where the custodian tells this process of every change of its keys (the broker's
    /// notices): what `isUnchanged(since:)` compares with. Not on the wire; nil where changes
    /// are not told.
    package var mark: UInt64?

    package init(open: [LockClass: ClientSubkeys], settingsVerified: Bool?, generation: UInt64 = 0) {
        self.open = open
        self.settingsVerified = settingsVerified
        self.generation = generation
    }
}

/// The custodian's keys for the keychain changed since the state the request's generation names:
/// the client asks for the state again (a lock then shows as one) and retries once.
package struct CustodyGenerationChanged: Error, Sendable {
    package init() {}
}

/// One row's item key, as the custodian is asked to wrap, unwrap or check it. The custodian
/// makes the additional data itself from these fields and its own keybag uuid.
package struct ItemKeyRequest: Sendable {
    package var keychain: Bytes
    package var rowID: Int64
    package var itemClass: ItemClass
    package var lockClass: LockClass
    /// The row's metadata ciphertext (row format 2), which holds the access list.
    package var metadata: Bytes
    /// The wrapped item key (empty for `wrap`).
    package var wrappedKey: Bytes
    /// The generation of the state the client read the row with (`CustodyState.generation`);
    /// 0 asks for no check.
    package var generation: UInt64

    package init(
        keychain: Bytes, rowID: Int64, itemClass: ItemClass, lockClass: LockClass, metadata: Bytes, wrappedKey: Bytes, generation: UInt64 = 0
    ) {
        self.keychain = keychain
        self.rowID = rowID
        self.itemClass = itemClass
        self.lockClass = lockClass
        self.metadata = metadata
        self.wrappedKey = wrappedKey
        self.generation = generation
    }
}

/// Whether the person may be asked for this read (kSecUseAuthenticationUI, an LAContext with
/// interactionNotAllowed, a helper run with no terminal).
package enum CustodyInteraction: Sendable, Equatable {
    case allowed
    case notAllowed
}

package struct UnwrappedItemKey: Sendable {
    package var key: Bytes
    /// Set when the person answered "Always allow": the item's list with the caller added (for an
    /// item older than lists, with what it was taken to trust as well), as the custodian made it
    /// from metadata it opened itself; the engine writes it with its next seal of the row.
    package var alwaysAllow: AccessList?

    package init(key: Bytes, alwaysAllow: AccessList? = nil) {
        self.key = key
        self.alwaysAllow = alwaysAllow
    }
}

/// A rotation begun in a custodian: the new keybag and the new classes' subkeys (A, C).
package struct CustodyRotation: Sendable {
    package var fields: [String: Bytes]
    package var open: [LockClass: ClientSubkeys]

    package init(fields: [String: Bytes], open: [LockClass: ClientSubkeys]) {
        self.fields = fields
        self.open = open
    }
}

extension KeyCustodian {
    package func isUnchanged(since mark: UInt64) -> Bool { false }
}
