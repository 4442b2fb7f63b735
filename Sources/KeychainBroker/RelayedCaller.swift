import Glibc
import KeychainCore
import KeychainPeers

/// What an unwrap's op byte says of a relay (issue 55): a deputy, a daemon of the user that serves
/// other programs (the SSH agent, the Secret Service), asks for an item key on behalf of the
/// process it serves, and passes that process's pidfd with the message (SCM_RIGHTS), so that the
/// broker judges the program the person knows (ssh, git), not the daemon between them.
package struct RelayMarks: OptionSet, Sendable, Equatable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The message carries the served process's pidfd.
    package static let relayedCaller = RelayMarks(rawValue: 0x40)
    /// Ask the person even where the list names the served process, and never write an entry for
    /// it (`ssh-add -c`: every use is confirmed). Only with `relayedCaller`.
    package static let confirmEach = RelayMarks(rawValue: 0x20)
    static let all: RelayMarks = [.relayedCaller, .confirmEach]

    /// The marks of an encoded request (its first byte).
    package static func of(_ message: Bytes) -> RelayMarks {
        guard let first = message.first else { return [] }
        return RelayMarks(rawValue: first & all.rawValue)
    }

    /// Marks only on an unwrap or a whoAmI (the Secret Service asks who a client that stores an
    /// item is, to write its entry), and `confirmEach` only with a relayed caller.
    static func check(_ first: UInt8, op: BrokerOp) throws {
        let marks = RelayMarks(rawValue: first & all.rawValue)
        guard marks.isEmpty || (op.carriesRelay && marks.contains(.relayedCaller)) else {
            throw KeychainError.decode("relay marks on a request that carries no relayed caller")
        }
    }
}

/// The process a deputy relays one request for: pinned by the pidfd it passed.
package final class RelayedProcess {
    private let pinned: PinnedProcess
    package let marks: RelayMarks
    private var opened: CallerHandle?

    /// Takes `pidfd` over (closed here, whatever the outcome); nil when it is not a pidfd of a
    /// process this broker sees.
    package init?(pidfd: Int32, marks: RelayMarks) {
        guard let pinned = PinnedProcess(adopting: pidfd) else { return nil }
        self.pinned = pinned
        self.marks = marks
    }

    /// Its pid, in the broker's pid namespace.
    package var pid: Int32 { pinned.pid }

    /// Its handle, made at first use: a process judged already on this connection is known by
    /// its pid and the earlier handle (`BrokerPeer.facts(of:)`), and the SSH agent relays each
    /// client twice (its judging sent ahead, then its signature's unwrap), so the second needs
    /// no descriptors of its own.
    package var handle: CallerHandle {
        if let opened { return opened }
        let made = CallerHandle(pinned: pinned)
        opened = made
        return made
    }
}

/// A relayed process as the decisions see it: judged as itself, its deputy named beside it in
/// the question and the log.
struct RelayedCallerFacts: CallerFacts {
    var client: any CallerFacts
    var deputy: any CallerFacts
    var confirmsEachUse: Bool

    var entry: AccessList.Entry? { client.entry }
    var canMatchSilently: Bool { client.canMatchSilently && !confirmsEachUse }
    var isInterpreter: Bool { client.isInterpreter }
    var parentEntries: [AccessList.Entry] { client.parentEntries }
    var summary: String { client.summary + ", through " + Self.name(of: deputy) }
    var chain: [String] { client.chain }
    var warnings: [String] { client.warnings }

    /// "keychain-ssh-agent (pid 12)".
    static func name(of deputy: any CallerFacts) -> String {
        let path = deputy.executablePath ?? "?"
        return (path.split(separator: "/").last.map(String.init) ?? path) + " (\(path))"
    }
}

extension BrokerOp {
    /// The requests a deputy may send for the process it serves.
    package var carriesRelay: Bool { self == .unwrap || self == .whoAmI }
}

extension AccessDecision {
    /// The deputies' default paths: the daemons that serve other programs of the session.
    package static let defaultDeputies: [String] = ["/usr/bin/keychain-ssh-agent", "/usr/bin/keychain-secret-service"]

    /// Whether `caller` may relay for another process: its executable on the deputy list, and it
    /// trusted to be itself (identified, not traced, preloaded or an interpreter).
    package func isDeputy(_ caller: any CallerFacts) -> Bool {
        guard caller.canMatchSilently, !caller.isInterpreter, case .executable(let path)? = caller.entry else { return false }
        return deputies.contains(path)
    }
}

extension BrokerService {
    /// Who an unwrap is judged as: the peer itself, or the process its deputy relays for. A
    /// relay from a program that is no deputy is refused and logged: passing a pidfd must not be
    /// a way to borrow another program's name.
    /// `forKey`: an unwrap's, not a whoAmI's.
    func callerFacts(of peer: BrokerPeer, _ evaluate: CallerEvaluator, uid: UInt32, keychain: String, forKey: Bool = true) throws -> any CallerFacts {
        let facts = peer.facts(evaluate)
        guard let relayed = peer.relayed else { return facts }
        guard decision.isDeputy(facts) else {
            record(
                uid: uid, keychain: keychain, caller: facts.summary, chain: facts.chain.joined(separator: " < "),
                decision: "refused: relayed a caller, not a deputy")
            throw KeychainError.param("only a deputy (keychain-broker --deputy) may relay a caller")
        }
        return RelayedCallerFacts(
            client: peer.facts(of: relayed, forKey: forKey, evaluate), deputy: facts, confirmsEachUse: relayed.marks.contains(.confirmEach))
    }
}
