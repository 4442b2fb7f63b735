import KeychainBroker
import KeychainCore
import KeychainPresence
import KeychainSSH
import KeychainTPMClient

/// The agent behind the socket: keys kept in the user's default keychain (memory only with
/// --session, or when there is no keychain to keep them in), the person asked through pinentry
/// for `ssh-add -c` keys, and TPM-resident keys signed through keychain-tpm-helper.
func makeHandlerFactory(_ settings: AgentSettings, log: @escaping @Sendable (String) -> Void) -> AgentServer.HandlerFactory {
    PresenceSetup.installPolkit()
    // A daemon has no terminal: the broker's questions (a program not on a key's list, a -c key)
    // are asked through pinentry, with their whole text.
    BrokerSetup.install(answerer: AccessAnswerers.daemon())
    TPMClientSetup.install()
    SSHPrivateKey.tpmSign = { digest, blob in try TPMSigningKeys.sign(digest: digest, with: blob) }

    var configuration = AgentConfiguration()
    configuration.defaultLifetime = settings.defaultLifetime
    configuration.sessionOnly = settings.session
    configuration.rememberConfirmation = settings.rememberConfirmation
    // The protocol speaks of SHA-256 and MD5 fingerprints; ssh-agent's other digests appear only
    // in its debug lines, so they log as SHA-256.
    configuration.fingerprintHash = settings.fingerprintHash == .md5 ? .md5 : .sha256
    configuration.log = log
    // pinentry carries the question's text; polkit cannot: polkitd takes the details its
    // message would name them with only from root or the action's owner.
    let prompter = AccessPrompters([PinentryAccessPrompter()])
    configuration.confirm = { question in
        let answer = prompter.ask(question)
        if answer != .allowed { log("confirmation refused (\(answer)): " + question.text.split(separator: "\n").joined(separator: " ")) }
        return answer == .allowed
    }
    // With a broker, a kept key's item is read for the client that asks: the broker judges it
    // against the key's list and asks the person, through the question the agent adds to.
    if let custodian = BrokerSetup.installed {
        configuration.judgeAhead = { pidfd in custodian.judgeAhead(relaying: pidfd) }
        configuration.relay = { client, body in
            BrokerRelay.serving(RelayedClient(pidfd: client.pidfd, confirmEach: client.confirmEach, note: relayNote(client)), body)
        }
    }
    if !settings.session {
        do {
            configuration.vault = SSHKeyVault(store: try KeychainStore.open())
        } catch {
            log("keys are kept in memory only: the keychain cannot be opened (\(error))")
        }
    }
    let agent = Agent(configuration: configuration)
    return { peer in
        let connection = AgentConnection(agent: agent, peer: peer)
        return { message in connection.reply(to: message) }
    }
}

/// The agent's lines under the broker's question: what only the agent knows (the key, its
/// fingerprint, where the signature goes, a -c key).
private func relayNote(_ client: SigningClient) -> String {
    var note = client.question.text
    if client.confirmsKey {
        note += "\nThis key asks before each use (ssh-add -c)."
    } else if client.confirmEach {
        note += "\nThe request comes through your agent forwarded to a host that the key's constraints do not name."
    }
    return note
}
