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

/// OpenSSH's match_pattern: `*` and `?` wildcards, nothing else. Matched with one backtrack
/// point, the last star: a later star can only do better than an earlier one, so no more is
/// needed, and the time is at most the product of the lengths, whatever the pattern (the
/// recursive form takes a power of the user name's length, which the asker chooses).
enum UserPattern {
    static func matches(_ string: String, _ pattern: String) -> Bool {
        let s = Array(string.utf8)
        let p = Array(pattern.utf8)
        var i = 0
        var j = 0
        var star: (pattern: Int, string: Int)?
        while i < s.count {
            if j < p.count, p[j] == UInt8(ascii: "*") {
                star = (j, i)
                j += 1
            } else if j < p.count, p[j] == UInt8(ascii: "?") || p[j] == s[i] {
                i += 1
                j += 1
            } else if let last = star {
                // The last star takes one more byte; the rest of the pattern starts again after it.
                star = (last.pattern, last.string + 1)
                i = last.string + 1
                j = last.pattern + 1
            } else {
                return false
            }
        }
        while j < p.count, p[j] == UInt8(ascii: "*") { j += 1 }
        return j == p.count
    }
}
