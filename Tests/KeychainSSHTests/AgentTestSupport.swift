import Foundation
import KeychainCore
import KeychainSSH
import XCTest

/// A clock the tests move by hand.
final class TestClock: @unchecked Sendable {
    var now: Double = 1000
}

/// What the agent asked the person and logged.
final class Recorder: @unchecked Sendable {
    var requests: [AccessQuestion] = []
    var lines: [String] = []
    var delays: [Double] = []
    var answer = true
}

extension AccessQuestion {
    var keyComment: String? {
        guard case .sshKey(let comment, _) = target else { return nil }
        return comment
    }
    var host: String? { destination?.host }
}

/// Builds the client's messages, as ssh-add and ssh (authfd.c) write them.
struct AgentClient {
    let connection: AgentConnection

    func send(_ build: (inout ByteWriter) -> Void) -> Bytes? {
        var writer = ByteWriter()
        build(&writer)
        return connection.reply(to: writer.bytes)
    }

    func add(_ serialized: Bytes, comment: String = "key", constraints: (inout ByteWriter) -> Void = { _ in }, constrained: Bool = false) -> Bytes? {
        send {
            var tail = ByteWriter()
            constraints(&tail)
            $0.u8(constrained || !tail.bytes.isEmpty ? 25 : 17)
            $0.raw(serialized)
            $0.string(comment)
            $0.raw(tail.bytes)
        }
    }

    func list() -> [(blob: Bytes, comment: String)] {
        guard let answer = send({ $0.u8(11) }) else { return [] }
        var reader = ByteReader(answer)
        XCTAssertEqual(try reader.u8(), 12)
        let count = (try? reader.u32()) ?? 0
        return (0..<count).compactMap { _ in
            guard let blob = try? reader.blob(), let comment = try? reader.string() else { return nil }
            return (blob, comment)
        }
    }

    /// The signature blob, nil on failure.
    func sign(_ blob: Bytes, _ data: Bytes, flags: UInt32 = 0) -> Bytes? {
        guard
            let answer = send({
                $0.u8(13)
                $0.blob(blob)
                $0.blob(data)
                $0.u32(flags)
            })
        else { return nil }
        var reader = ByteReader(answer)
        guard (try? reader.u8()) == 14, let signature = try? reader.blob(), reader.isAtEnd else {
            XCTAssertEqual(answer, [5])
            return nil
        }
        return signature
    }

    func remove(_ blob: Bytes) -> Bytes? {
        send {
            $0.u8(18)
            $0.blob(blob)
        }
    }

    func passphrase(_ type: UInt8, _ passphrase: String) -> Bytes? {
        send {
            $0.u8(type)
            $0.string(passphrase)
        }
    }

    /// session-bind@openssh.com: `hostKey` signs `sessionID`.
    func bind(_ hostKey: SSHPrivateKey, sessionID: Bytes, forwarded: Bool, signature: Bytes? = nil) -> Bytes? {
        send {
            $0.u8(27)
            $0.string("session-bind@openssh.com")
            $0.blob(hostKey.publicBlob)
            $0.blob(sessionID)
            $0.blob(signature ?? (try! hostKey.sign(sessionID, flags: 0)))
            $0.bool(forwarded)
        }
    }
}

/// A publickey userauth request, as ssh asks the agent to sign it.
func userauthRequest(sessionID: Bytes, user: String, key: Bytes, hostKey: Bytes? = nil) -> Bytes {
    var writer = ByteWriter()
    writer.blob(sessionID)
    writer.u8(50)
    writer.string(user)
    writer.string("ssh-connection")
    writer.string(hostKey == nil ? "publickey" : "publickey-hostbound-v00@openssh.com")
    writer.u8(1)
    writer.string(SSHPublicKey.keyType(of: key)!)
    writer.blob(key)
    if let hostKey { writer.blob(hostKey) }
    return writer.bytes
}

/// One hop of a destination constraint, as ssh-add -h writes it.
func hop(user: String = "", host: String = "", keys: [(Bytes, Bool)] = []) -> Bytes {
    var writer = ByteWriter()
    writer.string(user)
    writer.string(host)
    writer.blob([])
    for (blob, isCA) in keys {
        writer.blob(blob)
        writer.bool(isCA)
    }
    return writer.bytes
}

func destinationConstraint(from: Bytes, to: Bytes) -> Bytes {
    var inner = ByteWriter()
    inner.blob(from)
    inner.blob(to)
    inner.blob([])
    var writer = ByteWriter()
    writer.blob(inner.bytes)
    return writer.bytes
}

/// The constraint extension that carries destination constraints.
func restrictDestination(_ constraints: [Bytes]) -> (inout ByteWriter) -> Void {
    { writer in
        writer.u8(255)
        writer.string("restrict-destination-v00@openssh.com")
        writer.blob(constraints.flatMap { $0 })
    }
}

/// Keys made once per test run: ssh-keygen costs a process each.
enum TestKeys {
    static let ed25519 = try! OpenSSHTools.generate("ed25519", comment: "ed")
    static let ecdsa = try! OpenSSHTools.generate("ecdsa", bits: 384, comment: "ec")
    static let rsa = try! OpenSSHTools.generate("rsa", bits: 2048, comment: "rsa")
    static let host1 = try! SSHPrivateKey(serialized: OpenSSHTools.generate("ed25519", comment: "host1").serialized)
    static let host2 = try! SSHPrivateKey(serialized: OpenSSHTools.generate("ecdsa", bits: 256, comment: "host2").serialized)
    static let all = [ed25519, ecdsa, rsa]
}
