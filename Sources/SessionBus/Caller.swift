import KeychainPeers

/// Who sent a call: an unconfined program of the user, or an app in a Flatpak or Snap sandbox.
///
/// A sandboxed app reaches secrets only through this service (its sandbox hides the keychain
/// files and the kernel keyring), so here it can be kept to its own items. It is told apart as
/// xdg-desktop-portal tells it: by the process that connected (BusPeer), then `/.flatpak-info` in
/// its root (Flatpak puts it in the app's sandbox and in its D-Bus proxy's), or a `snap.NAME.*`
/// label or cgroup (snapd's). Nothing here confines an unconfined process of the same
/// user: it can read the keychain files and the kernel's keys directly.
package enum Caller: Equatable {
    case unconfined
    /// A sandboxed app, by its app id (`org.example.App`, or `snap.NAME`).
    case app(String)
    /// Which program could not be told (a `/.flatpak-info` without a valid name, a connecting
    /// process gone or replaced, no pid from the bus): refused everything.
    case unidentified

    /// The owner its items carry; nil for an unconfined program, which sees every item.
    package var owner: String? {
        switch self {
        case .app(let id): return id
        case .unconfined, .unidentified: return nil
        }
    }

    package var isConfined: Bool { self != .unconfined }

    /// The caller behind a bus connection, from the identity of the process that connected
    /// (BusPeer); none known is unidentified. A snap's AppArmor label, which the bus records when
    /// the connection is made, needs no process.
    package init(identity: ProcessIdentity?, securityLabel: String?) {
        if let label = securityLabel, let id = SandboxIDs.appArmorAppID(label) {
            self = .app(id)
            return
        }
        switch identity?.sandbox {
        case .none?: self = .unconfined
        case .app(let id)?: self = .app(id)
        case .undetermined?, nil: self = .unidentified
        }
    }

    /// Letters, digits, `.`, `_` and `-`, as Flatpak and snapd allow in their ids.
    package static func isAppID(_ id: String) -> Bool { SandboxIDs.isAppID(id) }
}
