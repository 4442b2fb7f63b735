/// What the person answered to an `AccessQuestion`.
package enum AccessAnswer: Equatable, Sendable {
    case allowed
    /// The person said no, or dismissed the question.
    case denied
    /// Nobody could be asked (no prompter, no display, no answer in time); the reason, for the log.
    case unavailable(String)
}

/// Whoever shows an `AccessQuestion` and brings back the answer: pinentry (KeychainPresence) now,
/// the desktop's portal and the terminal next. It shows the question's `text`, nothing else, so
/// that each way of asking names the same program, key or item, and host.
package protocol AccessPrompter: Sendable {
    /// Asks, and waits a bounded time.
    func ask(_ question: AccessQuestion) -> AccessAnswer
}

/// Prompters in order of preference: the first that can ask does (a refusal is final); when none
/// can, nobody was asked, and the caller refuses at once rather than wait.
package struct AccessPrompters: AccessPrompter {
    package var prompters: [any AccessPrompter]

    package init(_ prompters: [any AccessPrompter]) { self.prompters = prompters }

    package func ask(_ question: AccessQuestion) -> AccessAnswer {
        var reasons: [String] = []
        for prompter in prompters {
            let answer = prompter.ask(question)
            guard case .unavailable(let why) = answer else { return answer }
            reasons.append(why)
        }
        return .unavailable(reasons.isEmpty ? NobodyToAsk.why : reasons.joined(separator: "; "))
    }
}

extension NobodyToAsk: AccessPrompter {
    package func ask(_ question: AccessQuestion) -> AccessAnswer { .unavailable(Self.why) }
}
