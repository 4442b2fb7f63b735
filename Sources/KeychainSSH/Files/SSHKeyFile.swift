package import KeychainCore

/// One private key from a file: its serialization (contract 1) and its comment.
package struct SSHKeyFileEntry {
    package var serialized: Bytes
    package var comment: String

    package init(serialized: Bytes, comment: String) {
        self.serialized = serialized
        self.comment = comment
    }
}

package enum SSHKeyFileError: Error, Equatable, CustomStringConvertible {
    case needsPassphrase
    case wrongPassphrase
    /// The key type, cipher or KDF it names.
    case unsupported(String)
    /// What is wrong with the file.
    case malformed(String)

    package var description: String {
        switch self {
        case .needsPassphrase: return "the private key file is encrypted: a passphrase is needed"
        case .wrongPassphrase: return "incorrect passphrase for the private key file"
        case .unsupported(let what): return "unsupported in a private key file: \(what)"
        case .malformed(let what): return "invalid private key file: \(what)"
        }
    }
}

/// Private key files as OpenSSH and OpenSSL write them.
package enum SSHKeyFile {
    /// Far above any real key file (an RSA 16384 key in PEM is about 13 kB), low enough that a
    /// hostile file costs nothing to refuse.
    static let maximumSize = 256 << 10

    /// openssh-key-v1 ("-----BEGIN OPENSSH PRIVATE KEY-----"), PEM (RSA/EC PRIVATE KEY, with
    /// Proc-Type encryption too) and PKCS#8 (ENCRYPTED PRIVATE KEY too).
    package static func read(_ contents: Bytes, passphrase: Bytes?) throws -> [SSHKeyFileEntry] {
        guard contents.count <= maximumSize else { throw SSHKeyFileError.malformed("larger than \(maximumSize >> 10) KiB") }
        let passphrase = passphrase?.isEmpty == true ? nil : passphrase
        // The decoded bytes of a clear file hold the private key.
        if var decoded = try OpenSSHKeyV1.decode(contents) {
            defer { decoded.wipe() }
            return try guarded { try OpenSSHKeyV1.read(decoded, passphrase: passphrase) }
        }
        return [try guarded { try PEMPrivateKey.read(contents, passphrase: passphrase) }]
    }

    package static func isEncrypted(_ contents: Bytes) -> Bool {
        guard contents.count <= maximumSize else { return false }
        if let decoded = try? OpenSSHKeyV1.decode(contents) {
            return (try? OpenSSHKeyV1.cipherName(of: decoded)).map { $0 != "none" } ?? false
        }
        return PEMPrivateKey.isEncrypted(contents)
    }

    /// openssh-key-v1, as `ssh-keygen` writes it (aes256-ctr, bcrypt rounds 16 when a passphrase
    /// is given; "none" otherwise).
    package static func write(_ entry: SSHKeyFileEntry, publicBlob: Bytes, passphrase: Bytes?) throws -> String {
        let passphrase = passphrase?.isEmpty == true ? nil : passphrase
        return try guarded { try OpenSSHKeyV1.write(entry, publicBlob: publicBlob, passphrase: passphrase) }
    }

    /// The engine's reader throws its own decode errors (a length past the end); here they all
    /// mean one thing.
    private static func guarded<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as SSHKeyFileError {
            throw error
        } catch {
            throw SSHKeyFileError.malformed("truncated or damaged (\(error))")
        }
    }
}
