internal import CLinux
internal import Glibc

/// Who is asking the broker: a caller's executable, how it runs and its parents, read from /proc
/// with no more than CAP_SYS_PTRACE's read access (exe, maps, root), and what may be concluded.
///
/// A path is never believed by itself: the executable's inode (fstat through /proc/PID/exe) must be
/// the one the path names in the broker's own mount namespace, root's, and out of the caller's
/// reach up to `/`. Everything is read within limits, and a process that exits or execs while it
/// is read yields an unidentified caller.
package enum CallerTrust {
    /// How far up the parents are followed.
    package static let chainLimit = 12

    /// Reads the caller `pid` (optionally pinned by `pidfd`, SO_PEERPIDFD; borrowed) of uid `uid`.
    package static func evaluate(pid: Int32, pidfd: Int32?, uid: UInt32, interpreters: [String] = CallerTrust.defaultInterpreters) -> Caller {
        evaluate(CallerHandle(pid: pid, pidfd: pidfd), uid: uid, interpreters: interpreters)
    }

    /// Reads the process `handle` holds; keep the handle for `stillSame`.
    /// `inspectingParents` false: the parents are named (their programs' paths and pids, for the
    /// question and the log) but not inspected; `inspectParents` reads their entries when a
    /// decision needs them (an `exe:HELPER<PARENT` rule), which most never do: inspecting each
    /// parent (its status, its program, every library it maps) was most of the broker's time
    /// evaluating a new caller.
    package static func evaluate(
        _ handle: CallerHandle, uid: UInt32, interpreters: [String] = CallerTrust.defaultInterpreters, inspectingParents: Bool = true
    ) -> Caller {
        let pid = handle.pid
        let unidentified = Caller(pid: pid, uid: uid, startTime: handle.startTime ?? 0, warnings: [.unidentified])
        guard let process = handle.process, let started = handle.startTime, let status = ProcessStatus.read(of: pid) else {
            return unidentified
        }
        let writer = FileWriter(uid: uid, groups: status.groups)
        var rootsFiles = Set<[UInt64]>()
        let program = inspect(pid, tracer: status.tracer, writer: writer, interpreters: interpreters, rootsFiles: &rootsFiles)
        var caller = Caller(pid: pid, uid: uid, startTime: started, entry: program.entry, executable: program.executable)
        caller.warnings = program.warnings
        caller.mappedFiles = program.mappedFiles
        if !handle.pinnedAtConnect { add(.unidentified, to: &caller.warnings) }
        caller.groups = status.groups
        if inspectingParents {
            (caller.chain, caller.parentEntries) = parents(of: pid, writer: writer, interpreters: interpreters, rootsFiles: &rootsFiles)
        } else {
            caller.chain = namedParents(of: pid)
        }
        // All of it was read of the process pinned first, in the program it ran then: alive now,
        // it held the pid through every read, its start time (`started`, read once pinned) among
        // them; a second read of that time would only repeat it (a new judging is read on every
        // SSH signature through a deputy, and /proc/PID/stat is one of its dearer files).
        guard process.isAlive, handle.isSameImage else { return unidentified }
        return caller
    }

    /// Whether the process is still the one evaluated: not reaped (the pidfd, and the status the
    /// handle opened still reads), not exec'd since (the maps the handle opened still read), and
    /// not traced since: a process of the same uid may attach to a dumpable program once it has
    /// connected (its own descendant, under Yama's default) and make it ask for anything it is
    /// trusted for, on the connection it already has. Asked on every request, so it reads through
    /// the handle's descriptors only: no path is looked up, and no start time is read again (the
    /// status descriptor names the pinned process and no later holder of its pid).
    ///
    /// `mappingsToo`: nor has it mapped a file executable that was not judged (review 56), for a
    /// judging made before the process could be expected to have loaded what it loads: the SSH
    /// agent's client judged as it connects, which loads a GSSAPI mechanism (GSS_MECH_CONFIG) or
    /// a Kerberos plugin only after. Not on every request: the mappings' read cost a SecItem read
    /// through the broker 126 us, more than the read itself.
    package static func stillSame(_ caller: Caller, handle: CallerHandle, mappingsToo: Bool = false) -> Bool {
        guard handle.pid == caller.pid, let process = handle.process, handle.startTime == caller.startTime else { return false }
        guard let tracer = handle.tracer, tracer == 0 || caller.warnings.contains(.traced) else { return false }
        guard process.isAlive, handle.isSameImage else { return false }
        guard mappingsToo else { return true }
        guard let mapped = handle.executableFiles, mapped.isSubset(of: caller.mappedFiles) else { return false }
        return true
    }

    /// One process's program: its entry, its path for display, its warnings.
    struct Program {
        var entry: String?
        var executable: String?
        var warnings: [Caller.Warning] = []
        /// Every file it maps executable, as read for the judging.
        var mappedFiles: Set<[UInt64]> = []
    }

    /// What `pid` runs and whether it is root's program running as itself. `writer` is the
    /// caller's user (for a parent too: what matters is what the caller's user could have changed).
    /// `rootsFiles` holds the mapped files (device, inode) found root's so far in this evaluation:
    /// the caller and its parents share most libraries.
    static func inspect(_ pid: Int32, tracer: Int32, writer: FileWriter, interpreters: [String], rootsFiles: inout Set<[UInt64]>) -> Program {
        guard let path = ProcessLineage.executable(of: pid) else { return Program(warnings: [.unidentified]) }
        var program = Program(executable: Caller.displayable(path))
        let descriptor = clinux_open_path(AT_FDCWD, "/proc/\(pid)/exe", O_CLOEXEC)
        let file = descriptor < 0 ? nil : FileFacts(descriptor: descriptor)
        if descriptor >= 0 { close(descriptor) }
        guard let file, file.isRegularFile else { return Program(executable: program.executable, warnings: [.unidentified]) }

        let deleted = file.links == 0 || path.hasSuffix(" (deleted)")
        if deleted { program.warnings.append(.deleted) }
        if file.owner != 0 { program.warnings.append(.notRootOwned) }
        if file.mode & 0o022 != 0 || FileTrust.isWritable(file, by: writer) { program.warnings.append(.userWritable) }
        if program.warnings.isEmpty {
            switch identify(path, file: file, pid: pid, writer: writer) {
            case .entry(let entry): program.entry = entry
            case .unsafeDirectory: program.warnings.append(.userWritable)
            case .unknown: program.warnings.append(.unidentified)
            }
        }

        if tracer != 0 { program.warnings.append(.traced) }
        if !mapsOnlyRootsFiles(pid, besides: file, writer: writer, rootsFiles: &rootsFiles, files: &program.mappedFiles) {
            program.warnings.append(.preloaded)
        }
        let name = String(path.dropLast(deleted && path.hasSuffix(" (deleted)") ? " (deleted)".count : 0).split(separator: "/").last ?? "")
        if isInterpreter(name, in: interpreters) { program.warnings.append(.interpreter) }
        return program
    }

    enum Identity: Equatable {
        case entry(String)
        case unsafeDirectory
        case unknown
    }

    /// The entry `path` earns when it names `file` here too, every directory on the way safe.
    static func identify(_ path: String, file: FileFacts, pid: Int32, writer: FileWriter) -> Identity {
        switch ResolvedPaths.shared.resolve(path, for: writer) {
        case .file(let found) where found.isSameFile(as: file): return entry(forRealPath: path)
        case .unsafeDirectory: return .unsafeDirectory
        case .file, .missing: break
        }
        // A Flatpak app's program is /app/… in its sandbox: found here under the deployment its
        // /.flatpak-info names. That file is only a hint (a user namespace can plant one); the
        // inode and the deployment's path decide.
        guard path.hasPrefix("/app/"), case .contents(let info) = ProcessIdentity.flatpakInfo(of: pid),
            let deployment = SandboxIDs.flatpakValue(info, group: "Instance", key: "app-path"),
            deployment.hasPrefix("/var/lib/flatpak/app/")
        else { return .unknown }
        let real = deployment + path.dropFirst("/app".count)
        switch FileTrust.resolve(real, for: writer) {
        case .file(let found) where found.isSameFile(as: file): return entry(forRealPath: real)
        case .unsafeDirectory: return .unsafeDirectory
        case .file, .missing: return .unknown
        }
    }

    /// "flatpak:ID" under a system Flatpak app's deployment, "snap:NAME" under a snap, otherwise
    /// "exe:PATH". A Flatpak runtime's programs are every app's: they name none.
    static func entry(forRealPath path: String) -> Identity {
        let names = path.split(separator: "/")
        if path.hasPrefix("/var/lib/flatpak/app/"), names.count > 5, SandboxIDs.isAppID(String(names[4])) {
            return .entry("flatpak:" + names[4])
        }
        if path.hasPrefix("/var/lib/flatpak/runtime/") { return .unknown }
        if path.hasPrefix("/snap/"), names.count > 3, SandboxIDs.isAppID(String(names[1])) { return .entry("snap:" + names[1]) }
        return .entry("exe:" + path)
    }

    /// Every file the process maps executable is root's: the loader, each library (its program,
    /// `program`, is judged by the checks above).
    /// One in another mount namespace (a Flatpak app's /app, its runtime's /usr) is found through
    /// the process's root instead, and only its own facts count there (that namespace's
    /// directories are the sandbox's, made by the user); root's inode is root's content wherever
    /// it is mounted.
    static func mapsOnlyRootsFiles(
        _ pid: Int32, besides program: FileFacts, writer: FileWriter, rootsFiles: inout Set<[UInt64]>, files: inout Set<[UInt64]>
    ) -> Bool {
        guard let mappings = ExecutableMappings.read("/proc/\(pid)/maps") else { return false }
        files = Set(mappings.map(\.file))
        var root: Int32 = -2
        defer { if root >= 0 { close(root) } }
        for mapping in mappings where mapping.device != program.device || mapping.inode != program.inode {
            guard !mapping.path.hasSuffix(" (deleted)") else { return false }
            if rootsFiles.contains(mapping.file) { continue }
            let mapped = FileFacts(device: mapping.device, inode: mapping.inode, owner: 0, group: 0, mode: 0, links: 0)
            var resolution = ResolvedPaths.shared.resolve(mapping.path, for: writer)
            if case .file(let found) = resolution, !found.isSameFile(as: mapped) { resolution = .missing }
            if resolution == .missing {
                if root == -2 { root = clinux_open_path(AT_FDCWD, "/proc/\(pid)/root", O_DIRECTORY | O_CLOEXEC) }
                guard root >= 0 else { return false }
                resolution = FileTrust.resolve(mapping.path, for: nil, from: root)
            }
            guard case .file(let found) = resolution, found.isSameFile(as: mapped), found.isRegularFile, found.links > 0,
                FileTrust.isRootsOwn(found), !FileTrust.isWritable(found, by: writer)
            else { return false }
            if rootsFiles.count < ExecutableMappings.fileLimit { rootsFiles.insert(mapping.file) }
        }
        return true
    }

    /// The parents' chain and entries of `caller` (evaluated through `handle` with its parents
    /// named only), read now: nil when the process is no longer the one evaluated.
    package static func inspectParents(
        of caller: Caller, handle: CallerHandle, interpreters: [String] = CallerTrust.defaultInterpreters
    ) -> (chain: [String], entries: [String?])? {
        var rootsFiles = Set<[UInt64]>()
        let found = parents(of: caller.pid, writer: FileWriter(uid: caller.uid, groups: caller.groups), interpreters: interpreters, rootsFiles: &rootsFiles)
        guard stillSame(caller, handle: handle) else { return nil }
        return found
    }

    /// The parents of `pid` as `parents` shows them, without inspecting them.
    static func namedParents(of pid: Int32) -> [String] {
        var chain: [String] = []
        // The session and the first parent from one read of the caller's stat: a new caller is
        // read on every SSH signature through a deputy.
        guard let (first, session) = ProcessLineage.parentAndSession(of: pid) else { return chain }
        var next = first
        while chain.count < chainLimit, let parent = next, parent > 1 {
            chain.append("\(ProcessLineage.executable(of: parent).map { Caller.displayable($0) } ?? "?") (pid \(parent))")
            if parent == session { break }
            next = ProcessLineage.parent(of: parent)
        }
        return chain
    }

    /// The parents of `pid`, nearest first: up to its session's leader (included), ending before
    /// pid 1, at most `chainLimit`.
    static func parents(of pid: Int32, writer: FileWriter, interpreters: [String], rootsFiles: inout Set<[UInt64]>) -> ([String], [String?]) {
        var chain: [String] = []
        var entries: [String?] = []
        let session = ProcessLineage.session(of: pid)
        var child = pid
        while chain.count < chainLimit, let parent = ProcessLineage.parent(of: child), parent > 1 {
            // Pinned, then the child's parent read again: still `parent`, so the pinned process is
            // that parent and not a later holder of its pid.
            guard let pinned = PinnedProcess(pid: parent), ProcessLineage.parent(of: child) == parent else {
                chain.append("? (pid \(parent))")
                entries.append(nil)
                break
            }
            let program = ProcessStatus.read(of: parent).map {
                inspect(parent, tracer: $0.tracer, writer: writer, interpreters: interpreters, rootsFiles: &rootsFiles)
            }
            let alive = pinned.isAlive
            chain.append("\(program?.executable ?? "?") (pid \(parent))")
            entries.append(alive && program?.warnings.isEmpty == true ? program?.entry : nil)
            if parent == session { break }
            child = parent
        }
        return (chain, entries)
    }

    private static func add(_ warning: Caller.Warning, to warnings: inout [Caller.Warning]) {
        if !warnings.contains(warning) { warnings.append(warning) }
    }
}
