import KWalletBus
import KWalletItems
import KeychainCore
import SecretServiceBus
import SessionBus

/// KWallet's entries on the way out of kwalletd and back: enable has kwalletd write its wallets
/// before stopping it, and disable checks that the kwalletd it started again holds every entry
/// the keychain held then. kwalletd writes a change to its file about 5 s after it, and loses it
/// to a SIGTERM before then: the entry came into the keychain, but without this kwalletd would
/// lack it after disable, and nothing would say so.
extension Takeover {
    /// kwalletd's wallets written and closed (`closeAllWallets`), and the time recorded for
    /// disable's check; false when kwalletd did not answer (then it is left running).
    func closeWallets(of holder: BusClient.Peer, name: String, client: BusClient, state: inout State) -> Bool {
        guard let path = KWalletDaemon.objectPath(for: name) else { return true }
        let daemon = KWalletDaemon(client: client, name: holder.uniqueName, path: path, promptTimeout: promptTimeout)
        do {
            try daemon.closeAllWallets()
        } catch {
            say("\(holder.shown) did not write and close its wallets (\(error)): it is left running, and \(name) with it, so that no change of its is lost")
            return false
        }
        state.kwalletStopped = SystemClock.now()
        return true
    }

    /// Whether kwalletd, serving `name` again, holds every KWallet entry the keychains held when
    /// enable stopped it (`heldAt`); each wallet that lacks some is said, with the way to bring
    /// them back. kwalletd's keyDoesNotExist answers from the wallet file's index: no wallet is
    /// opened, nothing asks for a password.
    func kwalletHoldsItsEntries(client: BusClient, name: String, heldAt stopped: Double?) -> Bool {
        guard let stopped, let peer = client.peer(name), !peer.isKeychainService, let path = KWalletDaemon.objectPath(for: name) else { return true }
        let daemon = KWalletDaemon(client: client, name: peer.uniqueName, path: path, promptTimeout: promptTimeout)
        let wallets = Set(((try? daemon.wallets()) ?? []) + [KWalletService.loginWallet])
        var all = true
        for wallet in wallets.sorted() {
            let file =
                wallet == KWalletService.loginWallet ? KeychainFile.loginPath() : KeychainFile.resolve(BusImport.keychainName(element: wallet))
            guard KeychainFile.exists(file) else { continue }
            let held: [(folder: String, key: String)]
            do {
                held = try KeychainStore.open(at: file, storage: .kernel).kwalletEntryNames(createdBy: stopped)
            } catch {
                say("whether the wallet \u{201C}\(wallet)\u{201D} of \(peer.shown) holds every entry of \(file) is not checked: \(KeychainErrorText.of(error))")
                continue
            }
            let missing = held.filter { (try? daemon.keyDoesNotExist(wallet: wallet, folder: $0.folder, key: $0.key)) == true }
            guard !missing.isEmpty else { continue }
            all = false
            let shown = missing.prefix(5).map { "\($0.folder)/\($0.key)" }.joined(separator: ", ") + (missing.count > 5 ? ", ..." : "")
            say(
                "the wallet \u{201C}\(wallet)\u{201D} of \(peer.shown) lacks \(missing.count) \(missing.count == 1 ? "entry" : "entries") that \(file) held when enable stopped kwalletd (\(shown)): `keychain-secret-service export --to \(name)` copies them into KWallet"
            )
        }
        return all
    }
}
