internal import COpenSSL
package import KeychainCore

/// OpenBSD's bcrypt_pbkdf, the key derivation of openssh-key-v1 files: PBKDF2's structure with
/// SHA-512 and an eksblowfish hash in place of HMAC, and its output bytes spread across the blocks
/// so that no part of the key can be computed alone. A port of openssh-portable's
/// openbsd-compat/bcrypt_pbkdf.c (BSD licence).
package enum BcryptPBKDF {
    /// `rounds` is the file's own number: the caller bounds it (each round costs two eksblowfish
    /// hashes per 32 bytes of key).
    package static func derive(passphrase: Bytes, salt: Bytes, rounds: Int, count: Int) throws -> Bytes {
        guard rounds >= 1, !passphrase.isEmpty, !salt.isEmpty, salt.count <= 1 << 20, count > 0, count <= 32 * 32 else {
            throw KeychainError.decode("bcrypt_pbkdf: a parameter out of range")
        }
        let blockSize = 32
        let stride = (count + blockSize - 1) / blockSize
        let amount = (count + stride - 1) / stride
        var key = Bytes(repeating: 0, count: count)
        var sha2pass = try sha512(passphrase)
        var countSalt = salt + [0, 0, 0, 0]
        var out = Bytes(repeating: 0, count: blockSize)
        var hashed = Bytes(repeating: 0, count: blockSize)
        defer {
            sha2pass.wipe()
            out.wipe()
            hashed.wipe()
        }
        var remaining = count
        var block = 1
        while remaining > 0 {
            for i in 0..<4 { countSalt[salt.count + i] = UInt8(truncatingIfNeeded: block >> (24 - 8 * i)) }
            var sha2salt = try sha512(countSalt)
            hashed = Eksblowfish.hash(sha2pass: sha2pass, sha2salt: sha2salt)
            out = hashed
            for _ in 1..<rounds {
                sha2salt = try sha512(hashed)
                hashed = Eksblowfish.hash(sha2pass: sha2pass, sha2salt: sha2salt)
                for j in 0..<blockSize { out[j] ^= hashed[j] }
            }
            sha2salt.wipe()
            var written = 0
            for i in 0..<min(amount, remaining) {
                let destination = i * stride + (block - 1)
                if destination >= count { break }
                key[destination] = out[i]
                written += 1
            }
            remaining -= written
            block += 1
        }
        return key
    }

    private static let sha512Digest: OpaquePointer? = EVP_MD_fetch(nil, "SHA512", nil)

    private static func sha512(_ data: Bytes) throws -> Bytes {
        var digest = Bytes(repeating: 0, count: 64)
        var length: UInt32 = 0
        guard EVP_Digest(data, data.count, &digest, &length, sha512Digest, nil) == 1, length == 64 else {
            throw KeychainError(.allocate, "SHA-512 failed")
        }
        return digest
    }
}

/// Blowfish with bcrypt's expensive key schedule, only as far as bcrypt_pbkdf's hash needs it.
enum Eksblowfish {
    /// S-boxes at 0..<1024, the P-array at 1024..<1042, as in `initialState`.
    private static let pOffset = 1024

    /// bcrypt_hash of bcrypt_pbkdf.c: 32 bytes from the two SHA-512 digests.
    static func hash(sha2pass: Bytes, sha2salt: Bytes) -> Bytes {
        var state = initialState
        var cipherText: [UInt32] = [0, 0, 0, 0, 0, 0, 0, 0]
        state.withUnsafeMutableBufferPointer { buffer in
            let s = buffer.baseAddress!
            expand(s, data: sha2salt, key: sha2pass)
            for _ in 0..<64 {
                expand(s, data: nil, key: sha2salt)
                expand(s, data: nil, key: sha2pass)
            }
            let magic = Array("OxychromaticBlowfishSwatDynamite".utf8)
            var j = 0
            for i in 0..<8 { cipherText[i] = word(magic, &j) }
            for _ in 0..<64 {
                for i in Swift.stride(from: 0, to: 8, by: 2) {
                    var (left, right) = (cipherText[i], cipherText[i + 1])
                    encipher(s, &left, &right)
                    (cipherText[i], cipherText[i + 1]) = (left, right)
                }
            }
        }
        state.withUnsafeMutableBytes { raw in OPENSSL_cleanse(raw.baseAddress, raw.count) }
        var out = Bytes(repeating: 0, count: 32)
        for i in 0..<8 {
            for k in 0..<4 { out[4 * i + k] = UInt8(truncatingIfNeeded: cipherText[i] >> (8 * k)) }
        }
        return out
    }

    /// Blowfish_stream2word: four bytes, big-endian, wrapping around `data`.
    private static func word(_ data: Bytes, _ j: inout Int) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            if j >= data.count { j = 0 }
            value = value << 8 | UInt32(data[j])
            j += 1
        }
        return value
    }

    /// Blowfish_expandstate, or Blowfish_expand0state when `data` is nil.
    private static func expand(_ s: UnsafeMutablePointer<UInt32>, data: Bytes?, key: Bytes) {
        var j = 0
        for i in 0..<18 { s[pOffset + i] ^= word(key, &j) }
        j = 0
        var left: UInt32 = 0
        var right: UInt32 = 0
        for i in Swift.stride(from: 0, to: 1042, by: 2) {
            if let data {
                left ^= word(data, &j)
                right ^= word(data, &j)
            }
            encipher(s, &left, &right)
            // The P-array is filled first, then the S-boxes.
            let index = i < 18 ? pOffset + i : i - 18
            s[index] = left
            s[index + 1] = right
        }
    }

    @inline(__always)
    private static func encipher(_ s: UnsafeMutablePointer<UInt32>, _ xl: inout UInt32, _ xr: inout UInt32) {
        let p = s + pOffset
        var l = xl ^ p[0]
        var r = xr
        var n = 1
        while n < 17 {
            r ^= feistel(s, l) ^ p[n]
            l ^= feistel(s, r) ^ p[n + 1]
            n += 2
        }
        xl = r ^ p[17]
        xr = l
    }

    @inline(__always)
    private static func feistel(_ s: UnsafeMutablePointer<UInt32>, _ x: UInt32) -> UInt32 {
        ((s[Int(x >> 24)] &+ s[0x100 + Int((x >> 16) & 0xff)]) ^ s[0x200 + Int((x >> 8) & 0xff)]) &+ s[0x300 + Int(x & 0xff)]
    }
}
