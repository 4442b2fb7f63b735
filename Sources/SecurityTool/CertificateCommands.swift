import ArgumentParser
import Glibc
import KeychainCore

/// The certificates of a keychain with their parsed form, oldest first; none is not an error here.
enum StoredCertificates {
    static func all(in store: KeychainStore) throws -> [(item: Item, certificate: Certificate)] {
        var query = Query(itemClass: .certificate)
        query.synchronizable = .any
        do {
            return try store.find(query, limit: nil, includeSecret: true).map { ($0, try Certificate(der: $0.secret ?? [])) }
        } catch let error as KeychainError where error.code == .itemNotFound {
            return []
        }
    }

    /// macOS's -c: the common name contains `name`, ignoring case.
    static func commonName(_ certificate: Certificate, contains name: String) -> Bool {
        certificate.commonName?.lowercased().contains(name.lowercased()) ?? false
    }

    static func hex(_ bytes: Bytes) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }
}

struct FindCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "find-certificate", abstract: "Find certificates.")

    @Flag(name: .customShort("a"), help: "Find all matching certificates, not just the first one.") var all = false
    @Option(name: .customShort("c"), parsing: .unconditional, help: "Match on a common name containing this text (any case).") var name: String?
    @Option(name: .customShort("e"), parsing: .unconditional, help: "Match on this email address.") var email: String?
    @Flag(name: .customShort("m"), help: "Show the email addresses in the certificate.") var showEmail = false
    @Flag(name: .customShort("p"), help: "Output the certificate in PEM form.") var pem = false
    @Flag(name: .customShort("Z"), help: "Print the SHA-256 and SHA-1 hashes of the certificate.") var hashes = false
    @OptionGroup var target: KeychainListArgument

    func run() throws {
        try perform("find-certificate") {
            var found = try target.all { try StoredCertificates.all(in: $0) }.filter { entry, _ in
                if let name, !StoredCertificates.commonName(entry.certificate, contains: name) { return false }
                if let email, !entry.certificate.emailAddresses.contains(where: { $0.lowercased() == email.lowercased() }) { return false }
                return true
            }
            guard !found.isEmpty else { throw KeychainError(.itemNotFound) }
            if !all { found = [found[0]] }
            for ((item, certificate), store) in found {
                if hashes {
                    Terminal.out("SHA-256 hash: " + StoredCertificates.hex(certificate.sha256))
                    Terminal.out("SHA-1 hash: " + StoredCertificates.hex(certificate.sha1))
                }
                if showEmail { Terminal.out("email addresses: " + certificate.emailAddresses.joined(separator: ", ")) }
                if pem {
                    Terminal.out(PEM.encode(certificate.der, label: "CERTIFICATE"), terminator: "")
                } else {
                    Terminal.out(ItemFormat.describe(item, keychain: store.path))
                }
            }
        }
    }
}

struct FindIdentity: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-identity",
        abstract: "Find identities: certificates whose private key is in the keychain.",
        discussion: "Valid means within the certificate's validity dates; trust settings are not kept by this keychain.")

    @Option(
        name: .customShort("p"), parsing: .unconditionalSingleValue,
        help:
            "Policy (basic, ssl-client, ssl-server, smime, eap, ipsec, ichat, codesigning, sys-default, sys-kerberos-kdc, appleID, macappstore): shown, not evaluated; may be repeated."
    )
    var policies: [String] = []
    @Option(name: .customShort("s"), parsing: .unconditional, help: "Only identities whose certificate names this host or email address.") var string: String?
    @Flag(name: .customShort("v"), help: "Show valid identities only.") var validOnly = false
    @OptionGroup var target: KeychainListArgument

    /// identity_find.m's policies, in the order it searches them whatever the order of -p.
    static let policyNames: [(String, String)] = [
        ("ssl-client", "SSL"), ("ssl-server", "SSL"), ("smime", "S/MIME"), ("eap", "EAP"), ("ipsec", "IPSec"),
        ("ichat", "iChat"), ("codesigning", "Code Signing"), ("basic", "X.509 Basic"), ("sys-default", "System Default"),
        ("sys-kerberos-kdc", "System Kerberos KDC"), ("appleID", "AppleID Sharing"), ("macappstore", "Mac App Store Receipt")
    ]

    func validate() throws {
        for policy in policies where !Self.policyNames.contains(where: { $0.0 == policy }) {
            throw ValidationError("unknown policy \(policy)")
        }
    }

    func run() throws {
        try perform("find-identity") {
            var query = Query(itemClass: .identity)
            query.synchronizable = .any
            var identities: [(Identity, Certificate)] = try target.all { store in
                try store.findIdentities(query, limit: nil).map { ($0, try Certificate(der: $0.certificate.secret ?? [])) }
            }.map(\.0)
            if let string {
                let wanted = string.lowercased()
                identities = identities.filter { _, certificate in
                    certificate.subjectValues.contains { $0.lowercased().contains(wanted) }
                        || certificate.emailAddresses.contains { $0.lowercased() == wanted }
                }
            }
            let now = SystemClock.now()
            if let string { Terminal.out("Looking for identities matching \"\(string)\"") }
            let wanted = policies.isEmpty ? ["basic"] : policies
            for (policy, policyName) in Self.policyNames where wanted.contains(policy) {
                // identity_find.m prints the headers only without -v, so that
                // `find-identity -v -p codesigning | head -1` is the first identity.
                if !validOnly {
                    Terminal.out("")
                    Terminal.out("Policy: \(policyName)")
                    Terminal.out("  Matching identities")
                    for (index, (_, certificate)) in identities.enumerated() {
                        Terminal.out(line(index, certificate, problem: problem(certificate, at: now)))
                    }
                    Terminal.out("     \(identities.count) identities found")
                    Terminal.out("")
                    Terminal.out("  Valid identities only")
                }
                let valid = identities.filter { problem($0.1, at: now) == nil }
                for (index, (_, certificate)) in valid.enumerated() { Terminal.out(line(index, certificate, problem: nil)) }
                Terminal.out("     \(valid.count) valid identities found")
            }
        }
    }

    /// identity_find.m's printIdentity: "%3d) " then the SHA-1 and the name.
    private func line(_ index: Int, _ certificate: Certificate, problem: String?) -> String {
        let number = String(index + 1)
        return String(repeating: " ", count: max(0, 3 - number.count)) + number + ") "
            + "\(StoredCertificates.hex(certificate.sha1)) \"\(certificate.subjectSummary)\"" + (problem.map { " (\($0))" } ?? "")
    }

    /// macOS's names for why a certificate is not valid.
    private func problem(_ certificate: Certificate, at time: Double) -> String? {
        if time > certificate.notAfter { return "CSSMERR_TP_CERT_EXPIRED" }
        if time < certificate.notBefore { return "CSSMERR_TP_CERT_NOT_VALID_YET" }
        return nil
    }
}

struct DeleteCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-certificate",
        abstract: "Delete a certificate, named by common name (-c) or SHA-1 or SHA-256 hash (-Z).")

    @Option(name: .customShort("c"), parsing: .unconditional, help: "Common name of the certificate (must name exactly one).") var name: String?
    @Option(name: .customShort("Z"), parsing: .unconditional, help: "SHA-1 or SHA-256 hash of the certificate, as find-certificate -Z prints them.") var hash:
        String?
    @Flag(name: .customShort("t"), help: "Also delete user trust settings (there are none here; accepted for macOS compatibility).")
    var trust = false
    @OptionGroup var target: KeychainListArgument

    func validate() throws {
        guard (name == nil) != (hash == nil) else { throw ValidationError("give -c name or -Z hash") }
    }

    func run() throws {
        try perform("delete-certificate") {
            let matches = try target.all { try StoredCertificates.all(in: $0) }.filter { entry, _ in
                // keychain_find.c's find_unique_certificate: a SHA-1 or a SHA-256 hash.
                if let hash {
                    let wanted = hash.uppercased().filter { $0 != ":" && $0 != " " }
                    return StoredCertificates.hex(wanted.count == 64 ? entry.certificate.sha256 : entry.certificate.sha1) == wanted
                }
                return StoredCertificates.commonName(entry.certificate, contains: name!)
            }
            guard let (match, store) = matches.first else { throw KeychainError(.itemNotFound, "no certificate matches") }
            if matches.count > 1 {
                throw KeychainError(.param, "\"\(name ?? hash!)\" is ambiguous (\(matches.count) certificates); use -Z with the SHA-1 hash")
            }
            try store.delete(references: [match.item.persistentReference])
        }
    }
}
