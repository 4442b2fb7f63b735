import Glibc
import KeychainCore
import SessionBus

/// What the keychains folder, the default-keychain choice and the chosen file looked like, for
/// where `FolderWatch` cannot be armed: while they look the same, a rescan would find the same
/// keychains, so a search need not list the folder again (six system calls and the sorting of
/// its names, on every SearchItems).
struct FolderStamp: Equatable {
    /// A file's identity and times, or nil for one that is not there.
    private struct FileState: Equatable {
        var identity: FileIdentity
        var size: Int64
        var modified: timespec
        var changed: timespec

        init?(_ path: String) {
            var st = stat()
            guard stat(path, &st) == 0 else { return nil }
            (identity, size, modified, changed) = (FileIdentity(st), Int64(st.st_size), st.st_mtim, st.st_ctim)
        }

        static func == (a: FileState, b: FileState) -> Bool {
            a.identity == b.identity && a.size == b.size && a.modified.tv_sec == b.modified.tv_sec
                && a.modified.tv_nsec == b.modified.tv_nsec && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
        }
    }

    private let folder: FileState?
    private let choice: FileState?
    private let chosen: FileState?
    /// The kernel stamps files from a clock that moves once a tick: a change in the same tick as
    /// the one before leaves the times as they were. A stamp is trusted only when every time in it
    /// was at least a second old when it was taken, so any later change must show; and never on
    /// a network filesystem, whose times come from the server's clock, not this one.
    let isSettled: Bool

    /// `chosen`: the default keychain as the last scan found it (the choice file's contents, or
    /// the login keychain); the choice file's own state tells when that changes.
    init(chosen: String) {
        folder = FileState(KeychainFile.directory())
        choice = FileState(KeychainFile.defaultChoiceFile())
        self.chosen = FileState(chosen)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let aged = [folder, choice, self.chosen].allSatisfy { state in
            guard let state else { return true }
            return state.modified.tv_sec < now.tv_sec - 1 && state.changed.tv_sec < now.tv_sec - 1
        }
        let paths = [KeychainFile.directory(), KeychainFile.defaultChoiceFile(), chosen]
        isSettled = aged && zip([folder, choice, self.chosen], paths).allSatisfy { state, path in state == nil || FolderWatch.isLocal(path) }
    }

    static func == (a: FolderStamp, b: FolderStamp) -> Bool {
        a.folder == b.folder && a.choice == b.choice && a.chosen == b.chosen
    }
}
