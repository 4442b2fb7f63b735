import Glibc
import KeychainCore
import KeychainPeers

/// What the broker's decisions need to know of a caller. KeychainPeers' `CallerTrust` is the real
/// evaluator (wired in at merge); `ProcCallerFacts` is a minimal stand-in over /proc.
package protocol CallerFacts: Sendable {
    /// The entry an access list would hold for this caller; nil when it cannot be identified (a
    /// copy the user owns, a deleted executable): such a caller gets no entry, only Allow once.
    var entry: AccessList.Entry? { get }
    /// Whether an entry naming it may be trusted without asking: a root-owned executable, no
    /// untrusted ancestor, and a system that stops same-uid processes from tracing it.
    var canMatchSilently: Bool { get }
    /// It runs whatever script it is given (python3, perl, node, a shell): only an
    /// `interpreter:` entry matches it.
    var isInterpreter: Bool { get }
    /// The entries of its parents, nearest first.
    var parentEntries: [AccessList.Entry] { get }
    /// One line for people (the question, the log): the program and its pid.
    var summary: String { get }
    /// Its parents, nearest first, for the log.
    var chain: [String] { get }
    /// What `whoAmI` shows besides (why it cannot match silently).
    var warnings: [String] { get }
}

extension CallerFacts {
    /// The executable the entry names.
    var executablePath: String? {
        switch entry {
        case .executable(let path)?, .executableUnder(let path, _)?, .interpreter(let path)?: return path
        default: return nil
        }
    }
}

/// Where the broker evaluates a caller: the connecting process's pid, its pidfd (-1 when the
/// kernel gave none) and its uid.
package typealias CallerEvaluator = @Sendable (_ pid: Int32, _ pidfd: Int32, _ uid: uid_t) -> any CallerFacts

/// The stand-in evaluator: /proc/PID/exe and the parents' executables, trusted silently only when
/// the executable is root's and not writable by others, and Yama stops same-uid tracing.
package struct ProcCallerFacts: CallerFacts {
    package var entry: AccessList.Entry?
    package var canMatchSilently: Bool
    package var isInterpreter: Bool
    package var parentEntries: [AccessList.Entry]
    package var summary: String
    package var chain: [String]
    package var warnings: [String]

    package init(
        entry: AccessList.Entry?, canMatchSilently: Bool, isInterpreter: Bool = false, parentEntries: [AccessList.Entry] = [],
        summary: String, chain: [String] = [], warnings: [String] = []
    ) {
        self.entry = entry
        self.canMatchSilently = canMatchSilently
        self.isInterpreter = isInterpreter
        self.parentEntries = parentEntries
        self.summary = summary
        self.chain = chain
        self.warnings = warnings
    }

    static let interpreterNames = [
        "python", "perl", "ruby", "node", "bash", "sh", "dash", "zsh", "fish", "lua", "php", "tclsh", "java", "osascript", "deno", "bun"
    ]

    package static func isInterpreter(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return interpreterNames.contains { name == $0 || (name.hasPrefix($0) && name.dropFirst($0.count).allSatisfy { $0.isNumber || $0 == "." }) }
    }

    package static let evaluate: CallerEvaluator = { pid, _, uid in
        guard let exe = ProcessLineage.executable(of: pid) else {
            return ProcCallerFacts(
                entry: nil, canMatchSilently: false, summary: "pid \(pid) (uid \(uid), executable unknown)", warnings: ["its executable cannot be read"])
        }
        var warnings: [String] = []
        var identified = true
        var st = stat()
        if exe.hasSuffix(" (deleted)") || stat(exe, &st) != 0 {
            identified = false
            warnings.append("its executable was deleted or replaced")
        } else if st.st_uid != 0 || st.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            identified = false
            warnings.append("its executable is not root's (a copy anyone could change)")
        }
        let yama = ProcFiles.read("/proc/sys/kernel/yama/ptrace_scope", limit: 16).flatMap { Int(String(decoding: $0, as: UTF8.self).filter(\.isNumber)) } ?? 0
        if yama < 1 { warnings.append("ptrace_scope is 0 (or Yama is absent): any process of the user could steer it") }
        let interpreter = isInterpreter(exe)
        let parents = ProcessLineage.parents(of: pid)
        let entry: AccessList.Entry? = identified ? (interpreter ? .interpreter(exe) : .executable(exe)) : nil
        return ProcCallerFacts(
            entry: entry, canMatchSilently: identified && yama >= 1, isInterpreter: interpreter,
            parentEntries: parents.map { isInterpreter($0) ? .interpreter($0) : .executable($0) },
            summary: "\(exe) (pid \(pid))", chain: parents, warnings: warnings)
    }
}
