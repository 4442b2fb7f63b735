import KeychainSSH

// TEMPORARY, until the protocol (Sources/KeychainSSH/Agent) lands: at the merge this file is
// replaced by one that builds the Agent from `settings` and answers with
// `AgentConnection(agent: agent, peer: peer).reply(to:)`. It answers REQUEST_IDENTITIES with an
// empty list and anything else with failure, so that ssh-add and ssh can already talk to the socket.
func makeHandlerFactory(_ settings: AgentSettings, log: @escaping @Sendable (String) -> Void) -> AgentServer.HandlerFactory {
    let requestIdentities: UInt8 = 11
    let identitiesAnswer: [UInt8] = [12, 0, 0, 0, 0]
    let failure: [UInt8] = [5]
    return { _ in
        { message in message == [requestIdentities] ? identitiesAnswer : failure }
    }
}
