import Foundation
import KeychainCore
import KeychainSSH
import XCTest

/// Keys made on the fly by the real ssh-keygen and openssl in a folder of their own, and an
/// independent reading of contract-1 bytes: the public blob rebuilt from the private fields with
/// canonical mpints, to compare with ssh-keygen's .pub file.
final class KeyFileFixtures {
    let folder: URL
    private var counter = 0

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("sshfiles-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: folder) }

    func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    /// Runs a tool with no terminal: its stdout, or a failure of the test with its stderr.
    @discardableResult
    func run(_ tool: String, _ arguments: [String], allowFailure: Bool = false, file: StaticString = #filePath, line: UInt = #line) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        if !allowFailure, process.terminationStatus != 0 {
            XCTFail("\(tool) \(arguments.joined(separator: " ")): \(String(decoding: errors, as: UTF8.self))", file: file, line: line)
        }
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// `ssh-keygen -t type` with the extra options (-b, -m, -Z, -a): the key file's path.
    func sshKeygen(_ type: String, bits: Int? = nil, passphrase: String = "", comment: String = "test key", _ options: [String] = []) throws -> String {
        counter += 1
        let file = path("key\(counter)")
        var arguments = ["-q", "-t", type, "-N", passphrase, "-C", comment, "-f", file] + options
        if let bits { arguments += ["-b", String(bits)] }
        try run("/usr/bin/ssh-keygen", arguments)
        return file
    }

    func contents(_ file: String) throws -> Bytes { Array(try Data(contentsOf: URL(fileURLWithPath: file))) }

    func write(_ text: String) throws -> String {
        counter += 1
        let file = path("written\(counter)")
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        return file
    }

    /// The blob of an authorized_keys line ("type base64 comment").
    static func publicBlob(ofLine line: String) -> Bytes {
        let fields = line.split(whereSeparator: \.isWhitespace)
        guard fields.count >= 2, let data = Data(base64Encoded: String(fields[1])) else { return [] }
        return Array(data)
    }

    func publicBlob(ofPubFile file: String) throws -> Bytes {
        Self.publicBlob(ofLine: String(decoding: try contents(file + ".pub"), as: UTF8.self))
    }

    /// The public blob that contract-1 bytes imply: ed25519 its pk, ECDSA its curve and point,
    /// RSA e then n (the public order, not the private one).
    static func publicBlob(ofSerialized serialized: Bytes) throws -> Bytes {
        var reader = ByteReader(serialized)
        let type = try reader.string()
        var writer = ByteWriter()
        writer.string(type)
        switch type {
        case "ssh-ed25519":
            writer.blob(try reader.blob())
            XCTAssertEqual(try reader.blob().count, 64)
        case let ecdsa where ecdsa.hasPrefix("ecdsa-sha2-"):
            writer.string(try reader.string())
            writer.blob(try reader.blob())
            XCTAssertFalse(try reader.mpint().isEmpty)
        case "ssh-rsa":
            let n = try reader.mpint()
            writer.mpint(try reader.mpint())
            writer.mpint(n)
            for _ in 0..<4 { XCTAssertFalse(try reader.mpint().isEmpty) }
        default:
            XCTFail("unexpected type \(type)")
        }
        XCTAssertTrue(reader.isAtEnd, "bytes after the \(type) key")
        return writer.bytes
    }

    /// The decoded bytes of an OpenSSH private key file, and the way back.
    static func unarmour(_ text: Bytes) -> Bytes { PEM.blocks(in: text).first?.der ?? [] }
    static func armour(_ decoded: Bytes) -> Bytes { Array(PEM.encode(decoded, label: "OPENSSH PRIVATE KEY", columns: 70).utf8) }
}

/// The key types the tests make with ssh-keygen.
let sshKeygenTypes: [(type: String, bits: Int?)] = [("ed25519", nil), ("ecdsa", 256), ("ecdsa", 384), ("ecdsa", 521), ("rsa", 2048)]
