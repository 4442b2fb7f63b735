internal import Glibc

/// Whether two pinned processes belong to one process tree, as the broker's shared questions need
/// it (review 55): an answer the person gave one process may go to another only when that one is
/// the same process, its descendant, or its sibling (the same parent: a browser's or a build's
/// concurrent children). A process of the user that merely runs the same program elsewhere is
/// none of these, and is asked itself.
extension CallerHandle {
    /// How far up a descendant's parents are followed looking for the asker.
    static let kinshipDepth = 32

    /// The service managers that adopt orphans (PID 1's program, `systemd --user`): a process of
    /// the user that double-forks becomes their child, so being their child too says nothing.
    static let adoptingParents: Set<String> = ["/usr/lib/systemd/systemd", "/lib/systemd/systemd"]

    /// Whether this handle's process is `asker`'s, one of its descendants, or a child of its
    /// parent, read now while both run. Both must have been pinned when they connected: a pid
    /// found later may be a later holder's.
    package func isKin(of asker: CallerHandle) -> Bool {
        guard let mine = process, let theirs = asker.process, pinnedAtConnect, asker.pinnedAtConnect else { return false }
        // Two live processes never share a pid.
        if mine.pid == theirs.pid { return mine.isAlive && theirs.isAlive }
        return isDescendant(mine, of: theirs) || isSibling(mine, of: theirs)
    }

    private func isDescendant(_ process: PinnedProcess, of ancestor: PinnedProcess) -> Bool {
        var child = process
        for _ in 0..<Self.kinshipDepth {
            // The child alive after the read: the parent read was its own.
            guard let parent = ProcessLineage.parent(of: child.pid), parent > 1, child.isAlive else { return false }
            if parent == ancestor.pid { return ancestor.isAlive }
            // Pinned, then the child's parent read again: still `parent`, so the pinned process
            // is that parent (an exited one's child is given another) and no later holder of its pid.
            guard let pinned = PinnedProcess(pid: parent), ProcessLineage.parent(of: child.pid) == parent, child.isAlive else { return false }
            child = pinned
        }
        return false
    }

    private func isSibling(_ process: PinnedProcess, of other: PinnedProcess) -> Bool {
        guard let parent = ProcessLineage.parent(of: process.pid), parent > 1, let pinned = PinnedProcess(pid: parent),
            ProcessLineage.parent(of: other.pid) == parent, ProcessLineage.parent(of: process.pid) == parent,
            let program = ProcessLineage.executable(of: parent), pinned.isAlive, process.isAlive, other.isAlive
        else { return false }
        return !Self.adoptingParents.contains(program)
    }
}
