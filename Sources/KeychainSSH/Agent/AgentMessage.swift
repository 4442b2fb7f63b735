/// draft-miller-ssh-agent's message numbers (OpenSSH's authfd.h) and the agent's own limits
/// (ssh-agent.c's).
package enum AgentMessage {
    package static let failure: UInt8 = 5
    package static let success: UInt8 = 6
    static let removeAllRSAIdentities: UInt8 = 9
    package static let requestIdentities: UInt8 = 11
    package static let identitiesAnswer: UInt8 = 12
    package static let signRequest: UInt8 = 13
    package static let signResponse: UInt8 = 14
    package static let addIdentity: UInt8 = 17
    package static let removeIdentity: UInt8 = 18
    package static let removeAllIdentities: UInt8 = 19
    package static let lock: UInt8 = 22
    package static let unlock: UInt8 = 23
    package static let addIdentityConstrained: UInt8 = 25
    package static let extensionRequest: UInt8 = 27
    package static let extensionFailure: UInt8 = 28
    package static let extensionResponse: UInt8 = 29

    static let constrainLifetime: UInt8 = 1
    static let constrainConfirm: UInt8 = 2
    static let constrainExtension: UInt8 = 255

    static let userauthRequest: UInt8 = 50
}

package enum AgentLimits {
    /// AGENT_MAX_LEN: a longer message closes the connection.
    package static let maximumMessage = 256 * 1024
    /// AGENT_MAX_SESSION_IDS: session-bind records per connection.
    static let maximumBindings = 16
    /// AGENT_MAX_SID_LEN.
    static let maximumSessionID = 128
    /// AGENT_MAX_DEST_CONSTRAINTS.
    static let maximumDestinationConstraints = 1024
    /// AGENT_MAX_EXT_CERTS.
    static let maximumAssociatedCertificates = 1024
    /// AGENT_USER_CONSTRAINT_MAX_LEN.
    static let maximumUserPattern = 256
    /// Identities the agent holds at once, memory and keychain together.
    static let maximumIdentities = 1024
}
