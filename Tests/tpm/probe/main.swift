// Tests/tpm: the SSH agent's TPM keys (KeychainTPMClient's TPMSigningKeys) as a caller uses them,
// through keychain-tpm-helper beside this program and the TPM of $KEYCHAIN_TPM_TCTI.
//   keychain-tpm-probe create               prints: POINT BLOB (hex)
//   keychain-tpm-probe sign BLOB DIGEST     prints: R S (hex)
//   keychain-tpm-probe sign BLOB DIGEST N   N threads sign at once (the agent's connections);
//                                           prints each one's R S or error, in order
// An error is one line on standard error and exit status 1; wrong usage, status 2.
import Dispatch
import Glibc
import KeychainCore
import KeychainTPMClient

func bytes(hex: String) -> Bytes? {
    let digits = Array(hex.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var out = Bytes()
    for i in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[i...i + 1], as: UTF8.self), radix: 16) else { return nil }
        out.append(byte)
    }
    return out
}

func fail(_ message: String, status: Int32) -> Never {
    fputs(message + "\n", stderr)
    exit(status)
}

let arguments = CommandLine.arguments.dropFirst()
do {
    switch (arguments.first, arguments.count) {
    case ("create", 1):
        let key = try TPMSigningKeys.create()
        print(key.publicPoint.hex, key.blob.hex)
    case ("sign", 3):
        let values = arguments.dropFirst().map { bytes(hex: $0) }
        guard let blob = values[0], let digest = values[1] else { fail("not hex", status: 2) }
        let (r, s) = try TPMSigningKeys.sign(digest: digest, with: blob)
        print(r.hex, s.hex)
    case ("sign", 4):
        let values = arguments.dropFirst().prefix(2).map { bytes(hex: $0) }
        guard let blob = values[0], let digest = values[1], let count = Int(arguments.last!), (1...64).contains(count) else {
            fail("usage: keychain-tpm-probe sign BLOB DIGEST N (1-64)", status: 2)
        }
        let lines = UnsafeMutableBufferPointer<String>.allocate(capacity: count)
        lines.initialize(repeating: "")
        DispatchQueue.concurrentPerform(iterations: count) { i in
            do {
                let (r, s) = try TPMSigningKeys.sign(digest: digest, with: blob)
                lines[i] = r.hex + " " + s.hex
            } catch {
                lines[i] = "error: \(error)"
            }
        }
        lines.forEach { print($0) }
    default:
        fail("usage: keychain-tpm-probe create | sign BLOB DIGEST", status: 2)
    }
} catch {
    fail("\(error)", status: 1)
}
