internal import KeychainCore

/// One hop of a `ssh-add -h` constraint: a user pattern, a host name and the host's keys (or
/// its CAs).
struct DestinationHop {
    var user: String?
    var hostname: String?
    var keys: [(blob: Bytes, isCA: Bool)]

    /// parse_dest_constraint_hop.
    init(reading bytes: Bytes) throws {
        var reader = ByteReader(bytes)
        let user = try reader.string()
        let hostname = try reader.string()
        guard try reader.blob().isEmpty else { throw SSHKeyError("unsupported destination hop extensions") }
        guard user.utf8.count <= AgentLimits.maximumUserPattern else { throw SSHKeyError("user match pattern too long") }
        self.user = user.isEmpty ? nil : user
        self.hostname = hostname.isEmpty ? nil : hostname
        keys = []
        while !reader.isAtEnd {
            let blob = try SSHPublicKeyParts(blob: try reader.blob()).canonicalBlob
            keys.append((blob, try reader.u8() != 0))
        }
    }

    /// match_key_hop: `key` is one of the hop's keys, or a host certificate for the hop's
    /// host name signed by one of its CAs.
    func admits(_ key: SSHPublicKeyParts, now: UInt64) -> Bool {
        for (blob, isCA) in keys {
            guard let certificate = key.certificate else {
                if !isCA && blob == key.canonicalBlob { return true }
                continue
            }
            guard isCA, (try? SSHPublicKeyParts(blob: certificate.signatureKey).canonicalBlob) == blob else { continue }
            if certificate.admitsHost(hostname ?? "(ORIGIN)", now: now) { return true }
        }
        return false
    }
}

/// A `restrict-destination-v00@openssh.com` constraint: from one hop to the next.
struct DestinationConstraint {
    var from: DestinationHop
    var to: DestinationHop

    /// parse_dest_constraint, with its consistency checks.
    init(reading reader: inout ByteReader) throws {
        var constraint = ByteReader(try reader.blob())
        from = try DestinationHop(reading: try constraint.blob())
        to = try DestinationHop(reading: try constraint.blob())
        guard try constraint.blob().isEmpty else { throw SSHKeyError("unsupported destination constraint extensions") }
        guard (from.hostname == nil) == from.keys.isEmpty, from.user == nil else { throw SSHKeyError("inconsistent \"from\" specification") }
        guard to.hostname != nil, !to.keys.isEmpty else { throw SSHKeyError("incomplete \"to\" specification") }
    }

    /// Every constraint in the extension's payload, at most AGENT_MAX_DEST_CONSTRAINTS.
    static func all(in payload: Bytes) throws -> [DestinationConstraint] {
        var reader = ByteReader(payload)
        var constraints: [DestinationConstraint] = []
        while !reader.isAtEnd {
            guard constraints.count < AgentLimits.maximumDestinationConstraints else { throw SSHKeyError("too many destination constraints") }
            constraints.append(try DestinationConstraint(reading: &reader))
        }
        return constraints
    }
}

extension Array where Element == DestinationConstraint {
    /// permitted_by_dest_constraints: some constraint leads from `from` (nil: this machine) to
    /// `to` (nil: anywhere) for `user`; its destination's host name when one does.
    func permit(from: SSHPublicKeyParts?, to: SSHPublicKeyParts?, user: String?, now: UInt64) -> (permitted: Bool, hostname: String?) {
        for constraint in self {
            if let from {
                guard constraint.from.admits(from, now: now) else { continue }
            } else if constraint.from.hostname != nil || !constraint.from.keys.isEmpty {
                continue
            }
            if let to, !constraint.to.admits(to, now: now) { continue }
            if let pattern = constraint.to.user, let user, !UserPattern.matches(user, pattern) { continue }
            return (true, constraint.to.hostname)
        }
        return (false, nil)
    }
}

/// OpenSSH's match_pattern: `*` and `?` wildcards, nothing else.
enum UserPattern {
    static func matches(_ string: String, _ pattern: String) -> Bool {
        matches(Array(string.utf8)[...], Array(pattern.utf8)[...])
    }

    private static func matches(_ string: ArraySlice<UInt8>, _ pattern: ArraySlice<UInt8>) -> Bool {
        var s = string
        var p = pattern
        while let first = p.first {
            if first == UInt8(ascii: "*") {
                let rest = p.dropFirst()
                if rest.isEmpty { return true }
                var tail = s
                while true {
                    if matches(tail, rest) { return true }
                    guard !tail.isEmpty else { return false }
                    tail = tail.dropFirst()
                }
            }
            guard let next = s.first, first == UInt8(ascii: "?") || first == next else { return false }
            s = s.dropFirst()
            p = p.dropFirst()
        }
        return s.isEmpty
    }
}
