import KeychainCore

/// Why a `.kwl` file could not be read: one line each, said to a user who ran an import or to
/// the log of a login, so each names the cause and nothing of the wallet's contents.
package enum KWalletFileError: Error, Equatable, CustomStringConvertible {
    /// Not KWallet's magic "KWALLET\n\r\0\r\n".
    case notAWallet
    /// A format revision kwalletd itself does not read (major, minor).
    case unsupportedVersion(UInt8, UInt8)
    /// A cipher or hash byte kwalletd does not know.
    case unknownCipher(cipher: UInt8, hash: UInt8)
    /// Encrypted to a GPG key by kwalletd's GpgME backend: only gpg with the user's key opens it.
    case gpg
    /// A wallet of the PBKDF2-SHA512 kind without its `<wallet>.salt` file, or with a salt
    /// kwalletd never writes.
    case salt(String)
    /// The password does not open the wallet: the decrypted length or SHA-1 does not check out.
    /// A damaged encrypted part looks the same, and no reader can tell the two apart.
    case wrongPassword
    /// The file ends before the part it announces.
    case truncated
    /// The decrypted contents break the format (a count, a length, a name index that does not
    /// match the entries).
    case malformed(String)
    /// Larger than `KWalletFile.maximumFileSize`: refused unread.
    case tooLarge

    package var description: String {
        switch self {
        case .notAWallet: return "not a KWallet wallet file (no KWALLET magic)"
        case .unsupportedVersion(let major, let minor): return "unsupported KWallet file format revision \(major).\(minor)"
        case .unknownCipher(let cipher, let hash): return "unknown KWallet cipher \(cipher) or hash \(hash)"
        case .gpg: return "a GPG-encrypted wallet is not readable here: open it in KWallet and export it, or re-create it with a password"
        case .salt(let why): return why
        case .wrongPassword: return "wrong password for this wallet (or its encrypted part is damaged)"
        case .truncated: return "the wallet file is truncated"
        case .malformed(let why): return "damaged wallet file: \(why)"
        case .tooLarge: return "the file is larger than \(KWalletFile.maximumFileSize >> 20) MiB; not a wallet kwalletd writes"
        }
    }

    /// The keychain's error for it, so that a front end exits and names it as for a keyring file:
    /// errSecAuthFailed for a wrong password, errSecDecode for the rest.
    package var keychainError: KeychainError {
        self == .wrongPassword ? KeychainError(.authFailed, description) : KeychainError.decode(description)
    }
}
