/// What the broker knows of a caller, read once when it connects (`CallerTrust.evaluate`).
package struct Caller: Sendable, Equatable {
    /// Why the caller may not be matched to a trusted entry without asking. The first four say
    /// the executable is not root's file at the path it claims, so `entry` is nil with them; the
    /// others say root's program may be doing someone else's bidding, so `entry` stays (for the
    /// question, and for "always allow") but never matches silently.
    package enum Warning: String, Sendable, CaseIterable {
        /// A tracer is attached (TracerPid): it can read and change the process.
        case traced
        /// An executable mapping is not root's file (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH, dlopen
        /// of a user's library), or was deleted, or could not be checked.
        case preloaded
        /// The program runs what it is told (a shell, Python, the dynamic loader): its path says
        /// nothing of the script.
        case interpreter
        /// The executable was unlinked after it was started.
        case deleted
        /// The executable, or a directory above it, could be changed by the caller's user, by
        /// anyone, or by a group (the file).
        case userWritable
        /// Not known for certain: the process was not pinned by the connection's pidfd (the pid
        /// alone may have been reused), could not be read, exited or exec'd while being read, or
        /// its executable's path names another file here (a bind mount in its own namespace, a
        /// Flatpak runtime's program).
        case unidentified
        /// The executable is not owned by root.
        case notRootOwned
    }

    package var pid: Int32
    package var uid: UInt32
    package var startTime: UInt64
    /// "exe:/usr/bin/git", "flatpak:org.example.App", "snap:name"; nil when unidentified.
    package var entry: String?
    /// The executable's path as the kernel names it (may be a lie if warnings say so), for display:
    /// control characters escaped.
    package var executable: String?
    /// Parents, nearest first, as display strings ("/usr/bin/bash (pid 123)"), up to the session
    /// leader or pid 1, at most 12.
    package var chain: [String]
    /// Parents' entries, nearest first ("exe:/usr/bin/git" or nil when that parent is unidentified/warned).
    /// Empty when the parents were only named (`CallerTrust.evaluate(inspectingParents: false)`).
    package var parentEntries: [String?]
    package var warnings: [Warning]
    /// Its gids and supplementary groups when evaluated: whose files count as its user's, for an
    /// inspection of its parents made later (`CallerTrust.inspectParents`).
    package var groups: [UInt32] = []
    /// The files (device, inode) it mapped executable when it was judged: its program, the
    /// loader, its libraries. One mapped since (a module loaded after the judging) is not judged.
    package var mappedFiles: Set<[UInt64]> = []

    package init(
        pid: Int32, uid: UInt32, startTime: UInt64 = 0, entry: String? = nil, executable: String? = nil, chain: [String] = [],
        parentEntries: [String?] = [], warnings: [Warning] = []
    ) {
        self.pid = pid
        self.uid = uid
        self.startTime = startTime
        self.entry = entry
        self.executable = executable
        self.chain = chain
        self.parentEntries = parentEntries
        self.warnings = warnings
    }

    /// Matched to a trusted entry without asking only when identified and no warning.
    package var canMatchSilently: Bool { entry != nil && warnings.isEmpty }

    /// One line for a question or a log: "python3 (/usr/bin/python3: interpreter) ← bash ← sshd",
    /// "git (/usr/bin/git) ← bash": the program by its whole path, which a person can check, and
    /// its parents by name.
    package var summary: String {
        var text = executable.map(Self.lastComponent) ?? "pid \(pid)"
        if !warnings.isEmpty {
            text += " (\(executable ?? "?"): \(warnings.map(\.rawValue).joined(separator: ", ")))"
        } else if let executable {
            text += " (\(executable))"
        }
        for parent in chain {
            text += " ← " + Self.lastComponent(Self.droppingPid(parent))
        }
        return text
    }

    /// A link of a chain, or a summary, without its pid: "/usr/bin/bash (pid 12)" → "/usr/bin/bash".
    package static func withoutPid(_ text: String) -> String {
        let bytes = Array(text.utf8), marker = Array(" (pid ".utf8)
        guard text.hasSuffix(")"), bytes.count >= marker.count,
            let start = stride(from: bytes.count - marker.count, through: 0, by: -1).first(where: {
                bytes[$0..<$0 + marker.count].elementsEqual(marker)
            })
        else { return text }
        return String(decoding: bytes[..<start], as: UTF8.self)
    }

    /// A path or name as it may be shown to a person or written to a log: control characters and
    /// the bidirectional overrides escaped, so that a file name cannot forge a line or reorder one.
    package static func displayable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x20 || value == 0x7f || (0x80..<0xa0).contains(value) || (0x202a...0x202e).contains(value)
                || (0x2066...0x2069).contains(value) || value == 0x200e || value == 0x200f
            {
                out += "\\u{\(String(value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// "/usr/bin/bash (pid 123)" without its " (pid 123)".
    private static func droppingPid(_ link: String) -> String {
        guard link.hasSuffix(")") else { return link }
        let digits = link.dropLast().reversed().prefix(while: { $0.isASCII && $0.isNumber }).count
        let head = link.dropLast(1 + digits)
        return head.hasSuffix(" (pid ") ? String(head.dropLast(" (pid ".count)) : link
    }

    private static func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
