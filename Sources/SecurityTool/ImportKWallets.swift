import Glibc
import KWalletItems
import KeychainCore
import SecretServiceItems

/// KWallet's `.kwl` files into keychains: `kdewallet` to the login keychain, another wallet to
/// the keychain of its name. KWallet's own entries keep their folders, names, types and bytes
/// (KWalletItems' storage, which keychain-secret-service's org.kde.KWallet serves); the items
/// kwalletd's Secret Service stored come over as the Secret Service items they were.
extension SecretImportRun {
    /// The folder kwalletd keeps its wallets in: $XDG_DATA_HOME/kwalletd, else
    /// ~/.local/share/kwalletd (kwalletd5 and kwalletd6 alike).
    static func kwalletFolder() -> String {
        if let data = KeychainFile.environment("XDG_DATA_HOME"), data.hasPrefix("/") { return data + "/kwalletd" }
        return KeychainFile.homeDirectory() + "/.local/share/kwalletd"
    }

    /// The wallet a file holds: its name without ".kwl", with kwalletd's ";XX" escapes undone
    /// (Backend::encodeWalletName). It may then hold a "/" (";2F"), a NUL or anything else: it
    /// names a keychain only through `KeychainFile.resolveBareName`.
    static func walletName(forFile path: String) -> String {
        let base = Array((path.split(separator: "/").last.map(String.init) ?? "").utf8)
        let name = base.count > 4 && base.suffix(4).elementsEqual(".kwl".utf8) ? Array(base.dropLast(4)) : base
        var decoded = Bytes()
        var index = 0
        while index < name.count {
            if name[index] == UInt8(ascii: ";"), index + 2 < name.count, let byte = Bytes(hexDigits: name[index + 1...index + 2]) {
                decoded += byte
                index += 3
            } else {
                decoded.append(name[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// A file beside the wallet (its salt, its Secret Service attributes), or nil when there is
    /// none; its errors name it, as the wallet's line is the one that says them.
    private func sibling(_ path: String, limit: Int) throws -> Bytes? {
        guard KeychainFile.exists(path) else { return nil }
        do {
            return try ImportFiles.read(path, limit: limit)
        } catch let error as KeychainError {
            throw KeychainError(error.code, "\(path): \(error.detail)")
        }
    }

    func importKWallets(_ files: [String], folderAsked: Bool) {
        if files.isEmpty, folderAsked { note("no KWallet wallets in \(Self.kwalletFolder())") }
        var seen = Set<String>()
        for file in files where seen.insert(file).inserted { importKWallet(file) }
    }

    func importKWallet(_ file: String) {
        let name = Self.walletName(forFile: file)
        let stem = file.hasSuffix(".kwl") ? String(file.dropLast(4)) : file
        let target: String
        var contents: KWalletContents
        var walletPassword: Bytes?
        defer { walletPassword?.wipe() }
        let split: (items: [KWalletSecretItem], entries: [KWalletEntry])
        do {
            guard !name.isEmpty else { throw KeychainError.param("a wallet file needs a name (NAME.kwl)") }
            // Before anything is read or asked: a name that is not a plain one goes nowhere.
            target = name == "kdewallet" ? KeychainFile.loginPath() : try KeychainFile.resolveBareName(name)
            var bytes = try ImportFiles.read(file, limit: KWalletFile.maximumFileSize)
            defer { bytes.wipe() }
            if KWalletFile.isGPG(bytes) { throw KWalletFileError.gpg }
            let salt = try sibling(stem + ".salt", limit: KWalletFile.maximumSaltSize)
            progress.clear()
            walletPassword = try password ?? Terminal.readSecret(prompt: TerminalText.escaped("password for the wallet \(name) (\(file)): "))
            contents = try KWalletFile.read(bytes, password: walletPassword ?? [], salt: salt)
            split = try contents.splitSecretServiceItems(
                attributesFile: try sibling(stem + "_attributes.json", limit: KWalletContents.maximumAttributesFileSize))
        } catch let error as KWalletFileError {
            fail(file, error.keychainError)
            return
        } catch {
            fail(file, error)
            return
        }
        defer { for index in contents.entries.indices { contents.entries[index].value.wipe() } }
        let store: KeychainStore?
        do {
            store = try keychain(target, passwords: [walletPassword, password].compactMap { $0 }) {
                if let walletPassword { return walletPassword }
                throw KeychainError(.noSuchKeychain)
            }
        } catch {
            fail("\(file) -> \(target)", error)
            return
        }
        inBatch(store, place: "\(file) -> \(target)") {
            importKWalletContents(contents, split: split, wallet: name, file: file, store: store)
        }
        progress.clear()
    }

    private func importKWalletContents(
        _ contents: KWalletContents, split: (items: [KWalletSecretItem], entries: [KWalletEntry]), wallet: String, file: String, store: KeychainStore?
    ) {
        let total = contents.entries.count
        var done = 0
        for folder in contents.emptyFolders {
            let place = "\(file): folder \(folder)"
            do {
                guard let store else {
                    count(.added, place)
                    continue
                }
                count(dryRun ? (try store.holdsKWalletFolder(folder) ? .alreadyThere : .added) : try store.importKWalletFolder(folder), place)
            } catch {
                fail(place, error)
            }
        }
        for entry in split.entries {
            done += 1
            progress.show("import-secrets: \(wallet).kwl \(done)/\(total)")
            let place = "\(file): \(entry.folder)/\(entry.key)"
            do {
                guard let store else {
                    count(.added, place)
                    continue
                }
                count(dryRun ? (try store.holdsKWalletEntry(entry) ? .alreadyThere : .added) : try store.importKWalletEntry(entry), place)
            } catch {
                fail(place, error)
            }
        }
        var known: SecretImportIndex
        do {
            known = try SecretImportIndex()
        } catch {
            return fail(file, error)
        }
        let syncsNewItems = dryRun ? false : store?.readSyncDefault()
        for item in split.items {
            done += 1
            progress.show("import-secrets: \(wallet).kwl \(done)/\(total)")
            importSecretItem(
                label: item.label, attributes: item.attributes, secret: item.secret, contentType: item.contentType, created: item.created,
                modified: item.modified, into: store, syncsNewItems: syncsNewItems, index: &known, place: "\(file): \"\(item.label)\"")
        }
    }
}
