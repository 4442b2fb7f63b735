import Glibc
import KeychainCore
import KeychainPeers

/// What the broker's decisions need to know of a caller. KeychainPeers' `CallerTrust` is the real
/// evaluator (wired in at merge); `ProcCallerFacts` is a minimal stand-in over /proc.
package protocol CallerFacts: Sendable {
    /// The entry an access list would hold for this caller; nil when it cannot be identified (a
    /// copy the user owns, a deleted executable): such a caller gets no entry, only Allow once.
    var entry: AccessList.Entry? { get }
    /// Whether an entry naming it may be trusted without asking: a root-owned executable, no
    /// untrusted ancestor, and a system that stops same-uid processes from tracing it.
    var canMatchSilently: Bool { get }
    /// It runs whatever script it is given (python3, perl, node, a shell): only an
    /// `interpreter:` entry matches it.
    var isInterpreter: Bool { get }
    /// The entries of its parents, nearest first.
    var parentEntries: [AccessList.Entry] { get }
    /// One line for people (the question, the log): the program and its pid.
    var summary: String { get }
    /// Its parents, nearest first, for the log.
    var chain: [String] { get }
    /// What `whoAmI` shows besides (why it cannot match silently).
    var warnings: [String] { get }
    /// Every use is confirmed (a relayed `ssh-add -c` key): an answer is never "always".
    var confirmsEachUse: Bool { get }
}

extension CallerFacts {
    package var confirmsEachUse: Bool { false }

    /// The executable the entry names.
    var executablePath: String? {
        switch entry {
        case .executable(let path)?, .executableUnder(let path, _)?, .interpreter(let path)?: return path
        default: return nil
        }
    }
}

/// Where the broker evaluates a caller: the descriptors pinned when it connected, and its uid.
package typealias CallerEvaluator = @Sendable (_ handle: CallerHandle, _ uid: uid_t) -> any CallerFacts

/// A caller as the decisions see it: made from KeychainPeers' `Caller` (`init(_:)`), or by hand
/// in tests.
package struct CallerRecord: CallerFacts {
    package var entry: AccessList.Entry?
    package var canMatchSilently: Bool
    package var isInterpreter: Bool
    /// The parents' entries: given, or read at their first use (`ParentsRead`).
    package var parentEntries: [AccessList.Entry] {
        get { parentsRead?.entries ?? givenParents }
        set {
            givenParents = newValue
            parentsRead = nil
        }
    }
    private var givenParents: [AccessList.Entry]
    private var parentsRead: ParentsRead?
    package var summary: String
    package var chain: [String]
    package var warnings: [String]
    /// What it was made from, for `BrokerPeer` to tell whether the process is still the same.
    package var caller: Caller?

    package init(
        entry: AccessList.Entry?, canMatchSilently: Bool, isInterpreter: Bool = false, parentEntries: [AccessList.Entry] = [],
        summary: String, chain: [String] = [], warnings: [String] = []
    ) {
        self.entry = entry
        self.canMatchSilently = canMatchSilently
        self.isInterpreter = isInterpreter
        givenParents = parentEntries
        self.summary = summary
        self.chain = chain
        self.warnings = warnings
    }

    /// The evaluation KeychainPeers made. An interpreter's entry is `interpreter:` (only such an
    /// entry, written on purpose, ever names it), and being one is not a reason of its own to
    /// refuse a silent match against that entry; every other warning is. The parents' entries end
    /// at the first parent that is neither identified nor a shell: a helper's parent rule never
    /// looks past a program it cannot vouch for.
    package init(_ caller: Caller) {
        let interpreter = caller.warnings.contains(.interpreter)
        let path = caller.entry.flatMap { AccessList.Entry($0) }.flatMap { entry -> String? in
            if case .executable(let path) = entry { return path }
            return nil
        }
        if interpreter, let path {
            entry = .interpreter(path)
        } else {
            entry = caller.entry.flatMap { AccessList.Entry($0) }
        }
        canMatchSilently = entry != nil && caller.warnings.allSatisfy { $0 == .interpreter }
        isInterpreter = interpreter
        givenParents = Self.entries(caller.parentEntries, chain: caller.chain)
        summary = caller.summary
        chain = caller.chain
        warnings = caller.warnings.map(\.rawValue)
        self.caller = caller
    }

    /// A caller evaluated with its parents named only: their entries are read when a decision first
    /// needs them (a helper's parent rule), through `handle`, and kept with the record.
    package init(namingParentsOf caller: Caller, handle: CallerHandle) {
        self.init(caller)
        parentsRead = ParentsRead {
            guard let (chain, entries) = CallerTrust.inspectParents(of: caller, handle: handle) else { return [] }
            return Self.entries(entries, chain: chain)
        }
    }

    /// Parents' entries as the decisions take them: they end at the first parent that is neither
    /// identified nor a shell.
    static func entries(_ texts: [String?], chain: [String]) -> [AccessList.Entry] {
        var parents: [AccessList.Entry] = []
        for (index, text) in texts.enumerated() {
            if let text, let parent = AccessList.Entry(text) {
                parents.append(parent)
                continue
            }
            let shown = index < chain.count ? Caller.withoutPid(chain[index]) : ""
            guard AccessDecision.shells.contains(shown) else { break }
            parents.append(.interpreter(shown))
        }
        return parents
    }

    package static let evaluate: CallerEvaluator = { handle, uid in
        CallerRecord(namingParentsOf: CallerTrust.evaluate(handle, uid: uid, inspectingParents: false), handle: handle)
    }
}

/// Parents' entries read once, at their first use: the broker serves one request at a time, and a
/// record lives with its connection.
final class ParentsRead: @unchecked Sendable {
    private let read: () -> [AccessList.Entry]
    private var done: [AccessList.Entry]?

    init(_ read: @escaping () -> [AccessList.Entry]) { self.read = read }

    var entries: [AccessList.Entry] {
        if let done { return done }
        let found = read()
        done = found
        return found
    }
}
