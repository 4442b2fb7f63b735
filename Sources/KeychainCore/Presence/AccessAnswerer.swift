/// What the person said when the keychain's custodian asked whether a program may read an item.
/// Allowing needs the keychain's password, which the custodian checks: any process of the user's
/// can type "yes" on a terminal, only the person knows the password.
package enum AccessGrant: Sendable, Equatable {
    case deny
    case once(password: Bytes)
    case always(password: Bytes)
}

/// Who asks the person on the custodian's behalf: a program the tests name, the terminal, later
/// the desktop's dialog. The custodian's client holds one (KeychainPresence makes the usual chain;
/// the engine starts no process, so none of the implementations live here).
package protocol AccessAnswerer: Sendable {
    /// The person's answer to `question`; nil when nobody can be asked here (no terminal, no
    /// dialog), which the caller reports as errSecInteractionNotAllowed.
    func answer(_ question: String) throws -> AccessGrant?
}
