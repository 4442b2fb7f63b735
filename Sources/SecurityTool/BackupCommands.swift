import ArgumentParser
import Glibc
import KeychainCore

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export certificates, public keys or an identity (-t), or write an encrypted backup of the whole keychain.",
        discussion: """
            With -t: certs (PEM, or DER with -f x509), pubKeys (PEM, or DER with -f openssl and no -p), \
            identities or privKeys (PKCS#12, -f pkcs12, with a passphrase). Written to -o or standard output. \
            Without -t: an encrypted backup of every item but the ThisDeviceOnly ones (-o required), \
            which `security import` restores. Passphrases: -P, else the terminal, else standard input.
            """)

    @Option(name: .customShort("k"), help: "Keychain to export from (default: the default keychain).") var keychain: String?
    @Option(name: .customShort("t"), help: "What to export: certs, pubKeys, privKeys, identities.") var type: String?
    @Option(name: .customShort("f"), help: "Format: pemseq, x509, openssl, pkcs12.") var format: String?
    @Flag(name: .customShort("p"), help: "PEM armour (the default for certs and pubKeys).") var pem = false
    @Option(name: .customShort("o"), help: "File to write (created 0600; must not exist).") var output: String?
    @Option(name: .customShort("P"), help: "Passphrase (visible to other processes; prefer the prompt).") var passphrase: String?

    func run() throws {
        try perform("export") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            if type != nil || format != nil {
                let bytes = try ItemExport.export(from: store, type: type ?? "all", format: format, pem: pem) {
                    try passphrase ?? Terminal.readSecretText(prompt: "passphrase for the PKCS#12 file: ", confirm: "retype passphrase: ")
                }
                if let output { try BackupFile.write(bytes, to: output) } else { Terminal.write(bytes) }
                return
            }
            guard let output else { throw ValidationError("a backup needs -o FILE") }
            var secret =
                try passphrase.map { Array($0.utf8) }
                ?? Terminal.readSecret(prompt: "passphrase for the backup: ", confirm: "retype passphrase: ")
            defer { secret.wipe() }
            guard !secret.isEmpty else { throw KeychainError(.param, "a backup needs a passphrase") }
            let summary = try store.exportBackup(password: secret)
            try BackupFile.write(summary.backup, to: output)
            Terminal.error("\(summary.exported) item(s) exported, \(summary.keptOnDevice) ThisDeviceOnly item(s) left out")
        }
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import certificates, keys and identities (PEM, DER, PKCS#12), or restore a backup made by `security export`.")

    @Argument(help: "File: a certificate or key (PEM or DER), a PKCS#12 file, or a backup.") var input: String
    @Option(name: .customShort("k"), help: "Keychain to import into (default: the default keychain).") var keychain: String?
    @Option(name: .customShort("t"), help: "Item type (cert, pub, priv, agg): accepted; the file's contents decide.") var type: String?
    @Option(name: .customShort("f"), help: "Format: pkcs12 forces PKCS#12; others are recognised from the contents.") var format: String?
    @Option(name: .customShort("P"), help: "Passphrase (visible to other processes; prefer the prompt).") var passphrase: String?
    @Flag(name: .customShort("x"), help: "Accepted for macOS compatibility (keys are never exported in the clear here).") var nonExtractable = false
    @Flag(name: .customShort("A"), help: "Accepted for macOS compatibility (there are no per-application ACLs).") var anyApplication = false
    @Option(name: .customShort("T"), help: "Accepted for macOS compatibility (there are no per-application ACLs).") var applications: [String] = []

    func run() throws {
        try perform("import") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            let bytes = try BackupFile.read(input)
            if KeychainStore.isBackup(bytes) {
                var secret = try passphrase.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "passphrase of the backup: ")
                defer { secret.wipe() }
                let summary = try store.importBackup(bytes, password: secret)
                Terminal.error("\(summary.imported) item(s) imported, \(summary.alreadyPresent) already present")
                return
            }
            let bundle = try ItemFiles.read(bytes, path: input, format: format) {
                try passphrase ?? Terminal.readSecretText(prompt: "passphrase of the PKCS#12 file: ")
            }
            let imported = try store.importBundle(bundle)
            for line in ItemFiles.summary(imported) { Terminal.out(line) }
            if imported.alreadyPresent > 0 { Terminal.error("\(imported.alreadyPresent) item(s) already in the keychain") }
        }
    }
}

enum BackupFile {
    static func write(_ bytes: Bytes, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeychainError(.io, "cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, fsync(fd) == 0 else { throw KeychainError(.io, "cannot write \(path)") }
    }

    static func read(_ path: String) throws -> Bytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw KeychainError(.io, "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var out = Bytes()
        var buffer = Bytes(repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { throw KeychainError(.io, "cannot read \(path)") }
            if n == 0 { break }
            out += buffer[0..<n]
            if out.count > 1 << 30 { throw KeychainError(.decode, "\(path) is too large to be a backup") }
        }
        return out
    }
}
