import KeychainCore
internal import CSodium

/// A device's own key pairs: Ed25519 signs what it writes (the group manifest, its records), X25519
/// receives the sync key sealed for it (crypto_box_seal). The secret halves never leave the
/// keychain item of class AfterFirstUnlockThisDeviceOnly they are stored in.
package struct SyncDeviceKeys: Sendable {
    package var deviceID: Bytes
    package var signPublic: Bytes
    var signSecret: Bytes
    package var boxPublic: Bytes
    var boxSecret: Bytes

    static func generate() throws -> SyncDeviceKeys {
        _ = try Crypto.random(1)  // libsodium initialized
        var signPublic = Bytes(repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
        var signSecret = Bytes(repeating: 0, count: Int(crypto_sign_SECRETKEYBYTES))
        var boxPublic = Bytes(repeating: 0, count: Int(crypto_box_PUBLICKEYBYTES))
        var boxSecret = Bytes(repeating: 0, count: Int(crypto_box_SECRETKEYBYTES))
        guard crypto_sign_keypair(&signPublic, &signSecret) == 0, crypto_box_keypair(&boxPublic, &boxSecret) == 0 else {
            throw KeychainError(.allocate, "cannot make the device's key pairs")
        }
        return SyncDeviceKeys(deviceID: try Crypto.random(16), signPublic: signPublic, signSecret: signSecret, boxPublic: boxPublic, boxSecret: boxSecret)
    }

    var publicDevice: SyncDevice { SyncDevice(id: deviceID, signPublic: signPublic, boxPublic: boxPublic) }

    func sign(_ message: Bytes) -> Bytes {
        var signature = Bytes(repeating: 0, count: Int(crypto_sign_BYTES))
        _ = crypto_sign_detached(&signature, nil, message, UInt64(message.count), signSecret)
        return signature
    }

    /// Opens a key sealed for this device by `SyncDevice.sealForDevice`.
    func openSealed(_ sealed: Bytes) throws -> Bytes {
        guard sealed.count > Int(crypto_box_sealbytes()) else { throw KeychainError.decode("sealed key too short") }
        var plain = Bytes(repeating: 0, count: sealed.count - Int(crypto_box_sealbytes()))
        guard crypto_box_seal_open(&plain, sealed, UInt64(sealed.count), boxPublic, boxSecret) == 0 else {
            throw KeychainError.decode("the sync key sealed for this device does not open")
        }
        return plain
    }

    func encoded() -> Bytes {
        var w = ByteWriter()
        for part in [deviceID, signPublic, signSecret, boxPublic, boxSecret] { w.blob(part) }
        return w.bytes
    }

    static func decode(_ bytes: Bytes) throws -> SyncDeviceKeys {
        var r = ByteReader(bytes)
        let keys = SyncDeviceKeys(deviceID: try r.blob(), signPublic: try r.blob(), signSecret: try r.blob(), boxPublic: try r.blob(), boxSecret: try r.blob())
        guard r.isAtEnd, keys.deviceID.count == 16, keys.signPublic.count == 32, keys.signSecret.count == 64,
            keys.boxPublic.count == 32, keys.boxSecret.count == 32
        else { throw KeychainError.decode("the device's sync keys are damaged") }
        return keys
    }
}

/// A device as the group knows it: its id and public keys.
package struct SyncDevice: Sendable, Equatable {
    package var id: Bytes
    package var signPublic: Bytes
    package var boxPublic: Bytes

    func verify(_ signature: Bytes, of message: Bytes) -> Bool {
        signature.count == Int(crypto_sign_BYTES) && signPublic.count == Int(crypto_sign_PUBLICKEYBYTES)
            && crypto_sign_verify_detached(signature, message, UInt64(message.count), signPublic) == 0
    }

    /// `secret` sealed so that only this device's X25519 secret key opens it.
    func sealForDevice(_ secret: Bytes) throws -> Bytes {
        guard boxPublic.count == Int(crypto_box_PUBLICKEYBYTES) else { throw KeychainError.decode("bad device key") }
        var out = Bytes(repeating: 0, count: secret.count + Int(crypto_box_sealbytes()))
        guard crypto_box_seal(&out, secret, UInt64(secret.count), boxPublic) == 0 else { throw KeychainError(.allocate, "sealing failed") }
        return out
    }

    func write(to w: inout ByteWriter) {
        w.blob(id)
        w.blob(signPublic)
        w.blob(boxPublic)
    }

    static func read(from r: inout ByteReader) throws -> SyncDevice {
        let device = SyncDevice(id: try r.blob(), signPublic: try r.blob(), boxPublic: try r.blob())
        guard device.id.count == 16, device.signPublic.count == 32, device.boxPublic.count == 32 else {
            throw KeychainError.decode("a device entry is malformed")
        }
        return device
    }
}
