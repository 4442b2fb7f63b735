import KeychainCore

extension KWalletFile {
    /// A `.kwl` file as kwalletd writes one: format 0.1 (PBKDF2-SHA512 key) with a salt, 0.0
    /// (SHA-1 key) without; Blowfish-CBC. For tests of the reader, and what a hostile file is
    /// made from: `plaintext` and `index` are taken as given when set.
    package static func write(_ contents: KWalletContents, password: Bytes, salt: Bytes?, plaintext: Bytes? = nil, index: Bytes? = nil) throws -> Bytes {
        var clear = Bytes()
        var names = bigEndian(UInt32(contents.folders.count))
        for folder in contents.folders {
            let entries = contents.entries.filter { $0.folder == folder }
            clear += QtDataStream.string(folder) + bigEndian(UInt32(entries.count))
            names += Crypto.md5(Array(folder.utf8)) + bigEndian(UInt32(entries.count))
            for entry in entries {
                clear +=
                    QtDataStream.string(entry.key) + bigEndian(UInt32(bitPattern: entry.type.rawValue)) + bigEndian(UInt32(entry.value.count)) + entry.value
                names += Crypto.md5(Array(entry.key.utf8))
            }
        }
        if let plaintext { clear = plaintext }
        defer { clear.wipe() }
        var whole = try Crypto.random(8) + bigEndian(UInt32(clear.count)) + clear
        let filler = 8 - (whole.count + 20) % 8
        whole += try Crypto.random(filler) + KWalletFileCrypto.sha1(clear)
        defer { whole.wipe() }
        var key = try salt.map { try KWalletFileCrypto.pbkdf2SHA512(password: password, salt: $0) } ?? KWalletFileCrypto.sha1Key(password: password)
        defer { key.wipe() }
        var encrypted = whole
        try KWalletFileCrypto.blowfish(&encrypted, key: key, cbc: true, encrypt: true)
        return magic + [0, salt == nil ? 0 : 1, 3, salt == nil ? 0 : 2] + (index ?? names) + encrypted
    }

    private static func bigEndian(_ value: UInt32) -> Bytes {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

}
