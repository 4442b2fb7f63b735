import Glibc

/// An item's list of the programs it trusts (Apple's access list, `SecAccess` with its trusted
/// applications, and the partition list of `set-key-partition-list`), kept in the item's own
/// metadata under `AccessList.attribute`, so that it is sealed and bound to the secret with the
/// rest of the row: a client that edits the file cannot widen it.
///
/// The broker (`keychain-broker`) reads it from metadata it opened itself and gives the item's
/// key only to a caller that one of its entries names; any other caller gets the person's answer
/// or nothing. An item without the attribute was made before lists existed (`isLegacy`).
package struct AccessList: Equatable, Sendable {
    /// The metadata attribute that holds the list ("tapp": trusted applications). Not an Apple
    /// attribute: the Swift API never returns it as one.
    package static let attribute = "tapp"

    /// The program that adds items in this process, the one entry of the list every item it adds
    /// without a list gets (`creatorAttribute`). Each front end sets its own (the git helper its
    /// `exe:PATH<git`); nil: `exe:` and this process's executable.
    package nonisolated(unsafe) static var creatorEntry: Entry? {
        didSet { creatorAttribute = Self.attribute(for: creatorEntry ?? executableEntry) }
    }

    /// `creatorEntry`'s list as the attribute's value, made once per setting: every add writes it.
    package private(set) nonisolated(unsafe) static var creatorAttribute: AttributeValue? = attribute(for: executableEntry)

    /// What an importer of another keychain's or provider's items calls (`security import-secrets`,
    /// the PAM module's first-login import): the items it adds keep no list, as items from before
    /// lists do, so the broker gives each to the front end its shape names (git's and docker's
    /// logins to their helpers, the Secret Service's items to the service), not to the importer.
    package static func addsUnlisted() { creatorAttribute = nil }

    /// `body` with `list` as what new items, and items written over by a program their list does
    /// not name, get: a deputy (the Secret Service) writing for its client, whose list it is, not
    /// the deputy's. For a process that writes from one thread (the service's loop).
    package static func creating<T>(as list: AccessList, _ body: () throws -> T) rethrows -> T {
        let saved = creatorAttribute
        creatorAttribute = .string(list.text)
        defer { creatorAttribute = saved }
        return try body()
    }

    /// This process's executable as an entry, resolved once; nil when it cannot be read.
    private static var executableEntry: Entry? {
        guard let resolved = realpath("/proc/self/exe", nil) else { return nil }
        defer { free(resolved) }
        return .executable(String(cString: resolved))
    }

    private static func attribute(for entry: Entry?) -> AttributeValue? {
        entry.map { .string(AccessList([$0]).text) }
    }

    /// One trusted program, or a rule. Spelled as text so that a list reads the same in the file,
    /// in `security access` and in the log.
    package enum Entry: Hashable, Sendable {
        /// Any program, asked nothing (`-A`): today's behaviour, chosen for this item.
        case anyProgram
        /// An executable by absolute path, owned by root and not writable by the user.
        case executable(String)
        /// An executable, trusted only while `parents` (one of them) runs it: the git and docker
        /// helpers, trusted when git, docker, podman or skopeo start them.
        case executableUnder(String, parents: [String])
        /// An interpreter the person chose to trust for this item (`security access grant
        /// --interpreter`): matched although it runs whatever script it is given.
        case interpreter(String)
        /// A Flatpak app by id, known from its executable under /var/lib/flatpak/app/ID.
        case flatpak(String)
        /// A snap by name, known from its executable under /snap/NAME.
        case snap(String)
        /// Apple's partition ids: `apple-tool:` (the `security` command), `apple:` (this
        /// keychain's own programs), `teamid:X` (kept, matched by nothing on Linux).
        case partition(String)

        package init?(_ text: String) {
            // One entry per line, and a path's "<" and "," separate parents: no entry holds a
            // control character, so none can smuggle in a line of its own.
            guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else { return nil }
            if text == "any" { self = .anyProgram; return }
            guard let colon = text.firstIndex(of: ":") else { return nil }
            let kind = text[..<colon], value = String(text[text.index(after: colon)...])
            switch kind {
            case "exe":
                guard let under = value.firstIndex(of: "<") else {
                    guard value.hasPrefix("/") else { return nil }
                    self = .executable(value)
                    return
                }
                let path = String(value[..<under])
                let parents = value[value.index(after: under)...].split(separator: ",").map(String.init)
                guard path.hasPrefix("/"), !parents.isEmpty, parents.allSatisfy({ $0.hasPrefix("/") }) else { return nil }
                self = .executableUnder(path, parents: parents)
            case "interpreter":
                guard value.hasPrefix("/") else { return nil }
                self = .interpreter(value)
            case "flatpak":
                guard !value.isEmpty else { return nil }
                self = .flatpak(value)
            case "snap":
                guard !value.isEmpty else { return nil }
                self = .snap(value)
            case "apple-tool", "apple", "teamid", "cdhash", "unsigned":
                self = .partition(text)
            default: return nil
            }
        }

        package var text: String {
            switch self {
            case .anyProgram: return "any"
            case .executable(let path): return "exe:" + path
            case .executableUnder(let path, let parents): return "exe:" + path + "<" + parents.joined(separator: ",")
            case .interpreter(let path): return "interpreter:" + path
            case .flatpak(let id): return "flatpak:" + id
            case .snap(let name): return "snap:" + name
            case .partition(let id): return id
            }
        }
    }

    package var entries: [Entry]

    package init(_ entries: [Entry]) { self.entries = entries }

    /// The list as stored: one entry per line. Lines no version of this program can read are
    /// dropped, never widened into something else.
    package init(text: String) {
        entries = text.split(separator: "\n").compactMap { Entry(String($0)) }
    }

    package var text: String { entries.map(\.text).joined(separator: "\n") }

    package var allowsAnyProgram: Bool { entries.contains(.anyProgram) }

    /// The list stored in `item`'s attributes; nil for an item made before lists existed.
    package static func of(_ item: Item) -> AccessList? {
        item.attributes[attribute]?.stringValue.map { AccessList(text: $0) }
    }

    /// Adds `entry` unless it is there; `anyProgram` makes the others moot but they are kept, so
    /// that taking `-A` back leaves the list as it was.
    package mutating func add(_ entry: Entry) {
        if !entries.contains(entry) { entries.append(entry) }
    }

    package mutating func remove(_ entry: Entry) { entries.removeAll { $0 == entry } }
}

// MARK: The programs that run the credential helpers

extension AccessList {
    /// git runs credential helpers itself, and through its remote helpers (HTTP(S), FTP(S)).
    /// Installed paths with their /usr/local variants: constants, because a list must name where
    /// the trusted programs are, not where some link points today.
    package static let gitParents = [
        "/usr/bin/git", "/usr/local/bin/git", "/usr/lib/git-core/git", "/usr/local/lib/git-core/git",
        "/usr/lib/git-core/git-remote-http", "/usr/lib/git-core/git-remote-https",
        "/usr/lib/git-core/git-remote-ftp", "/usr/lib/git-core/git-remote-ftps",
        "/usr/local/lib/git-core/git-remote-http", "/usr/local/lib/git-core/git-remote-https",
        "/usr/local/lib/git-core/git-remote-ftp", "/usr/local/lib/git-core/git-remote-ftps"
    ]

    /// The programs an SSH key signs for without a question when the agent relays its client to
    /// the broker: ssh (which scp, sftp and git's transport run), and ssh-keygen, which git's SSH
    /// signing runs (`ssh-keygen -Y sign`).
    package static let sshClients: [Entry] = [.executable("/usr/bin/ssh"), .executable("/usr/bin/ssh-keygen")]

    /// The container tools that run docker-credential-* helpers.
    package static let dockerParents = [
        "/usr/bin/docker", "/usr/local/bin/docker", "/usr/bin/podman", "/usr/local/bin/podman",
        "/usr/bin/skopeo", "/usr/local/bin/skopeo", "/usr/bin/buildah", "/usr/local/bin/buildah",
        "/usr/libexec/docker/cli-plugins/docker-buildx", "/usr/local/libexec/docker/cli-plugins/docker-buildx"
    ]
}
