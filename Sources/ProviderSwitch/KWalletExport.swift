import KWalletItems
import KeychainCore
import SecretServiceBus
import SessionBus

extension KWalletDaemon {
    /// Whether an item is a KWallet entry (its folder and key among its attributes).
    static func isEntryItem(_ attributes: [String: String]) -> Bool {
        attributes["kwallet.folder"] != nil && attributes["kwallet.key"] != nil
    }
}

extension BusExport {
    /// The way back for KWallet's entries: each into the wallet natively (its folder, key, type
    /// and bytes, as KDE's programs read them), the empty folders made. An entry the wallet holds
    /// already with the same type and bytes is left as it is, so a second export changes
    /// nothing; one it holds with another value is kept there and said.
    func exportKWalletEntries(_ store: KeychainStore, wallet: String, daemon: KWalletDaemon, place: String, tally: TransferTally) {
        let shown = "\(place) wallet \u{201C}\(wallet)\u{201D}"
        var entries: [KWalletEntry] = []
        let folders: [String]
        do {
            folders = try store.kwalletFolders(owner: nil)
            for folder in folders { entries += try store.kwalletEntries(folder: folder, owner: nil) }
        } catch {
            tally.fail(shown, "its KWallet entries cannot be read: \(KeychainErrorText.of(error))")
            return
        }
        defer { for index in entries.indices { entries[index].value.wipe() } }
        if folders.isEmpty { return }
        // Opening a wallet that does not exist makes it, through kwalletd's dialog: not in a dry run.
        if dryRun, (try? daemon.wallets().contains(wallet)) != true {
            tally.list("would create", "\(daemon.service)'s wallet \u{201C}\(wallet)\u{201D}")
            for folder in folders where !entries.contains(where: { $0.folder == folder }) {
                tally.count(added: true, "\(shown): folder \u{201C}\(folder)\u{201D}")
            }
            for entry in entries { tally.count(added: true, "\(shown): \(entry.folder)/\(entry.key)") }
            return
        }
        let handle: Int32
        do {
            handle = try daemon.open(wallet)
        } catch {
            tally.fail(shown, "could not be opened (\(error)); none of its \(entries.count) entries went", count: max(entries.count, 1))
            return
        }
        defer {
            if !dryRun { daemon.sync(handle) }
            daemon.close(handle)
        }
        let withEntries = Set(entries.map(\.folder))
        for folder in folders where !withEntries.contains(folder) {
            let folderPlace = "\(shown): folder \u{201C}\(folder)\u{201D}"
            do {
                let isNew = try !daemon.hasFolder(handle, folder)
                if isNew && !dryRun { try daemon.createFolder(handle, folder) }
                tally.count(added: isNew, folderPlace)
            } catch {
                tally.fail(folderPlace, "\(error)")
            }
        }
        for entry in entries {
            let entryPlace = "\(shown): \(entry.folder)/\(entry.key)"
            do {
                if try daemon.has(handle, folder: entry.folder, key: entry.key) {
                    var held = try daemon.entry(handle, folder: entry.folder, key: entry.key)
                    defer { held.value.wipe() }
                    if held == entry {
                        tally.count(added: false, entryPlace)
                    } else {
                        tally.fail(entryPlace, "the wallet holds another value under this folder and key; it is kept")
                    }
                    continue
                }
                if !dryRun { try daemon.write(handle, entry) }
                tally.count(added: true, entryPlace)
            } catch {
                tally.fail(entryPlace, "\(error)")
            }
        }
    }
}
