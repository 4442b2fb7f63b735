import COpenSSL
import Glibc
import KeychainCore
import SecretServiceBus
import SecretServiceItems
import SessionBus
import struct KeychainPeers.ProcessIdentity

/// `keychain-secret-service enable | disable | status`: becoming the calling user's Secret Service
/// provider, and giving it back, as KeePassXC's users do it by hand. Nothing here touches another
/// user or a file outside the user's own folders; an administrator's machine-wide form is
/// described in keychain-secret-service(1), never done by default.
///
/// enable: gnome-keyring's secrets component is kept from starting for this user (an XDG autostart
/// override with Hidden=true; its systemd user units masked), the service's own unit enabled for
/// the graphical session, and a D-Bus activation file of the user's own makes the bus start this
/// service for org.freedesktop.secrets. If a provider runs now, its secrets are imported first;
/// then the user's own gnome-keyring-daemon is stopped and this service takes the name. Each file
/// written is recorded in a state file, so that disable removes exactly those (and only while they
/// are still as written): files the user made are left alone.
package struct Takeover {
    static let busName = SecretService.busName
    static let ourUnit = "keychain-secret-service.service"
    static let gnomeKeyringUnits = ["gnome-keyring-daemon.service", "gnome-keyring-daemon.socket"]

    let pinentry: String
    let promptTimeout: Double

    package init(pinentry: String, promptTimeout: Double) {
        (self.pinentry, self.promptTimeout) = (pinentry, promptTimeout)
    }

    // MARK: Where things are

    static func home() -> String { KeychainFile.homeDirectory() }

    static func xdg(_ variable: String, _ fallback: String) -> String {
        if let value = KeychainFile.environment(variable), value.hasPrefix("/") { return value }
        return home() + "/" + fallback
    }

    static var configHome: String { xdg("XDG_CONFIG_HOME", ".config") }
    static var dataHome: String { xdg("XDG_DATA_HOME", ".local/share") }
    static var stateFile: String { xdg("XDG_STATE_HOME", ".local/state") + "/keychain/secret-service-enabled" }
    /// Hides /etc/xdg/autostart/gnome-keyring-secrets.desktop for this user (the XDG autostart
    /// spec: a file of the same name in the user's folder wins, and Hidden=true means "as if it
    /// were not there").
    static var autostartFile: String { configHome + "/autostart/gnome-keyring-secrets.desktop" }
    static var userUnitFolder: String { configHome + "/systemd/user" }
    /// The user's own activation file: the session bus reads ~/.local/share/dbus-1/services before
    /// the system's folders, so it, not gnome-keyring's, says what starts org.freedesktop.secrets.
    static var activationFile: String { dataHome + "/dbus-1/services/" + busName + ".service" }

    /// Whether a systemd user manager runs for this user (its private socket is there).
    static func userManagerRuns() -> Bool {
        guard let runtime = KeychainFile.environment("XDG_RUNTIME_DIR"), runtime.hasPrefix("/") else { return false }
        var st = stat()
        return lstat(runtime + "/systemd/private", &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK
    }

    /// The folders systemd reads user units from, the user's own configuration left out:
    /// $SYSTEMD_UNIT_PATH as systemd takes it (an empty element: the usual folders), else the usual.
    static func systemUnitFolders() -> [String] {
        let usual = [
            "/etc/systemd/user", xdg("XDG_RUNTIME_DIR", ".run") + "/systemd/user", "/run/systemd/user", dataHome + "/systemd/user",
            "/usr/local/share/systemd/user", "/usr/share/systemd/user", "/usr/local/lib/systemd/user", "/usr/lib/systemd/user"
        ]
        guard let path = KeychainFile.environment("SYSTEMD_UNIT_PATH") else { return usual }
        var folders: [String] = []
        for element in path.split(separator: ":", omittingEmptySubsequences: false) {
            if element.isEmpty { folders += usual } else { folders.append(String(element)) }
        }
        return folders
    }

    static func unitFile(_ unit: String) -> String? {
        systemUnitFolders().map { $0 + "/" + unit }.first { KeychainFile.exists($0) }
    }

    /// The targets a unit's [Install] section names in WantedBy=.
    static func wantedBy(_ file: String) -> [String] {
        guard let bytes = ProcFile.read(file, limit: 65536) else { return [] }
        var section = ""
        var targets: [String] = []
        for raw in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let line = raw.trimmingSpaces
            if line.hasPrefix("[") {
                section = line
            } else if section == "[Install]", line.hasPrefix("WantedBy=") {
                targets += line.dropFirst("WantedBy=".count).split(separator: " ").map(String.init)
            }
        }
        return targets
    }

    static func autostartContents() -> String {
        """
        [Desktop Entry]
        Type=Application
        Name=Secret Storage Service (gnome-keyring)
        Comment=Hidden by keychain-secret-service enable: the keychain is the Secret Service; `keychain-secret-service disable` removes this file
        Exec=/usr/bin/gnome-keyring-daemon --start --components=secrets
        Hidden=true

        """
    }

    /// `kwallet`: on KDE, the service started for the Secret Service answers KWallet's names too.
    static func activationContents(kwallet: Bool) -> String {
        """
        [D-BUS Service]
        Name=\(busName)
        Exec=\(program())\(kwallet ? " --kwallet" : "")
        SystemdService=\(ourUnit)

        """
    }

    // MARK: The state file

    /// What enable did, one record a line: `file PATH SHA256` (a file it wrote), `link PATH TARGET`
    /// (a symbolic link it made), `stopped COMPONENTS HOW` (the user's gnome-keyring-daemon it
    /// stopped), `since SECONDS`, `kwallet-stopped SECONDS`. Paths are %-escaped.
    struct State {
        enum Record: Equatable {
            case file(path: String, digest: String)
            case link(path: String, target: String)
            case stopped(components: String, how: String)
            /// A folder it made (removed again when it is empty).
            case folder(path: String)
            /// A file of the user's it changed (kwalletrc): its former bytes in `copy`.
            case saved(path: String, copy: String, digest: String)
        }

        var since: Int = 0
        /// When enable stopped kwalletd, its wallets written: disable checks that kwalletd holds
        /// every KWallet entry the keychain held then.
        /// Seconds since 1970 with their fraction: an entry written through the keychain in the
        /// same second, after it, is no entry kwalletd had.
        var kwalletStopped: Double?
        var records: [Record] = []

        static func escape(_ text: String) -> String {
            var out = ""
            for byte in text.utf8 {
                if byte <= 0x20 || byte == UInt8(ascii: "%") || byte >= 0x7f {
                    out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(2)
                } else {
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                }
            }
            return out
        }

        static func unescape(_ text: Substring) -> String {
            var bytes: [UInt8] = []
            var rest = Array(text.utf8)[...]
            while let byte = rest.first {
                if byte == UInt8(ascii: "%"), rest.count >= 3, let value = UInt8(String(decoding: rest.dropFirst().prefix(2), as: UTF8.self), radix: 16) {
                    bytes.append(value)
                    rest = rest.dropFirst(3)
                } else {
                    bytes.append(byte)
                    rest = rest.dropFirst()
                }
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        static func load() -> State? {
            guard let bytes = ProcFile.read(Takeover.stateFile, limit: 65536) else { return nil }
            var state = State()
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
                let fields = line.split(separator: " ")
                switch (fields.first, fields.count) {
                case ("since", 2): state.since = Int(fields[1]) ?? 0
                case ("kwallet-stopped", 2): state.kwalletStopped = Double(fields[1])
                case ("file", 3): state.records.append(.file(path: unescape(fields[1]), digest: String(fields[2])))
                case ("link", 3): state.records.append(.link(path: unescape(fields[1]), target: unescape(fields[2])))
                case ("stopped", 3): state.records.append(.stopped(components: String(fields[1]), how: String(fields[2])))
                case ("folder", 2): state.records.append(.folder(path: unescape(fields[1])))
                case ("saved", 4): state.records.append(.saved(path: unescape(fields[1]), copy: unescape(fields[2]), digest: String(fields[3])))
                default: continue
                }
            }
            return state
        }

        func save() throws {
            var text = "# keychain-secret-service enable: what it changed; `keychain-secret-service disable` undoes exactly this.\n"
            text += "since \(since)\n"
            if let kwalletStopped { text += "kwallet-stopped \(kwalletStopped)\n" }
            for record in records {
                switch record {
                case .file(let path, let digest): text += "file \(Self.escape(path)) \(digest)\n"
                case .link(let path, let target): text += "link \(Self.escape(path)) \(Self.escape(target))\n"
                case .stopped(let components, let how): text += "stopped \(components) \(how)\n"
                case .folder(let path): text += "folder \(Self.escape(path))\n"
                case .saved(let path, let copy, let digest): text += "saved \(Self.escape(path)) \(Self.escape(copy)) \(digest)\n"
                }
            }
            try Files.replace(Takeover.stateFile, with: Array(text.utf8), mode: 0o600)
        }
    }

    // MARK: enable

    package func enable(importFirst: Bool) -> Int32 {
        var state = State.load() ?? State(since: Int(time(nil)))
        let client = try? BusClient()
        var status: Int32 = 0
        let provider = client.flatMap { $0.peer(Self.busName) }
        if client == nil { say("no session bus: the files are written; the keychain becomes the Secret Service at your next login") }
        let kde = Self.kdeReason(client: client)
        if let kde { say("KDE: \(kde); the keychain answers KWallet's names too") }
        let holder = provider.map { NameHolder(command: $0.command, executable: $0.executable) } ?? .other

        // 1. The provider's secrets first: nothing is changed when they could not all come.
        // KWallet's wallets through its own API (which also brings what its Secret Service holds).
        if let client, kde != nil, importFirst {
            for name in Self.kwalletNames where !importKWallet(client: client, name: name) { return 1 }
            reportUnreadWallets(client: client)
        }
        if let client, let provider, !provider.isKeychainService, !(kde != nil && holder == .kwallet) {
            guard provider.uid == getuid() else {
                say("\(Self.busName) is provided by \(provider.shown) of uid \(provider.uid), not one of yours: nothing was changed")
                return 1
            }
            if importFirst {
                say("importing the secrets of \(provider.shown) first")
                let imported = BusImport(
                    from: provider.uniqueName, dryRun: false, asker: PasswordAsker(program: pinentry, timeout: promptTimeout),
                    promptTimeout: promptTimeout
                ).run(client: client)
                guard imported == 0 else {
                    say(
                        "not every secret of \(provider.shown) could come (above); nothing else was changed, and it still serves. Bring the rest over by hand, or run `keychain-secret-service enable --no-import`"
                    )
                    return 1
                }
            }
        }

        // 2. The files that keep gnome-keyring's secrets component from starting, and start this one.
        // The state file's folder first: disable removes the folders enable made once they are empty.
        if let made = try? Files.makeFolder(for: Self.stateFile) { state.records += made.map { .folder(path: $0) } }
        writeFile(Self.autostartFile, Self.autostartContents(), what: "the autostart override hiding gnome-keyring's secrets component", state: &state)
        writeFile(
            Self.activationFile, Self.activationContents(kwallet: kde != nil), what: "the D-Bus activation file starting this service for \(Self.busName)",
            state: &state)
        let manager = Self.userManagerRuns()
        if !manager {
            say("no systemd user manager runs for you ($XDG_RUNTIME_DIR/systemd/private): its unit files are written for its next start")
        }
        for unit in Self.gnomeKeyringUnits where Self.unitFile(unit) != nil {
            link(Self.userUnitFolder + "/" + unit, to: "/dev/null", what: "\(unit) masked", manager: manager, systemctl: ["mask", unit], state: &state)
        }
        if let ours = Self.unitFile(Self.ourUnit) {
            let targets = Self.wantedBy(ours)
            for target in targets.isEmpty ? ["graphical-session-pre.target"] : targets {
                link(
                    Self.userUnitFolder + "/" + target + ".wants/" + Self.ourUnit, to: ours, what: "\(Self.ourUnit) enabled for \(target)",
                    manager: manager, systemctl: ["enable", Self.ourUnit], state: &state)
            }
        } else {
            say("\(Self.ourUnit) is not installed in any systemd user unit folder: the D-Bus activation file starts the service instead")
        }
        takeOverSSHAgent(manager: manager, state: &state)
        if kde != nil { enableKWallet(manager: manager, state: &state) }
        if manager { _ = Spawn.run(["systemctl", "--user", "daemon-reload"]) }
        do {
            try state.save()
        } catch {
            say("cannot write \(Self.stateFile): \(KeychainErrorText.of(error)); `disable` will not know what to undo")
            status = 1
        }

        // 3. The names: the user's own gnome-keyring-daemon or kwalletd stopped, this service in its place.
        guard let client else { return status }
        if kde != nil {
            guard stopKWallet(client: client, imported: importFirst, state: &state) else {
                try? state.save()
                return 1
            }
            try? state.save()
        }
        if let provider, !provider.isKeychainService, client.owner(of: Self.busName) == provider.uniqueName {
            switch holder {
            case .gnomeKeyring:
                guard stopGnomeKeyring(provider, client: client, manager: manager, state: &state) else { return 1 }
                try? state.save()
            case .keePassXC, .kwallet:
                // Neither lets the name be replaced: --replace would only fail.
                say("\(Self.busName) is provided by \(provider.shown), which does not let another program take the name: \(holder.freeing ?? "")")
                if kde != nil { _ = takeKWalletNames(client: client) }
                return 1
            case .other:
                say("\(Self.busName) is provided by \(provider.shown); asking it to hand the name over (--replace)")
                let replacing = [Self.program(), "--replace", "--pinentry", pinentry]
                if !manager || Spawn.run(Self.underUserManager(replacing, oneshot: false))?.status != 0 { _ = Spawn.detached(replacing) }
                if !client.wait(seconds: 5, until: { client.peer(Self.busName)?.isKeychainService == true }) {
                    say("\(provider.shown) keeps \(Self.busName): turn its Secret Service off, then run `keychain-secret-service enable` again")
                    return 1
                }
            }
        }
        guard let owner = takeName(client, manager: manager) else {
            say("\(Self.busName) is not provided by keychain-secret-service yet: it starts when a client first asks (\(Self.activationFile))")
            return 1
        }
        say("\(Self.busName) is now provided by \(owner.shown)")
        if kde != nil && !takeKWalletNames(client: client) { status = 1 }
        return status
    }

    func say(_ line: String) { print(line) }

    /// Writes `contents` at `path` unless something is there already (the user's own file: left
    /// alone, and said).
    func writeFile(_ path: String, _ contents: String, what: String, state: inout State) {
        let bytes = Array(contents.utf8)
        let digest = Files.sha256(bytes)
        if state.records.contains(where: { if case .file(path, _) = $0 { return true } else { return false } }), Files.digest(of: path) == digest {
            say("\(what): \(path) (already there)")
            return
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            let hides = (ProcFile.read(path, limit: 65536).map { String(decoding: $0, as: UTF8.self) } ?? "")
                .split(separator: "\n").contains { $0.trimmingSpaces == "Hidden=true" }
            say(
                "\(path) is yours (not written by enable): left as it is\(path == Self.autostartFile && !hides ? "; it does not say Hidden=true, so gnome-keyring's secrets component may still start at login" : "")"
            )
            return
        }
        do {
            state.records += try Files.makeFolder(for: path).map { .folder(path: $0) }
            try Files.create(path, with: bytes, mode: 0o644)
            state.records.append(.file(path: path, digest: digest))
            say("\(what): \(path)")
        } catch {
            say("cannot write \(path): \(KeychainErrorText.of(error))")
        }
    }

    /// A symbolic link at `path` to `target`, made by systemctl where the user manager runs, else
    /// by hand as systemctl makes it.
    func link(_ path: String, to target: String, what: String, manager: Bool, systemctl: [String], state: inout State) {
        if case .some(target) = ProcFile.link(path) {
            if state.records.contains(.link(path: path, target: target)) {
                say("\(what): \(path) (already there)")
            } else {
                say("\(what) already (\(path) is yours: left as it is)")
            }
            return
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            say("\(path) is yours (not written by enable): left as it is, so not \(what)")
            return
        }
        // The folders made here, even where systemctl makes the link (it would make a target's
        // .wants folder unrecorded): disable removes each once it is empty again.
        do {
            state.records += try Files.makeFolder(for: path).map { .folder(path: $0) }
        } catch {
            say("cannot make \(path): \(KeychainErrorText.of(error))")
            return
        }
        if manager, let result = Spawn.run(["systemctl", "--user"] + systemctl), result.status == 0, ProcFile.link(path) != nil {
            state.records.append(.link(path: path, target: ProcFile.link(path) ?? target))
            say("\(what) (systemctl --user \(systemctl.joined(separator: " "))): \(path)")
            return
        }
        do {
            guard symlink(target, path) == 0 else { throw KeychainError(.io, String(cString: strerror(errno))) }
            state.records.append(.link(path: path, target: target))
            say("\(what): \(path) -> \(target)")
        } catch {
            say("cannot make \(path): \(KeychainErrorText.of(error))")
        }
    }

    /// The components a gnome-keyring-daemon serves besides the secrets (its control folder's
    /// sockets say which), to be started again without it.
    static func otherComponents() -> [String] {
        let folder = KeychainFile.environment("GNOME_KEYRING_CONTROL") ?? xdg("XDG_RUNTIME_DIR", ".run") + "/keyring"
        // Not the SSH agent once the keychain's is the user's.
        return (sshAgentEnabled() ? ["pkcs11"] : ["pkcs11", "ssh"]).filter { component in
            var st = stat()
            return lstat(folder + "/" + component, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK
        }
    }

    /// Stops the user's own gnome-keyring-daemon (the bus's word for its uid, and /proc's, must
    /// both be the caller's); its other components (SSH agent, PKCS#11) start again without the
    /// secrets. Waits for the name to be free.
    private func stopGnomeKeyring(_ provider: BusClient.Peer, client: BusClient, manager: Bool, state: inout State) -> Bool {
        guard provider.uid == getuid(), Self.realUID(of: provider.pid) == getuid() else {
            say("\(provider.shown) is not yours: it is left running, and \(Self.busName) with it")
            return false
        }
        let others = Self.otherComponents()
        var how = "signal"
        let cgroup = ProcFile.read("/proc/\(provider.pid)/cgroup").map { String(decoding: $0, as: UTF8.self) } ?? ""
        if manager, cgroup.contains("/gnome-keyring-daemon.service"),
            let result = Spawn.run(["systemctl", "--user", "stop"] + Self.gnomeKeyringUnits), result.status == 0
        {
            how = "systemd"
        } else if kill(provider.pid, SIGTERM) != 0 {
            say("cannot stop \(provider.shown): \(String(cString: strerror(errno)))")
            return false
        }
        state.records.append(.stopped(components: (["secrets"] + others).joined(separator: ","), how: how))
        guard client.wait(seconds: 10, until: { client.owner(of: Self.busName) != provider.uniqueName }) else {
            say("\(provider.shown) was asked to stop but still holds \(Self.busName)")
            return false
        }
        say("stopped \(provider.shown), after its secrets were imported")
        if !others.isEmpty {
            let result = Self.startGnomeKeyring(components: others.joined(separator: ","), manager: manager)
            say(
                result?.status == 0
                    ? "gnome-keyring-daemon started again for \(others.joined(separator: " and ")) only (not the secrets)"
                    : "gnome-keyring-daemon's \(others.joined(separator: " and ")) could not be started again: `gnome-keyring-daemon --start --components=\(others.joined(separator: ","))`"
            )
        }
        return true
    }

    /// `gnome-keyring-daemon --start` for `components`, where the user manager runs it when it runs.
    static func startGnomeKeyring(components: String, manager: Bool) -> (status: Int32, output: String)? {
        let daemon = ["gnome-keyring-daemon", "--start", "--components=" + components]
        if manager, let result = Spawn.run(underUserManager(daemon, oneshot: true), seconds: 15), result.status == 0 { return result }
        return Spawn.run(daemon, seconds: 15)
    }

    /// `argv` as a transient unit of the user manager (systemd-run), not as this command's child: a
    /// daemon started here would live on in the caller's cgroup, the login session's scope, and
    /// logind would keep that session, and user@UID.service with it, after the user logs out (the
    /// real boot of Tests/vm showed it). In a unit of its own it ends with the user manager.
    /// `oneshot`: a program that daemonizes (`gnome-keyring-daemon --start`), whose daemon stays in
    /// the unit after it exits (RemainAfterExit), systemd-run answering with its exit status.
    static func underUserManager(_ argv: [String], oneshot: Bool) -> [String] {
        var run = ["systemd-run", "--user", "--quiet", "--collect", "--description=" + argv.joined(separator: " ")]
        if oneshot { run += ["--property=Type=oneshot", "--property=RemainAfterExit=yes"] }
        // Where the caller's gnome-keyring keeps its control socket, which --start looks for.
        if KeychainFile.environment("GNOME_KEYRING_CONTROL") != nil { run.append("--setenv=GNOME_KEYRING_CONTROL") }
        return run + ["--"] + argv
    }

    static func realUID(of pid: pid_t) -> uid_t? {
        guard let status = ProcFile.read("/proc/\(pid)/status", limit: 65536) else { return nil }
        for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("Uid:") {
            return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { uid_t(String($0)) }
        }
        return nil
    }

    /// Starts this service for the name (systemd where it runs and has the unit, else D-Bus
    /// activation, which now finds the user's activation file first); who owns it then.
    private func takeName(_ client: BusClient, manager: Bool) -> BusClient.Peer? {
        if let owner = client.peer(Self.busName), owner.isKeychainService { return owner }
        if manager, Self.unitFile(Self.ourUnit) != nil {
            _ = Spawn.run(["systemctl", "--user", "start", Self.ourUnit])
        } else {
            client.reloadConfig()
            _ = try? client.activate(Self.busName)
        }
        _ = client.wait(seconds: 10, until: { client.peer(Self.busName)?.isKeychainService == true })
        guard let owner = client.peer(Self.busName), owner.isKeychainService else { return nil }
        return owner
    }

    // MARK: disable

    package func disable() -> Int32 {
        guard let state = State.load() else {
            print("keychain-secret-service is not enabled for you (no \(Self.stateFile)): nothing to undo")
            return 0
        }
        var status: Int32 = 0
        let manager = Self.userManagerRuns()
        for record in state.records.reversed() {
            switch record {
            case .file(let path, let digest):
                guard KeychainFile.exists(path) else { continue }
                if Files.digest(of: path) == digest {
                    if unlink(path) == 0 { say("removed \(path)") } else { say("cannot remove \(path): \(String(cString: strerror(errno)))"); status = 1 }
                } else {
                    say("\(path) changed since enable wrote it: left as it is")
                }
            case .link(let path, let target):
                guard let current = ProcFile.link(path) else { continue }
                if current == target {
                    if unlink(path) == 0 { say("removed \(path)") } else { say("cannot remove \(path): \(String(cString: strerror(errno)))"); status = 1 }
                } else {
                    say("\(path) now points at \(current), not at what enable made: left as it is")
                }
            case .saved(let path, let copy, let digest):
                if !restoreSaved(path: path, copy: copy, digest: digest) { status = 1 }
            case .stopped, .folder:
                continue
            }
        }
        if manager { _ = Spawn.run(["systemctl", "--user", "daemon-reload"]) }
        let client = try? BusClient()
        // This service, for each name it holds (on KDE it may serve KWallet's names alone).
        for name in [Self.busName] + Self.kwalletNames {
            guard let client, let owner = client.peer(name), owner.isKeychainService else { continue }
            if owner.uid == getuid(), Self.realUID(of: owner.pid) == getuid() {
                if manager, Self.unitFile(Self.ourUnit) != nil { _ = Spawn.run(["systemctl", "--user", "stop", Self.ourUnit]) }
                if client.owner(of: name) == owner.uniqueName { kill(owner.pid, SIGTERM) }
                if client.wait(seconds: 10, until: { client.owner(of: name) != owner.uniqueName }) {
                    say("stopped \(owner.shown)")
                } else {
                    say("\(owner.shown) still holds \(name)")
                    status = 1
                }
            }
        }
        for case .stopped(let components, let how) in state.records {
            if how == "kwallet" {
                restartKWallet(client: client, name: components)
                if let client, !kwalletHoldsItsEntries(client: client, name: components, heldAt: state.kwalletStopped) { status = 1 }
                continue
            }
            if how == "units" {
                // gcr's SSH agent, unmasked above: started again where it ran.
                if manager { _ = Spawn.run(["systemctl", "--user", "start"] + components.split(separator: ",").map(String.init)) }
                continue
            }
            if how == "systemd" && manager {
                let result = Spawn.run(["systemctl", "--user", "start"] + Self.gnomeKeyringUnits.reversed())
                say(
                    result?.status == 0
                        ? "gnome-keyring-daemon started again (systemctl --user start)" : "gnome-keyring-daemon could not be started: \(result?.output ?? "")")
            } else {
                let result = Self.startGnomeKeyring(components: components, manager: manager)
                if result?.status != 0 {
                    say("gnome-keyring-daemon could not be started again: `gnome-keyring-daemon --start --components=\(components)`")
                    status = 1
                }
            }
            if let client, client.wait(seconds: 10, until: { client.peer(Self.busName)?.isGnomeKeyring == true }),
                let owner = client.peer(Self.busName)
            {
                say("\(Self.busName) is provided by \(owner.shown) again")
                say(
                    "what was stored in the keychain since enable stays there: `keychain-secret-service export --to \(Self.busName)` copies it into gnome-keyring"
                )
            }
        }
        // Kept when something could not be undone, so that a second disable tries again.
        guard status == 0 else { return status }
        if unlink(Self.stateFile) != 0 && errno != ENOENT { return 1 }
        for case .folder(let path) in state.records.reversed() { rmdir(path) }
        return status
    }

    // MARK: status

    package func status() -> Int32 {
        let client = try? BusClient()
        for name in [Self.busName] + Self.kwalletNames {
            if let client {
                if let owner = client.peer(name) {
                    let since = Self.startTime(of: owner.pid).map { ", since " + Self.date($0) } ?? ""
                    print("\(name): \(owner.command) (pid \(owner.pid), uid \(owner.uid))\(since)")
                } else {
                    print("\(name): nobody (the bus starts a provider when a client first asks)")
                }
            } else {
                print("\(name): no session bus")
            }
        }
        let state = State.load()
        if let state {
            print("enabled: yes, since \(Self.date(state.since)) (\(Self.stateFile))")
        } else {
            print("enabled: no")
        }
        let written = Set(
            (state?.records ?? []).compactMap { record -> String? in
                switch record {
                case .file(let path, _), .link(let path, _), .saved(let path, _, _): return path
                case .stopped, .folder: return nil
                }
            })
        func origin(_ path: String) -> String { written.contains(path) ? "by enable" : "yours" }
        var st = stat()
        if lstat(Self.autostartFile, &st) == 0 {
            let hidden = (ProcFile.read(Self.autostartFile, limit: 65536).map { String(decoding: $0, as: UTF8.self) } ?? "")
                .split(separator: "\n").contains { $0.trimmingSpaces == "Hidden=true" }
            print("  gnome-keyring's secrets autostart: \(hidden ? "hidden" : "overridden, not hidden") (\(Self.autostartFile), \(origin(Self.autostartFile)))")
        } else {
            print("  gnome-keyring's secrets autostart: as the system has it")
        }
        for unit in Self.gnomeKeyringUnits {
            let path = Self.userUnitFolder + "/" + unit
            if ProcFile.link(path) == "/dev/null" {
                print("  \(unit): masked (\(path), \(origin(path)))")
            } else if Self.unitFile(unit) != nil {
                print("  \(unit): not masked")
            }
        }
        if let ours = Self.unitFile(Self.ourUnit) {
            let links = Self.wantedBy(ours).map { Self.userUnitFolder + "/" + $0 + ".wants/" + Self.ourUnit }.filter { ProcFile.link($0) != nil }
            print("  \(Self.ourUnit): " + (links.isEmpty ? "not enabled" : "enabled (" + links.map { "\($0), \(origin($0))" }.joined(separator: "; ") + ")"))
        } else {
            print("  \(Self.ourUnit): not installed")
        }
        if lstat(Self.activationFile, &st) == 0 {
            print("  D-Bus activation of \(Self.busName): \(Self.activationFile) (\(origin(Self.activationFile)))")
        } else {
            print("  D-Bus activation of \(Self.busName): as the system has it")
        }
        Self.printSSHStatus(origin: origin)
        Self.printKWalletStatus(client: client, origin: origin)
        print("  systemd user manager: \(Self.userManagerRuns() ? "running" : "not running")")
        return 0
    }

    /// When a process started, in seconds since 1970 (/proc/PID/stat and the boot time).
    static func startTime(of pid: pid_t) -> Int? {
        guard let ticks = ProcessIdentity.startTime(of: pid), let stat = ProcFile.read("/proc/stat") else { return nil }
        guard let line = String(decoding: stat, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Int(line.dropFirst("btime ".count))
        else { return nil }
        return boot + Int(ticks) / max(sysconf(Int32(_SC_CLK_TCK)), 1)
    }

    static func date(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S UTC", &parts)
        return String(cString: buffer)
    }
}

/// The user's small files: written whole, created only where nothing is, folders made 0700.
enum Files {
    static func sha256(_ bytes: Bytes) -> String {
        var digest = Bytes(repeating: 0, count: 32)
        var size: UInt32 = 0
        _ = EVP_Digest(bytes, bytes.count, &digest, &size, EVP_sha256(), nil)
        return digest.map { String($0, radix: 16).leftPadded(2) }.joined()
    }

    static func digest(of path: String) -> String? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, let bytes = ProcFile.read(path, limit: 1 << 20) else { return nil }
        return sha256(bytes)
    }

    /// Makes the folders above `path` that are missing (0700); the ones it made, outermost first.
    @discardableResult
    static func makeFolder(for path: String) throws -> [String] {
        var folder = ""
        var made: [String] = []
        for part in path.split(separator: "/").dropLast() {
            folder += "/" + part
            if mkdir(folder, 0o700) == 0 {
                made.append(folder)
            } else if errno != EEXIST {
                throw KeychainError(.io, "cannot make \(folder): \(String(cString: strerror(errno)))")
            }
        }
        return made
    }

    /// A new file: fails when anything is at `path`.
    static func create(_ path: String, with bytes: Bytes, mode: mode_t) throws {
        try makeFolder(for: path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw KeychainError(.io, "cannot create it: \(String(cString: strerror(errno)))") }
        var ok = fchmod(fd, mode) == 0
        var rest = bytes[...]
        while ok && !rest.isEmpty {
            let n = rest.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { ok = false } else { rest = rest.dropFirst(n) }
        }
        ok = fsync(fd) == 0 && ok
        close(fd)
        if !ok {
            unlink(path)
            throw KeychainError(.io, "cannot write it")
        }
    }

    /// Replaces `path` in one rename.
    static func replace(_ path: String, with bytes: Bytes, mode: mode_t) throws {
        let temporary = path + ".\(getpid()).tmp"
        unlink(temporary)
        try create(temporary, with: bytes, mode: mode)
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw KeychainError(.io, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
