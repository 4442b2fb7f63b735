import Glibc
import KeychainCore

/// The access list of the items a credential helper makes: the helper itself, trusted only while
/// one of the programs that run it as their helper is its parent (`exe:HELPER<PARENT,...`). A
/// copy of the helper run by anything else (a script, an infostealer) is asked instead.
///
/// The parents are the programs' installed paths, with their /usr/local/bin variants for
/// builds installed there; they are constants, not resolved at run time, because the list must
/// name where the trusted programs are, not where some link points today.
package enum HelperAccess {
    /// git runs credential helpers itself, and through its remote helpers (HTTP(S), FTP(S)).
    package static let gitParents = [
        "/usr/bin/git", "/usr/local/bin/git", "/usr/lib/git-core/git", "/usr/local/lib/git-core/git",
        "/usr/lib/git-core/git-remote-http", "/usr/lib/git-core/git-remote-https",
        "/usr/lib/git-core/git-remote-ftp", "/usr/lib/git-core/git-remote-ftps",
        "/usr/local/lib/git-core/git-remote-http", "/usr/local/lib/git-core/git-remote-https",
        "/usr/local/lib/git-core/git-remote-ftp", "/usr/local/lib/git-core/git-remote-ftps"
    ]

    /// The container tools that run docker-credential-* helpers.
    package static let dockerParents = [
        "/usr/bin/docker", "/usr/local/bin/docker", "/usr/bin/podman", "/usr/local/bin/podman",
        "/usr/bin/skopeo", "/usr/local/bin/skopeo", "/usr/bin/buildah", "/usr/local/bin/buildah",
        "/usr/libexec/docker/cli-plugins/docker-buildx", "/usr/local/libexec/docker/cli-plugins/docker-buildx"
    ]

    /// The list for the running helper: its own resolved path under `parents`; nil when the
    /// helper's own path cannot be read (then its items keep no list, as before lists existed).
    package static func list(parents: [String]) -> AccessList? {
        guard let resolved = realpath("/proc/self/exe", nil) else { return nil }
        defer { free(resolved) }
        return AccessList([.executableUnder(String(cString: resolved), parents: parents)])
    }
}
