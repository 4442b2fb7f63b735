import KeychainCore

/// Whether a caller gets an item's key without asking, per the rules of the access list
/// (BROKER-SPEC "Decision"): `any`; an entry naming a caller that can match silently; a legacy
/// item read by the keychain's own programs; else the person is asked.
package struct AccessDecision: Sendable {
    package enum Verdict: Equatable, Sendable {
        case trusted
        case ask
    }

    /// The keychain's own programs (`--own-program`): `apple-tool:` names those called `security`,
    /// `apple:` those that act for the person who runs them (not the Secret Service and the SSH
    /// agent, which serve any program of the session: issue 55 brings their clients' names), and
    /// the makers of items older than lists are looked for among them (`impliedList`).
    package var ownPrograms: Set<String>

    package static let defaultOwnPrograms: [String] = ["/usr/bin", "/usr/local/bin"].flatMap { dir in
        ["security", "git-credential-keychain", "docker-credential-keychain", "keychain-secret-service", "keychain-ssh-agent"].map {
            dir + "/" + $0
        }
    }

    /// Shells between a helper and the program that runs it (git runs helpers through sh).
    package static let shells: Set<String> = ["/bin/sh", "/usr/bin/sh", "/bin/dash", "/usr/bin/dash", "/bin/bash", "/usr/bin/bash"]

    /// The daemons that may relay the process they serve (`--deputy`, `RelayedCaller`).
    package var deputies: Set<String>

    package init(ownPrograms: [String] = AccessDecision.defaultOwnPrograms, deputies: [String] = AccessDecision.defaultDeputies) {
        self.ownPrograms = Set(ownPrograms)
        self.deputies = Set(deputies)
    }

    /// `list` nil: an item made before lists existed; pass its `impliedList`.
    package func decide(list: AccessList?, caller: any CallerFacts) -> Verdict {
        guard let list else { return .ask }
        if list.allowsAnyProgram { return .trusted }
        guard caller.canMatchSilently else { return .ask }
        return list.entries.contains { names(caller, $0) } ? .trusted : .ask
    }

    /// What an item made before lists existed is taken to trust: the front end that made it, where
    /// its shape says which (the Secret Service's free-form attributes, the SSH agent's key type,
    /// an internet password's git or docker helper under their own parents); none otherwise, so
    /// every program is asked once ("Always allow" then writes the list). Never "anyone, silently".
    package func impliedList(itemClass: ItemClass, attributes: [String: AttributeValue]) -> AccessList {
        func own(_ name: String) -> [String] { ownPrograms.filter { $0.hasSuffix("/" + name) }.sorted() }
        if attributes[AttributeKey.freeFormAttributes] != nil {
            return AccessList(own("keychain-secret-service").map { .executable($0) })
        }
        if itemClass == .key, attributes[AttributeKey.keyType] == .int(OpenSSHKeyItem.keyType) {
            // The agent relays its client (`RelayedCaller`): the programs a new key trusts, which
            // are fewer than the agent's every client, trusted before.
            return AccessList(own("keychain-ssh-agent").map { .executable($0) } + AccessList.sshClients)
        }
        if itemClass == .internetPassword {
            return AccessList(
                own("git-credential-keychain").map { .executableUnder($0, parents: AccessList.gitParents) }
                    + own("docker-credential-keychain").map { .executableUnder($0, parents: AccessList.dockerParents) })
        }
        return AccessList([])
    }

    /// The daemons that serve other programs: not named by `apple:`.
    static let servingOthers: Set<String> = ["keychain-secret-service", "keychain-ssh-agent"]

    /// Whether `entry` names `caller`.
    func names(_ caller: any CallerFacts, _ entry: AccessList.Entry) -> Bool {
        if caller.isInterpreter {
            guard case .interpreter(let path) = entry else { return false }
            return path == caller.executablePath
        }
        switch entry {
        case .anyProgram: return true
        case .executable(let path): return path == caller.executablePath
        case .executableUnder(let path, let parents):
            guard path == caller.executablePath, let parent = nearestParent(of: caller) else { return false }
            return parents.contains(parent)
        case .interpreter: return false
        case .flatpak, .snap: return caller.entry == entry
        case .partition("apple-tool:"):
            guard let path = caller.executablePath else { return false }
            return ownPrograms.contains(path) && path.hasSuffix("/security")
        case .partition("apple:"):
            guard let path = caller.executablePath, ownPrograms.contains(path) else { return false }
            return !Self.servingOthers.contains(path.split(separator: "/").last.map(String.init) ?? "")
        case .partition: return false
        }
    }

    /// The caller's nearest parent that is not a shell, as an `exe:` path.
    func nearestParent(of caller: any CallerFacts) -> String? {
        for parent in caller.parentEntries {
            switch parent {
            case .executable(let path) where Self.shells.contains(path): continue
            case .interpreter(let path) where Self.shells.contains(path): continue
            case .executable(let path): return path
            default: return nil
            }
        }
        return nil
    }
}
