import Foundation
import KeychainCore
import KeychainSSH
import XCTest

/// A key made by the real `ssh-keygen`, with contract 1's bytes taken from its openssh-key-v1 file.
struct GeneratedKey {
    let directory: String
    let path: String
    let serialized: Bytes
    let publicBlob: Bytes
    let comment: String
    /// The type's fields after the type name, as the private section holds them.
    var privateFields: Bytes {
        var reader = ByteReader(serialized)
        _ = try? reader.string()
        return reader.rest()
    }
}

enum OpenSSHTools {
    static let scratch: String = {
        let path = NSTemporaryDirectory() + "keychain-ssh-tests-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        atexit { _ = system("rm -rf '\(NSTemporaryDirectory())keychain-ssh-tests-\(getpid())'") }
        return path
    }()

    @discardableResult
    static func run(_ arguments: [String], input: Bytes = []) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let output = Pipe()
        let inputPipe = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = inputPipe
        try process.run()
        inputPipe.fileHandleForWriting.write(Data(input))
        try inputPipe.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func generate(_ type: String, bits: Int? = nil, comment: String = "test key") throws -> GeneratedKey {
        let directory = scratch + "/" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/id"
        var arguments = ["/usr/bin/ssh-keygen", "-q", "-t", type, "-N", "", "-C", comment, "-f", path]
        if let bits { arguments += ["-b", String(bits)] }
        let result = try run(arguments)
        XCTAssertEqual(result.status, 0, result.output)
        let (serialized, publicBlob) = try privateSection(of: try String(contentsOfFile: path, encoding: .utf8))
        return GeneratedKey(directory: directory, path: path, serialized: serialized, publicBlob: publicBlob, comment: comment)
    }

    /// An unencrypted openssh-key-v1 file's one key: its private serialization and public blob.
    static func privateSection(of file: String) throws -> (Bytes, Bytes) {
        let body = file.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        var reader = ByteReader(Array(Data(base64Encoded: body)!))
        XCTAssertEqual(try reader.fixed(15), Array("openssh-key-v1\0".utf8))
        XCTAssertEqual(try reader.string(), "none")
        XCTAssertEqual(try reader.string(), "none")
        _ = try reader.blob()
        XCTAssertEqual(try reader.u32(), 1)
        let publicBlob = try reader.blob()
        var section = ByteReader(try reader.blob())
        XCTAssertEqual(try section.u32(), try section.u32())
        // The serialization runs up to the comment; reading it as a key finds where it ends.
        let all = section.rest()
        var probe = ByteReader(all)
        _ = try SSHPrivateKey(reading: &probe)
        let length = all.count - probe.remaining
        return (Array(all[0..<length]), publicBlob)
    }

    /// `path`.pub signed by a throwaway CA: the certificate's blob.
    static func certify(_ key: GeneratedKey, host: Bool = false, principals: String = "alice", ca: GeneratedKey? = nil) throws -> Bytes {
        let ca = try ca ?? generate("ed25519", comment: "ca")
        var arguments = ["/usr/bin/ssh-keygen", "-q", "-s", ca.path, "-I", "test-id", "-n", principals, "-V", "-1h:+1h"]
        if host { arguments.append("-h") }
        let result = try run(arguments + [key.path + ".pub"])
        XCTAssertEqual(result.status, 0, result.output)
        let line = try String(contentsOfFile: key.path + "-cert.pub", encoding: .utf8)
        return Array(Data(base64Encoded: String(line.split(separator: " ")[1]))!)
    }

    static func base64(_ bytes: Bytes) -> String { Data(bytes).base64EncodedString() }

    /// Verifies `key`'s signature with `ssh-keygen -Y check-novalidate`: the agent signs SSHSIG's
    /// signed data, the test wraps it as an SSH SIGNATURE, and OpenSSH checks it.
    static func checkWithSSHKeygen(_ key: SSHPrivateKey, flags: UInt32 = 0) throws -> (status: Int32, output: String) {
        let message = Array("a message to sign\n".utf8)
        let namespace = "file"
        var signed = ByteWriter()
        signed.raw(Array("SSHSIG".utf8))
        signed.string(namespace)
        signed.blob([])
        signed.string("sha512")
        signed.blob(sha512(message))
        let signature = try key.sign(signed.bytes, flags: flags)
        var blob = ByteWriter()
        blob.raw(Array("SSHSIG".utf8))
        blob.u32(1)
        blob.blob(key.publicBlob)
        blob.string(namespace)
        blob.blob([])
        blob.string("sha512")
        blob.blob(signature)
        let armored =
            "-----BEGIN SSH SIGNATURE-----\n" + Data(blob.bytes).base64EncodedString(options: [.lineLength76Characters, .endLineWithLineFeed])
            + "\n-----END SSH SIGNATURE-----\n"
        let path = scratch + "/" + UUID().uuidString + ".sig"
        try armored.write(toFile: path, atomically: true, encoding: .utf8)
        return try run(["/usr/bin/ssh-keygen", "-Y", "check-novalidate", "-n", namespace, "-s", path], input: message)
    }

    static func sha512(_ data: Bytes) -> Bytes {
        let path = scratch + "/" + UUID().uuidString
        _ = FileManager.default.createFile(atPath: path, contents: Data(data))
        return hex(String(try! run(["/usr/bin/openssl", "dgst", "-sha512", "-r", path]).output.prefix(128)))
    }

    static func hex(_ text: String) -> Bytes {
        let digits = Array(text)
        return stride(from: 0, to: digits.count - 1, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }
}
