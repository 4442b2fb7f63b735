import ArgumentParser
import Glibc
import KeychainCore
import KeychainTPMPolicy

/// The administrator's side of the recovery escrow (KeychainTPMPolicy/RecoveryEscrow.swift): the
/// key pair made once, the public half put in /etc/keychain/recovery-escrow.pub (or named by
/// pam_keychain's tpm_escrow=), and an escrow opened with the secret half when a TPM was cleared.
struct TPMEscrowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tpm-escrow",
        abstract: "Make the administrator's escrow key, or open a keychain's recovery escrow with it.",
        discussion: """
            --new-key FILE makes an X25519 key pair: the secret key goes to FILE (made new, readable by \
            its owner alone; keep it away from the machines whose keychains escrow to it), the public \
            key to standard output, one line, for /etc/keychain/recovery-escrow.pub (root's, writable by \
            no one else). A keychain sealed to the TPM then has its recovery key sealed to it as well, in \
            the file beside the keychain named KEYCHAIN.recovery-escrow: at a first login \
            (pam_keychain's auto_create with tpm_enroll, which seals nothing without an escrow key), and \
            at `security tpm-enroll`, `create-keychain --tpm` and a key rotation.

            --key FILE ESCROW opens the escrow file ESCROW with the secret key in FILE and prints the \
            keychain's recovery key; its user then runs `security tpm-recover` with it (--no-tpm when \
            the TPM refuses to seal, as after its owner authorization was set by someone else).
            """)

    @Option(name: .customLong("new-key"), help: "Make a key pair: the secret key into this new file, the public key on standard output.")
    var newKey: String?
    @Option(name: .customLong("key"), help: "The secret key's file, to open an escrow with.")
    var key: String?
    @Argument(help: "The escrow file (KEYCHAIN.recovery-escrow).")
    var escrow: String?

    func run() throws {
        switch (newKey, key, escrow) {
        case (let file?, nil, nil):
            try perform(file) {
                var (pub, secret) = try RecoveryEscrow.makeKeyPair()
                defer { secret.wipe() }
                var text = Array((PEM.base64(secret) + "\n").utf8)
                defer { text.wipe() }
                let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw KeychainError(.io, "cannot make \(file): \(String(cString: strerror(errno)))") }
                let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                let synced = fsync(fd)
                close(fd)
                guard written == text.count, synced == 0 else {
                    unlink(file)
                    throw KeychainError(.io, "cannot write \(file)")
                }
                Terminal.out(PEM.base64(pub))
                Terminal.error(
                    "security: the secret key is in \(file) (keep it away from this machine); the public key \(RecoveryEscrow.fingerprint(pub)) above goes in \(RecoveryEscrow.machineFile)"
                )
            }
        case (nil, let file?, let escrow?):
            try perform(escrow) {
                var secret = try Self.secretKey(file)
                defer { secret.wipe() }
                guard let envelope = try RecoveryEscrow.envelope(at: escrow) else { throw KeychainError(.itemNotFound, "no such file") }
                var recovery = try envelope.open(secret: secret)
                defer { recovery.wipe() }
                showRecoveryKey(&recovery)
                Terminal.error(
                    "security: the recovery key of keychain \(envelope.uuid.hex) (`security tpm-recover` opens it with this key; it opens all but its ThisDeviceOnly items)"
                )
            }
        default:
            throw ValidationError("--new-key FILE, or --key FILE ESCROW")
        }
    }

    /// The secret key: a file its owner alone can read, one line of base64.
    static func secretKey(_ path: String) throws -> Bytes {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw KeychainError(.io, "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_mode & 0o077 == 0, st.st_size <= 256 else {
            throw KeychainError.param("\(path) must be a small file readable by its owner alone")
        }
        var text = Bytes(repeating: 0, count: 257)
        defer { text.wipe() }
        let count = read(fd, &text, text.count)
        guard count > 0 else { throw KeychainError(.io, "cannot read \(path)") }
        var line = Array(text[0..<count])
        defer { line.wipe() }
        while let last = line.last, last == 0x0a || last == 0x0d || last == 0x20 { line.removeLast() }
        guard let key = PEM.base64(decoding: line), key.count == 32 else {
            throw KeychainError.param("\(path) must hold one X25519 secret key in base64 (`security tpm-escrow --new-key` makes one)")
        }
        return key
    }
}
