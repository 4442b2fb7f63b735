/// The NIST curves of ecdsa-sha2-nistp*: SSH's curve name, OpenSSL's, the field's size, and the
/// hash RFC 5656 pairs with each.
package enum SSHCurve: String, CaseIterable, Sendable {
    case p256 = "nistp256"
    case p384 = "nistp384"
    case p521 = "nistp521"

    var fieldBytes: Int {
        switch self {
        case .p256: return 32
        case .p384: return 48
        case .p521: return 66
        }
    }

    var opensslName: String {
        switch self {
        case .p256: return "prime256v1"
        case .p384: return "secp384r1"
        case .p521: return "secp521r1"
        }
    }

    var digest: String {
        switch self {
        case .p256: return "SHA256"
        case .p384: return "SHA384"
        case .p521: return "SHA512"
        }
    }

    var keyType: String { "ecdsa-sha2-" + rawValue }

    static func named(keyType: String) -> SSHCurve? { allCases.first { $0.keyType == keyType } }
}

/// The key types the agent accepts; sk-* (security keys) and anything else are refused.
enum SSHKeyKind: Equatable {
    case ed25519
    case ecdsa(SSHCurve)
    case rsa

    static let certificateSuffix = "-cert-v01@openssh.com"

    /// The plain kind and whether `name` is its certificate form.
    static func parse(_ name: String) -> (SSHKeyKind, isCertificate: Bool)? {
        var base = name
        let isCertificate = name.hasSuffix(certificateSuffix)
        if isCertificate { base = String(name.dropLast(certificateSuffix.count)) }
        switch base {
        case "ssh-ed25519": return (.ed25519, isCertificate)
        case "ssh-rsa": return (.rsa, isCertificate)
        default: return SSHCurve.named(keyType: base).map { (.ecdsa($0), isCertificate) }
        }
    }

    var name: String {
        switch self {
        case .ed25519: return "ssh-ed25519"
        case .ecdsa(let curve): return curve.keyType
        case .rsa: return "ssh-rsa"
        }
    }
}

/// Bounds on what a peer may hand the agent.
package enum SSHLimits {
    static let minimumRSABits = 1024
    /// OpenSSH's SSHBUF_MAX_BIGNUM is 16384 bits.
    static let maximumRSABits = 16384
    /// A certificate larger than this is not one OpenSSH would make.
    static let maximumCertificate = 64 * 1024
}
