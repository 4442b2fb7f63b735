/// What open_session's worker hands back after its first byte (whether the user enabled the
/// keychain's SSH agent, SSHAgentEnvironment): the unlock's outcome and detail, framed, written as
/// soon as the unlock is done; then one byte, the sources of the first-login import still to be
/// imported (FirstLoginImport.pending), absent when the worker was stopped before it could tell.
struct UnlockReply {
    var outcome: AsUser.Outcome
    var detail: [UInt8]
    /// None too when the worker was stopped before it could tell.
    var importPending: [FirstLoginImport.Source]

    /// The first write. The detail (the engine's words, one line) is cut to 1 KiB, so the reply
    /// stays within `AsUser.replyLimit`.
    static func encode(_ outcome: AsUser.Outcome, detail: [UInt8]) -> [UInt8] {
        let kept = detail.prefix(1024)
        return [UInt8(truncatingIfNeeded: outcome.rawValue), UInt8(kept.count >> 8), UInt8(kept.count & 0xff)] + kept
    }

    /// Nil for a reply without the first write whole (no password, a worker that failed early).
    init?(_ reply: [UInt8]) {
        guard reply.count >= 3, let outcome = AsUser.Outcome(rawValue: Int32(reply[0])) else { return nil }
        let length = Int(reply[1]) << 8 | Int(reply[2])
        guard reply.count >= 3 + length else { return nil }
        self.outcome = outcome
        detail = Array(reply[3..<3 + length])
        let pending = reply.count > 3 + length ? reply[3 + length] : 0
        importPending = FirstLoginImport.Source.allCases.filter { pending & $0.rawValue != 0 }
    }
}
