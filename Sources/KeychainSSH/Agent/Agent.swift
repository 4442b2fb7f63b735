internal import KeychainCore

/// A key the agent can sign with, and what it was added under.
struct AgentIdentity {
    var parts: SSHPublicKeyParts
    var publicBlob: Bytes
    var comment: String
    /// nil for a key kept in the vault: read from the keychain at each signature.
    var key: SSHPrivateKey?
    /// On the configuration's monotonic clock.
    var death: Double?
    var confirm: Bool
    var destinations: [DestinationConstraint]
    var destinationPayload: Bytes
}

/// The agent's state that all connections share: its identities (in memory, and in the vault),
/// the vault's keys unloaded from it, its lock, and the approvals it remembers.
package final class Agent: @unchecked Sendable {
    package let configuration: AgentConfiguration
    private let mutex = Mutex()
    private var memory: [AgentIdentity] = []
    private var lockSecret: (salt: Bytes, hash: Bytes)?
    private var failedUnlocks = 0
    /// Unlock attempts wait their delay one after another, so parallel guesses gain nothing.
    private let unlockMutex = Mutex()
    private var approvals: [String: Double] = [:]
    /// Questions are asked one at a time (gpg-agent shows one pinentry at a time too): a program
    /// that watches for the dialog the person expects cannot put its own up beside it, for the
    /// same click to allow both.
    private let askMutex = Mutex()
    /// The vault's entries as last parsed, so that listing does not parse every key again.
    private var vaultCache: (entries: [SSHKeyVault.Entry], identities: [AgentIdentity]) = ([], [])
    /// The vault was read at least once (`vaultCache` is what it held).
    private var vaultRead = false
    /// The vault's keys that `ssh-add -d`/`-D` unloaded from this agent (canonical blobs): they
    /// neither list nor sign here until this agent adds them again or restarts. The keychain keeps
    /// them, and so does every other agent on it: OpenSSH's -d and -D mean "from this agent",
    /// and people run -D before trying another key, not to destroy the ones they have.
    private var unloaded: Set<Bytes> = []

    package init(configuration: AgentConfiguration) { self.configuration = configuration }

    func log(_ line: String) { configuration.log(line) }

    func fingerprint(_ blob: Bytes) -> String { SSHPublicKey.fingerprint(of: blob, hash: configuration.fingerprintHash) }

    // MARK: Identities

    /// Every identity: in memory first (expired ones dropped, as ssh-agent's reaper does), then
    /// the vault's that memory does not also hold and that this agent has not unloaded.
    func identities() -> [AgentIdentity] {
        mutex.withLock {
            let now = configuration.clock()
            memory.removeAll { identity in
                guard let death = identity.death, now >= death else { return false }
                log("expiring key '\(identity.comment)'")
                return true
            }
            let held = Set(memory.map { $0.parts.canonicalBlob })
            return memory + vaultIdentities().filter { !held.contains($0.parts.canonicalBlob) && !unloaded.contains($0.parts.canonicalBlob) }
        }
    }

    /// The mutex held.
    private func vaultIdentities() -> [AgentIdentity] {
        guard let vault = configuration.vault else { return [] }
        let entries = vault.entries()
        defer { vaultRead = true }
        if entries == vaultCache.entries { return vaultCache.identities }
        let identities = entries.compactMap { entry -> AgentIdentity? in
            guard let parts = try? SSHPublicKeyParts(blob: entry.publicBlob),
                let destinations = try? DestinationConstraint.all(in: entry.destinations)
            else { return nil }
            return AgentIdentity(
                parts: parts, publicBlob: entry.publicBlob, comment: entry.comment, key: nil, death: nil, confirm: entry.confirm,
                destinations: destinations, destinationPayload: entry.destinations)
        }
        vaultCache = (entries, identities)
        // A key deleted from the keychain and kept there again later is a new addition.
        unloaded.formIntersection(identities.map(\.parts.canonicalBlob))
        return identities
    }

    func identity(for parts: SSHPublicKeyParts) -> AgentIdentity? {
        identities().first { $0.parts.canonicalBlob == parts.canonicalBlob }
    }

    /// Adds or replaces a key: in the vault when it has no lifetime, one is configured and
    /// `keepable`, otherwise in memory. False (with a log line) when it cannot be kept.
    func add(_ identity: AgentIdentity, key: SSHPrivateKey, lifetime: UInt32?, keepable: Bool = true) -> Bool {
        let lifetime = lifetime ?? configuration.defaultLifetime
        let existing = identities()
        let isNew = !existing.contains { $0.parts.canonicalBlob == identity.parts.canonicalBlob }
        if isNew, existing.count >= configuration.maximumIdentities {
            log("refusing key \(fingerprint(identity.publicBlob)): the agent holds \(existing.count) keys already")
            return false
        }
        if let vault = configuration.vault, lifetime == nil, !configuration.sessionOnly, keepable {
            do {
                try vault.save(key, comment: identity.comment, confirm: identity.confirm, destinations: identity.destinationPayload)
            } catch {
                log("cannot keep key \(fingerprint(identity.publicBlob)) in the keychain: \(error)")
                return false
            }
            mutex.withLock {
                memory.removeAll { $0.parts.canonicalBlob == identity.parts.canonicalBlob }
                unloaded.remove(identity.parts.canonicalBlob)
            }
            return true
        }
        var held = identity
        held.key = key
        held.death = lifetime.map { configuration.clock() + Double($0) }
        mutex.withLock {
            if let index = memory.firstIndex(where: { $0.parts.canonicalBlob == identity.parts.canonicalBlob }) {
                memory[index] = held
            } else {
                memory.append(held)
            }
        }
        return true
    }

    /// `ssh-add -d`: the key leaves this agent's memory, and a key the vault keeps is unloaded
    /// from this agent (a key re-added with a lifetime may be in both; it must not come back from
    /// the vault). False when this agent held neither.
    func remove(_ identity: AgentIdentity) -> Bool {
        let blob = identity.parts.canonicalBlob
        return mutex.withLock {
            let before = memory.count
            memory.removeAll { $0.parts.canonicalBlob == blob }
            let kept = vaultIdentities().contains { $0.parts.canonicalBlob == blob }
            let unloadedNow = kept && unloaded.insert(blob).inserted
            return memory.count != before || unloadedNow
        }
    }

    /// `ssh-add -D`: every key leaves this agent's memory, and every key the vault keeps is
    /// unloaded from this agent, those made inside the TPM too.
    func removeAll() {
        mutex.withLock {
            memory.removeAll()
            unloaded = Set(vaultIdentities().map(\.parts.canonicalBlob))
        }
    }

    /// The identity's private key: its own, or read from the keychain now (failing, with one log
    /// line, while the keychain is locked), with the confirm flag the keychain holds.
    func privateKey(of identity: AgentIdentity, for client: SigningClient? = nil) -> (key: SSHPrivateKey, confirm: Bool)? {
        if let key = identity.key { return (key, identity.confirm) }
        guard let vault = configuration.vault else { return nil }
        var read: Result<(SSHPrivateKey, SSHKeyVault.Entry), any Error> = .failure(SSHKeyError("not read"))
        if let client, let relay = configuration.relay {
            relay(client) { read = Result { try vault.privateKey(for: identity.publicBlob) } }
        } else {
            read = Result { try vault.privateKey(for: identity.publicBlob) }
        }
        do {
            let (key, entry) = try read.get()
            return (key, entry.confirm || identity.confirm)
        } catch let error as KeychainError where error.code == .interactionNotAllowed && client == nil {
            log("refusing to sign with \(identity.comment) \(fingerprint(identity.publicBlob)): the keychain is locked")
        } catch {
            log("refusing to sign with \(identity.comment) \(fingerprint(identity.publicBlob)): \(error)")
        }
        return nil
    }

    /// Whether a signature with `identity` is judged by the broker: a key the keychain keeps,
    /// where a broker keeps the keychain's keys.
    func isRelayed(_ identity: AgentIdentity) -> Bool { identity.key == nil && configuration.vault != nil && configuration.relay != nil }

    /// Whether a client that connects may sign with a key the broker judges it for: the vault
    /// held a key this agent has not unloaded when last read, or it was not read yet. Known
    /// without reading it, so that the judging starts as the client connects.
    func mayRelay() -> Bool {
        guard configuration.vault != nil, configuration.relay != nil else { return false }
        return mutex.withLock { !vaultRead || vaultCache.identities.contains { !unloaded.contains($0.parts.canonicalBlob) } }
    }

    // MARK: Confirmation

    /// Asks the person (or finds an approval remembered for this program, key and route). A
    /// program the kernel would not name (one that made itself undumpable, as any process may)
    /// is asked every time: all such programs would share one name.
    func confirm(_ identity: AgentIdentity, asker: AccessQuestion.Asker, destination: AccessQuestion.Destination?, route: String) -> Bool {
        let fingerprint = fingerprint(identity.publicBlob)
        let program = asker.executable
        let remembered = program.map { $0 + "\0" + fingerprint + "\0" + route }
        func known() -> Bool {
            let now = configuration.clock()
            return mutex.withLock {
                approvals = approvals.filter { $0.value > now }
                return remembered.map { approvals[$0] != nil } ?? false
            }
        }
        if known() { return true }
        return askMutex.withLock {
            // An approval remembered while this question waited its turn holds for it too.
            if known() { return true }
            let question = AccessQuestion(asker: asker, target: .sshKey(comment: identity.comment, fingerprint: fingerprint), destination: destination)
            guard configuration.confirm(question) else {
                log("the user refused key \(identity.comment) \(fingerprint)")
                return false
            }
            if configuration.rememberConfirmation > 0, let remembered {
                mutex.withLock { approvals[remembered] = configuration.clock() + Double(configuration.rememberConfirmation) }
            }
            return true
        }
    }

    // MARK: Lock

    var isLocked: Bool { mutex.withLock { lockSecret != nil } }

    private static let lockIterations = 1000

    /// `ssh-add -x`: the agent keeps a salted hash of the passphrase, never the passphrase.
    func lock(passphrase: Bytes) -> Bool {
        guard !passphrase.isEmpty, let salt = try? Crypto.random(16) else { return false }
        return mutex.withLock {
            guard lockSecret == nil else { return false }
            lockSecret = (salt, Crypto.iteratedSHA256(passphrase, salt: salt, iterations: Self.lockIterations))
            log("agent locked")
            return true
        }
    }

    /// `ssh-add -X`: compared in constant time; each failure waits 0.1 s longer, up to 10 s.
    func unlock(passphrase: Bytes) -> Bool {
        guard !passphrase.isEmpty else { return false }
        return unlockMutex.withLock {
            let (matched, failures) = mutex.withLock { () -> (Bool?, Int) in
                guard let secret = lockSecret else { return (nil, 0) }
                var hash = Crypto.iteratedSHA256(passphrase, salt: secret.salt, iterations: Self.lockIterations)
                defer { hash.wipe() }
                if Crypto.equal(hash, secret.hash) {
                    lockSecret = nil
                    failedUnlocks = 0
                    return (true, 0)
                }
                failedUnlocks = min(failedUnlocks + 1, 100)
                return (false, failedUnlocks)
            }
            guard let matched else { return false }
            if matched {
                log("agent unlocked")
                return true
            }
            log("unlock failed, delaying \(Double(failures) / 10) seconds")
            configuration.unlockDelay(Double(failures) / 10)
            return false
        }
    }
}
