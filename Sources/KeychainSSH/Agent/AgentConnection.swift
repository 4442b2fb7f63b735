package import KeychainCore

/// One client connection's state: its session-bind@openssh.com bindings, and so whether it is
/// forwarded. The protocol's logic is ssh-agent.c's, function by function.
package final class AgentConnection {
    package let agent: Agent
    package let peer: AgentPeer

    private struct Binding {
        var hostKey: SSHPublicKeyParts
        var sessionID: Bytes
        var forwarded: Bool
    }

    private var bindings: [Binding] = []
    private var bindAttempted = false

    package init(agent: Agent, peer: AgentPeer) {
        self.agent = agent
        self.peer = peer
        judgeAhead()
    }

    /// Whether a session-bind was attempted: the connection comes through ssh, from elsewhere.
    /// What such a connection adds stays in memory: a host the agent is forwarded to may use the
    /// keys, not write the user's items. What it removes is unloaded from this agent, as any
    /// connection's removal is, and as ssh-agent lets a forwarded connection do.
    package var isRemote: Bool { bindAttempted || !bindings.isEmpty }

    /// One message (its bytes after the uint32 length) to its answer (without the length); nil
    /// closes the connection.
    package func reply(to message: Bytes) -> Bytes? {
        guard message.count <= AgentLimits.maximumMessage else { return nil }
        var reader = ByteReader(message)
        guard let type = try? reader.u8() else { return nil }
        if agent.isLocked && type != AgentMessage.unlock {
            switch type {
            case AgentMessage.requestIdentities: return [AgentMessage.identitiesAnswer, 0, 0, 0, 0]
            case AgentMessage.extensionRequest: return handleExtension(&reader)
            default: return Self.status(false)
            }
        }
        switch type {
        case AgentMessage.lock, AgentMessage.unlock:
            guard let passphrase = try? reader.blob() else { return Self.status(false) }
            var secret = passphrase
            defer { secret.wipe() }
            return Self.status(type == AgentMessage.lock ? agent.lock(passphrase: secret) : agent.unlock(passphrase: secret))
        case AgentMessage.removeAllRSAIdentities, AgentMessage.removeAllIdentities:
            agent.removeAll()
            return Self.status(true)
        case AgentMessage.signRequest: return sign(&reader)
        case AgentMessage.requestIdentities: return listIdentities()
        case AgentMessage.addIdentity, AgentMessage.addIdentityConstrained: return Self.status(add(&reader))
        case AgentMessage.removeIdentity: return Self.status(remove(&reader))
        case AgentMessage.extensionRequest: return handleExtension(&reader)
        default:
            // Smartcards (20, 21, 26), SSH1's messages and anything unknown.
            agent.log("unsupported message \(type)")
            return Self.status(false)
        }
    }

    private static func status(_ success: Bool) -> Bytes { [success ? AgentMessage.success : AgentMessage.failure] }

    // MARK: Identities

    /// The broker judges the client as it connects, on the broker's turn while this agent and
    /// the client exchange the list of keys, rather than after its signature request comes
    /// (ssh, ssh-keygen -Y sign and ssh-add -T list the keys first). The cost where no
    /// signature follows (ssh-add adding a key, ssh-add -l): one judging in the broker, and
    /// none while the keychain holds no key this agent would relay.
    private func judgeAhead() {
        guard let judge = agent.configuration.judgeAhead, let pidfd = peer.pidfd, agent.mayRelay() else { return }
        judge(pidfd.descriptor)
    }

    private func listIdentities() -> Bytes {
        var entries = ByteWriter()
        var count: UInt32 = 0
        for identity in agent.identities() where permitted(identity, user: nil).permitted {
            entries.blob(identity.publicBlob)
            entries.string(identity.comment)
            count += 1
        }
        var out = ByteWriter()
        out.u8(AgentMessage.identitiesAnswer)
        out.u32(count)
        out.raw(entries.bytes)
        return out.bytes
    }

    /// process_add_identity: a key (contract 1), its comment, then its constraints.
    private func add(_ reader: inout ByteReader) -> Bool {
        let key: SSHPrivateKey
        let comment: String
        do {
            key = try SSHPrivateKey(reading: &reader)
            comment = try reader.string()
            // A TPM key is made inside the TPM by the keychain; its internal form is not a wire type.
            guard !key.isTPMResident else { throw SSHKeyError("unsupported key type \(SSHPrivateKey.tpmKeyType)") }
        } catch {
            agent.log("refusing to add a key: \(error)")
            return false
        }
        guard let parts = try? SSHPublicKeyParts(blob: key.publicBlob) else { return false }
        var lifetime: UInt32?
        var confirm = false
        var destinationPayload: Bytes?
        do {
            while !reader.isAtEnd {
                switch try reader.u8() {
                case AgentMessage.constrainLifetime:
                    guard lifetime == nil else { throw SSHKeyError("lifetime already set") }
                    lifetime = try reader.u32()
                case AgentMessage.constrainConfirm:
                    guard !confirm else { throw SSHKeyError("confirm already set") }
                    confirm = true
                case AgentMessage.constrainExtension:
                    let name = try reader.string()
                    switch name {
                    case "restrict-destination-v00@openssh.com":
                        guard destinationPayload == nil else { throw SSHKeyError("\(name) already set") }
                        let payload = try reader.blob()
                        _ = try DestinationConstraint.all(in: payload)
                        destinationPayload = payload
                    case "associated-certs-v00@openssh.com":
                        // Only a smartcard's keys take certificates this way; ssh-agent refuses it here.
                        throw SSHKeyError("\(name) not valid here")
                    default:
                        // sk-provider@openssh.com too: security keys are not supported.
                        throw SSHKeyError("unsupported constraint \"\(name.prefix(64))\"")
                    }
                case let other:
                    throw SSHKeyError("unknown constraint \(other)")
                }
            }
        } catch {
            agent.log("failed to parse constraints: \(error)")
            return false
        }
        let payload = destinationPayload ?? []
        guard let destinations = try? DestinationConstraint.all(in: payload) else { return false }
        if let existing = agent.identity(for: parts), !permitted(existing, user: nil).permitted { return false }
        let identity = AgentIdentity(
            parts: parts, publicBlob: key.publicBlob, comment: comment, key: nil, death: nil, confirm: confirm, destinations: destinations,
            destinationPayload: payload)
        return agent.add(identity, key: key, lifetime: lifetime, keepable: !isRemote)
    }

    private func remove(_ reader: inout ByteReader) -> Bool {
        guard let blob = try? reader.blob(), let parts = try? SSHPublicKeyParts(blob: blob), let identity = agent.identity(for: parts),
            permitted(identity, user: nil).permitted
        else { return false }
        return agent.remove(identity)
    }

    // MARK: Signing

    /// process_sign_request2.
    private func sign(_ reader: inout ByteReader) -> Bytes {
        guard let blob = try? reader.blob(), let data = try? reader.blob(), let flags = try? reader.u32() else { return Self.status(false) }
        guard let parts = try? SSHPublicKeyParts(blob: blob), let identity = agent.identity(for: parts) else {
            agent.log("\(SSHPublicKey.keyType(of: blob)?.prefix(64) ?? "unknown") key not found")
            return Self.status(false)
        }
        var hostnames: [String?] = []
        if !identity.destinations.isEmpty {
            guard !bindings.isEmpty else {
                agent.log("refusing use of destination-constrained key to sign on unbound connection")
                return Self.status(false)
            }
            guard let request = UserauthRequest(data, expectedKey: parts) else {
                agent.log("refusing use of destination-constrained key to sign an unidentified signature")
                return Self.status(false)
            }
            let verdict = permitted(identity, user: request.user)
            guard verdict.permitted else { return Self.status(false) }
            let last = bindings[bindings.count - 1]
            // The session ID must be the one bound last, by ssh just before its userauth.
            guard Crypto.equal(request.sessionID, last.sessionID) else {
                agent.log("unexpected session ID on signature request for target user \(request.user)")
                return Self.status(false)
            }
            if bindings.count > 1 && request.hostKey == nil {
                agent.log("refusing use of destination-constrained key: no hostkey recorded in signature for forwarded connection")
                return Self.status(false)
            }
            if let hostKey = request.hostKey, hostKey.canonicalBlob != last.hostKey.canonicalBlob {
                agent.log("refusing use of destination-constrained key: mismatch between hostkey in request and most recently bound session")
                return Self.status(false)
            }
            hostnames = verdict.hostnames
        }
        let asker = AccessQuestion.Asker(executable: peer.executable, parents: peer.parents)
        let login = isLoginInLastSession(data, key: parts)
        var client: SigningClient?
        if agent.isRelayed(identity) {
            // The broker judges the client itself, every time: no approval is kept here.
            guard let pidfd = peer.pidfd else {
                agent.log("refusing to sign with \(identity.comment): the kernel gave no pidfd of the client (pid \(peer.pid))")
                return Self.status(false)
            }
            let question = AccessQuestion(
                asker: asker, target: .sshKey(comment: identity.comment, fingerprint: agent.fingerprint(identity.publicBlob)),
                destination: destination(hostnames: hostnames, login: login))
            client = SigningClient(
                pidfd: pidfd.descriptor, confirmEach: identity.confirm || forwardedToUnnamedHost(identity), confirmsKey: identity.confirm,
                question: question)
        }
        guard let (key, confirm) = agent.privateKey(of: identity, for: client) else { return Self.status(false) }
        if confirm && client?.confirmEach != true {
            let destination = destination(hostnames: hostnames, login: login)
            guard agent.confirm(identity, asker: asker, destination: destination, route: route(login: login)) else { return Self.status(false) }
        }
        do {
            var out = ByteWriter()
            out.u8(AgentMessage.signResponse)
            out.blob(try key.sign(data, flags: flags))
            return out.bytes
        } catch {
            agent.log("cannot sign with \(identity.comment): \(error)")
            return Self.status(false)
        }
    }

    /// A signature asked for through a forwarded agent (or after a bind that failed), with a key
    /// whose constraints name no host: the peer is the user's own ssh, which is on the key's
    /// list, but the request comes from the host it was forwarded to, which nothing chose. A
    /// constrained key got here only for hops its constraints name (`permitted`).
    private func forwardedToUnnamedHost(_ identity: AgentIdentity) -> Bool {
        guard identity.destinations.isEmpty else { return false }
        return (bindAttempted && bindings.isEmpty) || bindings.contains { $0.forwarded }
    }

    /// Whether `data` is the user authentication of the session bound last, for `key`: ssh's own
    /// login there. A session-bind proves only that the client saw a session with that host (any
    /// program can open one to a host the person trusts and bind it), not that what it then asks
    /// to sign goes there.
    private func isLoginInLastSession(_ data: Bytes, key: SSHPublicKeyParts) -> Bool {
        guard let last = bindings.last, !last.forwarded, let request = UserauthRequest(data, expectedKey: key) else { return false }
        if let hostKey = request.hostKey, hostKey.canonicalBlob != last.hostKey.canonicalBlob { return false }
        return Crypto.equal(request.sessionID, last.sessionID)
    }

    /// Where a signature on this connection goes, as its session-binds say: each hop by the name
    /// a destination constraint gave it, else by its host key; forwarded hops apart from the
    /// host logged in to, which is named only for a `login` in its session. nil without a bind (a
    /// local signature: a commit, a file), or with only a host the signature is not a login to.
    private func destination(hostnames: [String?], login: Bool) -> AccessQuestion.Destination? {
        if bindAttempted && bindings.isEmpty { return .unverifiedHost }
        guard let last = bindings.last else { return nil }
        let names = bindings.indices.map { index in
            (index < hostnames.count ? hostnames[index] : nil) ?? "the host with key " + agent.fingerprint(bindings[index].hostKey.canonicalBlob)
        }
        // Only the last binding may be an authentication's (bind refuses any after one).
        if last.forwarded { return AccessQuestion.Destination(host: nil, forwardedThrough: names) }
        if login { return AccessQuestion.Destination(host: names.last, forwardedThrough: Array(names.dropLast())) }
        return names.count > 1 ? AccessQuestion.Destination(host: nil, forwardedThrough: Array(names.dropLast())) : nil
    }

    /// The hops this connection's session-binds recorded, and whether the signature is the login
    /// they announce: a remembered approval holds for the same program over the same route only,
    /// since ssh itself is the peer of the connections it forwards from a remote host, and an
    /// approved login covers no other data signed over a connection bound alike.
    private func route(login: Bool) -> String {
        if bindAttempted && bindings.isEmpty { return "unbound after a failed bind" }
        let hops = bindings.map { agent.fingerprint($0.hostKey.canonicalBlob) + ($0.forwarded ? " forwarded" : "") }.joined(separator: ",")
        guard let last = bindings.last, !last.forwarded, !login else { return hops }
        return hops + " not a login"
    }

    // MARK: Destination constraints

    /// identity_permitted: whether the identity may be used (listed, signed with) over this
    /// connection's recorded hops; with each hop's host name, as the constraint that matched it
    /// gave one.
    private func permitted(_ identity: AgentIdentity, user: String?) -> (permitted: Bool, hostnames: [String?]) {
        guard !identity.destinations.isEmpty else { return (true, []) }
        if bindAttempted && bindings.isEmpty {
            agent.log("previous session bind failed on socket")
            return (false, [])
        }
        guard !bindings.isEmpty else { return (true, []) }
        let now = UInt64(max(0, agent.configuration.wallClock()))
        var from: SSHPublicKeyParts?
        var hostnames: [String?] = []
        for (index, binding) in bindings.enumerated() {
            var testUser: String?
            if index == bindings.count - 1 {
                // The user can only be checked at the final hop, where a signature is asked for.
                testUser = user
                if binding.forwarded && user != nil {
                    agent.log("tried to sign on forwarding hop")
                    return (false, [])
                }
            } else if !binding.forwarded {
                agent.log("tried to forward though signing bind")
                return (false, [])
            }
            let verdict = identity.destinations.permit(from: from, to: binding.hostKey, user: testUser, now: now)
            guard verdict.permitted else {
                agent.log("\(identity.parts.kind.name) identity \"\(identity.comment)\" not permitted for this destination")
                return (false, [])
            }
            hostnames.append(verdict.hostname)
            from = binding.hostKey
        }
        // A key usable to reach the last forwarding host but not beyond it is hidden there.
        if let last = bindings.last, last.forwarded, user == nil,
            !identity.destinations.permit(from: last.hostKey, to: nil, user: nil, now: now).permitted
        {
            return (false, [])
        }
        return (true, hostnames)
    }

    // MARK: Extensions

    /// process_extension: session-bind works even while the agent is locked.
    private func handleExtension(_ reader: inout ByteReader) -> Bytes {
        guard let name = try? reader.string() else { return Self.status(false) }
        if name == "session-bind@openssh.com" {
            return [bind(&reader) ? AgentMessage.success : AgentMessage.extensionFailure]
        }
        guard !agent.isLocked, name == "query" else {
            agent.log("unsupported extension \"\(name.prefix(64))\"")
            return Self.status(false)
        }
        var out = ByteWriter()
        out.u8(AgentMessage.extensionResponse)
        out.string("query")
        out.string("session-bind@openssh.com")
        return out.bytes
    }

    /// process_ext_session_bind: the host key's signature over the session ID, recorded per
    /// connection.
    private func bind(_ reader: inout ByteReader) -> Bool {
        bindAttempted = true
        guard let keyBlob = try? reader.blob(), let sessionID = try? reader.blob(), let signature = try? reader.blob(),
            let forwarded = try? reader.bool()
        else {
            agent.log("session-bind: cannot parse the request")
            return false
        }
        guard sessionID.count <= AgentLimits.maximumSessionID else {
            agent.log("session-bind: session ID too long")
            return false
        }
        guard let hostKey = try? SSHPublicKeyParts(blob: keyBlob), hostKey.verify(signature: signature, of: sessionID) else {
            agent.log("session-bind: the host key's signature does not verify")
            return false
        }
        for binding in bindings {
            guard binding.forwarded else {
                agent.log("attempt to bind session ID to socket previously bound for authentication attempt")
                return false
            }
            let sameSession = Crypto.equal(sessionID, binding.sessionID)
            let sameKey = hostKey.canonicalBlob == binding.hostKey.canonicalBlob
            if sameSession && sameKey { return true }
            if sameSession {
                agent.log("session ID recorded against different key")
                return false
            }
        }
        guard bindings.count < AgentLimits.maximumBindings else {
            agent.log("too many session IDs recorded")
            return false
        }
        bindings.append(Binding(hostKey: hostKey, sessionID: sessionID, forwarded: forwarded))
        return true
    }
}

/// parse_userauth_request: the data of a destination-constrained signature must be an SSH
/// publickey userauth request for this very key.
struct UserauthRequest {
    var sessionID: Bytes
    var user: String
    var hostKey: SSHPublicKeyParts?

    init?(_ data: Bytes, expectedKey: SSHPublicKeyParts) {
        var reader = ByteReader(data)
        guard let sessionID = try? reader.blob(), !sessionID.isEmpty, let type = try? reader.u8(), let user = try? reader.string(),
            let service = try? reader.string(), let method = try? reader.string(), let signatureFollows = try? reader.u8(),
            let algorithm = try? reader.string(), let keyBlob = try? reader.blob(), let key = try? SSHPublicKeyParts(blob: keyBlob)
        else { return nil }
        guard type == AgentMessage.userauthRequest, signatureFollows == 1, service == "ssh-connection",
            key.canonicalBlob == expectedKey.canonicalBlob, Self.keyType(ofAlgorithm: algorithm) == SSHPublicKey.keyType(of: expectedKey.canonicalBlob)
        else { return nil }
        if method == "publickey-hostbound-v00@openssh.com" {
            guard let hostBlob = try? reader.blob(), let host = try? SSHPublicKeyParts(blob: hostBlob) else { return nil }
            hostKey = host
        } else if method != "publickey" {
            return nil
        }
        guard reader.isAtEnd else { return nil }
        self.sessionID = sessionID
        self.user = user
    }

    /// sshkey_type_from_name: RSA's signature algorithms name the ssh-rsa key type.
    private static func keyType(ofAlgorithm name: String) -> String {
        for rsa in ["rsa-sha2-256", "rsa-sha2-512"] where name.hasPrefix(rsa) { return "ssh-rsa" + name.dropFirst(rsa.count) }
        return name
    }
}
