import Glibc
import KeychainCore

/// The access list of the items a credential helper makes: the helper itself, trusted only while
/// one of the programs that run it as their helper is its parent (`exe:HELPER<PARENT,...`). A
/// copy of the helper run by anything else (a script, an infostealer) is asked instead.
///
package enum HelperAccess {
    /// The programs that run each helper (kept in the engine, where the broker's rule for items
    /// older than lists finds them too).
    package static let gitParents = AccessList.gitParents
    package static let dockerParents = AccessList.dockerParents

    /// The list for the running helper: its own resolved path under `parents`; nil when the
    /// helper's own path cannot be read (then its items keep no list, as before lists existed).
    package static func list(parents: [String]) -> AccessList? {
        guard let resolved = realpath("/proc/self/exe", nil) else { return nil }
        defer { free(resolved) }
        return AccessList([.executableUnder(String(cString: resolved), parents: parents)])
    }
}
