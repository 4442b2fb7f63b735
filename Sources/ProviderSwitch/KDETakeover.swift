import Glibc
import KeychainCore
import SecretServiceBus
import SessionBus

/// enable's part for KDE: the keychain answers KWallet's own API (org.kde.kwalletd5 and
/// org.kde.kwalletd6, which KDE's programs call and never the Secret Service) besides
/// org.freedesktop.secrets.
///
/// A desktop is taken as KDE's when KWallet is there for this user: kwalletd5 or kwalletd6
/// running or activatable on the bus, XDG_CURRENT_DESKTOP naming KDE, a kwalletrc or a wallet
/// folder of the user's. Any one is enough: a KDE program under another desktop still starts
/// kwalletd through its activation file, and would store beside the keychain. Nothing of this
/// is written for a user with none of them.
///
/// What is written: the user's activation files for both KWallet names (`--kwallet`: the service
/// claims them, and serves them even while another provider keeps org.freedesktop.secrets),
/// pam_kwallet's autostart hidden and its systemd unit masked (they start kwalletd at login with
/// the login password), a drop-in giving our systemd unit `--kwallet`, and kwalletrc's
/// `[org.freedesktop.secrets] apiEnabled=false` (kwalletd 5.103 then stays out of the Secret
/// Service; `[Wallet] Enabled=false` is never set: KDE's client library would then refuse every
/// wallet, ours too). kwalletrc's former bytes are kept beside the state file for disable.
extension Takeover {
    static let kwalletNames = ["org.kde.kwalletd5", "org.kde.kwalletd6"]
    static let kwalletPAMUnit = "plasma-kwallet-pam.service"
    static let kwalletSecretsGroup = "[org.freedesktop.secrets]"

    static func kwalletActivationFile(_ name: String) -> String { dataHome + "/dbus-1/services/" + name + ".service" }
    /// Hides /etc/xdg/autostart/pam_kwallet_init.desktop (libpam-kwallet-common), which hands the
    /// login password to the kwalletd that pam_kwallet5 starts.
    static var kwalletAutostartFile: String { configHome + "/autostart/pam_kwallet_init.desktop" }
    static var kwalletrc: String { configHome + "/kwalletrc" }
    static var kwalletrcCopy: String { stateFile + ".kwalletrc" }
    static var unitDropIn: String { userUnitFolder + "/" + ourUnit + ".d/kwallet.conf" }

    /// Why this desktop counts as KDE's, or nil.
    static func kdeReason(client: BusClient?) -> String? {
        let desktops = (KeychainFile.environment("XDG_CURRENT_DESKTOP") ?? "").split(separator: ":")
        if desktops.contains(where: { $0.uppercased() == "KDE" }) { return "XDG_CURRENT_DESKTOP is KDE" }
        if let client {
            if let running = kwalletNames.first(where: { client.owner(of: $0) != nil }) { return "\(running) runs" }
            let activatable = client.activatableNames()
            if let installed = kwalletNames.first(where: { activatable.contains($0) }) { return "\(installed) is installed" }
        }
        if KeychainFile.exists(kwalletrc) { return "\(kwalletrc) is there" }
        if KeychainFile.exists(dataHome + "/kwalletd") { return "\(dataHome)/kwalletd is there" }
        return nil
    }

    static func program() -> String { ProcFile.link("/proc/self/exe") ?? "/usr/bin/keychain-secret-service" }

    static func kwalletActivationContents(_ name: String) -> String {
        // No SystemdService=: the unit waits for org.freedesktop.secrets, which another provider
        // may keep; started here, the service serves the KWallet names alone then.
        """
        [D-BUS Service]
        Name=\(name)
        Exec=\(program()) --kwallet

        """
    }

    static func kwalletAutostartContents() -> String {
        """
        [Desktop Entry]
        Type=Application
        Name=KWallet PAM Socket Connection
        Comment=Hidden by keychain-secret-service enable: the keychain answers KWallet; `keychain-secret-service disable` removes this file
        Exec=/usr/share/libpam-kwallet-common/pam_kwallet_init
        Hidden=true

        """
    }

    static func unitDropInContents() -> String {
        """
        # Written by keychain-secret-service enable on KDE: the service answers KWallet's names too.
        [Service]
        ExecStart=
        ExecStart=\(program()) --kwallet

        """
    }

    /// kwalletrc with kwalletd's Secret Service off, every other byte kept; nil when it is off
    /// already. KConfig's syntax: `[group]` lines, `key=value` with spaces around `=` allowed,
    /// a key's last line winning.
    static func disablingSecrets(_ text: String) -> String? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let endsWithNewline = text.isEmpty || text.hasSuffix("\n")
        if endsWithNewline { lines.removeLast() }
        var group = ""
        var found: [Int] = []
        var groupEnd: Int?
        for (index, line) in lines.enumerated() {
            let trimmed = line.trimmingSpaces
            if trimmed.hasPrefix("[") {
                if group == kwalletSecretsGroup && groupEnd == nil { groupEnd = index }
                group = trimmed
                continue
            }
            guard group == kwalletSecretsGroup, let equals = trimmed.firstIndex(of: "=") else { continue }
            if trimmed[..<equals].trimmingSpaces == "apiEnabled" { found.append(index) }
        }
        if let last = found.last {
            let value = lines[last].split(separator: "=", maxSplits: 1).last.map { String($0).trimmingSpaces }
            if value == "false" { return nil }
            lines[last] = "apiEnabled=false"
        } else if let start = lines.firstIndex(where: { $0.trimmingSpaces == kwalletSecretsGroup }) {
            lines.insert("apiEnabled=false", at: start + 1)
        } else {
            if let last = lines.last, !last.trimmingSpaces.isEmpty { lines.append("") }
            lines += [kwalletSecretsGroup, "apiEnabled=false"]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: enable

    /// The KWallet files, each recorded in `state`.
    func enableKWallet(manager: Bool, state: inout State) {
        for name in Self.kwalletNames {
            writeFile(
                Self.kwalletActivationFile(name), Self.kwalletActivationContents(name),
                what: "the D-Bus activation file starting this service for \(name)", state: &state)
        }
        writeFile(Self.kwalletAutostartFile, Self.kwalletAutostartContents(), what: "the autostart override hiding pam_kwallet's kwalletd", state: &state)
        if Self.unitFile(Self.kwalletPAMUnit) != nil {
            link(
                Self.userUnitFolder + "/" + Self.kwalletPAMUnit, to: "/dev/null", what: "\(Self.kwalletPAMUnit) masked", manager: manager,
                systemctl: ["mask", Self.kwalletPAMUnit], state: &state)
        }
        if Self.unitFile(Self.ourUnit) != nil {
            writeFile(Self.unitDropIn, Self.unitDropInContents(), what: "\(Self.ourUnit) answering KWallet's names too", state: &state)
        }
        keepKWalletOutOfSecretService(state: &state)
        reportPAMKWallet()
    }

    /// kwalletrc's `[org.freedesktop.secrets] apiEnabled=false`: a new file when there was none,
    /// else the user's file changed in one rename, its former bytes and mode kept for disable.
    func keepKWalletOutOfSecretService(state: inout State) {
        let path = Self.kwalletrc
        var st = stat()
        guard lstat(path, &st) == 0 else {
            writeFile(path, Self.kwalletSecretsGroup + "\napiEnabled=false\n", what: "kwalletd kept out of the Secret Service", state: &state)
            return
        }
        guard (st.st_mode & S_IFMT) == S_IFREG, let bytes = ProcFile.read(path, limit: 1 << 20) else {
            say("\(path) is not a file enable can read: kwalletd may still serve the Secret Service")
            return
        }
        guard let changed = Self.disablingSecrets(String(decoding: bytes, as: UTF8.self)) else {
            say("kwalletd kept out of the Secret Service: \(path) says so already")
            return
        }
        if state.records.contains(where: { if case .saved(path, _, _) = $0 { return true } else { return false } }) {
            say("\(path) changed since enable set it: apiEnabled=false set again")
        }
        do {
            if !state.records.contains(where: { if case .saved(path, _, _) = $0 { return true } else { return false } }) {
                try Files.replace(Self.kwalletrcCopy, with: bytes, mode: st.st_mode & 0o7777)
            }
            let written = Array(changed.utf8)
            try Files.replace(path, with: written, mode: st.st_mode & 0o7777)
            state.records.removeAll { if case .saved(path, _, _) = $0 { return true } else { return false } }
            state.records.append(.saved(path: path, copy: Self.kwalletrcCopy, digest: Files.sha256(written)))
            say("kwalletd kept out of the Secret Service: \(path) ([org.freedesktop.secrets] apiEnabled=false; as it was: \(Self.kwalletrcCopy))")
        } catch {
            say("cannot change \(path): \(KeychainErrorText.of(error)); kwalletd may still serve the Secret Service")
        }
    }

    /// The PAM services whose stack has pam_kwallet5 (or pam_kwallet): at each login it starts a
    /// kwalletd itself, which then waits for pam_kwallet_init (hidden by enable) and never reaches
    /// the bus, yet holds the login password's hash. /etc is the administrator's: said, not changed.
    static func pamServicesStartingKWallet() -> [String] {
        let folder = "/etc/pam.d"
        return PlainFiles.list(folder).filter { service in
            guard let bytes = ProcFile.read(folder + "/" + service, limit: 1 << 20) else { return false }
            return String(decoding: bytes, as: UTF8.self).split(separator: "\n").contains { line in
                let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                return !(words.first?.hasPrefix("#") ?? true) && words.contains { $0.hasPrefix("pam_kwallet") && $0.hasSuffix(".so") }
            }
        }
    }

    func reportPAMKWallet() {
        let services = Self.pamServicesStartingKWallet()
        guard !services.isEmpty else { return }
        say(
            "pam_kwallet in /etc/pam.d/\(services.joined(separator: ", /etc/pam.d/")) still starts a kwalletd at each login, which now waits for pam_kwallet_init and never serves, holding your login password's hash: an administrator removes its lines there"
        )
    }

    /// KWallet's wallets when no kwalletd runs to read them through: said, not guessed at (a wallet
    /// file opens only with its password, which only a prompt or the login can give).
    func reportUnreadWallets(client: BusClient) {
        guard !Self.kwalletNames.contains(where: { client.peer($0).map { !$0.isKeychainService } ?? false }) else { return }
        let folder = Self.dataHome + "/kwalletd"
        guard PlainFiles.list(folder).contains(where: { $0.hasSuffix(".kwl") }) else { return }
        say(
            "kwalletd does not run: the wallets in \(folder) are not imported now; `security import-secrets --kwallets` reads them with each wallet's password"
        )
    }

    /// KWallet's entries into the keychain, through the import of `import --from NAME`; false when
    /// not all of them came (then enable changes nothing).
    func importKWallet(client: BusClient, name: String) -> Bool {
        guard let holder = client.peer(name), !holder.isKeychainService else { return true }
        // kwalletd6 holds org.kde.kwalletd5 too (Debian 13 starts it for both names): its wallets once.
        if Self.kwalletNames.prefix(while: { $0 != name }).contains(where: { client.owner(of: $0) == holder.uniqueName }) { return true }
        guard holder.uid == getuid() else {
            say("\(name) is provided by \(holder.shown) of uid \(holder.uid), not one of yours: nothing was changed")
            return false
        }
        say("importing the wallets of \(holder.shown) first")
        let imported = BusImport(
            from: name, named: true, dryRun: false, asker: PasswordAsker(program: pinentry, timeout: promptTimeout), promptTimeout: promptTimeout
        ).run(client: client)
        guard imported == 0 else {
            say(
                "not every entry of \(holder.shown) could come (above); nothing else was changed, and it still serves. Bring the rest over by hand, or run `keychain-secret-service enable --no-import`"
            )
            return false
        }
        return true
    }

    /// Stops the user's own kwalletd (the KWallet names and, unless kwalletrc kept it out, the
    /// Secret Service), so that the keychain answers them. The bus starts it again for a KDE
    /// program once disable has removed the activation files.
    func stopKWallet(client: BusClient, imported: Bool, state: inout State) -> Bool {
        for name in Self.kwalletNames {
            guard let holder = client.peer(name), !holder.isKeychainService else { continue }
            guard holder.uid == getuid(), Self.realUID(of: holder.pid) == getuid() else {
                say("\(holder.shown) is not yours: it is left running, and \(name) with it")
                return false
            }
            guard closeWallets(of: holder, name: name, client: client, state: &state) else { return false }
            guard kill(holder.pid, SIGTERM) == 0 else {
                say("cannot stop \(holder.shown): \(String(cString: strerror(errno)))")
                return false
            }
            // Recorded by the name the daemon is known by (kwalletd6 holds kwalletd5's name too), so
            // that disable starts the same daemon again and names it.
            state.records.append(.stopped(components: KWalletDaemon.service(of: holder), how: "kwallet"))
            guard client.wait(seconds: 10, until: { client.owner(of: name) != holder.uniqueName }) else {
                say("\(holder.shown) was asked to stop but still holds \(name)")
                return false
            }
            say("stopped \(holder.shown)" + (imported ? ", after its wallets were imported" : " (--no-import: its wallets were not imported)"))
        }
        return true
    }

    /// The KWallet names: this service started for them where it has not claimed them yet.
    func takeKWalletNames(client: BusClient) -> Bool {
        var all = true
        for name in Self.kwalletNames {
            if client.peer(name)?.isKeychainService != true {
                // A service of ours holding another KWallet name claims this one itself, at once:
                // a second one started for it would find the names taken, and say so.
                if !Self.kwalletNames.contains(where: { client.peer($0)?.isKeychainService == true }) {
                    client.reloadConfig()
                    _ = try? client.activate(name)
                }
                _ = client.wait(seconds: 10, until: { client.peer(name)?.isKeychainService == true })
            }
            if let owner = client.peer(name), owner.isKeychainService {
                say("\(name) is now provided by \(owner.shown)")
            } else {
                say("\(name) is not provided by keychain-secret-service yet: it starts when a KDE program first asks (\(Self.kwalletActivationFile(name)))")
                all = false
            }
        }
        return all
    }

    // MARK: disable

    /// kwalletrc as it was: its former bytes (and mode) back while it is as enable left it.
    func restoreSaved(path: String, copy: String, digest: String) -> Bool {
        guard Files.digest(of: path) == digest || !KeychainFile.exists(path) else {
            say("\(path) changed since enable wrote it: left as it is (apiEnabled=false may still be set; as it was before: \(copy))")
            return true
        }
        guard rename(copy, path) == 0 else {
            say("cannot restore \(path) from \(copy): \(String(cString: strerror(errno)))")
            return false
        }
        say("restored \(path) as it was before enable")
        return true
    }

    /// kwalletd started again where enable stopped it, for the name it held (the bus's own
    /// activation file now that ours is gone).
    func restartKWallet(client: BusClient?, name: String) {
        guard let client else { return }
        client.reloadConfig()
        _ = try? client.activate(name)
        if client.wait(seconds: 10, until: { client.peer(name).map { !$0.isKeychainService } ?? false }), let owner = client.peer(name) {
            say("\(name) is provided by \(owner.shown) again")
            say("what was stored in the keychain since enable stays there: `keychain-secret-service export --to \(name)` copies it into KWallet")
        } else {
            say("kwalletd was not started again for \(name): a KDE program starts it when it first asks")
        }
    }

    // MARK: status

    /// status's lines for KWallet, for a KDE desktop or where enable wrote them.
    static func printKWalletStatus(client: BusClient?, origin: (String) -> String) {
        let written = kwalletNames.map { kwalletActivationFile($0) } + [kwalletAutostartFile, kwalletrc]
        guard let reason = kdeReason(client: client) ?? (written.contains { origin($0) == "by enable" } ? "enable wrote its files" : nil) else {
            print("  KDE: no (no kwalletd, kwalletrc or XDG_CURRENT_DESKTOP=KDE)")
            return
        }
        print("  KDE: yes (\(reason))")
        var st = stat()
        for name in kwalletNames {
            let file = kwalletActivationFile(name)
            print("  D-Bus activation of \(name): " + (lstat(file, &st) == 0 ? "\(file) (\(origin(file)))" : "as the system has it"))
        }
        print(
            "  pam_kwallet's autostart: "
                + (lstat(kwalletAutostartFile, &st) == 0 ? "overridden (\(kwalletAutostartFile), \(origin(kwalletAutostartFile)))" : "as the system has it"))
        let text = ProcFile.read(kwalletrc, limit: 1 << 20).map { String(decoding: $0, as: UTF8.self) }
        let off = text.map { disablingSecrets($0) == nil } ?? false
        print("  kwalletd's Secret Service: " + (off ? "off (\(kwalletrc), \(origin(kwalletrc)))" : "on (kwalletrc does not say apiEnabled=false)"))
    }
}
