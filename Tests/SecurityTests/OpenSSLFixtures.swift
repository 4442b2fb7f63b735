import KeychainCore
import Security
import XCTest

/// Certificates and keys made at test time by the `openssl` command, so that what the engine
/// derives is checked against another implementation's output, not against itself.
///
/// Root CA (RSA) -> Alice (EC P-256, email in subject and subjectAltName)
///               -> Expired Service (RSA, 2020-2021)
///               -> Intermediate CA -> server.example.test (RSA, no email)
/// Bob Other: self-signed, RSA, no email. Plus a PKCS#12 of Alice's identity with the root.
final class OpenSSLFixtures {
    static let shared: Result<OpenSSLFixtures, Error> = Result { try OpenSSLFixtures() }

    static func get() throws -> OpenSSLFixtures {
        switch shared {
        case .success(let fixtures): return fixtures
        case .failure(let error): throw error
        }
    }

    let directory: String
    static let p12Passphrase = "p12 pass phrase"

    private init() throws {
        directory = NSTemporaryDirectory() + "keychain-openssl-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory + "/db", withIntermediateDirectories: true)
        try "".write(toFile: directory + "/db/index.txt", atomically: true, encoding: .utf8)
        try "1000\n".write(toFile: directory + "/db/serial", atomically: true, encoding: .utf8)
        try """
        [ca]
        default_ca = test
        [test]
        database = db/index.txt
        new_certs_dir = db
        serial = db/serial
        default_md = sha256
        policy = any
        unique_subject = no
        copy_extensions = copy
        [any]
        commonName = supplied
        organizationName = optional
        emailAddress = optional
        [intermediate]
        basicConstraints = critical,CA:TRUE
        subjectKeyIdentifier = hash
        [leaf]
        basicConstraints = CA:FALSE
        subjectKeyIdentifier = hash
        authorityKeyIdentifier = keyid
        """.write(toFile: directory + "/ca.cnf", atomically: true, encoding: .utf8)

        try run(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "3650",
            "-subj", "/CN=Keychain Test Root CA/O=Keychain Tests")
        // Alice: an EC key in SEC1 form, her certificate issued by the root.
        try run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "alice.key")
        try run(
            "req", "-new", "-key", "alice.key", "-out", "alice.csr",
            "-subj", "/CN=Alice Example/O=Keychain Tests/emailAddress=alice@example.com",
            "-addext", "subjectAltName=email:alice@example.org")
        try issue("alice", by: "ca", extensions: "leaf", serial: "1001")
        // Expired: valid through 2020 only.
        try run("genrsa", "-traditional", "-out", "expired.key", "2048")
        try run("req", "-new", "-key", "expired.key", "-out", "expired.csr", "-subj", "/CN=Expired Service")
        try issue("expired", by: "ca", extensions: "leaf", serial: "1002", dates: ("20200101000000Z", "20210101000000Z"))
        // A chain of two: root -> intermediate -> server.
        try run(
            "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "intermediate.key", "-out", "intermediate.csr",
            "-subj", "/CN=Keychain Test Intermediate CA/O=Keychain Tests")
        try issue("intermediate", by: "ca", extensions: "intermediate", serial: "1003")
        try run(
            "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=server.example.test")
        try issue("server", by: "intermediate", extensions: "leaf", serial: "1004")
        // Someone else entirely.
        try run(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "bob.key", "-out", "bob.pem", "-days", "30",
            "-subj", "/CN=Bob Other")
        try run(
            "pkcs12", "-export", "-in", "alice.pem", "-inkey", "alice.key", "-certfile", "ca.pem",
            "-name", "Alice Identity", "-passout", "pass:\(Self.p12Passphrase)", "-out", "alice.p12")
        for name in ["ca", "alice", "expired", "intermediate", "server", "bob"] {
            try run("x509", "-in", "\(name).pem", "-outform", "DER", "-out", "\(name).der")
        }
        // Keys in the forms Apple's external representation and OpenSSL name.
        try run("rsa", "-in", "expired.key", "-traditional", "-outform", "DER", "-out", "expired.key.der")
        try run("rsa", "-in", "expired.key", "-RSAPublicKey_out", "-outform", "DER", "-out", "expired.pub.der")
        try run("ec", "-in", "alice.key", "-outform", "DER", "-out", "alice.key.der")
        try run("ec", "-in", "alice.key", "-pubout", "-conv_form", "uncompressed", "-outform", "DER", "-out", "alice.pub.der")
        try run("pkcs8", "-topk8", "-nocrypt", "-in", "bob.key", "-outform", "DER", "-out", "bob.key.p8")
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    private func issue(
        _ name: String, by issuer: String, extensions: String, serial: String,
        dates: (String, String)? = nil
    ) throws {
        try "\(serial)\n".write(toFile: directory + "/db/serial", atomically: true, encoding: .utf8)
        var arguments = [
            "ca", "-batch", "-config", "ca.cnf", "-cert", "\(issuer).pem", "-keyfile", "\(issuer).key",
            "-in", "\(name).csr", "-out", "\(name).pem", "-extensions", extensions, "-notext"
        ]
        if let (start, end) = dates { arguments += ["-startdate", start, "-enddate", end] } else { arguments += ["-days", "365"] }
        try run(arguments)
    }

    private func run(_ arguments: String...) throws { try run(arguments) }

    @discardableResult
    func run(_ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let diagnostics = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw SecError(errSecIO, "openssl \(arguments.joined(separator: " ")): \(String(decoding: diagnostics, as: UTF8.self))")
        }
        return data
    }

    func data(_ file: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: directory + "/" + file)) }

    /// `openssl x509 -noout <option>`'s value after "=": -serial, -subject and the like.
    func field(_ option: String, of certificate: String) throws -> String {
        let text = String(decoding: try run(["x509", "-in", "\(certificate).pem", "-noout", option]), as: UTF8.self)
        return String(text.split(separator: "=", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// SHA-1 by `openssl dgst`, of bytes written to a scratch file.
    func sha1(_ bytes: Data) throws -> Data {
        let path = directory + "/digest-input"
        try bytes.write(to: URL(fileURLWithPath: path))
        let text = String(decoding: try run(["dgst", "-sha1", "-r", path]), as: UTF8.self)
        return Data(hex: String(text.prefix(40)))
    }

    /// The Subject Key Identifier as `openssl x509 -ext` prints it, as bytes.
    func subjectKeyID(of certificate: String) throws -> Data {
        let text = String(decoding: try run(["x509", "-in", "\(certificate).pem", "-noout", "-ext", "subjectKeyIdentifier"]), as: UTF8.self)
        let hex = text.split(separator: "\n").last!.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ":", with: "")
        return Data(hex: hex)
    }
}

/// A throwaway keychain and the openssl-made fixtures, for the certificate, key and identity tests.
class OpenSSLTestCase: XCTestCase {
    var keychain: TestKeychain!
    var fixtures: OpenSSLFixtures!

    override func setUpWithError() throws {
        fixtures = try OpenSSLFixtures.get()
        keychain = try TestKeychain()
    }

    override func tearDown() { keychain.tearDown() }
}

extension Data {
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self.init(bytes)
    }

    var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
