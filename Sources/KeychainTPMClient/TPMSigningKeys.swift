import KeychainCore

/// An ECDSA P-256 key made inside the TPM: its public point and the blob that only this TPM can
/// load (TPM2B_PUBLIC || TPM2B_PRIVATE, marshalled). The private key never leaves the TPM.
package struct TPMSigningKey: Sendable, Equatable {
    /// X9.63 uncompressed: 04 || X || Y, 65 bytes.
    package let publicPoint: Bytes
    package let blob: Bytes

    package init(publicPoint: Bytes, blob: Bytes) {
        self.publicPoint = publicPoint
        self.blob = blob
    }
}

/// Why a TPM signing key could not be made or used, in words a person can act on.
package enum TPMSigningKeyError: Error, Equatable, CustomStringConvertible {
    /// No TPM configured or reachable, or keychain-tpm-helper missing.
    case noTPM(String)
    /// The blob does not load under this TPM's storage key: made by another TPM, or this one's
    /// owner hierarchy was cleared.
    case otherTPM(String)
    /// The TPM refused, did not answer in time, or the blob or an answer is malformed.
    case failed(String)

    package var description: String {
        switch self {
        case .noTPM(let why): why.hasPrefix("no TPM") ? why : "no TPM: \(why)"
        case .otherTPM(let why): why
        case .failed(let why): why
        }
    }
}

/// What keychain-tpm-helper does for `TPMSigningKeys` (KeychainTPM's `LocalTPM`).
package protocol TPMSigningOperations {
    func createSigningKey() throws -> (point: Bytes, blob: Bytes)
    func sign(digest: Bytes, blob: Bytes) throws -> (r: Bytes, s: Bytes)
}

/// ECDSA P-256 keys inside the TPM, through keychain-tpm-helper as the keychain's sealing goes:
/// one helper process per call, within the same time limit (`TPMDeadline`, $KEYCHAIN_TPM_TIMEOUT).
package enum TPMSigningKeys {
    /// One operation at a time in this process (the agent signs for several connections): a TPM
    /// without a resource manager (swtpm over TCP) has three or so object slots, and two helpers'
    /// primaries and keys at once overflow them (TPM_RC_OBJECT_MEMORY). A TPM runs one command at
    /// a time anyway; the kernel's resource manager only queues them too.
    private static let serial = Mutex()

    package static func create(_ configuration: TPMConfiguration = .current) throws -> TPMSigningKey {
        try explained {
            var request = TPMHelperWire.request(TPMSigningWire.create, configuration)
            return try HelperTPM.reaching(configuration).exchange(&request) { reply in
                let key = TPMSigningKey(publicPoint: try reply.blob(), blob: try reply.blob())
                guard reply.isAtEnd, key.publicPoint.count == 65, key.publicPoint.first == 0x04, !key.blob.isEmpty else {
                    throw TPMFailure.failed("\(HelperTPM.name) answered something unexpected")
                }
                return key
            }
        }
    }

    /// The ECDSA signature of a SHA-256 `digest` by the key in `blob`: r and s, 32 bytes each,
    /// big-endian unsigned.
    package static func sign(digest: Bytes, with blob: Bytes, _ configuration: TPMConfiguration = .current) throws -> (r: Bytes, s: Bytes) {
        guard digest.count == 32 else { throw TPMSigningKeyError.failed("a SHA-256 digest is 32 bytes, not \(digest.count)") }
        return try explained {
            var request = TPMHelperWire.request(TPMSigningWire.sign, configuration)
            request.blob(blob)
            request.blob(digest)
            return try HelperTPM.reaching(configuration).exchange(&request) { reply in
                let (r, s) = (try reply.blob(), try reply.blob())
                guard reply.isAtEnd, r.count == 32, s.count == 32 else { throw TPMFailure.failed("\(HelperTPM.name) answered something unexpected") }
                return (r, s)
            }
        }
    }

    private static func explained<T>(_ body: () throws -> T) throws -> T {
        do {
            return try serial.withLock(body)
        } catch let failure as TPMFailure {
            switch failure {
            case .unavailable(let why): throw TPMSigningKeyError.noTPM(why)
            case .foreign(let why): throw TPMSigningKeyError.otherTPM(why)
            case .failed(let why), .bootState(let why): throw TPMSigningKeyError.failed(why)
            case .authorization, .lockout: throw TPMSigningKeyError.failed("the TPM refused to use the key (dictionary-attack protection)")
            }
        }
    }
}

/// The two operations' requests and answers, on `TPMHelperWire`: create (no fields) answers the
/// point and the blob; sign (the blob, the digest) answers r and s.
enum TPMSigningWire {
    static let create = "sign-key-create"
    static let sign = "sign-key-sign"

    /// The helper's side: `finish` reads the request's time limit and checks nothing follows.
    static func serve(
        _ operation: String, _ r: inout ByteReader, _ tpm: TPMOperations, _ w: inout ByteWriter, finish: (inout ByteReader) throws -> Void
    ) throws {
        guard let signer = tpm as? TPMSigningOperations else { throw TPMFailure.failed("this helper makes no signing keys") }
        switch operation {
        case create:
            try finish(&r)
            let (point, blob) = try signer.createSigningKey()
            w.blob(point)
            w.blob(blob)
        default:
            let blob = try r.blob()
            let digest = try r.blob()
            try finish(&r)
            guard digest.count == 32, !blob.isEmpty else { throw TPMFailure.failed("malformed request") }
            let (rValue, sValue) = try signer.sign(digest: digest, blob: blob)
            w.blob(rValue)
            w.blob(sValue)
        }
    }
}

extension HelperTPM {
    /// The helper for `configuration`: the one it names (pam_keychain's `tpm_helper=`) if it
    /// passes `acceptable`, else the first found by `locate`.
    static func reaching(_ configuration: TPMConfiguration) throws -> HelperTPM {
        guard configuration.tcti != nil else { throw TPMFailure.unavailable(configuration.absence) }
        guard let helper = configuration.helper.map({ acceptable($0) ? $0 : "" }) ?? locate(), !helper.isEmpty else {
            throw TPMFailure.unavailable("\(name) is not installed (this program reaches the TPM through it)")
        }
        return HelperTPM(configuration: configuration, path: helper)
    }
}
