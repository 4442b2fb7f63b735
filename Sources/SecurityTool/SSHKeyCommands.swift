import ArgumentParser
import Glibc
import KeychainCore
import KeychainSSH
import KeychainTPMClient

/// `security import-ssh-keys`: OpenSSH's key files into the keychain, where keychain-ssh-agent
/// finds them. The files stay as they are; a key already there is replaced by the same key, so a
/// second run changes nothing.
struct ImportSSHKeys: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-ssh-keys",
        abstract: "Keep SSH private keys (~/.ssh/id_* by default) in the keychain for keychain-ssh-agent.",
        discussion: """
            Reads OpenSSH's own format (encrypted or not), PEM (PKCS#1, SEC1) and PKCS#8. Each passphrase \
            is asked once (the terminal, else one line of standard input per file); one given for an \
            earlier file is tried first. KEY-cert.pub beside a key is kept with it. The files are not \
            changed. One line per key that cannot come; the status is 1 when any could not.
            """)

    @Argument(help: "Private key files (default: every ~/.ssh/id_* that is not a .pub).") var files: [String] = []
    @Option(name: .customShort("k"), help: "Keychain to keep them in (default: the default keychain).") var keychain: String?
    @Flag(name: .customShort("c"), help: "Ask for the person (polkit) before each signature with these keys.") var confirm = false
    @Flag(name: [.customShort("n"), .customLong("dry-run")], help: "List what would come; change nothing.") var dryRun = false

    func run() throws {
        try perform("import-ssh-keys") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            let vault = SSHKeyVault(store: store)
            let candidates = files.isEmpty ? Self.defaultFiles() : files
            guard !candidates.isEmpty else { throw KeychainError(.param, "no ~/.ssh/id_* key files: name the files") }
            var passphrases: [Bytes] = []
            defer { for i in passphrases.indices { passphrases[i].wipe() } }
            var kept = 0, failed = 0
            for file in candidates {
                do {
                    for key in try Self.keys(in: file, passphrases: &passphrases) {
                        let fingerprint = SSHPublicKey.fingerprint(of: key.key.publicBlob)
                        if !dryRun { try vault.save(key.key, comment: key.comment, confirm: confirm, destinations: []) }
                        Terminal.out("\(dryRun ? "would keep" : "kept") \(fingerprint) \(key.comment) (\(key.key.keyType), \(file))")
                        kept += 1
                    }
                } catch let error as KeychainError {
                    throw error
                } catch {
                    Terminal.error("security: import-ssh-keys: \(file): \(error)")
                    failed += 1
                }
            }
            Terminal.error("import-ssh-keys: \(kept) key(s) \(dryRun ? "would be kept" : "kept"), \(failed) file(s) could not come")
            if failed > 0 { throw ExitCode.failure }
        }
    }

    /// ~/.ssh/id_*, as ssh-add's default list, without the public halves and certificates.
    static func defaultFiles() -> [String] {
        let folder = (getenv("HOME").map { String(cString: $0) } ?? "") + "/.ssh"
        return PlainFiles.list(folder).filter { $0.hasPrefix("id_") && !$0.hasSuffix(".pub") }.sorted().map { folder + "/" + $0 }
    }

    /// The keys of one file, with its certificate when KEY-cert.pub lies beside it.
    static func keys(in file: String, passphrases: inout [Bytes]) throws -> [(key: SSHPrivateKey, comment: String)] {
        guard let contents = PlainFiles.read(file) else { throw SSHKeyError("cannot read the file") }
        var entries: [SSHKeyFileEntry]?
        if SSHKeyFile.isEncrypted(contents) {
            for passphrase in passphrases.reversed() {
                if let found = try? SSHKeyFile.read(contents, passphrase: passphrase) {
                    entries = found
                    break
                }
            }
            while entries == nil {
                guard var passphrase = try? Terminal.readSecret(prompt: "passphrase for \(file): ") else {
                    throw SSHKeyFileError.needsPassphrase
                }
                do {
                    entries = try SSHKeyFile.read(contents, passphrase: passphrase)
                    passphrases.append(passphrase)
                } catch SSHKeyFileError.wrongPassphrase where isatty(0) != 0 {
                    passphrase.wipe()
                    Terminal.error("wrong passphrase for \(file), try again")
                }
            }
        } else {
            entries = try SSHKeyFile.read(contents, passphrase: nil)
        }
        let certificate = PlainFiles.read(file + "-cert.pub").flatMap(SSHPublicKey.blob(ofLine:))
        return try (entries ?? []).map { entry in
            var entry = entry
            defer { entry.serialized.wipe() }
            let key = try SSHPrivateKey(serialized: entry.serialized)
            let comment = entry.comment.isEmpty ? Self.publicComment(of: file) ?? file : entry.comment
            return (try certificate.map(key.certified(by:)) ?? key, comment)
        }
    }

    /// A PEM key has no comment; its .pub has one.
    static func publicComment(of file: String) -> String? {
        guard let line = PlainFiles.read(file + ".pub") else { return nil }
        let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 2)
        guard fields.count == 3 else { return nil }
        let comment = String(decoding: fields[2].prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        return comment.isEmpty ? nil : comment
    }
}

/// `security export-ssh-key`: a kept key back in OpenSSH's format, for a user who leaves or a
/// machine without the agent. A key made inside the TPM has no private part to give.
struct ExportSSHKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-ssh-key",
        abstract: "Write a kept SSH key as an OpenSSH private key file (its passphrase asked twice; empty for none).")

    @Argument(help: "The key: its fingerprint (SHA256:...) or its comment.") var key: String
    @Option(name: .customShort("o"), help: "File to write (created 0600; must not exist); its .pub beside it.") var output: String
    @Option(name: .customShort("k"), help: "Keychain the key is kept in (default: the default keychain).") var keychain: String?

    func run() throws {
        try perform("export-ssh-key") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            let vault = SSHKeyVault(store: store)
            let entry = try vault.entry(named: key)
            guard !entry.isTPMResident else {
                throw KeychainError(.param, "\(key) was made inside the TPM: its private part cannot leave it (its public key: `ssh-add -L`)")
            }
            let (privateKey, _) = try vault.privateKey(for: entry.publicBlob)
            var passphrase = try Terminal.readSecret(prompt: "passphrase for \(output) (empty for none): ", confirm: "retype passphrase: ")
            defer { passphrase.wipe() }
            // A certified key is written with its certificate, as sshkey.c serializes one.
            var serialized = privateKey.serialized()
            defer { serialized.wipe() }
            let text = try SSHKeyFile.write(
                SSHKeyFileEntry(serialized: serialized, comment: entry.comment), publicBlob: entry.publicBlob,
                passphrase: passphrase.isEmpty ? nil : passphrase)
            try BackupFile.write(Array(text.utf8), to: output)
            try? PlainFiles.write(output + ".pub", Array((SSHPublicKey.authorizedKeysLine(of: entry.publicBlob, comment: entry.comment) + "\n").utf8))
            Terminal.error("export-ssh-key: \(SSHPublicKey.fingerprint(of: entry.publicBlob)) written to \(output)")
        }
    }
}

/// `security delete-ssh-key`: a kept key deleted for good, from the keychain and so from every
/// agent on it. `ssh-add -d` and `-D` only unload keys from one agent, as OpenSSH's do.
struct DeleteSSHKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-ssh-key",
        abstract: "Delete a kept SSH key from the keychain for good (ssh-add -d only unloads it from one agent).")

    @Argument(help: "The key: its fingerprint (SHA256:...) or its comment.") var key: String
    @Option(name: .customShort("k"), help: "Keychain the key is kept in (default: the default keychain).") var keychain: String?

    func run() throws {
        try perform("delete-ssh-key") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            let vault = SSHKeyVault(store: store)
            let entry = try vault.entry(named: key)
            try vault.remove(entry.publicBlob)
            let kind = entry.isTPMResident ? " (made inside the TPM: it cannot be made again)" : ""
            Terminal.error("delete-ssh-key: \(SSHPublicKey.fingerprint(of: entry.publicBlob)) \(entry.comment) deleted\(kind)")
        }
    }
}

extension SSHKeyVault {
    /// The one kept key with this fingerprint or comment; a comment that several keys share is
    /// refused, so that a command never takes the wrong one.
    func entry(named key: String) throws -> Entry {
        let matches = entries().filter { SSHPublicKey.fingerprint(of: $0.publicBlob) == key || $0.comment == key }
        guard let entry = matches.first else { throw KeychainError(.itemNotFound, "no kept SSH key has the fingerprint or comment \(key)") }
        guard matches.count == 1 else { throw KeychainError(.param, "\(matches.count) keys have the comment \(key): name one by its fingerprint") }
        return entry
    }
}

/// `security create-ssh-key --tpm`: an ECDSA P-256 key made inside the TPM, kept as a keychain
/// item that holds only the TPM's wrapped blob; it signs through keychain-ssh-agent on this
/// machine's TPM and nowhere else.
struct CreateSSHKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create-ssh-key",
        abstract: "Make an SSH key inside the TPM (ECDSA P-256), usable through keychain-ssh-agent, never exportable.")

    @Flag(name: .customLong("tpm"), help: "Make it inside the TPM (the only kind this command makes).") var tpm = false
    @Option(name: .customShort("C"), help: "Comment (default: user@host).") var comment: String?
    @Option(name: .customLong("require"), help: "user-presence: ask for the person (polkit) before each signature.") var require: String?
    @Option(name: .customShort("k"), help: "Keychain to keep it in (default: the default keychain).") var keychain: String?

    func run() throws {
        try perform("create-ssh-key") {
            guard tpm else { throw ValidationError("only TPM-resident keys are made here: give --tpm (ssh-keygen makes the others)") }
            guard require == nil || require == "user-presence" else { throw ValidationError("--require takes user-presence") }
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            let made: TPMSigningKey
            do {
                made = try TPMSigningKeys.create()
            } catch {
                throw KeychainError(.deviceFailed, "cannot make a key in the TPM: \(error)")
            }
            var serialized = ByteWriter()
            serialized.string(SSHPrivateKey.tpmKeyType)
            serialized.blob(made.publicPoint)
            serialized.blob(made.blob)
            let key = try SSHPrivateKey(serialized: serialized.bytes)
            let comment = comment ?? Self.defaultComment()
            try SSHKeyVault(store: store).save(key, comment: comment, confirm: require != nil, destinations: [])
            Terminal.out(SSHPublicKey.authorizedKeysLine(of: key.publicBlob, comment: comment))
        }
    }

    /// user@host, as ssh-keygen's default comment.
    static func defaultComment() -> String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count - 1)
        let user = getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? "user"
        return user + "@" + String(cString: host)
    }
}
