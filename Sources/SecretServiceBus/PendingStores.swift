import CSDBus
import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus

/// A CreateItem whose arguments are read and whose secret is decoded, waiting for the commit it
/// shares with the calls that arrived with it.
struct PendingStore {
    /// Its message holds a reference of its own until it is answered.
    let call: Call
    let collection: Collection
    let label: String
    let attributes: [String: String]
    var secret: Bytes
    let contentType: String
    let replace: Bool
    /// The list a new item gets: its client's entry (`storedAccess`).
    let access: AccessList?
}

/// CreateItem calls that are already waiting on the connection share one commit (issue 29's batch
/// path): a client sending many without waiting for each answer (libsecret's and GDBus's
/// asynchronous calls) pays for one commit per group instead of one per item. A client that waits
/// for each answer gets it as before, once the loop finds nothing more to read.
///
/// Every answer is sent after the commit, so "stored" is never said of an item a crash could
/// still lose. Each store keeps its own checks and its own atomicity (a savepoint of the batch):
/// one that fails is answered with its error and the others are kept; a batch that cannot be
/// committed (a full disk) is stored again one call at a time, as without this path. Any other
/// call first commits what waits (`beforeDispatch`).
extension SecretService {
    /// The most calls one commit takes (other processes' writers wait for the write lock that
    /// long at most), and the longest the first of them waits (seconds) while the loop keeps
    /// finding work: secrets stay decoded in memory only that long.
    static let storesPerCommit = 64
    static let storeDelay = 0.005

    /// Queues a call whose handler returns next: the loop stores it (`storesAreDue`), never this
    /// function, so no copy of its secret is left in the handler's variables when it is wiped.
    func queue(_ store: PendingStore) {
        _ = sd_bus_message_ref(store.call.message)
        if pendingStores.isEmpty { firstPendingStore = SystemClock.monotonic() }
        pendingStores.append(store)
    }

    /// Any call but a CreateItem sees every item stored before it on the bus, whichever handler
    /// answers it (a method, a property, introspection, the portal), so what waits is committed
    /// before sd-bus dispatches it.
    func beforeDispatch(_ message: OpaquePointer) {
        guard !pendingStores.isEmpty, sd_bus_message_is_method_call(message, nil, nil) > 0,
            sd_bus_message_is_method_call(message, Interface.collection, "CreateItem") <= 0
        else { return }
        storePending()
    }

    /// Whether the loop should store what waits before it reads more.
    var storesAreDue: Bool {
        !pendingStores.isEmpty
            && (pendingStores.count >= Self.storesPerCommit || SystemClock.monotonic() - firstPendingStore >= Self.storeDelay)
    }

    /// Stores what waits, one batch per keychain, then answers each call and sends the signals.
    func storePending() {
        guard !pendingStores.isEmpty else { return }
        // Taken first: a property read while the signals go out finds nothing left to store.
        var batch = pendingStores
        pendingStores = []
        defer { for pending in batch { sd_bus_message_unref(pending.call.message) } }
        var outcomes = [Result<(item: SecretItem, replaced: [Int64], isNew: Bool), any Error>?](repeating: nil, count: batch.count)
        func add(_ index: Int, to store: KeychainStore, syncsNewItems: Bool? = nil) {
            let pending = batch[index]
            outcomes[index] = Result {
                try storing(for: pending.call, access: pending.access) {
                    try store.addSecretItem(
                        label: pending.label, attributes: pending.attributes, secret: pending.secret,
                        contentType: pending.contentType, replace: pending.replace, owner: pending.call.owner,
                        syncsNewItems: syncsNewItems, access: pending.access)
                }
            }
        }
        var done = Set<ObjectIdentifier>()
        for first in batch.indices where done.insert(ObjectIdentifier(batch[first].collection)).inserted {
            let collection = batch[first].collection
            let members = batch.indices.filter { batch[$0].collection === collection }
            let store: KeychainStore
            do {
                store = try collection.store()
            } catch {
                for index in members { outcomes[index] = .failure(error) }
                continue
            }
            var began = false
            do {
                try store.batch {
                    began = true
                    // Read once, under the batch's write lock: no other process can change it
                    // meanwhile, and none of these calls does (asking costs a lookup each). Apps'
                    // items never sync, so a group of apps' calls does not ask; a setting too
                    // locked to read now is asked again for each item.
                    let unconfined = members.contains { batch[$0].call.owner == nil }
                    let syncsNewItems = unconfined ? store.readSyncDefault() : false
                    for index in members { add(index, to: store, syncsNewItems: syncsNewItems) }
                }
            } catch {
                // Not committed: none of these was stored.
                if began {
                    // The commit failed (a full disk): each is stored again in a transaction of its
                    // own, so what failed the commit fails only its own call.
                    for index in members { add(index, to: store) }
                } else {
                    // No transaction began (another process kept the write lock past the busy
                    // timeout): each gets that answer, as it would alone, without waiting again.
                    for index in members { outcomes[index] = .failure(error) }
                }
            }
        }
        // Before any answer: a client that has its answer finds no secret of its calls left.
        for index in batch.indices { batch[index].secret.wipe() }
        announcingStores = true
        defer { announcingStores = false }
        var changed: [Collection] = []
        for (pending, outcome) in zip(batch, outcomes) {
            let collection = pending.collection
            switch outcome {
            case .success(let (item, replaced, isNew)):
                do {
                    try reply(pending.call) { w in
                        try w.objectPath(collection.itemPath(item.row))
                        try w.objectPath(ObjectPaths.none)
                    }
                } catch {
                    replyError(pending.call, error)
                }
                for row in replaced { emit(collection.path, Interface.collection, "ItemDeleted") { try $0.objectPath(collection.itemPath(row)) } }
                if isNew {
                    emit(collection.path, Interface.collection, "ItemCreated") { try $0.objectPath(collection.itemPath(item.row)) }
                } else {
                    itemChanged(collection, item.row)
                }
                if (isNew || !replaced.isEmpty) && !changed.contains(where: { $0 === collection }) { changed.append(collection) }
            case .failure(let error):
                replyError(pending.call, error)
            case nil:
                replyError(pending.call, ServiceError.failed("the item was not stored"))
            }
        }
        // One announcement per keychain: the property is announced by name only (objects.c).
        for collection in changed { emitPropertiesChanged(collection.path, Interface.collection, ["Items"]) }
    }
}
