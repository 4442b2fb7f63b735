import KeychainCore

/// The keychain's TPM operations (`TPMOperations`) through tpm2-tss, in the process that runs
/// them: keychain-tpm-helper. One connection per operation, closed (every transient object
/// flushed) before returning.
package struct LocalTPM: TPMOperations {
    let configuration: TPMConfiguration

    package init(configuration: TPMConfiguration) { self.configuration = configuration }

    func connected<T>(_ body: (TPMConnection) throws -> T) throws -> T {
        let connection = try TPMConnection(configuration)
        defer { connection.close() }
        do {
            return try body(connection)
        } catch TPMFailure.authorization {
            // The TPM's own count, read on the same connection after the failure.
            throw TPMFailure.authorization(try? connection.lockoutState())
        } catch TPMFailure.lockout {
            throw TPMFailure.lockout(try? connection.lockoutState())
        }
    }

    package func seal(_ secret: Bytes, auth: Bytes) throws -> TPMSealedSecret {
        try connected { connection in
            let (primary, name) = try connection.createPrimary()
            let (pub, priv) = try connection.seal(secret, auth: auth, parent: primary)
            var check = try connection.unseal(public: pub, private: priv, auth: auth, parent: primary, expectedLength: secret.count)
            defer { check.wipe() }
            guard equal(check, secret) else { throw TPMFailure.failed("the TPM unsealed another secret than the one it sealed") }
            return TPMSealedSecret(primaryName: name, sealedPublic: pub, sealedPrivate: priv)
        }
    }

    package func unseal(_ record: TPMSealedSecret, auth: Bytes, length: Int) throws -> Bytes {
        try connected { connection in
            let (primary, name) = try connection.createPrimary()
            // Before any authorization is sent: a TPM whose storage key is not the one recorded
            // cannot load the object anyway, and gets nothing derived from the password.
            guard equal(name, record.primaryName) else {
                throw TPMFailure.foreign("this TPM's storage key is not the one the keychain was sealed under")
            }
            return try connection.unseal(
                public: record.sealedPublic, private: record.sealedPrivate, auth: auth,
                parent: primary, expectedLength: length)
        }
    }

    package func seal(_ secret: Bytes, toPCRs pcrs: [UInt8]) throws -> TPMSealedSecret {
        try connected { connection in
            let (primary, name) = try connection.createPrimary()
            let (pub, priv) = try connection.seal(secret, toPCRs: pcrs, parent: primary)
            var check = try connection.unseal(public: pub, private: priv, pcrs: pcrs, parent: primary, expectedLength: secret.count)
            defer { check.wipe() }
            guard equal(check, secret) else { throw TPMFailure.failed("the TPM unsealed another secret than the one it sealed") }
            return TPMSealedSecret(primaryName: name, sealedPublic: pub, sealedPrivate: priv)
        }
    }

    package func unseal(_ record: TPMSealedSecret, pcrs: [UInt8], length: Int) throws -> Bytes {
        try connected { connection in
            let (primary, name) = try connection.createPrimary()
            guard equal(name, record.primaryName) else {
                throw TPMFailure.foreign("this TPM's storage key is not the one the keychain was sealed under")
            }
            return try connection.unseal(
                public: record.sealedPublic, private: record.sealedPrivate, pcrs: pcrs, parent: primary, expectedLength: length)
        }
    }

    package func seal(_ secret: Bytes, auth: Bytes, pcrs: [UInt8]) throws -> TPMSealedSecret {
        try connected { connection in
            let (primary, name) = try connection.createPrimary()
            let (pub, priv) = try connection.seal(secret, toPCRs: pcrs, auth: auth, parent: primary)
            var check = try connection.unseal(
                public: pub, private: priv, pcrs: pcrs, auth: auth, parent: primary, expectedLength: secret.count)
            defer { check.wipe() }
            guard equal(check, secret) else { throw TPMFailure.failed("the TPM unsealed another secret than the one it sealed") }
            return TPMSealedSecret(primaryName: name, sealedPublic: pub, sealedPrivate: priv, pcrs: pcrs)
        }
    }

    package func unseal(_ record: TPMSealedSecret, auth: Bytes, pcrs: [UInt8], length: Int) throws -> Bytes {
        try connected { connection in
            let (primary, name) = try connection.createPrimary()
            guard equal(name, record.primaryName) else {
                throw TPMFailure.foreign("this TPM's storage key is not the one the keychain was sealed under")
            }
            return try connection.unseal(
                public: record.sealedPublic, private: record.sealedPrivate, pcrs: pcrs, auth: auth, parent: primary,
                expectedLength: length)
        }
    }

    package func counter(_ request: TPMCounterRequest) throws -> TPMCounterAnswer {
        try connected { connection in
            switch request.action {
            case .find:
                guard let found = try connection.findCounter(auth: request.auth, candidates: request.candidates) else { return .none }
                return TPMCounterAnswer(index: found.index, value: found.value, protected: found.protected)
            case .findMatching(let expected):
                guard let found = try connection.findCounter(auth: request.auth, candidates: request.candidates, expected: expected) else { return .none }
                return TPMCounterAnswer(index: found.index, value: found.value, protected: found.protected)
            case .create:
                let (index, value, protected) = try connection.createCounter(auth: request.auth, candidates: request.candidates)
                return TPMCounterAnswer(index: index, value: value, protected: protected)
            case .migrate(let index, let expected):
                guard let (to, value) = try connection.migrateCounter(auth: request.auth, index: index, expected: expected, candidates: request.candidates)
                else { return .none }
                return TPMCounterAnswer(index: to, value: value, protected: true)
            case .increment(let index, let expected):
                return TPMCounterAnswer(index: index, value: try connection.incrementCounter(auth: request.auth, index: index, expected: expected))
            case .remove(let index):
                try connection.removeCounter(auth: request.auth, index: index)
                return .none
            }
        }
    }

    package func readPCRs(_ pcrs: [UInt8]) throws -> [Bytes] {
        try connected { try $0.readPCRs(pcrs) }
    }

    package func describe(primaryName: Bytes?) throws -> (TPMDescription, sealedHere: Bool?) {
        try connected { connection in
            let description = TPMDescription(
                tcti: connection.configuration, manufacturer: (try? connection.manufacturer()) ?? "?",
                lockout: try? connection.lockoutState())
            // An owner authorization someone set refuses the storage key: the description says so.
            guard let primaryName, let (primary, name) = try? connection.createPrimary() else { return (description, nil) }
            connection.flush(primary)
            return (description, equal(name, primaryName))
        }
    }

    /// In time that does not depend on where the inputs differ.
    private func equal(_ a: Bytes, _ b: Bytes) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
