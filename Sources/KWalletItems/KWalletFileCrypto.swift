internal import COpenSSL
import KeychainCore

/// The keys and cipher of kwalletd's Blowfish backend (kwalletbackend.cc, cbc.cc, blowfish.cc).
/// Its Blowfish reads each 32-bit half of a block big-endian (the byte swaps under its forced
/// Q_BIG_ENDIAN, on the little-endian machines wallets are written on), as OpenSSL's does, and its
/// CipherBlockChain is plain CBC with a zero IV.
enum KWalletFileCrypto {
    /// pam_kwallet and kwalletd: PBKDF2_SHA512_ITERATIONS, PBKDF2_SHA512_KEYSIZE. Fixed by the
    /// format, so a file cannot ask for more work.
    static let pbkdf2Iterations: Int32 = 50_000
    static let keyLength = 56

    /// kwalletd's password2PBKDF2_SHA512: the key of wallets of format 0.1.
    static func pbkdf2SHA512(password: Bytes, salt: Bytes) throws -> Bytes {
        var key = Bytes(repeating: 0, count: keyLength)
        guard PKCS5_PBKDF2_HMAC(password, Int32(password.count), salt, Int32(salt.count), pbkdf2Iterations, EVP_sha512(), Int32(keyLength), &key) == 1 else {
            throw KWalletFileError.malformed("PBKDF2-SHA512 failed")
        }
        return key
    }

    /// kwalletd's password2hash, the key of wallets of format 0.0: each 16-byte piece of the
    /// password (the fourth takes the rest) hashed 2000 times in all with KWallet's SHA-1; 20, 40
    /// or 56 bytes of the digests by the password's length.
    static func sha1Key(password: Bytes) -> Bytes {
        func stretched(_ piece: ArraySlice<UInt8>) -> Bytes {
            var digest = sha1(Bytes(piece))
            for _ in 1..<2000 { digest = sha1(digest) }
            return digest
        }
        let n = password.count
        var blocks = [stretched(password.prefix(16))]
        if n > 16 { blocks.append(stretched(password[16..<min(n, 32)])) }
        if n > 32 { blocks.append(stretched(password[32..<min(n, 48)])) }
        if n > 48 { blocks.append(stretched(password[48...])) }
        defer { for i in blocks.indices { blocks[i].wipe() } }
        switch blocks.count {
        case 1: return blocks[0]
        case 2: return blocks[0] + blocks[1]
        case 3: return blocks[0] + blocks[1] + blocks[2].prefix(16)
        default: return blocks.flatMap { $0.prefix(14) }
        }
    }

    /// KWallet's SHA-1, whose words are little-endian (see keychain_kwallet_sha1): not SHA-1's
    /// digest, but what every .kwl file's checksum and old key were made with.
    static func sha1(_ data: Bytes) -> Bytes {
        var out = Bytes(repeating: 0, count: 20)
        data.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { keychain_kwallet_sha1(input.baseAddress, input.count, $0.baseAddress) }
        }
        return out
    }

    /// Blowfish in place over whole blocks: CBC with a zero IV, or ECB for the oldest wallets.
    static func blowfish(_ data: inout Bytes, key: Bytes, cbc: Bool, encrypt: Bool) throws {
        let status = data.withUnsafeMutableBufferPointer { buffer in
            keychain_blowfish(key, Int32(key.count), buffer.baseAddress, buffer.count, cbc ? 1 : 0, encrypt ? 1 : 0)
        }
        guard status == 0 else { throw KWalletFileError.malformed("not whole Blowfish blocks") }
    }
}
