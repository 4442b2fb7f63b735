internal import CSodium
import Glibc
import KeychainCore

/// A sealed keychain's recovery key, sealed in turn (crypto_box_seal) to an administrator's
/// X25519 public key, in a file beside the keychain: the way back that does not depend on the
/// TPM's goodwill. Anyone who can reach the TPM can clear it (`tpm2_clear`, with the lockout
/// authorization empty, as Linux leaves it) or set its owner authorization (`tpm2_changeauth -c
/// o`); a keychain sealed at a first login, whose recovery key nobody saw, would then be lost.
/// Only the administrator's secret key opens the box; the box alone opens nothing, so it may sit
/// in the user's folder (the user can only delete or replace their own way back).
package enum RecoveryEscrow {
    /// The machine's escrow key, written by an administrator: one line, the X25519 public key in
    /// base64, in a root-owned file no one else can change (`security tpm-escrow --new-key`).
    nonisolated(unsafe) package static var machineFile = "/etc/keychain/recovery-escrow.pub"
    static let keyLength = 32
    static let magic = "keychain-recovery-escrow v1"
    static let boxLabel = "keychain-recovery-escrow-v1"
    /// An escrow file is a few hundred bytes; more is refused before it is parsed (root reads it).
    static let fileLimit = 4096

    /// Where the escrow of the keychain at `path` is kept.
    package static func file(for path: String) -> String { path + ".recovery-escrow" }

    /// The recipient in `file`, or nil when there is no such file (no escrow configured). A file
    /// that is there but not root's alone to change, or not one key, is an error: a recovery key
    /// escrowed to a key someone else put there would be theirs.
    package static func recipient(file: String) throws -> Bytes? {
        guard let text = try readSmall(file, requireRoot: true) else { return nil }
        guard let key = PEM.base64(decoding: trimmed(text)), key.count == keyLength else {
            throw KeychainError.param("\(file) must hold one X25519 public key in base64 (`security tpm-escrow --new-key` makes one)")
        }
        return key
    }

    /// A new key pair: the secret for the administrator to keep away from the machine.
    package static func makeKeyPair() throws -> (public: Bytes, secret: Bytes) {
        var pub = Bytes(repeating: 0, count: keyLength), secret = Bytes(repeating: 0, count: keyLength)
        guard Crypto.sodiumReady, crypto_box_keypair(&pub, &secret) == 0 else { throw KeychainError(.io, "cannot make a key pair") }
        return (pub, secret)
    }

    /// The escrow of `key`, the recovery key of the keychain `uuid` whose class key A checks as
    /// `checkA`, to `recipient`: the file's text. The uuid is inside the box too, so a box moved
    /// to another keychain's file is seen for what it is when opened.
    static func envelope(key: RecoveryKey, uuid: Bytes, checkA: Bytes, recipient: Bytes) throws -> Bytes {
        var plain = plaintext(key: key, uuid: uuid)
        defer { plain.wipe() }
        var box = Bytes(repeating: 0, count: plain.count + Int(crypto_box_sealbytes()))
        guard Crypto.sodiumReady, recipient.count == keyLength, crypto_box_seal(&box, plain, UInt64(plain.count), recipient) == 0 else {
            throw KeychainError(.io, "cannot seal the recovery key to the escrow key")
        }
        let lines = [
            magic, "keychain: \(uuid.hex)", "keys: \(checkA.hex)", "recipient: \(PEM.base64(recipient))", "box: \(PEM.base64(box))"
        ]
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    static func plaintext(key: RecoveryKey, uuid: Bytes) -> Bytes {
        var w = ByteWriter()
        w.string(boxLabel)
        w.blob(uuid)
        w.blob(key.bytes)
        return w.bytes
    }

    /// What an escrow file says without the secret key.
    package struct Envelope: Equatable {
        package var uuid: Bytes
        /// The key check value of class key A when the recovery key was escrowed: a rotation since
        /// (a new recovery key) makes it stale.
        package var checkA: Bytes
        package var recipient: Bytes
        var box: Bytes

        package init(parsing text: Bytes) throws {
            var fields: [String: Bytes] = [:]
            let lines = text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
            guard lines.first.map({ String(decoding: $0, as: UTF8.self) }) == RecoveryEscrow.magic else {
                throw KeychainError.decode("not a keychain recovery escrow file")
            }
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw KeychainError.decode("a damaged recovery escrow file") }
                fields[String(decoding: line[line.startIndex..<colon], as: UTF8.self)] = RecoveryEscrow.trimmed(Array(line[(colon + 1)...]))
            }
            guard let uuid = fields["keychain"].flatMap({ Bytes(hexDigits: $0) }), uuid.count == 16,
                let checkA = fields["keys"].flatMap({ Bytes(hexDigits: $0) }), checkA.count == 16,
                let recipient = fields["recipient"].flatMap({ PEM.base64(decoding: $0) }), recipient.count == RecoveryEscrow.keyLength,
                let box = fields["box"].flatMap({ PEM.base64(decoding: $0) }), box.count > Int(crypto_box_sealbytes())
            else { throw KeychainError.decode("a damaged recovery escrow file") }
            self.uuid = uuid
            self.checkA = checkA
            self.recipient = recipient
            self.box = box
        }

        /// The recovery key, with the secret key of the recipient; errSecAuthFailed for another key.
        package func open(secret: Bytes) throws -> RecoveryKey {
            var derived = Bytes(repeating: 0, count: RecoveryEscrow.keyLength)
            defer { derived.wipe() }
            guard Crypto.sodiumReady, secret.count == RecoveryEscrow.keyLength, crypto_scalarmult_base(&derived, secret) == 0 else {
                throw KeychainError.param("an escrow secret key is 32 bytes")
            }
            guard Crypto.equal(derived, recipient) else {
                throw KeychainError(.authFailed, "this escrow was sealed to another key (recipient \(RecoveryEscrow.fingerprint(recipient)))")
            }
            var plain = Bytes(repeating: 0, count: box.count - Int(crypto_box_sealbytes()))
            defer { plain.wipe() }
            guard crypto_box_seal_open(&plain, box, UInt64(box.count), recipient, secret) == 0 else {
                throw KeychainError(.authFailed, "the escrow's box does not open with this key (damaged or changed)")
            }
            var r = ByteReader(plain)
            guard (try? r.string()) == RecoveryEscrow.boxLabel, let inner = try? r.blob(), var key = try? r.blob(), r.isAtEnd else {
                throw KeychainError.decode("the escrow's box holds something else than a recovery key")
            }
            defer { key.wipe() }
            guard Crypto.equal(inner, uuid), key.count == RecoveryKey.byteCount else {
                throw KeychainError.decode("the escrow's box is another keychain's (its file was moved or changed)")
            }
            return RecoveryKey(bytes: key)
        }
    }

    /// The escrow file at `path`, read as root may read a file in a user's folder: not through a
    /// link, a regular file, bounded.
    package static func envelope(at path: String) throws -> Envelope? {
        guard let text = try readSmall(path, requireRoot: false) else { return nil }
        return try Envelope(parsing: text)
    }

    /// A short name for a public key, to tell which administrator's key an escrow is for.
    package static func fingerprint(_ key: Bytes) -> String { "SHA256:" + String(PEM.base64(Crypto.sha256(key)).prefix(16)) }

    static func trimmed(_ text: Bytes) -> Bytes {
        var slice = text[...]
        while let first = slice.first, first == 0x20 || first == 0x09 || first == 0x0a || first == 0x0d { slice.removeFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 || last == 0x0a || last == 0x0d { slice.removeLast() }
        return Array(slice)
    }

    /// The file's bytes; nil when it does not exist. `requireRoot`: it and its folder are root's,
    /// writable by no one else.
    static func readSmall(_ path: String, requireRoot: Bool) throws -> Bytes? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw KeychainError(.io, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size <= fileLimit else {
            throw KeychainError.param("\(path) must be a small regular file")
        }
        if requireRoot {
            let folder = String(path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/"))
            var parent = stat()
            guard st.st_uid == 0, st.st_mode & 0o022 == 0, lstat(folder.isEmpty ? "/" : folder, &parent) == 0,
                parent.st_mode & S_IFMT == S_IFDIR, parent.st_uid == 0, parent.st_mode & 0o022 == 0
            else { throw KeychainError.param("\(path) and its folder must be root's, writable by no one else") }
        }
        var bytes = Bytes(repeating: 0, count: fileLimit + 1)
        let count = read(fd, &bytes, bytes.count)
        guard count >= 0, count <= fileLimit else { throw KeychainError(.io, "cannot read \(path)") }
        return Array(bytes[0..<count])
    }
}

/// What `security tpm-status` says of a keychain's escrow.
package enum RecoveryEscrowState: Equatable {
    case none
    /// Escrowed to `recipient`, for the recovery key of the current class keys.
    case current(recipient: Bytes)
    /// An escrow of an older recovery key (a rotation since), or of another keychain.
    case stale(recipient: Bytes)
    case damaged(String)

    package var isCurrent: Bool {
        if case .current = self { return true }
        return false
    }
}

extension KeychainStore {
    /// Escrows `key`, this sealed keychain's recovery key, to `recipient` beside the keychain.
    package func escrowRecoveryKey(_ key: RecoveryKey, to recipient: Bytes) throws {
        let (uuid, checkA) = withLock { (keybag.uuid, keybag.checkA) }
        let text = try RecoveryEscrow.envelope(key: key, uuid: uuid, checkA: checkA, recipient: recipient)
        try PlainFiles.replace(RecoveryEscrow.file(for: path), with: text, mode: 0o600)
    }

    /// Escrows `key`, a new recovery key of this keychain, to the machine's escrow key
    /// (`RecoveryEscrow.machineFile`), else to the key its escrow was for (one a PAM service's
    /// `tpm_escrow=` named): a rotation or a new enrolment keeps the way back it had. Returns the
    /// recipient, nil when there is none.
    package func escrowRecoveryKeyIfConfigured(_ key: RecoveryKey) throws -> Bytes? {
        let previous = try? RecoveryEscrow.envelope(at: RecoveryEscrow.file(for: path))
        guard let recipient = try RecoveryEscrow.recipient(file: RecoveryEscrow.machineFile) ?? previous?.recipient else { return nil }
        try escrowRecoveryKey(key, to: recipient)
        return recipient
    }

    /// For an unlocked sealed keychain whose recovery key nobody saw and that has no current
    /// escrow (sealed at a first login before escrows, or before the machine had a key): a new
    /// recovery key, escrowed to `recipient`. The old one was wiped when it was made, so nothing
    /// anyone holds stops working. Returns whether it renewed one.
    package func escrowUnshownRecoveryKey(to recipient: Bytes) throws -> Bool {
        guard isSealedToTPM, recoveryKeyUnshown, !recoveryEscrowState.isCurrent else { return false }
        var key = try RecoveryKey.generate()
        defer { key.wipe() }
        try withLock {
            guard var a = heldClassKey(.whenUnlocked), var c = heldClassKey(.afterFirstUnlock) else {
                throw KeychainError(.interactionNotAllowed, "the keychain is locked")
            }
            defer { a.wipe(); c.wipe() }
            try db.transaction {
                var bag = try Keybag.load(from: db)
                guard var binding = bag.binding,
                    Crypto.equal(Keybag.keyCheck(a, uuid: bag.uuid, .whenUnlocked), bag.checkA),
                    Crypto.equal(Keybag.keyCheck(c, uuid: bag.uuid, .afterFirstUnlock), bag.checkC)
                else { throw KeychainError.decode("the keychain's keys changed under this process") }
                binding.recovery = try RecoveryRecord.make(a: a, c: c, for: bag, key: key).bytes
                bag.binding = binding
                try bag.save(to: db)
                adopt(bag)
            }
        }
        try escrowRecoveryKey(key, to: recipient)
        return true
    }

    /// The escrow opens nothing once the binding is gone.
    package func removeRecoveryEscrow() {
        unlink(RecoveryEscrow.file(for: path))
    }

    package var recoveryEscrowState: RecoveryEscrowState {
        let envelope: RecoveryEscrow.Envelope?
        do {
            envelope = try RecoveryEscrow.envelope(at: RecoveryEscrow.file(for: path))
        } catch let error as KeychainError {
            return .damaged(error.detail)
        } catch {
            return .damaged("\(error)")
        }
        guard let envelope else { return .none }
        let (uuid, checkA) = withLock { (keybag.uuid, keybag.checkA) }
        return Crypto.equal(envelope.uuid, uuid) && Crypto.equal(envelope.checkA, checkA)
            ? .current(recipient: envelope.recipient) : .stale(recipient: envelope.recipient)
    }
}
