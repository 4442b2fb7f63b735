/// The question a person answers before a program uses a key or an item: who asks, for what, and
/// where the use goes. Every door asks it the same way (the SSH agent's `-c` keys now; items'
/// access lists next), and every prompter shows the same `text`, so that two different requests
/// never look alike and none can dress itself up as another.
package struct AccessQuestion: Sendable, Equatable {
    /// The program that asks, as the kernel named it when it connected.
    package struct Asker: Sendable, Equatable {
        /// Its executable (/proc/PID/exe); nil when the kernel would not say.
        package var executable: String?
        /// The executables of its parents, nearest first (the shell, the terminal, the session).
        package var parents: [String]

        package init(executable: String?, parents: [String] = []) {
            self.executable = executable
            self.parents = parents
        }
    }

    /// What it wants to use.
    package enum Target: Sendable, Equatable {
        /// An SSH key in the agent: its comment and fingerprint (SHA256:... or MD5:...).
        case sshKey(comment: String, fingerprint: String)
        /// A keychain item, by what a person recognises it by.
        case item(label: String?, server: String?, account: String?)
    }

    /// Where the use goes: for an SSH key, the hosts the connection's session-binds named. A
    /// forwarded agent is the case to tell apart: the peer is then the user's own ssh, while the
    /// request comes from a host the agent was forwarded to.
    package struct Destination: Sendable, Equatable {
        /// The hosts the agent is forwarded through, from this computer outwards.
        package var forwardedThrough: [String]
        /// The host the signature logs in to; nil when a program on the last forwarded host asks
        /// for a signature there (not a login on a next host).
        package var host: String?
        /// A session-bind was refused: the host could not prove its key.
        package var unverified: Bool

        package init(host: String?, forwardedThrough: [String] = [], unverified: Bool = false) {
            self.host = host
            self.forwardedThrough = forwardedThrough
            self.unverified = unverified
        }

        package static let unverifiedHost = Destination(host: nil, unverified: true)
    }

    package var asker: Asker
    package var target: Target
    /// nil: nothing names one (a local program signing a file or a commit).
    package var destination: Destination?

    package init(asker: Asker, target: Target, destination: Destination? = nil) {
        self.asker = asker
        self.target = target
        self.destination = destination
    }

    /// The dialog's title.
    package var title: String {
        switch target {
        case .sshKey: return "Use of an SSH key"
        case .item: return "Use of a keychain item"
        }
    }

    /// What the person reads: one sentence naming the program, what it wants and where, then its
    /// parents. Everything in it that someone else chose (a key's comment, a path, a host's name)
    /// is escaped and bounded: no control or direction character can rewrite or reorder what the
    /// person reads, no quote can close a name early, and no name can push the rest out of sight.
    package var text: String {
        let program = asker.executable.map { Self.shown($0, limit: 120) } ?? "A program the system would not name"
        var sentence = program + " wants to use "
        switch target {
        case .sshKey(let comment, let fingerprint):
            sentence += "your SSH key " + Self.quoted(comment) + " (" + Self.shown(fingerprint, limit: 60) + ")"
        case .item(let label, let server, let account):
            sentence += "the keychain item " + (label.map { Self.quoted($0) } ?? "without a label")
            var details: [String] = []
            if let account { details.append("account " + Self.quoted(account)) }
            if let server { details.append("on " + Self.shown(server, limit: 64)) }
            if !details.isEmpty { sentence += " (" + details.joined(separator: " ") + ")" }
        }
        if let destination { sentence += destination.clause }
        sentence += "."
        guard !asker.parents.isEmpty else { return sentence }
        let parents = asker.parents.prefix(Self.shownParents).map { Self.shown($0, limit: 56) }
        let more = asker.parents.count > Self.shownParents ? ", ..." : ""
        return sentence + "\nStarted by: " + parents.joined(separator: ", ") + more + "."
    }

    /// Parents shown: the few nearest tell where the request came from (a terminal, an editor,
    /// a service). With the limits of each name, the text stays under 900 bytes, within one line
    /// of pinentry's protocol (1,000).
    static let shownParents = 3

    /// A name in double quotes, escaped and bounded.
    static func quoted(_ name: String, limit: Int = 64) -> String { "\"" + shown(name, limit: limit) + "\"" }

    /// `text` escaped as `TerminalText` escapes it, the double quote too; then cut in the middle
    /// to `limit` bytes of UTF-8, so that both where a path starts (/tmp/...) and what it ends in
    /// stay in sight.
    static func shown(_ text: String, limit: Int) -> String {
        let escaped = TerminalText.pieces(of: text, quotes: true)
        guard escaped.reduce(0, { $0 + $1.utf8.count }) > limit else { return escaped.joined() }
        // Whole escapes and characters only: half of one would read as something else.
        let half = (limit - 3) / 2
        var head = 0, headBytes = 0
        while head < escaped.count, headBytes + escaped[head].utf8.count <= half {
            headBytes += escaped[head].utf8.count
            head += 1
        }
        var tail = escaped.count, tailBytes = 0
        while tail > head, tailBytes + escaped[tail - 1].utf8.count <= limit - 3 - headBytes {
            tailBytes += escaped[tail - 1].utf8.count
            tail -= 1
        }
        return escaped[..<head].joined() + "..." + escaped[tail...].joined()
    }
}

extension AccessQuestion.Destination {
    /// The sentence's end: where the signature goes.
    fileprivate var clause: String {
        if unverified { return " on a connection whose host did not prove its key" }
        // 80: "the host with key SHA256:..." fits whole.
        var through = forwardedThrough.map { AccessQuestion.shown($0, limit: 80) }
        // The first hop and the last two tell where the request came from; up to 16 would not fit.
        if through.count > 3 { through = [through[0], "..."] + through.suffix(2) }
        switch (host.map { AccessQuestion.shown($0, limit: 80) }, through.isEmpty) {
        case (let host?, true):
            return " to log in to " + host
        case (let host?, false):
            return " to log in to " + host + " from " + through.joined(separator: ", then ") + " (your agent is forwarded there)"
        case (nil, false):
            return " for a program on " + through.joined(separator: ", then ") + " (your agent is forwarded there)"
        case (nil, true):
            return ""
        }
    }
}
