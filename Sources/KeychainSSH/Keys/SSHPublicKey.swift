package import KeychainCore

/// The hash of a key's fingerprint (ssh-agent -E).
package enum SSHFingerprintHash: String, Sendable {
    case sha256
    case md5
}

/// What the agent and its tools say about a public key blob.
package enum SSHPublicKey {
    /// As `ssh-keygen -l`: "SHA256:" and unpadded base64, or "MD5:" and colon-separated hex.
    package static func fingerprint(of publicBlob: Bytes, hash: SSHFingerprintHash = .sha256) -> String {
        switch hash {
        case .sha256:
            return "SHA256:" + String(PEM.base64(Crypto.sha256(publicBlob)).prefix { $0 != "=" })
        case .md5:
            let hex = Crypto.md5(publicBlob).hex
            var pairs: [Substring] = []
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                pairs.append(hex[index..<next])
                index = next
            }
            return "MD5:" + pairs.joined(separator: ":")
        }
    }

    /// "type base64 comment", as authorized_keys and `ssh-add -L` write it.
    package static func authorizedKeysLine(of publicBlob: Bytes, comment: String) -> String {
        var reader = ByteReader(publicBlob)
        let type = (try? reader.string()) ?? "unknown"
        let line = type + " " + PEM.base64(publicBlob)
        return comment.isEmpty ? line : line + " " + comment
    }

    /// The blob of an authorized_keys or .pub line ("type base64 [comment]"), nil when the line
    /// holds none or its type is not the blob's.
    package static func blob(ofLine line: Bytes) -> Bytes? {
        let fields = line.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\n") })
        guard fields.count >= 2, fields[1].count < 64 * 1024 else { return nil }
        guard let decoded = PEM.base64(decoding: Array(fields[1])) else { return nil }
        guard keyType(of: decoded).map({ Array($0.utf8) == Array(fields[0]) }) == true else { return nil }
        return decoded
    }

    /// Whether `signature` (string algorithm, string signature) is `publicBlob`'s over `data`;
    /// for a certificate, its key's (the certificate itself is checked as it is read).
    package static func verify(signature: Bytes, of data: Bytes, by publicBlob: Bytes) -> Bool {
        guard let parts = try? SSHPublicKeyParts(blob: publicBlob) else { return false }
        return parts.verify(signature: signature, of: data)
    }

    /// The key type name at the start of a blob, nil when there is none.
    package static func keyType(of publicBlob: Bytes) -> String? {
        var reader = ByteReader(publicBlob)
        return try? reader.string()
    }

    /// Whether the blob is a key the agent can use (a supported type, well formed, a valid
    /// certificate).
    package static func isValid(_ publicBlob: Bytes) -> Bool { (try? SSHPublicKeyParts(blob: publicBlob)) != nil }
}
