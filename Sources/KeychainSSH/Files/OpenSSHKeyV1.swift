internal import KeychainCore

/// OpenSSH's own private key file (PROTOCOL.key; sshkey.c's sshkey_private_to_blob2 and
/// sshkey_parse_private2): a clear envelope with the cipher, the KDF and the public keys, then
/// the private section, encrypted when there is a passphrase.
enum OpenSSHKeyV1 {
    static let label = "OPENSSH PRIVATE KEY"
    private static let magic = Array("openssh-key-v1".utf8) + [0]
    /// `ssh-keygen -a` defaults to 16. A file chooses its own count and the reader pays for it
    /// (two eksblowfish hashes per round for a 48-byte key), so a hostile 2^32 would never end;
    /// 1024 is 64 times the default: 8.4 s of CPU on this project's machine, the same as
    /// ssh-keygen's own C (8.2 ms a round for aes256-ctr's 48 bytes).
    static let maximumRounds: UInt32 = 1024
    static let defaultRounds: UInt32 = 16
    /// ssh-keygen writes one key per file and reads no other count; a few are accepted.
    private static let maximumKeys: UInt32 = 16
    private static let saltLength = 16

    /// The decoded bytes when `contents` is armoured as openssh-key-v1; nil when it is another
    /// format.
    static func decode(_ contents: Bytes) throws -> Bytes? {
        guard contents.containsASCII("-----BEGIN \(label)-----") else { return nil }
        guard let block = PEM.blocks(in: contents).first(where: { $0.label == label }) else {
            throw SSHKeyFileError.malformed("the OpenSSH private key's base64 is damaged or its END line missing")
        }
        guard block.der.starts(with: magic) else { throw SSHKeyFileError.malformed("no openssh-key-v1 header") }
        return block.der
    }

    private struct Envelope {
        var cipher: SSHKeyFileCipher
        var cipherName: String
        var kdfName: String
        var kdfOptions: Bytes
        var publicBlobs: [Bytes]
        var encrypted: Bytes
    }

    private static func envelope(_ decoded: Bytes) throws -> Envelope {
        var reader = ByteReader(decoded)
        _ = try reader.fixed(magic.count)
        let cipherName = try reader.string()
        let kdfName = try reader.string()
        let kdfOptions = try reader.blob()
        let count = try reader.u32()
        guard count >= 1, count <= maximumKeys else { throw SSHKeyFileError.malformed("\(count) keys in one file") }
        var publicBlobs: [Bytes] = []
        for _ in 0..<count { publicBlobs.append(try reader.blob()) }
        guard let cipher = SSHKeyFileCipher.named(cipherName) else { throw SSHKeyFileError.unsupported("cipher \(cipherName.prefix(64))") }
        let length = Int(try reader.u32())
        guard length >= cipher.blockSize, length % cipher.blockSize == 0 else {
            throw SSHKeyFileError.malformed("the private section is not a whole number of cipher blocks")
        }
        guard reader.remaining == length + cipher.tagLength else {
            throw SSHKeyFileError.malformed(reader.remaining < length + cipher.tagLength ? "truncated" : "bytes after the private section")
        }
        return Envelope(
            cipher: cipher, cipherName: cipherName, kdfName: kdfName, kdfOptions: kdfOptions, publicBlobs: publicBlobs, encrypted: reader.rest())
    }

    static func cipherName(of decoded: Bytes) throws -> String {
        var reader = ByteReader(decoded)
        _ = try reader.fixed(magic.count)
        return try reader.string()
    }

    static func read(_ decoded: Bytes, passphrase: Bytes?) throws -> [SSHKeyFileEntry] {
        let envelope = try envelope(decoded)
        var keyAndIV = try key(for: envelope, passphrase: passphrase)
        defer { keyAndIV.wipe() }
        var section = try envelope.cipher.crypt(envelope.encrypted, keyAndIV: keyAndIV, encrypt: false)
        defer { section.wipe() }
        var reader = ByteReader(section)
        guard try reader.u32() == reader.u32() else {
            if envelope.cipher.mode == .none { throw SSHKeyFileError.malformed("the check numbers differ") }
            throw SSHKeyFileError.wrongPassphrase
        }
        var entries: [SSHKeyFileEntry] = []
        for publicBlob in envelope.publicBlobs {
            let key = try SerializedKeyLayout.read(&reader)
            let comment = String(decoding: try reader.blob(), as: UTF8.self)
            guard key.publicBlob == publicBlob else { throw SSHKeyFileError.malformed("the public key does not match the private key") }
            entries.append(SSHKeyFileEntry(serialized: key.serialized, comment: comment))
        }
        // Deterministic padding (1, 2, 3, ...): what a tampered or misparsed section breaks.
        var expected: UInt8 = 1
        while !reader.isAtEnd {
            guard try reader.u8() == expected else { throw SSHKeyFileError.malformed("bad padding after the private key") }
            expected &+= 1
        }
        return entries
    }

    private static func key(for envelope: Envelope, passphrase: Bytes?) throws -> Bytes {
        switch envelope.kdfName {
        case "none":
            guard envelope.cipher.mode == .none else { throw SSHKeyFileError.malformed("cipher \(envelope.cipherName) without a KDF") }
            return []
        case "bcrypt":
            guard envelope.cipher.mode != .none else { throw SSHKeyFileError.malformed("a KDF without a cipher") }
            var options = ByteReader(envelope.kdfOptions)
            let salt = try options.blob()
            let rounds = try options.u32()
            guard options.isAtEnd, !salt.isEmpty, salt.count <= 1024 else { throw SSHKeyFileError.malformed("bad bcrypt options") }
            guard rounds >= 1, rounds <= maximumRounds else {
                throw SSHKeyFileError.unsupported("\(rounds) bcrypt rounds (at most \(maximumRounds) are accepted)")
            }
            guard let passphrase else { throw SSHKeyFileError.needsPassphrase }
            return try BcryptPBKDF.derive(
                passphrase: passphrase, salt: salt, rounds: Int(rounds), count: envelope.cipher.keyLength + envelope.cipher.ivLength)
        default:
            throw SSHKeyFileError.unsupported("KDF \(envelope.kdfName.prefix(64))")
        }
    }

    static func write(_ entry: SSHKeyFileEntry, publicBlob: Bytes, passphrase: Bytes?) throws -> String {
        guard try SerializedKeyLayout.publicBlob(of: entry.serialized) == publicBlob else {
            throw SSHKeyFileError.malformed("the public key does not match the private key")
        }
        let cipher = passphrase == nil ? SSHKeyFileCipher.none : SSHKeyFileCipher.aes256CTR
        var kdfOptions = ByteWriter()
        var keyAndIV = Bytes()
        defer { keyAndIV.wipe() }
        if let passphrase {
            let salt = try Crypto.random(saltLength)
            kdfOptions.blob(salt)
            kdfOptions.u32(defaultRounds)
            keyAndIV = try BcryptPBKDF.derive(
                passphrase: passphrase, salt: salt, rounds: Int(defaultRounds), count: cipher.keyLength + cipher.ivLength)
        }
        var section = ByteWriter()
        defer { section.wipe() }
        let check = try Crypto.random(4)
        section.raw(check)
        section.raw(check)
        section.raw(entry.serialized)
        section.string(entry.comment)
        var pad: UInt8 = 1
        while section.bytes.count % cipher.blockSize != 0 {
            section.u8(pad)
            pad += 1
        }
        var file = ByteWriter()
        file.raw(magic)
        file.string(cipher.name)
        file.string(passphrase == nil ? "none" : "bcrypt")
        file.blob(kdfOptions.bytes)
        file.u32(1)
        file.blob(publicBlob)
        file.u32(UInt32(section.bytes.count))
        file.raw(try cipher.crypt(section.bytes, keyAndIV: keyAndIV, encrypt: true))
        defer { file.wipe() }
        return PEM.encode(file.bytes, label: label, columns: 70)
    }
}
