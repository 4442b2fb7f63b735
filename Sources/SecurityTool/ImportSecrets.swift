import ArgumentParser
import CredentialHelperSupport
import Glibc
import KeychainCore
import SecretServiceItems

/// `security import-secrets`: a desktop's secrets into keychains, so that nothing stays behind
/// when gnome-keyring, git's credential store or docker's inline logins are given up.
///
/// Every source is idempotent (what is already in the keychain is not added again), nothing in a
/// source is deleted or changed (but docker's config.json, which is rewritten as a docker login
/// through a credential store leaves it, after a backup), an item that cannot come is one line on
/// stderr while the rest continue, and a summary line ends the run.
struct ImportSecrets: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-secrets",
        abstract: "Bring in git's credential-store files, docker's inline logins, gnome-keyring's keyrings and KWallet's wallets.",
        discussion: """
            git's credential-store lines become internet passwords exactly as git-credential-keychain \
            stores them; docker's inline auths become docker-credential-keychain's items, then config.json \
            gets "credsStore": "keychain" and loses its inline secrets (the old file is kept beside it, \
            0600); each gnome-keyring keyring file (encrypted or plain text) goes to a keychain of its \
            name (login.keyring to the login keychain; another is created with the keyring's password), \
            with its labels, attributes, secrets and dates, as the Secret Service showed them; each KWallet \
            wallet file (NAME.kwl, with NAME.salt beside it) likewise (kdewallet to the login keychain), \
            its folders and entries kept as KDE programs wrote them and the items kwalletd's Secret Service \
            stored as Secret Service items. Items already there are not added again, so a second run \
            changes nothing. -p gives the keyrings' and wallets' password (also tried on a locked \
            keychain); without it, it is asked for (terminal, or one line of standard input per keyring \
            or wallet).
            """)

    @Flag(
        name: .customLong("git-credentials"),
        help: ArgumentHelp(
            "git's credential-store files: ~/.git-credentials and $XDG_CONFIG_HOME/git/credentials, or the FILE given (--git-credentials FILE).",
            valueName: "FILE"))
    var gitCredentials = false
    @Option(name: .customLong("git-credentials-file"), help: .hidden) var gitCredentialFiles: [String] = []
    @Flag(
        name: .customLong("docker-config"),
        help: "docker's inline logins: $DOCKER_CONFIG/config.json or ~/.docker/config.json, or the FILE given (--docker-config FILE).")
    var dockerConfig = false
    @Option(name: .customLong("docker-config-file"), help: .hidden) var dockerConfigFiles: [String] = []
    @Option(name: .customLong("keyring"), help: ArgumentHelp("A gnome-keyring keyring file (repeatable).", valueName: "file"))
    var keyringFiles: [String] = []
    @Flag(name: .customLong("keyrings"), help: "Every keyring in $XDG_DATA_HOME/keyrings (~/.local/share/keyrings), its default one respected.")
    var allKeyrings = false
    @Option(name: .customLong("kwallet"), help: ArgumentHelp("A KWallet wallet file, NAME.kwl (repeatable).", valueName: "file"))
    var kwalletFiles: [String] = []
    @Flag(name: .customLong("kwallets"), help: "Every wallet in $XDG_DATA_HOME/kwalletd (~/.local/share/kwalletd), kdewallet first.")
    var allKWallets = false
    @Flag(name: .customLong("all"), help: "All of the above that exist.") var all = false
    @Flag(name: [.customShort("n"), .customLong("dry-run")], help: "List what would come; change nothing.") var dryRun = false
    @Option(
        name: .customShort("p"), parsing: .unconditional,
        help: ArgumentHelp(
            "The keyrings' and wallets' password (visible to other processes; prefer the prompt or standard input).", valueName: "password"))
    var password: String?

    func run() throws {
        AccessList.addsUnlisted()
        let wantsGit = all || gitCredentials || !gitCredentialFiles.isEmpty
        let wantsDocker = all || dockerConfig || !dockerConfigFiles.isEmpty
        let wantsKeyrings = all || allKeyrings || !keyringFiles.isEmpty
        let wantsKWallets = all || allKWallets || !kwalletFiles.isEmpty
        guard wantsGit || wantsDocker || wantsKeyrings || wantsKWallets else {
            throw ValidationError("name what to import: --git-credentials, --docker-config, --keyring FILE, --keyrings, --kwallet FILE, --kwallets or --all")
        }
        let run = SecretImportRun(dryRun: dryRun, password: password.map { Array($0.utf8) })
        defer { run.finish() }
        if wantsKeyrings {
            var files = keyringFiles
            if all || allKeyrings { files += SecretImportRun.keyringFolderFiles() }
            run.importKeyrings(files, folderAsked: all || allKeyrings)
        }
        if wantsKWallets {
            var files = kwalletFiles
            if all || allKWallets { files += SecretImportRun.folderFiles(SecretImportRun.kwalletFolder(), suffix: ".kwl", first: "kdewallet.kwl") }
            run.importKWallets(files, folderAsked: allKWallets)
        }
        if wantsGit {
            let explicit = !gitCredentialFiles.isEmpty
            run.importGitCredentials(
                explicit ? gitCredentialFiles : SecretImportRun.gitCredentialFiles(),
                explicit: explicit, quietWhenMissing: all && !gitCredentials)
        }
        if wantsDocker {
            let explicit = !dockerConfigFiles.isEmpty
            for file in explicit ? dockerConfigFiles : [SecretImportRun.dockerConfigFile()] {
                run.importDockerConfig(file, explicit: explicit, quietWhenMissing: all && !dockerConfig)
            }
        }
        run.summarize()
        if let status = run.failureStatus { throw ExitCode(status) }
    }
}

/// One run of import-secrets: counts, the lines it prints, the keychains it opened.
final class SecretImportRun {
    let dryRun: Bool
    private(set) var password: Bytes?
    private(set) var added = 0, alreadyThere = 0, skipped = 0, failed = 0
    private(set) var failureStatus: Int32?
    let progress: ProgressLine
    /// Keychains opened for writing (or, in a dry run, for reading), by path.
    private var stores: [String: KeychainStore] = [:]
    /// Keychains a dry run would create (a keyring's), so later sources can count on them.
    private var planned: Set<String> = []
    /// The default keychain a dry run would choose from gnome-keyring's default file.
    private var plannedDefault: String?
    /// Keychains this run created.
    private var created: Set<String> = []

    init(dryRun: Bool, password: Bytes?) {
        self.dryRun = dryRun
        self.password = password
        progress = ProgressLine(enabled: !dryRun && isatty(2) != 0)
    }

    func finish() {
        progress.clear()
        password?.wipe()
    }

    // MARK: Reporting

    /// One line on stderr for something that could not come; the run goes on.
    func fail(_ place: String, _ error: Error) {
        progress.clear()
        failed += 1
        let keychainError = error as? KeychainError
        let detail = keychainError?.description ?? "\(error)"
        let name = keychainError.map { " (\(KeychainError.name(for: $0.status)))" } ?? ""
        Terminal.error("security: import-secrets: " + TerminalText.escaped("\(place): \(detail)\(name)"))
        if failureStatus == nil {
            failureStatus = keychainError.map { Int32(UInt8(truncatingIfNeeded: $0.status)) } ?? 1
        }
    }

    /// Something in a source that is not a secret its program uses (a line git ignores too): said,
    /// counted apart, and not a failure.
    func skip(_ place: String, _ why: String) {
        skipped += 1
        if dryRun {
            list("skip", "\(place): \(why)")
        } else {
            note("\(place): skipped: \(why)")
        }
    }

    func note(_ line: String) {
        progress.clear()
        Terminal.error("security: import-secrets: " + TerminalText.escaped(line))
    }

    /// A dry run's listing, one line per item on stdout.
    func list(_ what: String, _ place: String) {
        if dryRun { Terminal.out(what.padding(13) + TerminalText.escaped(place)) }
    }

    func count(_ outcome: KeychainStore.ImportOutcome, _ place: String) {
        switch outcome {
        case .added:
            added += 1
            list("would add", place)
        case .alreadyThere:
            alreadyThere += 1
            list("already there", place)
        }
    }

    func summarize() {
        progress.clear()
        let failures = (skipped == 0 ? "" : ", \(skipped) skipped") + (failed == 0 ? "" : ", \(failed) could not come")
        if dryRun {
            Terminal.out("import-secrets: dry run: \(added) would be added, \(alreadyThere) already there\(failures); nothing was changed")
        } else {
            Terminal.out("import-secrets: \(added) added, \(alreadyThere) already there\(failures)")
        }
    }

    // MARK: Keychains

    /// The keychain at `path`, ready for what this run does with it: writable (unlocked in the
    /// kernel, created when missing) or, in a dry run, readable without changing its lock state
    /// (nil: it does not exist yet). Passwords tried in order: the given ones, then the prompt.
    func keychain(_ path: String, passwords: [Bytes], newPassword: () throws -> Bytes) throws -> KeychainStore? {
        if let store = stores[path] { return store }
        guard KeychainFile.exists(path) else {
            if dryRun {
                if planned.insert(path).inserted { list("would create", "keychain \(path)") }
                return nil
            }
            var secret = try newPassword()
            defer { secret.wipe() }
            let store = try KeychainStore.create(at: path, password: secret)
            try SearchList.add(path)
            created.insert(path)
            note("created the keychain \(path)")
            stores[path] = store
            return store
        }
        var store = try KeychainStore.open(at: path, storage: .kernel)
        if !store.status.whenUnlocked {
            // A dry run unlocks in this process only: the keychain stays locked for everyone else.
            if dryRun { store = try KeychainStore.open(at: path, storage: .process) }
            var unlocked = false
            for candidate in passwords where !candidate.isEmpty {
                do {
                    try store.unlock(password: candidate)
                    unlocked = true
                    break
                } catch let error as KeychainError where error.code == .authFailed {}
            }
            if !unlocked {
                progress.clear()
                var typed = try Terminal.readSecret(prompt: "password to unlock \(TerminalText.escaped(path)): ")
                defer { typed.wipe() }
                try store.unlock(password: typed)
            }
        }
        stores[path] = store
        return store
    }

    /// The default keychain, where git-credential-keychain and docker-credential-keychain look.
    func defaultKeychain() throws -> KeychainStore? {
        let path = plannedDefault ?? KeychainFile.defaultPath()
        if !KeychainFile.exists(path) && !planned.contains(path) {
            throw KeychainError(.noSuchKeychain, "no keychain at \(path), where the credential helpers look; create one with `security create-keychain`")
        }
        return try keychain(path, passwords: password.map { [$0] } ?? [], newPassword: { throw KeychainError(.noSuchKeychain) })
    }

    // MARK: gnome-keyring

    /// The keyring folder gnome-keyring uses: $XDG_DATA_HOME/keyrings, else ~/.local/share/keyrings.
    static func keyringFolder() -> String {
        if let data = KeychainFile.environment("XDG_DATA_HOME"), data.hasPrefix("/") { return data + "/keyrings" }
        return KeychainFile.homeDirectory() + "/.local/share/keyrings"
    }

    /// The folder's *.keyring files, login first (its keychain is the one the others' defaults
    /// and the credential helpers lean on), then by name.
    static func keyringFolderFiles() -> [String] { folderFiles(keyringFolder(), suffix: ".keyring", first: "login.keyring") }

    /// The files of `folder` named *`suffix` (not hidden), `first` first, then by name.
    static func folderFiles(_ folder: String, suffix: String, first: String) -> [String] {
        var names: [String] = []
        if let dir = opendir(folder) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
                if name.hasSuffix(suffix), name.count > suffix.count, !name.hasPrefix(".") {
                    names.append(name)
                }
            }
            closedir(dir)
        }
        names.sort { a, b in
            (a == first) != (b == first) ? a == first : a < b
        }
        return names.map { folder + "/" + $0 }
    }

    /// The keychain a keyring file goes to: login.keyring to the login keychain, NAME.keyring to
    /// the keychain NAME.
    static func keychainName(forKeyring path: String) -> String {
        let base = String(path.split(separator: "/").last ?? "")
        return base.hasSuffix(".keyring") ? String(base.dropLast(".keyring".count)) : base
    }

    func importKeyrings(_ files: [String], folderAsked: Bool) {
        var seen = Set<String>()
        var imported: [String: Set<String>] = [:]  // folder -> names brought in
        if files.isEmpty, folderAsked { note("no gnome-keyring keyrings in \(Self.keyringFolder())") }
        for file in files where seen.insert(file).inserted {
            let name = Self.keychainName(forKeyring: file)
            if importKeyring(file, name: name) {
                imported[String(file[..<(file.lastIndex(of: "/") ?? file.startIndex)]), default: []].insert(name)
            }
        }
        for (folder, names) in imported.sorted(by: { $0.key < $1.key }) { respectDefault(folder: folder.isEmpty ? "." : folder, imported: names) }
    }

    /// One keyring file into its keychain; true when the keyring could be read and its keychain
    /// opened (items that failed are counted, and said, one by one).
    @discardableResult
    func importKeyring(_ file: String, name: String) -> Bool {
        var keyring: GnomeKeyring
        var keyringPassword: Bytes?
        defer { keyringPassword?.wipe() }
        do {
            guard !name.isEmpty else { throw KeychainError.param("a keyring file needs a name (NAME.keyring)") }
            var bytes = try ImportFiles.read(file, limit: GnomeKeyring.maximumFileSize)
            defer { bytes.wipe() }
            guard let format = GnomeKeyring.format(of: bytes) else {
                throw KeychainError.decode("not a gnome-keyring keyring file (neither its encrypted nor its plain-text format)")
            }
            if format == .encrypted {
                progress.clear()
                keyringPassword = try password ?? Terminal.readSecret(prompt: TerminalText.escaped("password for the keyring \(name) (\(file)): "))
            }
            keyring = try GnomeKeyring.read(bytes, password: keyringPassword)
        } catch {
            fail(file, error)
            return false
        }
        let target: String
        let store: KeychainStore?
        do {
            target = name == "login" ? KeychainFile.loginPath() : try KeychainFile.resolveBareName(name)
        } catch {
            fail(file, error)
            return false
        }
        do {
            let tried = [keyringPassword, password].compactMap { $0 }
            store = try keychain(target, passwords: tried) {
                if let keyringPassword { return keyringPassword }
                if let password { return password }
                self.progress.clear()
                let shown = TerminalText.escaped(name)
                return try Terminal.readSecret(prompt: "password for the new keychain \(shown): ", confirm: "retype password for the new keychain \(shown): ")
            }
        } catch {
            fail("\(file) -> \(target)", error)
            return false
        }
        defer { for index in keyring.items.indices { keyring.items[index].secret.wipe() } }
        // A keychain made for the keyring is the same collection for Secret Service clients:
        // it takes the keyring's label ("Login", "Work").
        if let store, created.contains(target), !keyring.label.isEmpty {
            do {
                try store.setCollectionLabel(keyring.label)
            } catch {
                fail("\(file) -> \(target)", error)
            }
        }
        for (id, reason) in keyring.unreadable {
            fail("\(file): item \(id)", KeychainError.decode(reason))
        }
        // One transaction for the whole keyring (a batch): one commit instead of one per item,
        // and a run killed midway leaves none of this keyring's items. An item that fails is
        // undone alone, said, and the others go on, as before.
        inBatch(store, place: "\(file) -> \(target)") { importKeyringItems(keyring, name: name, file: file, store: store) }
        progress.clear()
        return true
    }

    /// Runs `body` in one batch of `store` when this run writes to it; if the batch cannot be
    /// committed, nothing of it came in, and the counts say so.
    func inBatch(_ store: KeychainStore?, place: String, _ body: () -> Void) {
        guard let store, !dryRun else { return body() }
        let before = (added, alreadyThere)
        do {
            try store.batch(body)
        } catch {
            (added, alreadyThere) = before
            fail(place, error)
        }
    }

    func importKeyringItems(_ keyring: GnomeKeyring, name: String, file: String, store: KeychainStore?) {
        // Read once: inside the batch only this run writes, and never the sync default (a
        // setting too locked to read now is asked again for each item).
        let syncsNewItems = dryRun ? false : store?.readSyncDefault()
        // What the keychain holds, read once per attribute set for the whole file.
        var known: SecretImportIndex
        do {
            known = try SecretImportIndex()
        } catch {
            return fail(file, error)
        }
        for (index, item) in keyring.items.enumerated() {
            progress.show("import-secrets: \(name).keyring \(index + 1)/\(keyring.items.count)")
            let place = "\(file): " + (item.label.isEmpty ? "item \(item.id)" : "\"\(item.label)\"")
            importSecretItem(
                label: item.label, attributes: item.attributes, secret: item.secret, created: item.created, modified: item.modified,
                into: store, syncsNewItems: syncsNewItems, index: &known, place: place)
        }
    }

    /// One Secret Service item into `store` (nil: a keychain a dry run would create), counted, or
    /// said when it cannot come.
    func importSecretItem(
        label: String, attributes: [String: String], secret: Bytes, contentType: String = KeychainStore.defaultContentType,
        created: UInt64, modified: UInt64, into store: KeychainStore?, syncsNewItems: Bool?, index known: inout SecretImportIndex, place: String
    ) {
        do {
            if let store {
                if dryRun {
                    let there = try store.holdsSecretItem(label: label, attributes: attributes, secret: secret, index: &known)
                    count(there ? .alreadyThere : .added, place)
                } else {
                    count(
                        try store.importSecretItem(
                            label: label, attributes: attributes, secret: secret, contentType: contentType,
                            created: created, modified: modified, syncsNewItems: syncsNewItems, index: &known), place)
                }
            } else {
                count(.added, place)
            }
        } catch {
            fail(place, error)
        }
    }

    /// gnome-keyring's `default` file names the keyring its `default` alias points at. The
    /// Secret Service's default alias is the default keychain here: it becomes that keyring's
    /// keychain, unless the user chose a default keychain already.
    func respectDefault(folder: String, imported: Set<String>) {
        guard let bytes = try? ImportFiles.read(folder + "/default", limit: 4096),
            let name = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r" }).first.map(String.init)?
                .trimmingCharacters(in: " \t"),
            !name.isEmpty, !name.contains("/"), imported.contains(name)
        else { return }
        let path = name == "login" ? KeychainFile.loginPath() : KeychainFile.resolve(name)
        let current = KeychainFile.defaultPath()
        guard current != path else { return }
        let chosen = KeychainFile.environment("KEYCHAIN_PATH") != nil || KeychainFile.exists(KeychainFile.defaultChoiceFile())
        if chosen {
            note("gnome-keyring's default keyring is \(name); the default keychain stays \(current), as you chose it")
        } else if dryRun {
            list("would make", "\(path) the default keychain (gnome-keyring's default keyring is \(name))")
            plannedDefault = path
        } else {
            do {
                try KeychainFile.setDefaultPath(path)
                note("\(path) is now the default keychain, as \(name) was gnome-keyring's default keyring")
            } catch {
                fail("\(folder)/default", error)
            }
        }
    }

    // MARK: git's credential store

    /// The files git's credential-store reads, in its order: ~/.git-credentials, then
    /// $XDG_CONFIG_HOME/git/credentials (~/.config/git/credentials).
    static func gitCredentialFiles() -> [String] {
        let home = KeychainFile.homeDirectory()
        let config = KeychainFile.environment("XDG_CONFIG_HOME").flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.config"
        return [home + "/.git-credentials", config + "/git/credentials"]
    }

    func importGitCredentials(_ files: [String], explicit: Bool, quietWhenMissing: Bool) {
        let present = files.filter { explicit || KeychainFile.exists($0) }
        if present.isEmpty {
            if !quietWhenMissing { note("no git credential-store file (\(files.joined(separator: ", ")))") }
            return
        }
        let store: KeychainStore?
        do {
            store = try defaultKeychain()
        } catch {
            fail("git credentials", error)
            return
        }
        // git uses the first line that matches; a later line for the same credential is not used.
        var first: [Bytes: String] = [:]
        for file in present {
            var bytes: Bytes
            do {
                bytes = try ImportFiles.read(file, limit: 64 << 20)
            } catch {
                fail(file, error)
                continue
            }
            defer { bytes.wipe() }
            // One batch per file, as for a keyring.
            inBatch(store, place: file) {
                // Read once: inside the batch only this run writes, and only git's credentials (a
                // setting too locked to read now is asked again for each item).
                let syncsNewItems = dryRun ? false : store?.readSyncDefault()
                for (number, raw) in bytes.split(separator: 10, omittingEmptySubsequences: false).enumerated() {
                    let line = raw.last == 13 ? raw.dropLast() : raw
                    if line.isEmpty { continue }
                    let place = "\(file) line \(number + 1)"
                    let parsed: GitCredentialStoreLine
                    do {
                        parsed = try GitCredentialStoreLine(parsing: String(decoding: line, as: UTF8.self))
                    } catch {
                        skip(place, "\(error)")
                        continue
                    }
                    let credential = parsed.credential
                    guard let item = credential.item(account: credential.username, secret: StoredSecret(password: parsed.password)) else {
                        fail(place, KeychainError.param("it names no host; git-credential-keychain keeps only credentials with one"))
                        continue
                    }
                    let shown =
                        "\(place) (\(credential.scheme ?? "")://\(credential.username.map { $0 + "@" } ?? "")\(credential.host ?? "")\(credential.path.map { "/" + $0 } ?? ""))"
                    // The bytes the keychain's uniqueness compares (git compares bytes too), not
                    // a text: interpolating an AttributeValue goes through reflection, which cost
                    // more than storing the item.
                    let key = KeychainStore.primaryKeyBytes(item)
                    if let earlier = first[key] {
                        skip(shown, "the same credential as \(earlier), which git uses")
                        continue
                    }
                    first[key] = place
                    do {
                        guard let store else {
                            count(.added, shown)
                            continue
                        }
                        let existing = try GitCredential.existing(item, in: store)
                        if existing.contains(where: { sameSecret($0.secret, item.secret) }) {
                            count(.alreadyThere, shown)
                        } else if !existing.isEmpty {
                            fail(
                                shown, KeychainError(.duplicateItem, "the keychain already holds another password for this credential; the keychain's is kept"))
                        } else {
                            if !dryRun { try GitCredential.save(item, in: store, syncsNewItems: syncsNewItems) }
                            count(.added, shown)
                        }
                    } catch {
                        fail(shown, error)
                    }
                }
            }
        }
    }

    // MARK: docker's config.json

    static func dockerConfigFile() -> String {
        if let folder = KeychainFile.environment("DOCKER_CONFIG"), !folder.isEmpty { return folder + "/config.json" }
        return KeychainFile.homeDirectory() + "/.docker/config.json"
    }

    func importDockerConfig(_ file: String, explicit: Bool, quietWhenMissing: Bool) {
        guard explicit || KeychainFile.exists(file) else {
            if !quietWhenMissing { note("no docker configuration at \(file)") }
            return
        }
        let original: Bytes
        let config: DockerConfig
        do {
            original = try ImportFiles.read(file, limit: 16 << 20)
            config = try DockerConfig(parsing: original)
        } catch {
            fail(file, error is DockerConfig.Problem ? KeychainError.decode("\(error)") : error)
            return
        }
        if let current = config.credsStore, !current.isEmpty, current != "keychain" {
            fail(
                file,
                KeychainError.param("its credsStore is \"\(current)\": docker keeps its logins in that helper; nothing was moved and the file is unchanged"))
            return
        }
        let entries = config.inlineEntries
        guard !entries.isEmpty else { return }
        let store: KeychainStore?
        do {
            store = try defaultKeychain()
        } catch {
            fail("\(file)", error)
            return
        }
        var moved = Set<String>()
        var stuck = 0
        for entry in entries {
            let place = "\(file): \(entry.serverURL)"
            guard let credential = entry.credential else {
                fail(place, KeychainError.decode(entry.problem ?? "unreadable"))
                stuck += 1
                continue
            }
            do {
                _ = try credential.item()  // the URL must be one the helper can store
                guard let store else {
                    count(.added, place)
                    moved.insert(entry.serverURL)
                    continue
                }
                // docker-credential-keychain's store replaces every item of the URL; an import
                // replaces nothing: only docker's own items count, others (git's) stay beside.
                let existing = try credential.existing(in: store).filter { $0["labl"]?.stringValue == DockerCredential.label }
                let wanted = Array(credential.secret.utf8)
                if existing.contains(where: { $0["acct"]?.stringValue == credential.username && sameSecret($0.secret, wanted) }) {
                    count(.alreadyThere, place)
                } else if !existing.isEmpty {
                    throw KeychainError(.duplicateItem, "the keychain already holds another login for this registry; the keychain's is kept")
                } else {
                    if !dryRun {
                        // Stored as docker-credential-keychain stores it, the sync default included.
                        let item = store.withSyncDefault(try credential.item().item)
                        // Synchronizable is part of Apple's uniqueness: a synchronizable login would
                        // not collide with another program's item of this user and URL, and would
                        // shadow it. That item is looked for whichever it is.
                        var same = Query(identifying: item)
                        same.synchronizable = .any
                        let kept = KeychainError(
                            .duplicateItem, "the keychain already holds a password of this user for this registry's URL (not docker's); it is kept")
                        try store.batch {
                            if try holdsAny(same, in: store) { throw kept }
                            do {
                                try store.add(item)
                            } catch let error as KeychainError where error.code == .duplicateItem {
                                throw kept
                            }
                        }
                    }
                    count(.added, place)
                }
                moved.insert(entry.serverURL)
            } catch let error as RegistryURL.Invalid {
                fail(place, KeychainError.param("not a registry URL docker-credential-keychain can keep: \(error.description)"))
                stuck += 1
            } catch {
                fail(place, error)
                stuck += 1
            }
        }
        guard stuck == 0 else {
            note("\(file) is left as it is: \(stuck) of its logins could not be moved into the keychain")
            return
        }
        let backup = ImportFiles.backupPath(for: file)
        if dryRun {
            list("would change", "\(file): credsStore \"keychain\", \(moved.count) inline logins removed (the old file kept as \(backup))")
            return
        }
        do {
            try ImportFiles.writeNew(original, to: backup)
            try ImportFiles.replaceAtomically(file, with: config.migrated(to: "keychain", moved: moved))
            note(
                "\(file): credsStore is now \"keychain\" and its \(moved.count) inline logins are gone from it; the old file is \(backup) (readable by you only)"
            )
            if !ImportFiles.onPath("docker-credential-keychain") {
                note("docker-credential-keychain is not on PATH: docker finds its logins only once it is")
            }
        } catch {
            fail(file, error)
        }
    }
}

/// Whether any item matches (locked ones make it throw, as the add would).
private func holdsAny(_ query: Query, in store: KeychainStore) throws -> Bool {
    do {
        return try !store.find(query, limit: 1).isEmpty
    } catch let error as KeychainError where error.code == .itemNotFound {
        return false
    }
}

/// Two optional secrets hold the same bytes (compared without an early exit).
private func sameSecret(_ a: Bytes?, _ b: Bytes?) -> Bool {
    guard let a, let b else { return a == nil && b == nil }
    return a.count == b.count && zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
}

/// "import-secrets: login.keyring 12/40" on stderr while a run goes, only when stderr is a terminal.
final class ProgressLine {
    let enabled: Bool
    private var shown = false

    init(enabled: Bool) { self.enabled = enabled }

    func show(_ text: String) {
        guard enabled else { return }
        fputs("\r\u{1B}[K" + TerminalText.escaped(text), stderr)
        fflush(stderr)
        shown = true
    }

    func clear() {
        guard shown else { return }
        fputs("\r\u{1B}[K", stderr)
        fflush(stderr)
        shown = false
    }
}

/// Reading the sources, and the one file import-secrets rewrites (docker's config.json).
enum ImportFiles {
    /// A source's bytes: a regular file only, opened without waiting (a FIFO named as a source
    /// would hold the run forever), no larger than `limit`.
    static func read(_ path: String, limit: Int) throws -> Bytes { try ForeignFile.read(path, limit: limit).bytes }

    /// `FILE.before-keychain`, or with .1, .2 ... when that exists already.
    static func backupPath(for path: String) -> String {
        let base = path + ".before-keychain"
        var candidate = base
        var n = 0
        while KeychainFile.exists(candidate) {
            n += 1
            candidate = "\(base).\(n)"
        }
        return candidate
    }

    /// A new file, 0600 whatever the umask, written whole and synced, or an error.
    static func writeNew(_ bytes: Bytes, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot create \(path): \(String(cString: strerror(errno)))") }
        var ok = fchmod(fd, 0o600) == 0
        var rest = bytes[...]
        while ok && !rest.isEmpty {
            let n = rest.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { ok = false } else { rest = rest.dropFirst(n) }
        }
        ok = ok && fsync(fd) == 0
        close(fd)
        if !ok {
            unlink(path)
            throw KeychainError(.io, "cannot write \(path)")
        }
    }

    /// Replaces `path` (the file a symbolic link points at, when it is one) by a new 0600 file in
    /// one rename: readers see the old file or the new one, never a half-written one.
    static func replaceAtomically(_ path: String, with bytes: Bytes) throws {
        var target = path
        if let resolved = realpath(path, nil) {
            target = String(cString: resolved)
            free(resolved)
        }
        let folder = target.lastIndex(of: "/").map { String(target[..<$0]) } ?? "."
        let temporary = "\(folder)/.\(target.split(separator: "/").last ?? "config.json").\(getpid()).tmp"
        unlink(temporary)
        try writeNew(bytes, to: temporary)
        guard rename(temporary, target) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw KeychainError(.io, "cannot replace \(target): \(reason)")
        }
        let dir = open(folder.isEmpty ? "/" : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }

    /// Whether an executable of that name is in a folder of $PATH.
    static func onPath(_ name: String) -> Bool {
        let path = KeychainFile.environment("PATH") ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(name)", X_OK) == 0 }
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }

    fileprivate func trimmingCharacters(in set: String) -> String {
        var scalars = Substring(self)
        while let first = scalars.first, set.contains(first) { scalars = scalars.dropFirst() }
        while let last = scalars.last, set.contains(last) { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
