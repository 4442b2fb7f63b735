import Glibc
import KWalletItems
import KeychainCore
import SecretServiceBus
import SecretServiceItems
import SessionBus

/// `import` from KWallet: every wallet read natively through `org.kde.KWallet`, not through
/// kwalletd's Secret Service, which serves its own entries as attribute-less items and, once it
/// restarts with a wallet holding Secret Service items, none of them at all. The wallet
/// `kdewallet` goes to the login keychain, another to the keychain of its name. KWallet's entries
/// (every folder, key, type and byte, and the empty folders) come as KWallet entries; the items
/// kwalletd's Secret Service stored come once, as Secret Service items with their attributes.
/// What cannot come is said, one line each, and the run then fails.
struct KWalletImport {
    let importer: BusImport
    /// org.kde.kwalletd5 or org.kde.kwalletd6.
    let service: String

    var dryRun: Bool { importer.dryRun }

    func run(client: BusClient, peer: BusClient.Peer) -> Int32 {
        let tally = TransferTally(verb: "import", dryRun: dryRun)
        guard let path = KWalletDaemon.objectPath(for: service) else {
            tally.note("\(service) is not a KWallet name (org.kde.kwalletd5, org.kde.kwalletd6)")
            return 1
        }
        let daemon = KWalletDaemon(client: client, name: peer.uniqueName, path: path, promptTimeout: importer.promptTimeout)
        let wallets: [String]
        do {
            // kdewallet first: the login keychain the others' defaults lean on.
            wallets = try daemon.wallets().sorted { a, b in (a == "kdewallet") != (b == "kdewallet") ? a == "kdewallet" : a < b }
        } catch {
            tally.note("\(peer.shown) does not answer as KWallet on \(service): \(error)")
            return 1
        }
        if wallets.isEmpty { tally.note("\(peer.command) has no wallet") }
        for wallet in wallets { importWallet(wallet, daemon: daemon, peer: peer, tally: tally) }
        tally.summary()
        return tally.failed == 0 ? 0 : 1
    }

    /// What a wallet holds, read before anything is written.
    private struct WalletContents {
        var emptyFolders: [String] = []
        var entries: [KWalletEntry] = []
        var secretItems: [(entry: KWalletEntry, item: KWalletSecretItems.Item)] = []
        var unreadable = 0
    }

    private func importWallet(_ wallet: String, daemon: KWalletDaemon, peer: BusClient.Peer, tally: TransferTally) {
        let place = "\(peer.command)'s wallet \u{201C}\(wallet)\u{201D}"
        let handle: Int32
        do {
            handle = try daemon.open(wallet)
        } catch {
            tally.fail(place, "could not be opened (\(error)); nothing of it came")
            return
        }
        defer { daemon.close(handle) }
        var contents: WalletContents
        do {
            contents = try read(wallet, handle: handle, daemon: daemon, place: place, tally: tally)
        } catch {
            tally.fail(place, "cannot be read (\(error)); nothing of it came")
            return
        }
        defer {
            for index in contents.entries.indices { contents.entries[index].value.wipe() }
            for index in contents.secretItems.indices { contents.secretItems[index].entry.value.wipe() }
        }
        let store: KeychainStore?
        let target: String
        do {
            // kwalletd lists a wallet file named ";2Ftmp;2Fx.kwl" as the wallet "/tmp/x": a name
            // that is not a plain one makes no keychain anywhere.
            target = wallet == "kdewallet" ? KeychainFile.loginPath() : try KeychainFile.resolveBareName(BusImport.keychainName(element: wallet))
        } catch {
            tally.fail(place, "nothing of it came: \(KeychainErrorText.of(error))", count: contents.entries.count + contents.secretItems.count)
            return
        }
        do {
            store = try importer.keychain(target, label: wallet, from: place, tally: tally)
        } catch {
            tally.fail(
                "\(place) -> \(target)", "nothing of it came: \(KeychainErrorText.of(error))", count: contents.entries.count + contents.secretItems.count)
            return
        }
        for folder in contents.emptyFolders {
            let shown = "\(place): folder \u{201C}\(folder)\u{201D}"
            do {
                guard let store else {
                    tally.count(added: true, shown)
                    continue
                }
                let outcome = dryRun ? (try store.holdsKWalletFolder(folder) ? .alreadyThere : .added) : try store.importKWalletFolder(folder)
                tally.count(added: outcome == .added, shown)
            } catch {
                tally.fail(shown, KeychainErrorText.of(error))
            }
        }
        for entry in contents.entries { bring(entry, into: store, place: "\(place): \(entry.folder)/\(entry.key)", tally: tally) }
        guard var index = try? SecretImportIndex() else {
            tally.fail(place, "cannot make a random key", count: contents.secretItems.count)
            return
        }
        for (entry, item) in contents.secretItems {
            let label = KWalletSecretAttributes.label(folder: entry.folder, key: entry.key)
            var secret = KWalletSecretAttributes.secret(of: entry)
            defer { secret.wipe() }
            let shown = "\(place): \u{201C}\(label)\u{201D}"
            guard let store else {
                tally.count(added: true, shown)
                continue
            }
            do {
                let outcome =
                    dryRun
                    ? (try store.holdsSecretItem(label: label, attributes: item.attributes, secret: secret, index: &index) ? .alreadyThere : .added)
                    : try store.importSecretItem(
                        label: label, attributes: item.attributes, secret: secret, contentType: item.contentType, created: item.created,
                        modified: item.modified, index: &index)
                tally.count(added: outcome == .added, shown)
            } catch {
                tally.fail(shown, KeychainErrorText.of(error))
            }
        }
    }

    /// Every folder and entry of the open wallet; an entry that cannot be read is said and left.
    private func read(_ wallet: String, handle: Int32, daemon: KWalletDaemon, place: String, tally: TransferTally) throws -> WalletContents {
        let secretItems = try KWalletSecretItems(wallet: wallet)
        var contents = WalletContents()
        for folder in try daemon.folders(handle) {
            let keys = try daemon.keys(handle, folder: folder)
            if keys.isEmpty { contents.emptyFolders.append(folder) }
            for key in keys {
                do {
                    let entry = try daemon.entry(handle, folder: folder, key: key)
                    if let item = secretItems.item(folder: folder, key: key) {
                        contents.secretItems.append((entry, item))
                    } else {
                        contents.entries.append(entry)
                    }
                } catch {
                    tally.fail("\(place): \(folder)/\(key)", "cannot be read: \(error)")
                }
            }
        }
        return contents
    }

    /// One KWallet entry: added, already there (same type and bytes), or kept out when the
    /// keychain holds another value under its folder and key (never overwritten by an import).
    private func bring(_ entry: KWalletEntry, into store: KeychainStore?, place: String, tally: TransferTally) {
        guard let store else {
            tally.count(added: true, place)
            return
        }
        do {
            let outcome = dryRun ? (try store.holdsKWalletEntry(entry) ? .alreadyThere : .added) : try store.importKWalletEntry(entry)
            tally.count(added: outcome == .added, place)
        } catch let error as KeychainError where error.code == .duplicateItem {
            tally.fail(place, KeychainStore.kwalletEntryKept)
        } catch {
            tally.fail(place, KeychainErrorText.of(error))
        }
    }
}
