/// What one SecItem call has obtained from the person so far, and the rules for items that need
/// one. The engine never asks while it holds its lock or a transaction: a call that meets an item
/// it may not use yet throws a `PresenceDemand` out of them, asks, and runs again.
struct PresenceGate {
    let options: PresenceOptions
    let authorizer: PresenceAuthorizer
    private(set) var polkitGranted: Bool
    private(set) var password: Bytes?
    private var asked = 0
    /// Item keys a custodian gave after asking the person, outside the transaction of the change
    /// that needed them (`Demand.custody`), for that change's next run: by row, while the row is
    /// as it was.
    private var custodyKeys: [(row: Row, key: UnwrappedItemKey)] = []

    enum Demand: Error { case polkit, applicationPassword }

    /// A change needs a row's item key, which its custodian gives only after asking the person.
    struct CustodyDemand: Error { let row: Row }

    init(_ options: PresenceOptions, authorizer: PresenceAuthorizer) {
        self.options = options
        self.authorizer = authorizer
        polkitGranted = options.context?.holdsGrant ?? false
        password = options.context?.applicationPassword
    }

    mutating func wipe() {
        password?.wipe()
        for index in custodyKeys.indices { custodyKeys[index].key.key.wipe() }
    }

    /// Keeps the item key a custodian gave for `row` after asking (`Demand.custody`).
    mutating func hold(_ key: UnwrappedItemKey, for row: Row) throws {
        asked += 1
        guard asked <= 4 else { throw KeychainError.presence(.interactionNotAllowed, "keychain-broker: asked too often in one call") }
        custodyKeys.append((row, key))
    }

    /// The item key held for `row`, if the row is still the one it was given for.
    func heldKey(for row: Row) -> UnwrappedItemKey? {
        custodyKeys.last { $0.row.rowID == row.rowID && $0.row.metadata == row.metadata && $0.row.secret == row.secret }?.key
    }

    private var interaction: PresenceInteraction {
        options.context?.interactionNotAllowed == true && options.interaction == .allow ? .fail : options.interaction
    }

    /// Whether a custodian may have the person asked for an item's key in this call: as for
    /// presence, kSecUseAuthenticationUI (Fail, Skip) and an LAContext's interactionNotAllowed.
    var custodyInteraction: CustodyInteraction { interaction == .allow ? .allowed : .notAllowed }

    /// kSecUseAuthenticationUISkip: items that would need a person are left out, not an error.
    var skipsItemsNeedingAPerson: Bool { interaction == .skip }

    /// Whether `item`'s secret may be used: true to go on, false to leave it out (Skip). A read
    /// opens a secret sealed under an application password; a change (`changing`: an update,
    /// replace or delete, which may also remove an item nobody can read) must prove it.
    func admits(_ item: Item, changing: Bool = false) throws -> Bool {
        let conditions = AccessConditions(of: item)
        guard conditions.needsAPerson else { return true }
        if options.context?.isInvalidated == true {
            throw KeychainError.presence(.authFailed, "the authentication context was invalidated")
        }
        if conditions.needsAbsentCompanion && !changing {
            throw KeychainError(.notAvailable, "the item needs a companion device, which this machine does not have")
        }
        var demand: Demand?
        if conditions.asksAuthorizer && !polkitGranted {
            demand = .polkit
        } else if !options.keepsSealedSecrets && conditions.contains(.applicationPassword) && password == nil {
            demand = .applicationPassword
        }
        guard let demand else { return true }
        switch interaction {
        case .skip: return false
        case .fail:
            throw KeychainError.presence(
                .interactionNotAllowed, "the item needs \(demand == .polkit ? "the user's presence" : "its application password") and asking is not allowed")
        case .allow: throw demand
        }
    }

    /// Asks for what `demand` names, outside any lock; throws the person's refusal as Apple's status.
    mutating func satisfy(_ demand: Demand) throws {
        asked += 1
        guard asked <= 4 else { throw KeychainError.presence(.interactionNotAllowed, "user presence: asked too often in one call") }
        switch demand {
        case .polkit:
            try authorizer.authorize(reason: options.operationPrompt).check()
            polkitGranted = true
            options.context?.recordGrant(evaluation: false)
        case .applicationPassword:
            guard let ask = options.askApplicationPassword else {
                throw KeychainError.presence(.interactionNotAllowed, "the item needs its application password (an LAContext credential)")
            }
            password = try ask()
        }
    }

    /// The secret as stored for `item`: sealed again under the application password when its
    /// conditions ask for one.
    func storedForm(of secret: Bytes, conditions: AccessConditions) throws -> Bytes {
        guard conditions.contains(.applicationPassword) else { return secret }
        guard let password else { throw Demand.applicationPassword }
        return try ApplicationPassword.seal(secret, password: password)
    }

    /// Changing, replacing or deleting an item sealed under an application password takes that
    /// password, as reading it does (`admits(_:changing:)` asks for it): the one at hand
    /// must open the stored secret, or the call is errSecAuthFailed and nothing changes.
    func proveApplicationPassword(of item: Item, stored: Bytes?) throws {
        guard AccessConditions(of: item).contains(.applicationPassword), let stored else { return }
        guard let password else { throw Demand.applicationPassword }
        var opened = try ApplicationPassword.open(stored, password: password)
        opened.wipe()
    }

    /// The secret as the caller sees it.
    func readableForm(of stored: Bytes, conditions: AccessConditions) throws -> Bytes {
        guard conditions.contains(.applicationPassword), !options.keepsSealedSecrets else { return stored }
        guard let password else { throw Demand.applicationPassword }
        return try ApplicationPassword.open(stored, password: password)
    }
}

extension KeychainStore {
    /// Runs `body` (which takes the lock itself) until the person has given what it needs.
    func withPresence<T>(_ options: PresenceOptions, _ body: (inout PresenceGate) throws -> T) throws -> T {
        var gate = PresenceGate(options, authorizer: presenceAuthorizer)
        defer { gate.wipe() }
        while true {
            do {
                return try body(&gate)
            } catch let demand as PresenceGate.Demand {
                guard options.interaction == .allow else {
                    throw KeychainError.presence(.interactionNotAllowed, "the item needs a person and asking is not allowed")
                }
                try gate.satisfy(demand)
            } catch let demand as PresenceGate.CustodyDemand {
                // Asked under the store's lock (other threads of this process wait), never in a
                // transaction (other processes' writers would).
                try gate.hold(withLock { try custodyItemKey(demand.row, interaction: .allowed) }, for: demand.row)
            }
        }
    }
}
