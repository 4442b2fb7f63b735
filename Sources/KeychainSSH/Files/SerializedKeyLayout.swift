internal import KeychainCore

/// Where one private key's serialization (contract 1) ends and which of its fields make its
/// public blob: an openssh-key-v1 file puts the comment right after the key with no length
/// around the key, so reading one means knowing each type's fields (sshkey.c's
/// *_serialize_private, PROTOCOL.certkeys for certificates).
enum SerializedKeyLayout {
    private enum Field { case string, mpint }

    /// The fields after the type name, and the indices of those that form the public blob after
    /// it, in the public blob's order.
    private static func layout(of type: String) throws -> (fields: [Field], publicFields: [Int]) {
        switch type {
        case "ssh-ed25519": return ([.string, .string], [0])
        case "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521": return ([.string, .string, .mpint], [0, 1])
        case "ssh-rsa": return ([.mpint, .mpint, .mpint, .mpint, .mpint, .mpint], [1, 0])
        // A certificate's public blob is the certificate itself, its first field.
        case "ssh-ed25519-cert-v01@openssh.com": return ([.string, .string, .string], [])
        case "ecdsa-sha2-nistp256-cert-v01@openssh.com", "ecdsa-sha2-nistp384-cert-v01@openssh.com", "ecdsa-sha2-nistp521-cert-v01@openssh.com":
            return ([.string, .mpint], [])
        case "ssh-rsa-cert-v01@openssh.com": return ([.string, .mpint, .mpint, .mpint, .mpint], [])
        default: throw SSHKeyFileError.unsupported("key type \(type.count > 64 ? String(type.prefix(64)) + "..." : type)")
        }
    }

    /// Reads one key from `reader`: its serialization byte for byte, and the public blob its
    /// fields give. Field values are checked only as far as the file's structure needs
    /// (SSHPrivateKey checks the key itself).
    static func read(_ reader: inout ByteReader) throws -> (serialized: Bytes, publicBlob: Bytes) {
        let type = try reader.string()
        let (fields, publicFields) = try layout(of: type)
        var values: [Bytes] = []
        var serialized = ByteWriter()
        serialized.string(type)
        for _ in fields {
            let value = try reader.blob()
            values.append(value)
            serialized.blob(value)
        }
        defer {
            serialized.wipe()
            for i in values.indices { values[i].wipe() }
        }
        try check(type, values)
        var publicBlob = ByteWriter()
        publicBlob.string(type)
        for i in publicFields { publicBlob.blob(values[i]) }
        return (serialized.bytes, publicFields.isEmpty ? values[0] : publicBlob.bytes)
    }

    private static func check(_ type: String, _ values: [Bytes]) throws {
        if type == "ssh-ed25519" {
            guard values[0].count == 32, values[1].count == 64, Array(values[1].suffix(32)) == values[0] else {
                throw SSHKeyFileError.malformed("an Ed25519 key with fields of the wrong size")
            }
        } else if type.hasPrefix("ecdsa-sha2-"), !type.hasSuffix("-cert-v01@openssh.com") {
            guard values[0] == Array(type.dropFirst("ecdsa-sha2-".count).utf8) else {
                throw SSHKeyFileError.malformed("an ECDSA key whose curve is not its type's")
            }
        }
    }

    /// The public blob of one whole serialization (nothing may follow it).
    static func publicBlob(of serialized: Bytes) throws -> Bytes {
        var reader = ByteReader(serialized)
        let key = try read(&reader)
        guard reader.isAtEnd else { throw SSHKeyFileError.malformed("bytes after the private key") }
        return key.publicBlob
    }
}
