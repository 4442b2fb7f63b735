import ArgumentParser
import Glibc
import KeychainCore

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an encrypted backup of a keychain (ThisDeviceOnly items stay behind).",
        discussion: "The backup has its own passphrase; with neither -P nor a terminal it is read from standard input.")

    @Option(name: .customShort("k"), help: "Keychain to export (default: the default keychain).") var keychain: String?
    @Option(name: .customShort("o"), help: "Backup file to write (created 0600; must not exist).") var output: String
    @Option(name: .customShort("P"), help: "Backup passphrase (visible to other processes; prefer the prompt).") var passphrase: String?

    func run() throws {
        try perform("export") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            var secret = try passphrase.map { Array($0.utf8) }
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
    static let configuration = CommandConfiguration(abstract: "Restore the items of a backup made by `security export`.")

    @Argument(help: "Backup file.") var input: String
    @Option(name: .customShort("k"), help: "Keychain to import into (default: the default keychain).") var keychain: String?
    @Option(name: .customShort("P"), help: "Backup passphrase (visible to other processes; prefer the prompt).") var passphrase: String?

    func run() throws {
        try perform("import") {
            let store = try KeychainStore.open(at: keychain.map(KeychainFile.resolve), storage: .kernel)
            let backup = try BackupFile.read(input)
            var secret = try passphrase.map { Array($0.utf8) } ?? Terminal.readSecret(prompt: "passphrase of the backup: ")
            defer { secret.wipe() }
            let summary = try store.importBackup(backup, password: secret)
            Terminal.error("\(summary.imported) item(s) imported, \(summary.alreadyPresent) already present")
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
