import KeychainCore

/// Whether a caller gets an item's key without asking, per the rules of the access list
/// (BROKER-SPEC "Decision"): `any`; an entry naming a caller that can match silently; a legacy
/// item read by the keychain's own programs; else the person is asked.
package struct AccessDecision: Sendable {
    package enum Verdict: Equatable, Sendable {
        case trusted
        case ask
    }

    /// The keychain's own programs (`--own-program`): `apple:` names them all, `apple-tool:` those
    /// named `security`.
    package var ownPrograms: Set<String>

    package static let defaultOwnPrograms: [String] = ["/usr/bin", "/usr/local/bin"].flatMap { dir in
        ["security", "git-credential-keychain", "docker-credential-keychain", "keychain-secret-service", "keychain-ssh-agent"].map {
            dir + "/" + $0
        }
    }

    /// Shells between a helper and the program that runs it (git runs helpers through sh).
    static let shells: Set<String> = ["/bin/sh", "/usr/bin/sh", "/bin/dash", "/usr/bin/dash", "/bin/bash", "/usr/bin/bash"]

    package init(ownPrograms: [String] = AccessDecision.defaultOwnPrograms) {
        self.ownPrograms = Set(ownPrograms)
    }

    /// `list` nil: an item made before lists existed.
    package func decide(list: AccessList?, caller: any CallerFacts) -> Verdict {
        guard let list else {
            // Legacy: the keychain's own programs made these items, as far as it knows.
            if caller.canMatchSilently, !caller.isInterpreter, let path = caller.executablePath, ownPrograms.contains(path) {
                return .trusted
            }
            return .ask
        }
        if list.allowsAnyProgram { return .trusted }
        guard caller.canMatchSilently else { return .ask }
        return list.entries.contains { names(caller, $0) } ? .trusted : .ask
    }

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
            return caller.executablePath.map(ownPrograms.contains) ?? false
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
