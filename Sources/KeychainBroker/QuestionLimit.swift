import KeychainCore
import KeychainPeers

/// No flood of dialogs: a caller refused `limit` times within `window` seconds (for the same uid)
/// is refused at once, without a question, for `window` seconds after that last refusal. A
/// program that asks again and again (a loop, or one hoping the person clicks through out of
/// weariness) stops putting the question in front of the person.
///
/// Kept by the broker, not by the client that shows the dialog: that client is the caller
/// itself, and an untrusted caller would not hold itself back.
package struct QuestionLimit: Sendable {
    package var limit = 3
    package var window: Double = 60
    /// Callers kept at most; past it the ones refused longest ago are dropped, so that a uid
    /// cannot grow the broker's memory by naming ever new callers.
    package var capacity = 4096
    private var callers: [Key: Refusals] = [:]

    struct Key: Hashable {
        var uid: UInt32
        var caller: String
    }

    struct Refusals {
        var times: [Double] = []
        var blockedUntil: Double = 0
    }

    package init() {}

    /// Whether `caller` may be asked now.
    package mutating func allows(_ caller: String, uid: UInt32, now: Double) -> Bool {
        let key = Key(uid: uid, caller: caller)
        guard let refusals = callers[key] else { return true }
        if now < refusals.blockedUntil { return false }
        if refusals.times.allSatisfy({ now - $0 >= window }) { callers[key] = nil }
        return true
    }

    /// The person refused `caller`.
    package mutating func refused(_ caller: String, uid: UInt32, now: Double) {
        let key = Key(uid: uid, caller: caller)
        var refusals = callers[key] ?? Refusals()
        refusals.times = Array((refusals.times.filter { now - $0 < window } + [now]).suffix(limit))
        if refusals.times.count >= limit { refusals.blockedUntil = now + window }
        callers[key] = refusals
        guard callers.count > capacity else { return }
        let byAge = callers.sorted { ($0.value.times.last ?? 0) < ($1.value.times.last ?? 0) }
        for (old, _) in byAge.prefix(callers.count - capacity) { callers[old] = nil }
    }

    /// What names a caller across its processes: its access-list entry, else (a copy the user
    /// owns, a deleted executable) its summary and parents without their pids, so that starting
    /// the same program again does not make it a new caller.
    package static func key(entry: String?, summary: String, chain: [String]) -> String {
        if let entry, !entry.isEmpty { return entry }
        return ([summary] + chain).map { Caller.withoutPid($0) }.joined(separator: " < ")
    }
}

extension BrokerService {
    /// The question limit at the point where a caller would be asked (or answers): a refusal is
    /// counted, and a caller refused too often is refused again without a question. A request
    /// that may not ask is left to its own refusal (errSecInteractionNotAllowed): no question
    /// would be shown for it anyway.
    func limitQuestions(
        _ caller: any CallerFacts, answer: WireAnswer, interaction: CustodyInteraction, uid: UInt32, log: (String) -> Void
    ) throws {
        let asker = QuestionLimit.key(entry: caller.entry?.text, summary: caller.summary, chain: caller.chain)
        let now = Double(clock())
        if answer == .deny {
            questions.refused(asker, uid: uid, now: now)
            return
        }
        if answer == .none, interaction != .allowed { return }
        guard questions.allows(asker, uid: uid, now: now) else {
            log("denied: asked too often")
            throw KeychainError.presence(.authFailed, "refused \(questions.limit) times within a minute: not asked again for a minute")
        }
    }
}
