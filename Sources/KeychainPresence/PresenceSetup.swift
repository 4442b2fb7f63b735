import KeychainCore

/// What a front end calls before its first keychain operation: polkit becomes the presence
/// authorizer of the stores it opens, unless the program already chose one (`security` starts a
/// terminal agent; tests give their own).
package enum PresenceSetup {
    /// Once per process, whichever thread asks first (a static's initializer runs once).
    private static let polkit: Void = {
        if KeychainStore.defaultPresenceAuthorizer is NobodyToAsk { KeychainStore.defaultPresenceAuthorizer = PolkitAuthorizer() }
    }()

    package static func installPolkit() { _ = polkit }

    /// `security`'s choice, at its start: polkit, with a text agent on the terminal when no
    /// desktop agent serves it (SSH).
    package static func installPolkitWithTerminalAgent() {
        KeychainStore.defaultPresenceAuthorizer = PolkitAuthorizer(terminalAgent: true)
    }
}
