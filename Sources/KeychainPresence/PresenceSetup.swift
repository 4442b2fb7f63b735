import KeychainCore

/// What a front end calls before its first keychain operation: polkit becomes the presence
/// authorizer of the stores it opens, unless the program already chose one (`security` starts a
/// terminal agent; tests give their own).
package enum PresenceSetup {
    nonisolated(unsafe) private static var installed = false

    package static func installPolkit(terminalAgent: Bool = false) {
        guard !installed else { return }
        installed = true
        if KeychainStore.defaultPresenceAuthorizer is NobodyToAsk || terminalAgent {
            KeychainStore.defaultPresenceAuthorizer = PolkitAuthorizer(terminalAgent: terminalAgent)
        }
    }
}
