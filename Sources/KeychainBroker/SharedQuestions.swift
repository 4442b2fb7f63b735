import KeychainCore

/// One question at a time per program and item (issue 55): while the person is asked whether a
/// program may read an item, another process of the same program asking for the same item waits
/// (`BrokerReply.wait`) instead of opening a second dialog, and then shares the answer that came:
/// an allowance once for it too, or the refusal. So a program that starts several readers at once
/// (a browser's processes, a build's jobs) puts one dialog in front of the person, not many. Only
/// the processes that waited share it: one that asks after the answer came is asked itself.
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

    enum State {
        /// Asked by the connection `by`, since `since`, the connections in `waiting` waiting.
        case asked(by: ObjectIdentifier, since: Double, waiting: Set<ObjectIdentifier>)
        /// Answered, for the connections that waited and have not yet taken it.
        case answered(allowed: Bool, at: Double, waiting: Set<ObjectIdentifier>)
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

    private var questions: [Key: State] = [:]

    package init() {}

    package mutating func turn(_ key: Key, by asker: ObjectIdentifier, now: Double) -> Turn {
        switch questions[key] {
        case .asked(let by, let since, var waiting)? where by != asker && now - since < questionTimeout:
            waiting.insert(asker)
            questions[key] = .asked(by: by, since: since, waiting: waiting)
            return .wait
        case .answered(let allowed, let at, var waiting)? where waiting.contains(asker) && now - at < shareWindow:
            waiting.remove(asker)
            questions[key] = .answered(allowed: allowed, at: at, waiting: waiting)
            return .shared(allowed: allowed)
        case .asked(let by, _, let waiting)? where by == asker:
            // Its own question again (a wrong password): those waiting still wait for it.
            questions[key] = .asked(by: asker, since: now, waiting: waiting)
            return .ask
        default:
            questions[key] = .asked(by: asker, since: now, waiting: [])
            if questions.count > capacity { dropOldest() }
            return .ask
        }
    }

    /// The person's answer to the question `key`, given through `asker`.
    package mutating func answered(_ key: Key, allowed: Bool, by asker: ObjectIdentifier, now: Double) {
        var waiting: Set<ObjectIdentifier> = []
        if case .asked(_, _, let those)? = questions[key] { waiting = those }
        waiting.remove(asker)
        questions[key] = .answered(allowed: allowed, at: now, waiting: waiting)
        if questions.count > capacity { dropOldest() }
    }

    /// `asker` could ask nobody, or its connection closed: another process may ask.
    package mutating func gaveUp(_ key: Key, by asker: ObjectIdentifier) {
        if case .asked(let by, _, _)? = questions[key], by == asker { questions[key] = nil }
    }

    package mutating func connectionClosed(_ asker: ObjectIdentifier) {
        for (key, state) in questions {
            if case .asked(let by, _, _) = state, by == asker { questions[key] = nil }
        }
    }

    private mutating func dropOldest() {
        func time(_ state: State) -> Double {
            switch state {
            case .asked(_, let since, _): return since
            case .answered(_, let at, _): return at
            }
        }
        let byAge = questions.sorted { time($0.value) < time($1.value) }
        for (old, _) in byAge.prefix(questions.count - capacity) { questions[old] = nil }
    }
}
