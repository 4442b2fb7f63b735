import KeychainCore
import SessionBus

/// The broker, as the service's deputy work needs it (issue 55): the executable installs it
/// (`SecretService.relay`) where a broker keeps the keys, over KeychainBroker's `BrokerRelay`.
package protocol ClientRelay: AnyObject {
    /// `body`, with the process `pidfd` named to the broker by every item key read in it: the
    /// broker judges that program against the item's list and asks the person about it. `note`
    /// follows the broker's question.
    func serving<T>(pidfd: Int32, note: String, _ body: () throws -> T) throws -> T
    /// The entry the broker gives the process `pidfd` on an item's list; nil when it cannot
    /// identify it (a copy in a folder the user may write to, a deleted executable).
    func entry(of pidfd: Int32) throws -> AccessList.Entry?
}

/// The one door every secret leaves by for a program on the bus: GetSecret, GetSecrets, and
/// KWallet's reads (and its writes and lookups, which read what they compare). The service
/// serves any program of the session; the broker must judge that program, never the service.
/// SearchItems, Unlock and attribute reads open no secret and stay as they are. A sandboxed app
/// keeps its own rules (its items only, the portal's per-app secret): not relayed.
extension SecretService {
    nonisolated(unsafe) package static var relay: (any ClientRelay)?

    /// `body` with the call's client relayed. Without a broker, or for a sandboxed app, as it was.
    /// A client whose process the bus cannot name for certain is refused: read as the service, it
    /// would borrow the service's trust.
    package func readingSecrets<T>(for call: Call, _ body: () throws -> T) throws -> T {
        guard let relay = Self.relay, call.caller == .unconfined else { return try body() }
        guard let process = identity(call.sender)?.process, process.isAlive else {
            throw ServiceError.accessDenied("the program that asks (\(call.sender)) could not be told for certain: no secret is given to it")
        }
        let note = "It asks through the Secret Service (keychain-secret-service), as \(call.sender) on the session bus."
        return try relay.serving(pidfd: process.pidfd, note: note, body)
    }

    /// The list of an item a client stores: the client, as the broker names it (python3 as its
    /// `interpreter:` entry); no entry for a client it cannot identify, so that every read of
    /// the item asks. nil (the store's own default) without a broker or for a sandboxed app.
    package func storedAccess(for call: Call) -> AccessList? {
        guard let relay = Self.relay, call.caller == .unconfined else { return nil }
        guard let process = identity(call.sender)?.process, process.isAlive, let entry = try? relay.entry(of: process.pidfd) else {
            return AccessList([])
        }
        return AccessList([entry])
    }

    /// `body`, a store for the call's client: an item it makes, or writes over without being on
    /// its list, gets `access` (the engine's rule for any writer, applied to the client, not to
    /// the service); the client relayed where it can be, so that the broker tells whether the
    /// list names it. One the bus cannot name is not relayed: the service is then the one the
    /// list is checked against, which never names it, so the item gets `access` all the same.
    package func storing<T>(for call: Call, access: AccessList?, _ body: () throws -> T) throws -> T {
        guard let relay = Self.relay, let access else { return try body() }
        return try AccessList.creating(as: access) {
            guard let process = identity(call.sender)?.process, process.isAlive else { return try body() }
            return try relay.serving(pidfd: process.pidfd, note: "", body)
        }
    }

    /// `body`'s answer; nil where the item is locked or gone, and the refusal thrown where the
    /// broker refused it (the person said no, or nobody could be asked).
    static func refusalThrown<T>(_ body: () throws -> T) throws -> T? {
        do {
            return try body()
        } catch let error as KeychainError where error.concernsPresence || error.code == .authFailed {
            throw error
        } catch {
            return nil
        }
    }
}
