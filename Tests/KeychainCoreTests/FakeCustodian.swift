@testable import KeychainCore
import XCTest

/// A custodian in this process, standing in for keychain-broker: it keeps the class keys, hands
/// out only the metadata and index subkeys, and answers each unwrap as `decision` says. It
/// records everything it gave out, so a test can show that no wrapping key ever left it.
final class FakeCustodian: KeyCustodian, @unchecked Sendable {
    enum Decision {
        /// The list trusts the caller.
        case allow
        /// The person refused.
        case deny
        /// The person answered "Always allow" for `entry`.
        case alwaysAllow(AccessList.Entry)
        /// The person would have to be asked: allowed when asking is, else not allowed.
        case ask
    }

    var decision = Decision.allow
    var keepsKeychains = true
    private(set) var unwraps = 0
    private(set) var wraps = 0
    private(set) var bindingChecks = 0
    /// Keychains made here (`create`), and unlocks with a password.
    private(set) var created: [Bytes] = []
    private(set) var unlocks = 0
    private(set) var interactions: [CustodyInteraction] = []
    /// Called at each unwrap, before it is answered.
    var onUnwrap: ((CustodyInteraction) -> Void)?
    /// Every key this custodian gave a client.
    private(set) var handedOut: [Bytes] = []
    /// The access list of the last row it unwrapped (nil: a legacy item).
    private(set) var lastList: AccessList?
    private var keys: [Bytes: [LockClass: Bytes]] = [:]
    /// Moves on with every change of the keys held, as keychain-broker's (`CustodyState.generation`).
    private(set) var generation: UInt64 = 1
    /// `state` calls, and every call a client made (state, wrap, unwrap, checkBinding).
    private(set) var stateCalls = 0
    private(set) var calls = 0
    /// Tells the client of every change of its keys, as keychain-broker's notices do: its states
    /// carry a mark, unchanged while the generation is.
    var tellsChanges = false

    /// Another process locks the keychain (`security lock-keychain` elsewhere).
    func lockElsewhere(_ uuid: Bytes) {
        keys[uuid]?[.whenUnlocked] = nil
        generation += 1
    }

    /// The custodian's check of an item request's generation.
    private func requireCurrent(_ request: ItemKeyRequest) throws {
        calls += 1
        if request.generation != 0, request.generation != generation { throw CustodyGenerationChanged() }
    }

    func keeps(_ keybag: CustodyKeybag) -> Bool { keepsKeychains }

    private func bag(_ keybag: CustodyKeybag) throws -> Keybag {
        let bag = try Keybag(fields: keybag.fields)
        guard bag.uuid == keybag.uuid else { throw KeychainError(.authFailed, "another keychain at this path") }
        return bag
    }

    /// The class keys this custodian holds for `uuid`: for tests to compare with what the client saw.
    func classKeys(_ uuid: Bytes) -> [Bytes] { Array((keys[uuid] ?? [:]).values) }

    func state(of keybag: CustodyKeybag) throws -> CustodyState {
        stateCalls += 1
        calls += 1
        let bag = try bag(keybag)
        var open: [LockClass: ClientSubkeys] = [:]
        for (lockClass, key) in keys[bag.uuid] ?? [:] {
            let subkeys = ClientSubkeys(
                metadata: Crypto.deriveKey(key, purpose: "metadata"), index: Crypto.deriveKey(key, purpose: "index"))
            handedOut += [subkeys.metadata, subkeys.index]
            open[lockClass] = subkeys
        }
        let settings = keys[bag.uuid]?[.whenUnlocked].map { bag.verifiedSettings(a: $0) != nil }
        var state = CustodyState(open: open, settingsVerified: settings, generation: generation)
        if tellsChanges { state.mark = generation }
        return state
    }

    func isUnchanged(since mark: UInt64) -> Bool { tellsChanges && mark == generation }

    func create(password: Bytes, scrypt: ScryptParameters, path: String) throws -> [String: Bytes] {
        let (bag, a, c) = try Keybag.make(password: password, scrypt: scrypt)
        keys[bag.uuid] = [.whenUnlocked: a, .afterFirstUnlock: c]
        generation += 1
        created.append(bag.uuid)
        return bag.fields
    }

    func unlock(_ keybag: CustodyKeybag, password: Bytes) throws -> Bool {
        unlocks += 1
        let bag = try bag(keybag)
        var opened = try bag.open(password: password)
        defer { opened.wipe() }
        let first = keys[bag.uuid] == nil
        keys[bag.uuid] = [.whenUnlocked: Array(opened.a), .afterFirstUnlock: Array(opened.c)]
        generation += 1
        return first
    }

    func verify(_ keybag: CustodyKeybag, password: Bytes) throws {
        var opened = try bag(keybag).open(password: password)
        opened.wipe()
    }

    func lock(_ keybag: CustodyKeybag) throws {
        keys[try bag(keybag).uuid]?[.whenUnlocked] = nil
        generation += 1
    }

    func changePassword(_ keybag: CustodyKeybag, from old: Bytes, to new: Bytes, scrypt: ScryptParameters) throws -> [String: Bytes] {
        var bag = try bag(keybag)
        var opened = try bag.open(password: old)
        defer { opened.wipe() }
        try bag.rewrap(a: opened.a, c: opened.c, password: new, scrypt: scrypt)
        return bag.fields
    }

    /// The rotation begun (old and new keys by class), and the rows it sealed again.
    private var rotation: (old: [LockClass: Bytes], new: [LockClass: Bytes], fields: [String: Bytes])?
    private(set) var rotatedRows = 0

    func beginRotation(_ keybag: CustodyKeybag, password: Bytes, newPassword: Bytes?, scrypt: ScryptParameters) throws -> CustodyRotation {
        let bag = try bag(keybag)
        var opened = try bag.open(password: password)
        defer { opened.wipe() }
        let a = try Crypto.random(32), c = try Crypto.random(32), d = try Crypto.random(32)
        let fields = try bag.rekeyed(a: a, c: c, d: d, oldA: opened.a, password: newPassword ?? password, scrypt: scrypt).fields
        rotation = (
            [.whenUnlocked: Array(opened.a), .afterFirstUnlock: Array(opened.c), .always: bag.keyD], [.whenUnlocked: a, .afterFirstUnlock: c, .always: d],
            fields
        )
        var open: [LockClass: ClientSubkeys] = [:]
        for (lockClass, key) in [(LockClass.whenUnlocked, a), (.afterFirstUnlock, c)] {
            let subkeys = ClientSubkeys(metadata: Crypto.deriveKey(key, purpose: "metadata"), index: Crypto.deriveKey(key, purpose: "index"))
            handedOut += [subkeys.metadata, subkeys.index]
            open[lockClass] = subkeys
        }
        return CustodyRotation(fields: fields, open: open)
    }

    func rotate(_ rows: [Row], keychain: Bytes) throws -> [Row] {
        guard let rotation else { throw KeychainError.param("no rotation") }
        rotatedRows += rows.count
        return try rows.map { try KeychainStore.resealRow($0, keychain: keychain, from: rotation.old[$0.lockClass]!, to: rotation.new[$0.lockClass]!) }
    }

    func commitRotation(_ keybag: CustodyKeybag) throws {
        guard let rotation, rotation.fields == keybag.fields else { throw KeychainError.param("no rotation") }
        keys[keybag.uuid] = [.whenUnlocked: rotation.new[.whenUnlocked]!, .afterFirstUnlock: rotation.new[.afterFirstUnlock]!]
        generation += 1
        self.rotation = nil
    }

    func settingsMAC(_ keybag: CustodyKeybag, settings: Bytes, password: Bytes?) throws -> Bytes {
        let bag = try bag(keybag)
        guard let a = keys[bag.uuid]?[.whenUnlocked] else { throw KeychainError.locked() }
        return Keybag.settingsMAC(try KeychainSettings(bytes: settings), uuid: bag.uuid, key: Keybag.settingsKey(a: a))
    }

    private func classKey(_ request: ItemKeyRequest) throws -> Bytes {
        guard let key = keys[request.keychain]?[request.lockClass] else { throw KeychainError.locked() }
        return key
    }

    /// The row's metadata opened with this custodian's own key, as the broker reads a list.
    private func list(_ request: ItemKeyRequest, key: Bytes) throws -> AccessList? {
        let plain = try Crypto.open(
            request.metadata, key: Crypto.deriveKey(key, purpose: "metadata"), aad: request.metadataAdditionalData)
        let attributes = try decodeAttributes(plain)
        return attributes[AccessList.attribute]?.stringValue.map { AccessList(text: $0) }
    }

    func wrap(_ itemKey: Bytes, for request: ItemKeyRequest) throws -> Bytes {
        try requireCurrent(request)
        let key = try classKey(request)
        _ = try list(request, key: key)
        wraps += 1
        return try Crypto.seal(itemKey, key: Crypto.deriveKey(key, purpose: "item-keys"), aad: request.itemKeyAdditionalData)
    }

    func unwrap(_ request: ItemKeyRequest, interaction: CustodyInteraction) throws -> UnwrappedItemKey {
        try requireCurrent(request)
        let key = try classKey(request)
        lastList = try list(request, key: key)
        interactions.append(interaction)
        onUnwrap?(interaction)
        let itemKey = try Crypto.open(
            request.wrappedKey, key: Crypto.deriveKey(key, purpose: "item-keys"), aad: request.itemKeyAdditionalData)
        switch decision {
        case .deny: throw KeychainError(.authFailed, "denied")
        case .ask where interaction == .notAllowed: throw KeychainError(.interactionNotAllowed, "would ask")
        case .allow, .ask:
            unwraps += 1
            handedOut.append(itemKey)
            return UnwrappedItemKey(key: itemKey)
        case .alwaysAllow(let entry):
            unwraps += 1
            handedOut.append(itemKey)
            // Once in the list, the caller is trusted: nobody is asked again.
            if lastList?.entries.contains(entry) == true { return UnwrappedItemKey(key: itemKey) }
            // Like the broker: the whole list to write, the one it read with the caller added.
            var list = lastList ?? AccessList([])
            list.add(entry)
            return UnwrappedItemKey(key: itemKey, alwaysAllow: list)
        }
    }

    func checkBinding(_ request: ItemKeyRequest) throws {
        try requireCurrent(request)
        let key = try classKey(request)
        _ = try list(request, key: key)
        var itemKey = try Crypto.open(
            request.wrappedKey, key: Crypto.deriveKey(key, purpose: "item-keys"), aad: request.itemKeyAdditionalData)
        itemKey.wipe()
        bindingChecks += 1
    }
}
