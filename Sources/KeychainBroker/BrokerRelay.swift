import Glibc
import KeychainCore

/// The process a deputy (the SSH agent) serves while it reads an item for it: its pidfd goes with
/// each unwrap this thread sends (`RelayMarks`), so that the broker judges it, and the deputy's
/// own lines (what the broker cannot know: a key's fingerprint, the host a signature goes to)
/// follow the broker's question.
package struct RelayedClient: Sendable {
    /// Borrowed: the deputy keeps it open for the request.
    package var pidfd: Int32
    /// Ask the person whatever the list says (`ssh-add -c`).
    package var confirmEach: Bool
    /// Made only when the broker asks a question: most reads ask none, and the SSH agent's lines
    /// (the question's text, quoted for a terminal) cost more to make than its whole relay.
    private let makeNote: @Sendable () -> String
    package var note: String { makeNote() }

    package init(pidfd: Int32, confirmEach: Bool, note: @autoclosure @escaping @Sendable () -> String) {
        self.pidfd = pidfd
        self.confirmEach = confirmEach
        makeNote = note
    }

    var marks: RelayMarks { confirmEach ? [.relayedCaller, .confirmEach] : [.relayedCaller] }
}

/// Per thread: the agent serves each connection on a thread of its own, and the engine between
/// the agent and the broker's client has no parameter for it.
package enum BrokerRelay {
    private static let mutex = Mutex()
    nonisolated(unsafe) private static var clients: [pthread_t: RelayedClient] = [:]

    /// Runs `body` with `client` relayed by every unwrap this thread makes.
    package static func serving<T>(_ client: RelayedClient, _ body: () throws -> T) rethrows -> T {
        let thread = pthread_self()
        mutex.withLock { clients[thread] = client }
        defer { mutex.withLock { clients[thread] = nil } }
        return try body()
    }

    static var current: RelayedClient? {
        let thread = pthread_self()
        return mutex.withLock { clients[thread] }
    }
}
