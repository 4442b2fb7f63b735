import KeychainCore
internal import CSodium

/// What the group's devices sign: a magic, the record's fields, then the signature over both.
/// The manifest and the sealed sync keys share this one shape on the wire.
protocol SignedSyncRecord {
    static var magic: Bytes { get }
    var signature: Bytes { get set }
    func writeFields(to w: inout ByteWriter)
}

extension SignedSyncRecord {
    var signedPart: Bytes {
        var w = ByteWriter()
        writeFields(to: &w)
        return Self.magic + w.bytes
    }

    func encoded() -> Bytes {
        var w = ByteWriter()
        w.blob(signature)
        return signedPart + w.bytes
    }

    /// `fields` reads the record's fields after the magic; the signature must end the bytes.
    static func decodeSigned(_ bytes: Bytes, notA: String, malformed: String, _ fields: (inout ByteReader) throws -> Self) throws -> Self {
        guard bytes.starts(with: magic) else { throw KeychainError.decode(notA) }
        var r = ByteReader(Array(bytes.dropFirst(magic.count)))
        var record = try fields(&r)
        record.signature = try r.blob()
        guard r.isAtEnd else { throw KeychainError.decode(malformed) }
        return record
    }
}

/// The signed list of a sync group's devices (`group` in the repository): who may write, whose
/// public keys the sync key is sealed to, and which key epoch is current. `serial` grows with
/// every change, so an older manifest put back (one that still lists a removed device) is refused.
/// Its signer must be a device of the manifest this device last accepted: the remote cannot add
/// a device of its own.
package struct SyncManifest: SignedSyncRecord, Sendable, Equatable {
    package var group: Bytes
    package var serial: UInt64
    package var epoch: UInt32
    package var devices: [SyncDevice]
    package var signer: Bytes
    var signature: Bytes = []

    static let magic = Array("KCSG".utf8)

    func writeFields(to w: inout ByteWriter) {
        w.blob(group)
        w.u64(serial)
        w.u32(epoch)
        w.u32(UInt32(devices.count))
        for device in devices { device.write(to: &w) }
        w.blob(signer)
    }

    mutating func sign(with keys: SyncDeviceKeys) {
        signer = keys.deviceID
        signature = keys.sign(signedPart)
    }

    package func device(_ id: Bytes) -> SyncDevice? { devices.first { $0.id == id } }

    /// Parses and checks that a device it lists signed it (what a joining device can check).
    static func decode(_ bytes: Bytes) throws -> SyncManifest {
        let manifest = try decodeSigned(bytes, notA: "not a sync group manifest", malformed: "the manifest is malformed") { r in
            let group = try r.blob()
            let serial = try r.u64()
            let epoch = try r.u32()
            let count = try r.u32()
            guard count <= 1024 else { throw KeychainError.decode("too many devices in the manifest") }
            var devices: [SyncDevice] = []
            for _ in 0..<count { devices.append(try SyncDevice.read(from: &r)) }
            return SyncManifest(group: group, serial: serial, epoch: epoch, devices: devices, signer: try r.blob())
        }
        guard manifest.group.count == 16 else { throw KeychainError.decode("the manifest is malformed") }
        guard let signer = manifest.device(manifest.signer), signer.verify(manifest.signature, of: manifest.signedPart) else {
            throw KeychainError.decode("the manifest is not signed by one of its devices")
        }
        return manifest
    }

    /// Whether `self` may follow `trusted`: same group, a later serial, an epoch that never goes
    /// back, signed by a device `trusted` lists.
    func follows(_ trusted: SyncManifest) -> Bool {
        guard group == trusted.group, serial > trusted.serial, epoch >= trusted.epoch,
            let signer = trusted.device(self.signer), signer.verify(signature, of: signedPart)
        else { return false }
        return true
    }
}

/// `keys/<device id hex>`: the current epoch's sync key sealed to one device's X25519 key, signed
/// by the device that sealed it (a device of the manifest).
struct SealedSyncKey: SignedSyncRecord {
    var group: Bytes
    var epoch: UInt32
    var device: Bytes
    var sealed: Bytes
    var signer: Bytes
    var signature: Bytes = []

    static let magic = Array("KCSK".utf8)

    func writeFields(to w: inout ByteWriter) {
        w.blob(group)
        w.u32(epoch)
        w.blob(device)
        w.blob(sealed)
        w.blob(signer)
    }

    static func make(group: Bytes, epoch: UInt32, key: Bytes, for device: SyncDevice, by signer: SyncDeviceKeys) throws -> SealedSyncKey {
        var sealed = SealedSyncKey(group: group, epoch: epoch, device: device.id, sealed: try device.sealForDevice(key), signer: signer.deviceID)
        sealed.signature = signer.sign(sealed.signedPart)
        return sealed
    }

    static func decode(_ bytes: Bytes) throws -> SealedSyncKey {
        try decodeSigned(bytes, notA: "not a sealed sync key", malformed: "a sealed sync key is malformed") { r in
            SealedSyncKey(group: try r.blob(), epoch: try r.u32(), device: try r.blob(), sealed: try r.blob(), signer: try r.blob())
        }
    }

    /// The sync key, if a device of `manifest` sealed it for `keys` under `manifest`'s epoch.
    func open(_ keys: SyncDeviceKeys, manifest: SyncManifest) throws -> Bytes {
        guard group == manifest.group, device == keys.deviceID, epoch == manifest.epoch,
            let signer = manifest.device(self.signer), signer.verify(signature, of: signedPart)
        else { throw KeychainError.decode("the sealed sync key is not one the group's devices made for this device") }
        let key = try keys.openSealed(sealed)
        guard key.count == Crypto.keyLength else { throw KeychainError.decode("the sealed sync key is malformed") }
        return key
    }
}

/// `requests/<random hex>`: a device asking to join. It carries the device's public keys and the
/// digest of the manifest it cloned; the short code both devices show covers all of them, so the
/// person comparing codes confirms both the new device's keys and the group state it saw.
package struct JoinRequest: Sendable {
    package var group: Bytes
    package var device: SyncDevice
    package var manifestDigest: Bytes
    var signature: Bytes = []

    static let magic = Array("KCSJ".utf8)

    var signedPart: Bytes {
        var w = ByteWriter()
        w.blob(group)
        device.write(to: &w)
        w.blob(manifestDigest)
        return Self.magic + w.bytes
    }

    func encoded() -> Bytes {
        var w = ByteWriter()
        w.blob(signature)
        return signedPart + w.bytes
    }

    static func decode(_ bytes: Bytes) throws -> JoinRequest {
        guard bytes.starts(with: magic) else { throw KeychainError.decode("not a join request") }
        var r = ByteReader(Array(bytes.dropFirst(magic.count)))
        var request = JoinRequest(group: try r.blob(), device: try SyncDevice.read(from: &r), manifestDigest: try r.blob())
        request.signature = try r.blob()
        guard r.isAtEnd, request.device.verify(request.signature, of: request.signedPart) else {
            throw KeychainError.decode("a join request is malformed or not signed by its device")
        }
        return request
    }

    /// Eight digits from a hash of everything the request says.
    /// The code both devices show, from everything the request says (`SyncCode`).
    package var code: String { get throws { try SyncCode.derive(signedPart, purpose: "keychain sync code") } }

    /// A code as a person may type it: digits only.
    package static func normalizedCode(_ text: String) -> String { SyncCode.normalized(text) }
}

/// The short codes a person carries between two devices: the join code (new device to member)
/// and the confirmation (member to new device, covering the manifest that added it). Ten digits
/// ("12345-67890") from Argon2id (64 MiB) of what they cover. Slow on purpose: whoever can write
/// to the remote sees what a code covers and could otherwise make a request or a manifest of their
/// own showing the same code (some field is always theirs to vary) and swap it in before the
/// person types it; each try now costs a memory-hard hash, and a match needs about 10^10.
package enum SyncCode {
    static func derive(_ bytes: Bytes, purpose: String) throws -> String {
        let password = Crypto.sha256(Array(purpose.utf8) + [0] + bytes)
        let salt = Array(Crypto.sha256(Array((purpose + " salt").utf8) + [0] + bytes).prefix(Int(crypto_pwhash_saltbytes())))
        var out = Bytes(repeating: 0, count: 16)  // crypto_pwhash_BYTES_MIN
        let rc = password.withUnsafeBufferPointer { p in
            p.withMemoryRebound(to: CChar.self) { chars in
                crypto_pwhash(
                    &out, UInt64(out.count), chars.baseAddress!, UInt64(chars.count), salt, UInt64(crypto_pwhash_opslimit_interactive()),
                    crypto_pwhash_memlimit_interactive(), crypto_pwhash_alg_argon2id13())
            }
        }
        guard rc == 0 else { throw KeychainError(.allocate, "cannot compute the code (Argon2id needs 64 MiB)") }
        var n: UInt64 = 0
        for b in out.prefix(8) { n = n << 8 | UInt64(b) }
        let digits = String(n % 10_000_000_000)
        let padded = String(repeating: "0", count: 10 - digits.count) + digits
        return padded.prefix(5) + "-" + padded.suffix(5)
    }

    package static func normalized(_ text: String) -> String { String(text.filter(\.isNumber)) }

    /// What `approve` shows and `confirm` checks: the manifest that added the device, and its id.
    static func confirmation(manifest: Bytes, device: Bytes) throws -> String {
        try derive(manifest + device, purpose: "keychain sync confirmation")
    }
}
