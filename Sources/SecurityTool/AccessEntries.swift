import Glibc
import KeychainCore
import KeychainPeers

/// The entries of an item's access list as the command line names them: programs by path
/// (`-T`, `access --grant /usr/bin/foo`), resolved here, and the entries' own spelling
/// (`exe:/path`, `flatpak:ID`, `apple-tool:` ...; AccessList.Entry).
enum AccessEntries {
    /// What `security add-*` writes when neither -T nor -A is given. macOS's items made by
    /// `security add-*` trust /usr/bin/security itself (keychain_add.c's create_access puts the
    /// calling program on the list); here that program is the keychain's `security` tool, named by
    /// Apple's partition id for it, `apple-tool:`, so that the list does not depend on where the
    /// tool is installed.
    static let securityTool = AccessList([.partition("apple-tool:")])

    /// Programs that run whatever code they are given: trusting one trusts every script it may
    /// run, so they are trusted only as `interpreter:` entries, on purpose (`--interpreter`). The
    /// same list the broker judges callers by (KeychainPeers' `CallerTrust`).
    static func isInterpreter(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return CallerTrust.isInterpreter(name, in: CallerTrust.defaultInterpreters)
    }

    /// `option` names the caller in messages (`--grant`, or SecTrustedApplicationCreateFromPath
    /// for -T, as keychain_add.c reports it).
    /// A program named by path, as the list keeps it: absolute, symbolic links resolved
    /// (realpath), an existing executable file. A name that is not a path (an app bundle's name,
    /// as macOS's -T takes, or a command name) is refused: a list names programs by where they are.
    static func program(_ given: String, option: String) throws -> String {
        guard given.contains("/") else {
            throw KeychainError.param(
                "\(option) \(given): not a program's path; the list names programs by where they are installed (for example /usr/bin/git)")
        }
        guard let resolved = realpath(given, nil) else {
            throw KeychainError.param("\(option) \(given): \(String(cString: strerror(errno))); give the path of an installed program")
        }
        defer { free(resolved) }
        let path = String(cString: resolved)
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(path, X_OK) == 0 else {
            throw KeychainError.param("\(option) \(given): not an executable file")
        }
        return path
    }

    /// `path` resolved when it exists, else as given: what a revoke looks for.
    static func resolvedIfPresent(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// An entry to grant: a path (resolved; an interpreter only with `asInterpreter`) or an
    /// entry's own text, whose paths are resolved the same way.
    static func granted(_ given: String, asInterpreter: Bool, option: String) throws -> AccessList.Entry {
        guard let entry = AccessList.Entry(given) else {
            if given.contains("/") { return try programEntry(given, asInterpreter: asInterpreter, option: option) }
            throw KeychainError.param(
                "\(option) \(given): not a program's path nor an entry (any, exe:/path, interpreter:/path, flatpak:ID, snap:NAME, apple-tool:, apple:, teamid:ID)"
            )
        }
        switch entry {
        case .executable(let path):
            return try programEntry(path, asInterpreter: asInterpreter, option: option)
        case .executableUnder(let path, let parents):
            let program = try self.program(path, option: option)
            if isInterpreter(program) { throw interpreterRefused(program, option: option) }
            return .executableUnder(program, parents: parents)
        case .interpreter(let path):
            return .interpreter(try self.program(path, option: option))
        default:
            return entry
        }
    }

    private static func programEntry(_ given: String, asInterpreter: Bool, option: String) throws -> AccessList.Entry {
        let path = try program(given, option: option)
        if asInterpreter { return .interpreter(path) }
        if isInterpreter(path) { throw interpreterRefused(path, option: option) }
        return .executable(path)
    }

    private static func interpreterRefused(_ path: String, option: String) -> KeychainError {
        KeychainError.param(
            "\(option) \(path): an interpreter runs whatever script it is given, so trusting it trusts every script; add --interpreter to trust it anyway (an interpreter: entry)"
        )
    }

    /// Whether `entry` names the program at `path` (itself, not as a parent).
    static func names(_ entry: AccessList.Entry, program path: String) -> Bool {
        switch entry {
        case .executable(let p), .executableUnder(let p, _), .interpreter(let p): return p == path
        default: return false
        }
    }

    /// Apple's partition ids (`-S`, comma-separated) as entries: apple-tool:, apple:, teamid:X
    /// and cdhash:/unsigned: are kept as given, and this keychain's own forms (exe:/path,
    /// flatpak:ID, snap:NAME, interpreter:/path, any) are accepted. Anything else is refused, so
    /// that a mistyped id never becomes a list that silently trusts nobody.
    static func partitions(_ text: String) throws -> AccessList {
        var list = AccessList([])
        for id in text.split(separator: ",").map({ $0.trimmingCharacters(in: " ") }) where !id.isEmpty {
            guard let entry = AccessList.Entry(id) else {
                throw KeychainError.param(
                    "-S: unknown partition id \"\(id)\" (known: apple-tool:, apple:, teamid:ID, exe:/path, flatpak:ID, snap:NAME); nothing was changed")
            }
            list.add(entry)
        }
        return list
    }

    /// The list as `dump-keychain -a` and `--access` print it, after the item's attributes.
    static func describe(_ list: AccessList?) -> String {
        guard let list else { return "access: no list (made before access lists, or imported: the program its kind names uses it, others are asked)" }
        var lines = ["access: \(list.entries.count) entries"]
        for (index, entry) in list.entries.enumerated() { lines.append("    entry \(index): \(entry.text)") }
        return lines.joined(separator: "\n")
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        String(drop(while: { $0 == set }).reversed().drop(while: { $0 == set }).reversed())
    }
}
