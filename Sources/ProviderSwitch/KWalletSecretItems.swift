import KWalletItems
import KeychainCore
import SecretServiceBus
import SessionBus

/// The Secret Service items kwalletd 5.97+ keeps in a wallet: each is a KWallet entry (folder
/// "Secret Service", or the folder its label names before a slash) whose label, attributes,
/// content type and dates live beside the wallet in `<wallet>_attributes.json`, keyed
/// "Folder/key" (kwalletd's kwalletfreedesktopattributes.cpp). `import` brings such an entry once,
/// as the Secret Service item it is, not also as a KWallet entry.
struct KWalletSecretItems {
    typealias Item = KWalletSecretAttributes.Fields

    /// None when the wallet has no attributes file (its Secret Service never stored an item).
    private var kept: KWalletSecretAttributes?

    /// The wallet's attributes file, as kwalletd names it: in its data folder (kwalletd5's, with
    /// the 5 cut off), the wallet's name percent-encoded with ';' for the characters a wallet
    /// file name cannot hold.
    static func path(wallet: String) -> String {
        let data = KeychainFile.environment("XDG_DATA_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? KeychainFile.homeDirectory() + "/.local/share"
        return data + "/kwalletd/" + encode(wallet) + "_attributes.json"
    }

    static func encode(_ wallet: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789^&'@{}[],$=!-#()%.+_\r\n\t\u{0C}\u{0B} ".utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in wallet.utf8 {
            if allowed.contains(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: ";"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A file that is not kwalletd's JSON object is an error: its items would otherwise come as
    /// plain entries, their attributes lost without a word.
    init(wallet: String) throws {
        let path = Self.path(wallet: wallet)
        guard KeychainFile.exists(path) else { return }
        let bytes: Bytes
        do {
            bytes = try ForeignFile.read(path, limit: KWalletSecretAttributes.maximumFileSize).bytes
        } catch {
            throw ServiceError.failed("\(path): \(KeychainErrorText.of(error))")
        }
        do {
            kept = try KWalletSecretAttributes(file: bytes)
        } catch let error as KWalletFileError {
            throw ServiceError.failed("\(path): \(error.description)")
        }
    }

    func item(folder: String, key: String) -> Item? { kept?.fields(folder: folder, key: key) }
}
