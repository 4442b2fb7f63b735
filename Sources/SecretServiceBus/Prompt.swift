import Glibc
import KeychainCore
import SecretServiceItems
import SessionBus

/// A Prompt object: what Unlock, CreateCollection and Collection.Delete return when a person must
/// type a password. Prompt() asks for pinentry, which starts when this client has no other
/// pinentry running and fewer than `SecretService.pinentriesAtOnce` run in all; the outcome is the
/// Completed signal (dismissed, result). A prompt belongs to the connection that caused it: to
/// any other it does not exist.
package final class Prompt {
    package enum Action {
        /// The objects asked for and the locked collection each is in.
        case unlock([(String, Collection)])
        case create(label: String, alias: String)
        /// Deleting a keychain, once its own password is given.
        case delete(Collection)
    }

    static let tries = 3

    let id: String
    /// The order prompts were made in: waiting ones start in this order.
    let sequence: UInt64
    /// The connection that caused it: to any other the prompt does not exist.
    let owner: String
    /// Whom the limits count it for: a sandboxed app (all its connections together), else the
    /// connection.
    let requester: String
    /// The sandboxed app asking, named in the dialog.
    let appID: String?
    let action: Action
    private(set) var pinentry: Pinentry?
    private var pending: [Collection] = []
    private var unlockedPaths: [String] = []
    private var failures = 0
    /// Prompt() was called: the prompt waits for its turn, or runs.
    private(set) var requested = false
    private var started = false
    /// Called once the prompt completes (dismissed or not): the portal's pending calls wait on it.
    package var completion: ((_ dismissed: Bool) -> Void)?

    init(id: String, sequence: UInt64, owner: String, caller: Caller, action: Action) {
        self.id = id
        self.sequence = sequence
        self.owner = owner
        appID = caller.owner
        requester = caller.owner.map { "app " + $0 } ?? owner
        self.action = action
    }

    /// Who asks, as the dialog names them.
    private var asker: String { appID.map { "The application \u{201C}\($0)\u{201D}" } ?? "An application" }

    var path: String { ObjectPaths.prompts + id }

    /// Waiting for a pinentry of its own.
    var isWaiting: Bool { requested && !started }

    package func request() {
        requested = true
    }

    func start(_ service: SecretService) {
        guard !started else { return }
        started = true
        switch action {
        case .unlock(let objects):
            for (_, collection) in objects where !pending.contains(where: { $0 === collection }) { pending.append(collection) }
        case .delete(let collection):
            pending = [collection]
        case .create:
            break
        }
        guard let pinentry = Pinentry(program: service.pinentryProgram) else {
            complete(service, dismissed: true)
            return
        }
        self.pinentry = pinentry
        askNext(error: nil)
    }

    private func askNext(error: String?) {
        switch action {
        case .unlock:
            guard let collection = pending.first else { return }
            pinentry?.ask(
                title: "Unlock keychain",
                description: "\(asker) wants access to the keychain \u{201C}\(collection.name)\u{201D}. Enter its password to unlock it.",
                prompt: "Password:", error: error)
        case .delete(let collection):
            pinentry?.ask(
                title: "Delete keychain",
                description: "\(asker) wants to delete the keychain \u{201C}\(collection.name)\u{201D} and every item in it. Enter its password to delete it.",
                prompt: "Password:", error: error)
        case .create(let label, _):
            pinentry?.ask(
                title: "New keychain",
                description: "\(asker) wants to create a new keychain \u{201C}\(label.isEmpty ? "keychain" : label)\u{201D}. Choose a password for it.",
                prompt: "Password:", error: error, repeatPrompt: "Repeat:")
        }
    }

    func pinentryReadable(_ service: SecretService) {
        guard let event = pinentry?.readable() else { return }
        switch event {
        case .cancelled:
            complete(service, dismissed: true)
        case .passphrase(var password):
            defer { password.wipe() }
            attempt(service, password)
        }
    }

    private func attempt(_ service: SecretService, _ password: Bytes) {
        switch action {
        case .unlock(let objects):
            guard let collection = pending.first else { return }
            do {
                try collection.store().unlock(password: password)
                pending.removeFirst()
                unlockedPaths += objects.filter { $0.1 === collection }.map(\.0)
                failures = 0
                if pending.isEmpty { complete(service, dismissed: false) } else { askNext(error: nil) }
            } catch let error as KeychainError where error.code == .authFailed {
                failures += 1
                if failures >= Self.tries { complete(service, dismissed: true) } else { askNext(error: "Wrong password; try again.") }
            } catch {
                SecretService.log("cannot unlock \(collection.name): \(error)")
                complete(service, dismissed: true)
            }
        case .delete(let collection):
            do {
                try collection.store().verify(password: password)
            } catch let error as KeychainError where error.code == .authFailed {
                failures += 1
                if failures >= Self.tries { complete(service, dismissed: true) } else { askNext(error: "Wrong password; try again.") }
                return
            } catch {
                SecretService.log("cannot open \(collection.name): \(error)")
                complete(service, dismissed: true)
                return
            }
            do {
                try service.deleteCollection(collection)
                complete(service, dismissed: false)
            } catch {
                SecretService.log("\(collection.name) was not deleted: \(ServiceError(error).message)")
                complete(service, dismissed: true)
            }
        case .create(let label, let alias):
            guard !password.isEmpty else {
                askNext(error: "The password cannot be empty.")
                return
            }
            do {
                let collection = try service.createCollection(label: label, alias: alias, password: password)
                unlockedPaths = [collection.path]
                complete(service, dismissed: false)
            } catch {
                SecretService.log("cannot create the keychain: \(error)")
                complete(service, dismissed: true)
            }
        }
    }

    /// Sends Completed and retires the prompt; the next waiting prompt gets its pinentry.
    func complete(_ service: SecretService, dismissed: Bool) {
        cancel()
        service.prompts[id] = nil
        service.startWaitingPrompts()
        service.noticeLockChanges()
        service.emit(path, Interface.prompt, "Completed") { w in
            try w.bool(dismissed)
            if case .create = action, !dismissed {
                try w.container(BusType.variant, "o") { try w.objectPath(unlockedPaths.first ?? ObjectPaths.none) }
            } else {
                try w.container(BusType.variant, "ao") { try w.objectPaths(dismissed ? [] : unlockedPaths) }
            }
        }
        completion?(dismissed)
        completion = nil
    }

    func cancel() {
        pinentry?.stop()
        pinentry = nil
    }
}

extension SecretService {
    /// A new prompt for the call's connection. A connection holds at most `promptsPerClient`, a
    /// sandboxed app (however many connections it opens) `promptsPerApp`.
    package func makePrompt(_ action: Prompt.Action, for call: Call) throws -> String {
        let id = nextID("p")
        let prompt = Prompt(id: id, sequence: UInt64(id.dropFirst()) ?? 0, owner: call.sender, caller: call.caller, action: action)
        let limit = prompt.appID == nil ? Self.promptsPerClient : Self.promptsPerApp
        guard prompts.values.filter({ $0.requester == prompt.requester }).count < limit else {
            throw ServiceError.limitsExceeded("\(prompt.appID ?? "this client") has \(limit) open prompts")
        }
        prompts[prompt.id] = prompt
        return prompt.path
    }

    /// Starts waiting prompts, oldest first, while their requester has no pinentry running and
    /// fewer than `pinentriesAtOnce` run in all.
    package func startWaitingPrompts() {
        // Each start either runs a pinentry or completes the prompt at once (no pinentry program),
        // which removes it: the loop ends.
        while true {
            let running = prompts.values.filter { $0.pinentry != nil }
            guard running.count < Self.pinentriesAtOnce,
                let next = prompts.values.filter({ prompt in prompt.isWaiting && !running.contains { $0.requester == prompt.requester } })
                    .min(by: { $0.sequence < $1.sequence })
            else { return }
            next.start(self)
        }
    }

    func promptMethod(_ member: String, _ call: Call) throws {
        // Another connection's prompt does not exist for this one: it can neither dismiss it nor
        // raise its dialog.
        guard call.path.hasPrefix(ObjectPaths.prompts), let prompt = prompts[String(call.path.dropFirst(ObjectPaths.prompts.count))],
            prompt.owner == call.sender
        else {
            throw ServiceError.noSuchObject("no prompt \(call.path)")
        }
        switch member {
        case "Prompt":
            _ = try call.reader.string()  // the window id: pinentry places its own dialog
            try reply(call)
            prompt.request()
            startWaitingPrompts()
        case "Dismiss":
            try reply(call)
            prompt.complete(self, dismissed: true)
        default:
            throw ServiceError.notSupported("unknown method \(member)")
        }
    }

    /// A new keychain in the keychains folder, named after the label, unlocked.
    func createCollection(label: String, alias: String, password: Bytes) throws -> Collection {
        var base = String(
            label.unicodeScalars.map { scalar -> Character in
                scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_" ? Character(scalar) : "_"
            })
        if base.isEmpty { base = "keychain" }
        var name = base, number = 1
        while KeychainFile.exists(KeychainFile.resolve(name)) {
            number += 1
            name = "\(base)-\(number)"
        }
        let file = KeychainFile.resolve(name)
        let store = try KeychainStore.create(at: file, password: password, storage: .kernel)
        if !label.isEmpty { try store.setCollectionLabel(label) }
        let collection = collections.add(file: file)
        if !alias.isEmpty { try collections.setAlias(alias, to: collection) }
        collection.announcedLocked = false
        emit(ObjectPaths.root, Interface.service, "CollectionCreated") { try $0.objectPath(collection.path) }
        emitPropertiesChanged(ObjectPaths.root, Interface.service, ["Collections"])
        return collection
    }
}
