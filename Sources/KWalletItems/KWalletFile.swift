import KeychainCore

/// What a `.kwl` file holds: every folder (empty ones too, as KWallet keeps "Passwords" and
/// "Form Data") and every entry, in the file's order (Qt's QMap order: by name).
package struct KWalletContents: Sendable, Equatable {
    package var folders: [String]
    package var entries: [KWalletEntry]

    package init(folders: [String], entries: [KWalletEntry]) {
        self.folders = folders
        self.entries = entries
    }
}

/// A KWallet wallet file (`~/.local/share/kwalletd/NAME.kwl`), read without kwalletd, so that
/// a KDE user's wallet can move into a keychain. As kwalletd 5.103 writes and reads it
/// (kwalletbackend.cc, backendpersisthandler.cpp):
///
/// - "KWALLET\n\r\0\r\n", then four bytes: major 0; minor 0 (key: SHA-1 password2hash) or 1 (key:
///   PBKDF2-SHA512 of the password and the 56-byte `NAME.salt` beside the file, 50000 rounds, 56
///   bytes); cipher 0 (Blowfish-ECB, the oldest files), 3 (Blowfish-CBC) or 2 (GPG); hash 0 or 2.
/// - a clear index of MD5s: the folder count, then per folder the MD5 of its UTF-8 name, its
///   entry count and the MD5 of each entry's name (kwalletd answers hasFolder with it while the
///   wallet is closed).
/// - the encrypted part: one random block, the plaintext's length (32-bit big-endian), the
///   plaintext, random filler to a whole block, and the plaintext's SHA-1 in the last 20 bytes.
///   The plaintext is a QDataStream of folders: name, entry count, then per entry its name, type
///   (qint32) and value (QByteArray).
///
/// Hostile files are expected: the file's size is bounded before anything is done, every count
/// and length is checked against what is left before it is used, the key derivation's cost is
/// fixed by the format (a file cannot ask for more), and each failure is one `KWalletFileError`.
package enum KWalletFile {
    /// Wallets hold passwords, form data and a few keys: kilobytes. Larger files are refused
    /// unread (64 MiB of Blowfish is about half a second).
    package static let maximumFileSize = 64 << 20
    /// kwalletd writes 56 bytes of salt (PBKDF2_SHA512_SALTSIZE).
    package static let maximumSaltSize = 4096

    static let magic: Bytes = Array("KWALLET\n\r".utf8) + [0] + Array("\r\n".utf8)

    private enum Cipher { case blowfishECB, blowfishCBC }

    /// Whether the file is a wallet kwalletd encrypted to a GPG key: no password opens it, so none
    /// is asked for.
    package static func isGPG(_ file: Bytes) -> Bool {
        file.count >= magic.count + 4 && file.starts(with: magic) && file[magic.count + 2] == 2 && file[magic.count + 3] == 0
    }

    /// Reads a wallet file with its password and, for the PBKDF2 kind, the bytes of its
    /// `NAME.salt` file.
    package static func read(_ file: Bytes, password: Bytes, salt: Bytes?) throws -> KWalletContents {
        guard file.count <= maximumFileSize else { throw KWalletFileError.tooLarge }
        guard magic.starts(with: file.prefix(magic.count)) else { throw KWalletFileError.notAWallet }
        guard file.count >= magic.count + 4 else { throw KWalletFileError.truncated }
        let version = Array(file[magic.count..<magic.count + 4])
        guard version[0] == 0, version[1] <= 1 else { throw KWalletFileError.unsupportedVersion(version[0], version[1]) }
        let cipher: Cipher
        switch (version[2], version[3]) {
        case (2, 0): throw KWalletFileError.gpg
        case (0, 0), (0, 2): cipher = .blowfishECB
        case (3, 0), (3, 2): cipher = .blowfishCBC
        default: throw KWalletFileError.unknownCipher(cipher: version[2], hash: version[3])
        }

        var stream = KWalletFileStream(file, from: magic.count + 4)
        let index = try readIndex(&stream)

        var key = try deriveKey(minor: version[1], password: password, salt: salt)
        defer { key.wipe() }
        var plaintext = try decrypt(Bytes(try stream.take(stream.remaining)), key: key, cipher: cipher)
        defer { plaintext.wipe() }
        let contents = try readContents(plaintext)
        try check(contents, against: index)
        return contents
    }

    /// The clear MD5 index: per folder, the digest of its name and those of its entries.
    private static func readIndex(_ stream: inout KWalletFileStream) throws -> [(folder: Bytes, entries: [Bytes])] {
        let count = try stream.uint32()
        // kwalletd's own sanity check; and each folder takes at least 20 bytes of what is left.
        guard count <= 0xFFFF else { throw KWalletFileError.malformed("\(count) folders in the name index") }
        guard Int(count) * 20 <= stream.remaining else { throw KWalletFileError.truncated }
        var index: [(folder: Bytes, entries: [Bytes])] = []
        for _ in 0..<count {
            let folder = Bytes(try stream.take(16))
            let entries = try stream.uint32()
            guard Int(entries) * 16 <= stream.remaining else { throw KWalletFileError.truncated }
            var digests: [Bytes] = []
            for _ in 0..<entries { digests.append(Bytes(try stream.take(16))) }
            index.append((folder, digests))
        }
        return index
    }

    private static func deriveKey(minor: UInt8, password: Bytes, salt: Bytes?) throws -> Bytes {
        guard minor == 1 else { return KWalletFileCrypto.sha1Key(password: password) }
        guard let salt, !salt.isEmpty else {
            throw KWalletFileError.salt("the wallet's salt file (NAME.salt beside NAME.kwl) is missing or empty; kwalletd cannot open it either")
        }
        guard salt.count <= maximumSaltSize else {
            throw KWalletFileError.salt("the wallet's salt file is \(salt.count) bytes; kwalletd writes 56")
        }
        return try KWalletFileCrypto.pbkdf2SHA512(password: password, salt: salt)
    }

    /// The plaintext inside the encrypted part, after its length and SHA-1 have been checked.
    private static func decrypt(_ encrypted: Bytes, key: Bytes, cipher: Cipher) throws -> Bytes {
        // A random block, the length, and the SHA-1: 32 bytes at least.
        guard encrypted.count % 8 == 0, encrypted.count >= 32 else { throw KWalletFileError.truncated }
        var decrypted = encrypted
        defer { decrypted.wipe() }
        try KWalletFileCrypto.blowfish(&decrypted, key: key, cbc: cipher == .blowfishCBC, encrypt: false)
        let length = decrypted[8..<12].reduce(0) { $0 << 8 | Int($1) }
        guard length <= decrypted.count - 12 - 20 else { throw KWalletFileError.wrongPassword }
        let plaintext = Array(decrypted[12..<12 + length])
        var digest = KWalletFileCrypto.sha1(plaintext)
        defer { digest.wipe() }
        guard Crypto.equal(digest, Array(decrypted.suffix(20))) else {
            var wiped = plaintext
            wiped.wipe()
            throw KWalletFileError.wrongPassword
        }
        return plaintext
    }

    private static func readContents(_ plaintext: Bytes) throws -> KWalletContents {
        var stream = KWalletFileStream(plaintext)
        var contents = KWalletContents(folders: [], entries: [])
        var seenFolders = Set<String>()
        while !stream.atEnd {
            let folder = try stream.string()
            guard seenFolders.insert(folder).inserted else { throw KWalletFileError.malformed("the folder \"\(folder)\" appears twice") }
            contents.folders.append(folder)
            let count = try stream.uint32()
            // An entry takes 12 bytes at least (empty name, type, empty value).
            guard Int(count) * 12 <= stream.remaining else { throw KWalletFileError.truncated }
            var seenKeys = Set<String>()
            for _ in 0..<count {
                let key = try stream.string()
                let rawType = try stream.uint32()
                let value = try stream.byteArray()
                guard seenKeys.insert(key).inserted else { throw KWalletFileError.malformed("the entry \"\(key)\" appears twice in a folder") }
                // kwalletd accepts any number from a client's writeEntry; what it cannot name is
                // an entry of unknown type, kept byte for byte.
                let type = KWalletEntryType(rawValue: Int32(bitPattern: rawType)) ?? .unknown
                contents.entries.append(KWalletEntry(folder: folder, key: key, type: type, value: value))
            }
        }
        return contents
    }

    /// The clear index must name the same folders and entries as the encrypted part, or one of
    /// the two was changed after kwalletd wrote them.
    private static func check(_ contents: KWalletContents, against index: [(folder: Bytes, entries: [Bytes])]) throws {
        let mismatch = KWalletFileError.malformed("the name index does not match the encrypted entries")
        guard index.count == contents.folders.count else { throw mismatch }
        var entries = contents.entries[...]
        for (folder, expected) in zip(contents.folders, index) {
            guard Crypto.md5(Array(folder.utf8)) == expected.folder else { throw mismatch }
            let inFolder = entries.prefix { $0.folder == folder }
            entries = entries.dropFirst(inFolder.count)
            guard inFolder.count == expected.entries.count,
                zip(inFolder, expected.entries).allSatisfy({ Crypto.md5(Array($0.key.utf8)) == $1 })
            else { throw mismatch }
        }
    }
}
