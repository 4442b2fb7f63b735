import KeychainCore
import KeychainPeers

/// One question at a time per program and item (issue 55): while the person is asked whether a
/// program may read an item, another process of the same program asking for the same item waits
/// (`BrokerReply.wait`) instead of opening a second dialog, and then shares the answer that came:
/// an allowance once for it too, or the refusal. So a program that starts several readers at once
/// (a browser's processes, a build's jobs) puts one dialog in front of the person, not many. Only
/// the processes that waited share it: one that asks after the answer came is asked itself. And
/// only those of the asker's own process tree (review 55): the person answered for that one
/// program run, not for any process of the user that starts the same program meanwhile.
///
/// Kept by the broker, as the question limit is: the processes do not know of each other.
package struct SharedQuestions {
    /// How long an answer is shared after it came: the processes that waited, retrying every
    /// quarter of a second, take it within this; a later read asks again.
    package var shareWindow: Double = 5
    /// How long a question may stay unanswered before another process asks again (the
    /// answerers' own limit is 120 s): an asker that hangs holds the others that long at most.
    package var questionTimeout: Double = 130
    /// Questions kept at most; past it the oldest go (a waiting process then asks itself).
    package var capacity = 4096

    package struct Key: Hashable {
        var uid: UInt32
        var asker: String
        var keychain: Bytes
        var rowID: Int64

        package init(uid: UInt32, asker: String, keychain: Bytes, rowID: Int64) {
            self.uid = uid
            self.asker = asker
            self.keychain = keychain
            self.rowID = rowID
        }
    }

    /// A question open: asked by the connection `by`, for the process `process`, since `since`;
    /// `sharers` the waiting connections it may be shared with. The process is held weakly: by
    /// its connection while that lives, never by the question (a relayed process's handle, and
    /// its descriptors, go with the request that brought it), so nothing is shared once it is gone.
    struct Question {
        var by: ObjectIdentifier
        weak var process: CallerHandle?
        var since: Double
        var sharers: Set<ObjectIdentifier>
    }

    /// An answer, for the sharers that waited and have not yet taken it.
    struct Answer {
        var allowed: Bool
        var at: Double
        var sharers: Set<ObjectIdentifier>
    }

    /// What to do with a request that would ask the person.
    package enum Turn: Equatable {
        /// Ask: no one else is asking this.
        case ask
        /// Another process is asking this now.
        case wait
        /// The person just answered this for another process.
        case shared(allowed: Bool)
    }

    private var questions: [Key: Question] = [:]
    private var answers: [Key: Answer] = [:]

    package init() {}

    /// `sharesWith` says whether the caller may take the answer to a question asked for the
    /// process given (review 55): a process of its own tree, and a program not driven by
    /// anyone (not an interpreter, not `security`). One that may not still waits while the
    /// question is open, and is then asked itself: one question at a time still holds.
    package mutating func turn(
        _ key: Key, by asker: ObjectIdentifier, process: CallerHandle?, now: Double, sharesWith: (CallerHandle?) -> Bool
    ) -> Turn {
        if let answer = answers[key], answer.sharers.contains(asker), now - answer.at < shareWindow {
            answers[key]?.sharers.remove(asker)
            return .shared(allowed: answer.allowed)
        }
        if var question = questions[key], question.by != asker, now - question.since < questionTimeout {
            if !question.sharers.contains(asker), sharesWith(question.process) {
                question.sharers.insert(asker)
                questions[key] = question
            }
            return .wait
        }
        if var question = questions[key], question.by == asker {
            // Its own question again (a wrong password): those waiting still wait for it.
            question.since = now
            question.process = process
            questions[key] = question
            return .ask
        }
        questions[key] = Question(by: asker, process: process, since: now, sharers: [])
        if questions.count > capacity { dropOldest() }
        return .ask
    }

    /// The person's answer to the question `key`, given through `asker`. Only the asker's own
    /// answer ends its question: another connection that sends one (never asked) shares nothing.
    package mutating func answered(_ key: Key, allowed: Bool, by asker: ObjectIdentifier, now: Double) {
        guard let question = questions[key], question.by == asker else { return }
        questions[key] = nil
        answers[key] = Answer(allowed: allowed, at: now, sharers: question.sharers.subtracting([asker]))
        if answers.count > capacity { dropOldest() }
    }

    /// `asker` could ask nobody, or its connection closed: another process may ask.
    package mutating func gaveUp(_ key: Key, by asker: ObjectIdentifier) {
        if questions[key]?.by == asker { questions[key] = nil }
    }

    package mutating func connectionClosed(_ asker: ObjectIdentifier) {
        for (key, question) in questions where question.by == asker { questions[key] = nil }
    }

    private mutating func dropOldest() {
        for (old, _) in questions.sorted(by: { $0.value.since < $1.value.since }).prefix(max(0, questions.count - capacity)) {
            questions[old] = nil
        }
        for (old, _) in answers.sorted(by: { $0.value.at < $1.value.at }).prefix(max(0, answers.count - capacity)) { answers[old] = nil }
    }
}

extension BrokerService {
    /// Whether a caller may take the answer given to another process of its tree: a program
    /// that is itself (identified, untraced, nothing preloaded), not one anyone drives with
    /// arguments or a script (an interpreter, `security`: the question names the program, not
    /// what it was told to do), and not one whose every use is confirmed.
    func mayShareAnswers(_ caller: any CallerFacts) -> Bool {
        guard caller.canMatchSilently, !caller.isInterpreter, !caller.confirmsEachUse, let path = caller.executablePath else { return false }
        return !path.hasSuffix("/security")
    }
}
