import KeychainCore
import Glibc

/// One exchange with the remote (`security sync now`), and the per-record merge it rests on.
package struct ExchangeSummary: Sendable {
    /// Record versions this device wrote (its changes, tombstones, records it wrote again).
    package var sent = 0
    /// Versions from other devices written into this keychain.
    package var received = 0
    /// Records refused: tampered, moved, older than one accepted, or unreadable.
    package var refused = 0
    /// Conflicts that lost a value (each also in the log `security sync status` shows).
    package var conflicts = 0
    /// Changed items this device could not read without asking (an item whose list does not name
    /// this program where keychain-broker keeps the keys, one that needs the user's presence):
    /// neither sent nor taken for deleted, and tried again at the next exchange. Named, not noted
    /// in the state's log: a note would change the keychain at each exchange, and keychain-sync.path
    /// would start the next one.
    package var skipped: [String] = []
    /// Still waiting for a device of the group to approve this one.
    package var pending = false
    /// Approved by this device (its id), waiting for `security sync confirm`.
    package var approvedBy: Bytes?
    package var attempts = 0
}

/// A record version this exchange decided on, with what the merge orders it by.
struct Candidate {
    var record: SyncRecord
    var order: SyncOrder
    /// Came from the remote (else: written by this device now).
    var incoming: Bool
}

extension SyncEngine {
    /// `security sync now`.
    package func exchange() throws -> ExchangeSummary {
        try exclusively { try exchangeLocked() }
    }

    /// `security sync confirm CODE`: the first exchange of a device just approved, once the
    /// person typed the confirmation the approving device showed. It covers the manifest that
    /// added this device: one made by anyone else (a remote that swapped the repository before
    /// the join, a removed device's keys) shows another code, and this device then takes nothing.
    package func confirm(_ code: String) throws -> ExchangeSummary {
        try exclusively { try exchangeLocked(confirmation: code) }
    }

    /// The exchange; `prepare` (approve, remove-device) changes the group in the same push and
    /// returns whether every record must be sealed again under the current epoch.
    func exchangeLocked(
        confirmation: String? = nil, prepare: ((inout SyncState, SyncDeviceKeys, SyncGit) throws -> Bool)? = nil
    ) throws -> ExchangeSummary {
        let saved = try loadState()
        let keys = try loadKeys()
        var summary = ExchangeSummary()
        for attempt in 1...Self.attempts {
            summary = ExchangeSummary(attempts: attempt)
            var state = saved
            guard try git.fetch() else { throw KeychainError(.itemNotFound, "the remote holds no sync group any more") }
            try git.resetToRemote()
            let member = try acceptManifest(&state, keys: keys)
            if !member {
                guard state.pending else {
                    throw KeychainError(.authFailed, "this device was removed from the sync group; it reads nothing written since")
                }
                summary.pending = true
                writeLastExchange(SystemClock.now(), "waiting for approval")
                if state.encoded() != saved.encoded() { try store.setHiddenSecret("state", state.encoded()) }
                return summary
            }
            if state.pending {
                let (approval, bytes) = try approvalManifest(after: saved.manifest, me: keys.deviceID)
                guard let confirmation else {
                    summary.pending = true
                    summary.approvedBy = approval.signer
                    writeLastExchange(SystemClock.now(), "approved by device \(approval.signer.hex.prefix(8)), waiting for confirmation")
                    return summary
                }
                let expected = try SyncCode.confirmation(manifest: bytes, device: keys.deviceID)
                guard SyncCode.normalized(confirmation) == SyncCode.normalized(expected) else {
                    throw KeychainError(
                        .authFailed,
                        "the confirmation does not match the approval this device sees: someone else approved it; run `security sync leave`, and join again")
                }
                state.pending = false
                state.note("\(Self.timestamp()) joined the group: approved by device \(approval.signer.hex.prefix(8)), confirmed")
            } else if confirmation != nil {
                throw KeychainError.param("this device is already in the group: nothing to confirm")
            }
            let resealAll = try prepare?(&state, keys, git) ?? false
            let plan = try merge(&state, keys: keys, resealAll: resealAll, summary: &summary)
            if try git.commitAll() {
                guard try git.push() else {
                    // Another device pushed first: start again from its tip; nothing was applied.
                    usleep(UInt32.random(in: 20_000...200_000) * UInt32(min(attempt, 5)))
                    continue
                }
            }
            try apply(plan, &state, saved: saved, summary: &summary)
            return summary
        }
        throw KeychainError(.io, "other devices kept pushing; nothing was lost, try `security sync now` again")
    }

    struct Plan {
        /// Winners from the remote, to write into the keychain.
        var applies: [Bytes: SyncRecord] = [:]
        /// What this device sealed and wrote, with the digest of each file.
        var written: [Bytes: (record: SyncRecord, digest: Bytes, localHash: Bytes)] = [:]
        /// The snapshot the decisions were made on: an item changed since is left for next time.
        var snapshot: [Bytes: SyncLocalItem] = [:]
        /// Digests of incoming records accepted, by id.
        var digests: [Bytes: Bytes] = [:]
    }

    /// Decides every record, writes this device's versions into the work tree, and returns what
    /// to apply once the push succeeded.
    func merge(_ state: inout SyncState, keys: SyncDeviceKeys, resealAll: Bool, summary: inout ExchangeSummary) throws -> Plan {
        var plan = Plan()
        let epoch = state.manifest.epoch
        guard let key = state.keys[epoch] else { throw KeychainError.decode("no sync key for epoch \(epoch)") }
        let now = SystemClock.now()
        let stamp = Self.timestamp(now)
        var incoming: [Bytes: Candidate] = [:]
        var repair = Set<Bytes>()
        var tipIDs = Set<Bytes>()
        // Files at the remote that no record of this device's explains (junk, or refused at an id
        // never accepted): they stay there, and are reported once. Each noted at every exchange
        // would write the keychain each time (and keychain-sync.path start the next exchange, for
        // ever); so the state keeps the marks of those at this tip, at most `maximumRefused` (in
        // mark order, so the same tip keeps the same ones), and notes only a file it newly keeps.
        var present: [Bytes: String] = [:]
        func refuseOnce(_ mark: Bytes, _ line: String) { present[mark] = line }

        // 1. The remote's records: what is new since this device last looked.
        for name in git.list("records") {
            guard name.count == 32, let id = Bytes(hex: name), let file = git.read("records/" + name) else {
                refuseOnce(Crypto.sha256(Array("records/\(name)".utf8)), "\(stamp) ignored records/\(name.prefix(40)): not a record name")
                continue
            }
            tipIDs.insert(id)
            let digest = Crypto.sha256(file)
            let known = state.records[id]
            if let known, known.order.digest == digest {
                if resealAll || SyncRecord.epoch(of: file) != epoch { repair.insert(id) }
                continue
            }
            let record: SyncRecord
            do {
                // A new version is always sealed under the current epoch by a current device: every
                // push starts from a tip that holds the current manifest. A removed device keeps
                // the old keys and could otherwise still write.
                guard SyncRecord.epoch(of: file) == epoch else {
                    throw KeychainError.decode("sealed under key epoch \(SyncRecord.epoch(of: file).map(String.init) ?? "?"), not the current \(epoch)")
                }
                record = try SyncRecord.open(file, id: id, group: state.group, key: key, device: { state.manifest.device($0) })
                if !record.tombstone {
                    // What a device of the group sent must still be an item this keychain takes
                    // (a ThisDeviceOnly one, a malformed certificate): checked before anything
                    // local is replaced by it.
                    guard KeychainStore.syncedClasses.contains(record.itemClass) else { throw KeychainError.decode("not an item class that syncs") }
                    var probe = Item(itemClass: record.itemClass, attributes: record.attributes, secret: record.secret)
                    probe.attributes[AttributeKey.synchronizable] = .bool(true)
                    _ = try KeychainStore.prepareNew(probe, keepingDates: true)
                }
            } catch let error as KeychainError {
                if known == nil {
                    refuseOnce(digest, "\(stamp) refused record \(name.prefix(12)): \(error.detail)")
                    continue
                }
                repair.insert(id)
                state.note("\(stamp) refused record \(name.prefix(12)): \(error.detail)")
                summary.refused += 1
                continue
            }
            let order = SyncOrder(stamp: record.stamp, digest: digest)
            if let known, order < known.order {
                summary.refused += 1
                if record.stamp.version < known.order.stamp.version {
                    state.note(
                        "\(stamp) refused record \(name.prefix(12)): version \(record.stamp.version) is older than version \(known.order.stamp.version) accepted here (replayed or rolled back)"
                    )
                } else {
                    state.note(
                        "\(stamp) refused record \(name.prefix(12)): its version from device \(record.stamp.writer.hex.prefix(8)) is older than the one accepted here"
                    )
                    if record.valueDigest != known.valueDigest {
                        summary.conflicts += 1
                        state.note(
                            "\(stamp) conflict: \(Self.describe(record)) written on device \(record.stamp.writer.hex.prefix(8)) at \(Self.timestamp(record.stamp.mdat)) lost to a later version"
                        )
                    }
                }
                repair.insert(id)
                continue
            }
            if SyncRecord.epoch(of: file) != epoch || resealAll { repair.insert(id) }
            incoming[id] = Candidate(record: record, order: order, incoming: true)
            plan.digests[id] = digest
        }
        let kept = present.keys.sorted { $0.lexicographicallyPrecedes($1) }.prefix(SyncState.maximumRefused)
        for mark in kept where !state.refused.contains(mark) { state.note(present[mark]!) }
        summary.refused += present.keys.filter { !state.refused.contains($0) }.count
        state.refused = Array(kept)
        for id in state.records.keys where !tipIDs.contains(id) {
            state.note("\(stamp) record \(id.hex.prefix(12)) was missing from the remote: written again")
            summary.refused += 1
            repair.insert(id)
        }

        // 2. This device's changes since the last exchange.
        let local = try store.syncSnapshot()
        plan.snapshot = local
        var byIdentity: [Bytes: Bytes] = [:]
        for (id, entry) in state.records where !entry.tombstone {
            if let other = byIdentity[entry.identity], state.records[other]!.order > entry.order { continue }
            byIdentity[entry.identity] = id
        }
        var outgoing: [Bytes: Candidate] = [:]
        var fresh = Set<Bytes>()
        func nextStamp(_ id: Bytes, mdat: Double) -> SyncStamp {
            let known = state.records[id]?.order.stamp
            let seen = max(known?.version ?? 0, incoming[id]?.record.stamp.version ?? 0)
            // A change made after this device accepted a version supersedes it, whatever the clocks say.
            let floor = (known?.mdat ?? -Double.infinity).nextUp
            return SyncStamp(mdat: max(mdat, floor), version: seen + 1, writer: keys.deviceID)
        }
        for (identity, item) in local {
            let known = byIdentity[identity]
            if let id = known, item.hash == state.records[id]!.localHash { continue }
            // Only what changed is decrypted; an item that would ask for the person stays as it is.
            guard let full = try store.syncItemWithSecret(item.item) else {
                summary.skipped.append(Self.describe(item.item))
                continue
            }
            var attributes = full.attributes
            attributes[AttributeKey.sha1] = nil
            let mdat = Self.date(attributes[AttributeKey.modificationDate]) ?? now
            if let id = known {
                let s = nextStamp(id, mdat: mdat)
                attributes[AttributeKey.modificationDate] = .date(s.mdat)
                let record = SyncRecord(id: id, itemClass: full.itemClass, attributes: attributes, secret: full.secret, tombstone: false, stamp: s)
                outgoing[id] = Candidate(record: record, order: SyncOrder(stamp: s, digest: []), incoming: false)
            } else {
                let id = try Crypto.random(16)
                let s = SyncStamp(mdat: mdat, version: 1, writer: keys.deviceID)
                let record = SyncRecord(id: id, itemClass: full.itemClass, attributes: attributes, secret: full.secret, tombstone: false, stamp: s)
                outgoing[id] = Candidate(record: record, order: SyncOrder(stamp: s, digest: []), incoming: false)
                fresh.insert(id)
            }
        }
        for (identity, id) in byIdentity where local[identity] == nil {
            let entry = state.records[id]!
            let s = nextStamp(id, mdat: now)
            let record = SyncRecord(
                id: id, itemClass: Self.itemClass(entry.keyAttributes, entry: entry), attributes: entry.keyAttributes, secret: nil, tombstone: true, stamp: s)
            outgoing[id] = Candidate(record: record, order: SyncOrder(stamp: s, digest: []), incoming: false)
        }

        // 3. Per record: the greater of the remote's new version and this device's change.
        var writes: [Bytes: SyncRecord] = [:]
        for id in Set(incoming.keys).union(outgoing.keys) {
            switch (incoming[id], outgoing[id]) {
            case (let inc?, let out?):
                if out.order > inc.order {
                    writes[id] = out.record
                    if inc.record.valueDigest != out.record.valueDigest {
                        summary.conflicts += 1
                        state.note(
                            "\(stamp) conflict: \(Self.describe(inc.record)) written on device \(inc.record.stamp.writer.hex.prefix(8)) at \(Self.timestamp(inc.order.stamp.mdat)) replaced by this device's later change"
                        )
                    }
                } else {
                    plan.applies[id] = inc.record
                    if inc.record.valueDigest != out.record.valueDigest {
                        summary.conflicts += 1
                        state.note(
                            "\(stamp) conflict: this device's change to \(Self.describe(out.record)) at \(Self.timestamp(out.order.stamp.mdat)) replaced by device \(inc.record.stamp.writer.hex.prefix(8))'s later version"
                        )
                    }
                }
            case (let inc?, nil): plan.applies[id] = inc.record
            case (nil, let out?): writes[id] = out.record
            case (nil, nil): break
            }
        }

        // 4. One item written as two records (created on two devices before either saw the
        //    other): the greater record stays, the others become tombstones.
        var live: [Bytes: [(id: Bytes, order: SyncOrder, value: Bytes, describe: String)]] = [:]
        for id in Set(state.records.keys).union(writes.keys).union(plan.applies.keys) {
            let order: SyncOrder, identity: Bytes, value: Bytes, tombstone: Bool, text: String
            if let r = writes[id] ?? plan.applies[id] {
                order = writes[id] != nil ? SyncOrder(stamp: r.stamp, digest: []) : incoming[id]!.order
                (identity, value, tombstone, text) = (r.identity, r.valueDigest, r.tombstone, Self.describe(r))
            } else {
                let e = state.records[id]!
                (order, identity, value, tombstone, text) = (e.order, e.identity, e.valueDigest, e.tombstone, "an item")
            }
            if !tombstone { live[identity, default: []].append((id, order, value, text)) }
        }
        for (_, records) in live where records.count > 1 {
            let winner = records.max { $0.order < $1.order }!
            for loser in records where loser.id != winner.id {
                if loser.value != winner.value {
                    summary.conflicts += 1
                    state.note(
                        "\(stamp) conflict: \(loser.describe) was written on two devices; the version of \(Self.timestamp(loser.order.stamp.mdat)) lost to the one of \(Self.timestamp(winner.order.stamp.mdat))"
                    )
                }
                plan.applies[loser.id] = nil
                if fresh.contains(loser.id) {
                    writes[loser.id] = nil
                    continue
                }
                let known = state.records[loser.id]
                let keyAttributes =
                    (writes[loser.id] ?? incoming[loser.id]?.record).map { SyncRecord.primaryKey(of: Item(itemClass: $0.itemClass, attributes: $0.attributes)) }
                    ?? known!.keyAttributes
                let itemClass = (writes[loser.id] ?? incoming[loser.id]?.record)?.itemClass ?? Self.itemClass(keyAttributes, entry: known!)
                let version = max(known?.order.stamp.version ?? 0, loser.order.stamp.version) + 1
                writes[loser.id] = SyncRecord(
                    id: loser.id, itemClass: itemClass, attributes: keyAttributes, secret: nil, tombstone: true,
                    stamp: SyncStamp(mdat: loser.order.stamp.mdat, version: version, writer: keys.deviceID))
            }
        }

        // 5. Records to write again as they stand (tampered, replayed or missing at the remote, or
        //    sealed under an older epoch): a new version by this device, same value and date.
        for id in repair where writes[id] == nil {
            if let inc = plan.applies[id] {
                var again = inc
                again.stamp = SyncStamp(mdat: inc.stamp.mdat, version: inc.stamp.version + 1, writer: keys.deviceID)
                writes[id] = again
                continue
            }
            guard let entry = state.records[id] else { continue }
            let version = max(entry.order.stamp.version, incoming[id]?.record.stamp.version ?? 0) + 1
            let s = SyncStamp(mdat: entry.order.stamp.mdat, version: version, writer: keys.deviceID)
            if entry.tombstone {
                writes[id] = SyncRecord(
                    id: id, itemClass: Self.itemClass(entry.keyAttributes, entry: entry), attributes: entry.keyAttributes, secret: nil, tombstone: true,
                    stamp: s)
            } else if let item = local[entry.identity], item.hash == entry.localHash, let full = try store.syncItemWithSecret(item.item) {
                var attributes = full.attributes
                attributes[AttributeKey.sha1] = nil
                writes[id] = SyncRecord(id: id, itemClass: full.itemClass, attributes: attributes, secret: full.secret, tombstone: false, stamp: s)
            }
        }

        // 6. Seal and write.
        for (id, record) in writes {
            let file = try record.seal(group: state.group, epoch: epoch, key: key, signer: keys)
            try git.write("records/" + id.hex, file)
            let localHash = record.tombstone ? [] : (local[record.identity]?.hash ?? [])
            plan.written[id] = (record, Crypto.sha256(file), localHash)
            if plan.applies[id] != nil { continue }
        }
        summary.sent = writes.count
        return plan
    }

    /// After the push: the remote's winners go into the keychain and the state records every
    /// version now at the remote, in one transaction.
    func apply(_ plan: Plan, _ state: inout SyncState, saved: SyncState, summary: inout ExchangeSummary) throws {
        let now = SystemClock.now()
        try store.batch {
            // Per identity (an item's class and primary key), what the remote's winners make of
            // it: the live record that now holds it, or records that no longer do (tombstones,
            // renames away). A record that no longer holds an item deletes it only if the item
            // was that record's: one created on two devices keeps the winner's copy whatever
            // order the records come in, and a local item not yet sent is never deleted.
            var owner: [Bytes: (id: Bytes, order: SyncOrder)] = [:]
            for (id, entry) in state.records where !entry.tombstone {
                if let other = owner[entry.identity], other.order > entry.order { continue }
                owner[entry.identity] = (id, entry.order)
            }
            var live: [Bytes: (id: Bytes, record: SyncRecord)] = [:]
            var leaving: [Bytes: [(id: Bytes, itemClass: ItemClass, key: [String: AttributeValue])]] = [:]
            for (id, record) in plan.applies {
                let key = SyncRecord.primaryKey(of: Item(itemClass: record.itemClass, attributes: record.attributes))
                if record.tombstone {
                    leaving[record.identity, default: []].append((id, record.itemClass, key))
                } else {
                    live[record.identity] = (id, record)
                }
                if let known = state.records[id], !known.tombstone, known.identity != record.identity {
                    leaving[known.identity, default: []].append((id, Self.itemClass(known.keyAttributes, entry: known), known.keyAttributes))
                }
            }
            var skipped = Set<Bytes>()
            var localHashes: [Bytes: Bytes] = [:]
            for identity in Set(live.keys).union(leaving.keys) {
                let leavers = leaving[identity] ?? []
                let (itemClass, key) =
                    live[identity].map {
                        ($0.record.itemClass, SyncRecord.primaryKey(of: Item(itemClass: $0.record.itemClass, attributes: $0.record.attributes)))
                    }
                    ?? (leavers[0].itemClass, leavers[0].key)
                let current = try store.syncItem(itemClass, key: key)
                // Changed while this exchange ran: the next one decides with that change.
                let changed = current.map(KeychainStore.syncHash) != plan.snapshot[identity]?.hash
                if let (id, record) = live[identity] {
                    if changed {
                        skipped.insert(id)
                        for leaver in leavers { skipped.insert(leaver.id) }
                        continue
                    }
                    if let current { try store.deleteRows([current.rowID]) }
                    var item = Item(itemClass: record.itemClass, attributes: record.attributes, secret: record.secret)
                    item.attributes[AttributeKey.synchronizable] = .bool(true)
                    _ = try store.add(item, keepingDates: true)
                    localHashes[id] = try store.syncItem(record.itemClass, key: key).map(KeychainStore.syncHash) ?? []
                } else if let current, let holder = owner[identity]?.id, leavers.contains(where: { $0.id == holder }) {
                    if changed {
                        for leaver in leavers { skipped.insert(leaver.id) }
                        continue
                    }
                    try store.deleteRows([current.rowID])
                }
            }
            for (id, record) in plan.applies where !skipped.contains(id) {
                summary.received += 1
                state.records[id] = SyncState.Entry(
                    order: SyncOrder(stamp: record.stamp, digest: plan.digests[id]!), identity: record.identity, tombstone: record.tombstone,
                    keyAttributes: SyncRecord.primaryKey(of: Item(itemClass: record.itemClass, attributes: record.attributes)),
                    valueDigest: record.valueDigest, localHash: record.tombstone ? [] : (localHashes[id] ?? []))
            }
            for (id, written) in plan.written {
                let record = written.record
                var localHash = written.localHash
                if plan.applies[id] != nil, let entry = state.records[id] { localHash = entry.localHash }
                state.records[id] = SyncState.Entry(
                    order: SyncOrder(stamp: record.stamp, digest: written.digest), identity: record.identity, tombstone: record.tombstone,
                    keyAttributes: SyncRecord.primaryKey(of: Item(itemClass: record.itemClass, attributes: record.attributes)),
                    valueDigest: record.valueDigest, localHash: localHash)
            }
            let result = "sent \(summary.sent), received \(summary.received), refused \(summary.refused), conflicts \(summary.conflicts)"
            writeLastExchange(now, result)
            // Written only when something changed: keychain-sync.path starts an exchange when the
            // keychain file changes, and a write of its own each time would start the next.
            var probe = state
            probe.lastExchange = saved.lastExchange
            probe.lastResult = saved.lastResult
            if probe.encoded() != saved.encoded() {
                state.lastExchange = now
                state.lastResult = result
                try store.setHiddenSecret("state", state.encoded())
            }
        }
    }

    var lastExchangeFile: String { folder + "/.git/keychain-last-exchange" }

    /// When the last exchange ended and what it did, in the clone's .git folder (not in the
    /// keychain, so that an exchange that changed nothing writes nothing there).
    func writeLastExchange(_ time: Double, _ result: String) {
        try? PlainFiles.write(lastExchangeFile, Array("\(time.bitPattern) \(result)\n".utf8))
    }

    func readLastExchange() -> (Double, String)? {
        guard let bytes = PlainFiles.read(lastExchangeFile) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first ?? ""
        guard let space = text.firstIndex(of: " "), let bits = UInt64(text[..<space]) else { return nil }
        return (Double(bitPattern: bits), String(text[text.index(after: space)...]))
    }

    static func date(_ value: AttributeValue?) -> Double? {
        if case .date(let d)? = value { return d }
        return nil
    }

    static func itemClass(_ keyAttributes: [String: AttributeValue], entry: SyncState.Entry) -> ItemClass {
        for itemClass in KeychainStore.syncedClasses where SyncRecord.identity(of: itemClass, keyAttributes) == entry.identity {
            return itemClass
        }
        return .genericPassword
    }

    /// An item named for the local log (which stays on this device, in its keychain).
    static func describe(_ record: SyncRecord) -> String { describe(record.itemClass, record.attributes) }

    static func describe(_ item: Item) -> String { describe(item.itemClass, item.attributes) }

    private static func describe(_ itemClass: ItemClass, _ attributes: [String: AttributeValue]) -> String {
        let name =
            attributes[AttributeKey.service]?.stringValue ?? attributes[AttributeKey.server]?.stringValue
            ?? attributes[AttributeKey.label]?.stringValue ?? "?"
        let account = attributes[AttributeKey.account].flatMap { value -> String? in
            if let s = value.stringValue { return s }
            if case .data(let d) = value { return String(decoding: d, as: UTF8.self) }
            return nil
        }
        return "\(itemClass.rawValue) \(name)" + (account.map { " (\($0))" } ?? "")
    }
}
