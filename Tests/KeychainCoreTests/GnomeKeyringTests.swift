@testable import KeychainCore
@testable import SecretServiceItems
import Glibc
import XCTest

/// gnome-keyring's keyring files: real ones written by gnome-keyring-daemon (GnomeKeyringFixtures),
/// files made here field by field for what the daemon never writes, and seeded damage of both:
/// no crash, no hang, only errSecDecode (damaged, hostile) or errSecAuthFailed (wrong password).
final class GnomeKeyringTests: XCTestCase {
    private func read(_ bytes: Bytes, _ password: String? = GnomeKeyringFixtures.encryptedPassword) throws -> GnomeKeyring {
        try GnomeKeyring.read(bytes, password: password.map { Array($0.utf8) })
    }

    private func item(_ keyring: GnomeKeyring, _ label: String) -> GnomeKeyring.Item? {
        keyring.items.first { $0.label == label }
    }

    // MARK: Files gnome-keyring wrote

    func testEncryptedKeyringWrittenByTheDaemon() throws {
        let keyring = try read(GnomeKeyringFixtures.encrypted)
        XCTAssertEqual(keyring.format, .encrypted)
        XCTAssertEqual(keyring.label, "Fixture")
        XCTAssertEqual(keyring.items.count, 4)
        let chromium = try XCTUnwrap(item(keyring, "Chromium Safe Storage"))
        XCTAssertEqual(chromium.secret, Array("c2VjcmV0LWtleQ==".utf8), "Chromium's key, byte for byte")
        XCTAssertEqual(chromium.attributes, ["application": "chromium", "xdg:schema": "chrome_libsecret_os_crypt_password_v2"])
        XCTAssertGreaterThan(chromium.created, 1_600_000_000)
        XCTAssertGreaterThan(chromium.modified, 1_600_000_000)
        let git = try XCTUnwrap(item(keyring, "Git: https://git.example.com/"))
        XCTAssertEqual(git.attributes, ["xdg:schema": "org.git.Password", "user": "ann", "server": "git.example.com", "protocol": "https"])
        XCTAssertEqual(git.secret, Array("git-pw".utf8))
        let binary = try XCTUnwrap(item(keyring, "  spaced\nlabel"))
        XCTAssertEqual(binary.secret, [0, 255, 1, 0x80])
        XCTAssertEqual(
            binary.attributes, ["app": "bin", "k=v": " x\\y ", "xdg:schema": "org.freedesktop.Secret.Generic"],
            "an item stored without a schema shows the one of its type, as gnome-keyring's service does")
        let empty = try XCTUnwrap(item(keyring, ""))
        XCTAssertEqual(empty.secret, [])
        XCTAssertEqual(empty.attributes, ["xdg:schema": "org.freedesktop.Secret.Generic"])
    }

    func testPlainTextKeyringWrittenByTheDaemonReadsAsTheEncryptedOne() throws {
        let plain = try read(Array(GnomeKeyringFixtures.plainText.utf8), nil)
        XCTAssertEqual(plain.format, .plainText)
        XCTAssertEqual(plain.label, "Plainfx")
        XCTAssertTrue(plain.unreadable.isEmpty)
        let encrypted = try read(GnomeKeyringFixtures.encrypted)
        func view(_ k: GnomeKeyring) -> [String: ([String: String], Bytes)] {
            Dictionary(uniqueKeysWithValues: k.items.map { ($0.label, ($0.attributes, $0.secret)) })
        }
        let a = view(plain), b = view(encrypted)
        XCTAssertEqual(Set(a.keys), Set(b.keys))
        for (label, value) in a {
            XCTAssertEqual(value.0, b[label]?.0, label)
            XCTAssertEqual(value.1, b[label]?.1, label)
        }
        XCTAssertEqual(item(plain, "")?.modified, 0, "mtime=0 in the file: unknown")
    }

    func testWrongPasswordIsAuthFailed() {
        for password in ["", "fixture-PW", "fixture-pw ", String(repeating: "x", count: 10_000)] {
            XCTAssertStatus(try read(GnomeKeyringFixtures.encrypted, password), .authFailed, password)
        }
        XCTAssertThrowsError(try read(GnomeKeyringFixtures.encrypted, "nope")) {
            XCTAssertEqual(($0 as? KeychainError)?.description, "the password does not open this keyring")
        }
    }

    func testFormatDetection() {
        XCTAssertEqual(GnomeKeyring.format(of: GnomeKeyringFixtures.encrypted), .encrypted)
        XCTAssertEqual(GnomeKeyring.format(of: Array("# comment\n\n[keyring]\n".utf8)), .plainText)
        XCTAssertNil(GnomeKeyring.format(of: []))
        XCTAssertNil(GnomeKeyring.format(of: Array("[other]\n".utf8)))
        XCTAssertNil(GnomeKeyring.format(of: Array("GnomeKeyring\n\r\0".utf8)))
        XCTAssertStatus(try read(Array("hello".utf8)), .decode)
    }

    // MARK: The KDF

    /// egg_symkey_generate_simple with SHA-256 and AES-128: one pass, key then IV from one digest.
    func testKeyDerivationIsIteratedSHA256OfPasswordAndSalt() {
        let password = Array("pw".utf8), salt: Bytes = [1, 2, 3, 4, 5, 6, 7, 8]
        XCTAssertEqual(Crypto.iteratedSHA256(password, salt: salt, iterations: 1), Crypto.sha256(password + salt))
        var expected = Crypto.sha256(password + salt)
        for _ in 1..<1000 { expected = Crypto.sha256(expected) }
        XCTAssertEqual(Crypto.iteratedSHA256(password, salt: salt, iterations: 1000), expected)
        // SHA-256("abc"), FIPS 180-2's example, through the same path (empty salt, one iteration).
        XCTAssertEqual(
            Crypto.iteratedSHA256(Array("abc".utf8), salt: [], iterations: 1).hex,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(Crypto.md5(Array("abc".utf8)).hex, "900150983cd24fb0d6963f7d28e17f72", "RFC 1321's example")
    }

    /// AES-128-CBC against NIST SP 800-38A F.2.1 (first two blocks).
    func testAES128CBCKnownAnswer() throws {
        let key = GnomeKeyringFixtures.hex("2b7e151628aed2a6abf7158809cf4f3c")
        let iv = GnomeKeyringFixtures.hex("000102030405060708090a0b0c0d0e0f")
        let plain = GnomeKeyringFixtures.hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
        let cipher = GnomeKeyringFixtures.hex("7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2")
        XCTAssertEqual(try Crypto.aes128CBC(plain, key: key, iv: iv, encrypt: true), cipher)
        XCTAssertEqual(try Crypto.aes128CBC(cipher, key: key, iv: iv, encrypt: false), plain)
        XCTAssertStatus(try Crypto.aes128CBC([1, 2, 3], key: key, iv: iv, encrypt: false), .decode, "not whole blocks")
    }

    // MARK: Hostile and damaged files

    /// A file may ask for any iteration count; 10^9 would take minutes. Refused at once.
    func testHostileIterationCountsAreRefusedBeforeHashing() {
        for iterations: UInt32 in [1_000_000_000, UInt32.max, GnomeKeyring.maximumIterations + 1] {
            let file = KeyringWriter(iterations: iterations, items: [.init(label: "x", secret: [1])]).bytes(password: [])
            XCTAssertThrowsError(try read(file, "pw")) { error in
                XCTAssertEqual((error as? KeychainError)?.code, .decode)
                XCTAssertTrue((error as? KeychainError)?.detail.contains("\(iterations) hash iterations") == true, "\(error)")
            }
        }
        let zero = KeyringWriter(iterations: 0, items: []).bytes(password: [])
        XCTAssertStatus(try read(zero, "pw"), .decode)
        // The largest count allowed still opens (and within a second on this machine).
        let most = KeyringWriter(iterations: GnomeKeyring.maximumIterations, items: [.init(label: "x", secret: [1])])
        XCTAssertEqual(try read(most.bytes(password: Array("pw".utf8)), "pw").items.first?.secret, [1])
    }

    func testEveryTruncationIsDecodeOrAuthFailed() {
        let file = GnomeKeyringFixtures.encrypted
        for length in 0..<file.count {
            XCTAssertThrowsError(try read(Array(file.prefix(length))), "length \(length)") { error in
                XCTAssertEqual((error as? KeychainError)?.code, .decode, "length \(length): \(error)")
            }
        }
        let plain = Array(GnomeKeyringFixtures.plainText.utf8)
        for length in 0..<plain.count {
            do {
                _ = try read(Array(plain.prefix(length)), nil)
            } catch let error as KeychainError {
                XCTAssertEqual(error.code, .decode, "length \(length)")
            } catch {
                XCTFail("length \(length): \(error)")
            }
        }
    }

    func testEncryptedPartMustBeWholeBlocksWithinTheFile() {
        let writer = KeyringWriter(items: [.init(label: "a", secret: Array("s".utf8))])
        let password = Array("pw".utf8)
        XCTAssertEqual(try read(writer.bytes(password: password), "pw").items.count, 1)
        for size: UInt32 in [0, 15, 17, 0xffff_fff0, 0x7fff_fff0] {
            XCTAssertStatus(try read(writer.bytes(password: password, encryptedSize: size), "pw"), .decode, "size \(size)")
        }
        // Extra bytes after the encrypted part are ignored, as gnome-keyring ignores them.
        XCTAssertEqual(try read(writer.bytes(password: password) + [1, 2, 3], "pw").items.count, 1)
    }

    /// A changed ciphertext, or bad padding of the plaintext, fails the MD5: reported as the wrong
    /// password (gnome-keyring cannot tell them apart either), never as a crash.
    func testChangedCiphertextIsRefused() throws {
        var file = GnomeKeyringFixtures.encrypted
        file[file.count - 3] ^= 0x40
        XCTAssertStatus(try read(file), .authFailed)
        let writer = KeyringWriter(items: [.init(label: "a", secret: [1])])
        XCTAssertStatus(try read(writer.bytes(password: Array("pw".utf8), damageDigest: true), "pw"), .authFailed)
    }

    func testLengthsPastTheEndAreRefused() {
        let password = Array("pw".utf8)
        var header = KeyringWriter(name: nil, items: []).bytes(password: password)
        // The keyring's name claims 2^31-2 bytes.
        header.replaceSubrange(20..<24, with: [0x7f, 0xff, 0xff, 0xfe])
        XCTAssertStatus(try read(header, "pw"), .decode)
        // An item whose secret claims more than the decrypted block holds (the MD5 is right).
        let liar = KeyringWriter(items: [.init(label: "a", secret: [1], secretLength: 0x7fff_fffe)])
        XCTAssertStatus(try read(liar.bytes(password: password), "pw"), .decode)
        // Counts far beyond the data: nothing is allocated from them.
        let many = KeyringWriter(items: [], itemCount: UInt32.max)
        XCTAssertStatus(try read(many.bytes(password: password), "pw"), .decode)
        let attributes = KeyringWriter(items: [.init(label: "a", secret: [1], attributeCount: 0xffff_ffff)])
        XCTAssertStatus(try read(attributes.bytes(password: password), "pw"), .decode)
    }

    func testUnsupportedVersionsAndAlgorithms() {
        let file = KeyringWriter(items: []).bytes(password: Array("pw".utf8))
        for offset in 16..<20 {
            var changed = file
            changed[offset] = 1
            XCTAssertStatus(try read(changed, "pw"), .decode, "byte \(offset)")
        }
    }

    func testFieldsTheDaemonWritesForOlderClients() throws {
        let writer = KeyringWriter(items: [
            .init(label: nil, secret: nil, attributes: [("port", .uint32(8443)), ("server", .string("h")), ("nothing", .string(nil))], type: 1),
            .init(label: "note", secret: [9], type: 2),
            .init(label: "odd type", secret: [9], type: 0x7777),
            .init(label: "named", secret: [9], attributes: [("xdg:schema", .string("my.schema"))], type: 1)
        ])
        let keyring = try read(writer.bytes(password: Array("pw".utf8)), "pw")
        XCTAssertEqual(keyring.items[0].label, "")
        XCTAssertEqual(keyring.items[0].secret, [])
        XCTAssertEqual(keyring.items[0].attributes, ["port": "8443", "server": "h", "nothing": "", "xdg:schema": "org.gnome.keyring.NetworkPassword"])
        XCTAssertEqual(keyring.items[1].attributes, ["xdg:schema": "org.gnome.keyring.Note"])
        XCTAssertEqual(keyring.items[2].attributes, [:], "an unknown type names no schema")
        XCTAssertEqual(keyring.items[3].attributes, ["xdg:schema": "my.schema"])
        XCTAssertEqual(keyring.items.map(\.created), [1_700_000_000, 1_700_000_000, 1_700_000_000, 1_700_000_000])
        XCTAssertEqual(keyring.items.map(\.modified), [1_700_000_100, 1_700_000_100, 1_700_000_100, 1_700_000_100])

        let unknownType = KeyringWriter(items: [.init(label: "a", secret: [1], attributes: [("x", .raw(7))])])
        XCTAssertStatus(try read(unknownType.bytes(password: Array("pw".utf8)), "pw"), .decode)
        let notText = KeyringWriter(items: [.init(label: "a", secret: [1], rawLabel: [0xff, 0xfe])])
        XCTAssertStatus(try read(notText.bytes(password: Array("pw".utf8)), "pw"), .decode)
        let nul = KeyringWriter(items: [.init(label: "a", secret: [1], rawLabel: [0x61, 0, 0x62])])
        XCTAssertStatus(try read(nul.bytes(password: Array("pw".utf8)), "pw"), .decode)
    }

    /// Seeded damage to both real files: flipped, inserted, removed bytes; big-endian lengths set
    /// to extremes. Each read ends with a keyring or a documented error, quickly.
    func testFuzzedFilesNeverCrash() {
        var g = SeededGenerator(state: 20_240_611)
        let iterations = Int(getenv("KEYCHAIN_FUZZ_ITERATIONS").flatMap { Int(String(cString: $0)) } ?? 1500)
        let sources: [(Bytes, String?)] = [
            (GnomeKeyringFixtures.encrypted, GnomeKeyringFixtures.encryptedPassword),
            (Array(GnomeKeyringFixtures.plainText.utf8), nil),
            (KeyringWriter(items: [.init(label: "a", secret: [1], attributes: [("p", .uint32(1))])]).bytes(password: Array("pw".utf8)), "pw")
        ]
        for round in 0..<iterations {
            let (source, password) = sources[round % sources.count]
            var file = source
            for _ in 0..<Int.random(in: 1...4, using: &g) {
                guard !file.isEmpty else { break }
                let at = Int.random(in: 0..<file.count, using: &g)
                switch Int.random(in: 0..<6, using: &g) {
                case 0: file[at] ^= UInt8.random(in: 1...255, using: &g)
                case 1: file.insert(UInt8.random(in: 0...255, using: &g), at: at)
                case 2: file.remove(at: at)
                case 3:
                    let value: [UInt8] = [[0xff, 0xff, 0xff, 0xff], [0x7f, 0xff, 0xff, 0xff], [0, 0, 0, 0], [0x3b, 0x9a, 0xca, 0x00]].randomElement(using: &g)!
                    for (i, byte) in value.enumerated() where at + i < file.count { file[at + i] = byte }
                case 4: file = Array(file.prefix(at))
                default: file.insert(contentsOf: Array("\n[x]\n=\\".utf8), at: at)
                }
            }
            do {
                _ = try read(file, password)
            } catch let error as KeychainError {
                XCTAssertTrue([.decode, .authFailed].contains(error.code), "round \(round): \(error)")
            } catch {
                XCTFail("round \(round): \(error)")
            }
        }
    }

    // MARK: The plain-text format

    func testPlainTextAsGKeyFileReadsIt() throws {
        let text = """
            # written by hand\r
            [keyring]\r
            display-name = My\\skeys\r

            [7]
            item-type=1
            display-name=site
            secret=  pass\\tword\\\\
            mtime=100
            ctime=50
            [7:attribute0]
            name=port
            type=uint32
            value=4294967297
            [7:attribute1]
            name=user
            value=ann
            [7:attribute2]
            name=bad
            value=a\\qb
            [7:acl0]
            path=/usr/bin/x
            [8]
            binary-secret=zz
            [7]
            display-name=site again
            """
        let keyring = try read(Array(text.utf8), nil)
        XCTAssertEqual(keyring.label, "My keys")
        XCTAssertEqual(keyring.items.count, 1)
        let item = keyring.items[0]
        XCTAssertEqual(item.label, "site again", "a repeated group adds to the first, a repeated key replaces")
        XCTAssertEqual(item.secret, Array("pass\tword\\".utf8), "leading space before the value dropped, escapes undone")
        XCTAssertEqual(item.attributes, ["port": "1", "user": "ann", "bad": "", "xdg:schema": "org.gnome.keyring.NetworkPassword"])
        XCTAssertEqual(item.created, 50)
        XCTAssertEqual(item.modified, 100)
        XCTAssertEqual(keyring.unreadable.map(\.id), ["8"])
    }

    func testDamagedPlainTextIsRefused() {
        for text in ["[keyring]\njunk line\n", "key=value\n[keyring]\n", "[other]\n[keyring]\n", "[keyring]\n=x\n", "[keyring]\n[a[b]\n"] {
            XCTAssertStatus(try read(Array(text.utf8), nil), .decode, text)
        }
        XCTAssertEqual(try read(Array("[keyring]\n".utf8), nil).items.count, 0)
    }

    // MARK: Import into a keychain

    func testImportIsIdempotentAndKeepsWhatTheServiceShowed() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let store = try scratch.create()
        let keyring = try read(GnomeKeyringFixtures.encrypted)
        for item in keyring.items {
            XCTAssertEqual(
                try store.importSecretItem(
                    label: item.label, attributes: item.attributes, secret: item.secret,
                    created: item.created, modified: item.modified), .added, item.label)
        }
        for item in keyring.items {
            XCTAssertEqual(
                try store.importSecretItem(
                    label: item.label, attributes: item.attributes, secret: item.secret,
                    created: item.created, modified: item.modified), .alreadyThere, item.label)
        }
        XCTAssertEqual(try store.secretItemRows().count, 4)
        let chromium = try XCTUnwrap(try store.searchSecretItems(["application": "chromium"]).unlocked.first)
        XCTAssertEqual(chromium.label, "Chromium Safe Storage")
        XCTAssertEqual(chromium.attributes, ["application": "chromium", "xdg:schema": "chrome_libsecret_os_crypt_password_v2"])
        XCTAssertEqual(try store.secretItem(chromium.row, includeSecret: true).secret, Array("c2VjcmV0LWtleQ==".utf8))
        let original = try XCTUnwrap(item(keyring, "Chromium Safe Storage"))
        XCTAssertEqual(chromium.created, original.created)
        XCTAssertEqual(chromium.modified, original.modified)
        // git's libsecret attributes make an internet password git-credential-keychain shares.
        let git = try store.find(
            Query(itemClass: .internetPassword, attributes: ["srvr": .string("git.example.com"), "acct": .string("ann")]),
            includeSecret: true)
        XCTAssertEqual(git.first?.secret, Array("git-pw".utf8))
        // A look-alike with another secret comes beside it; nothing is replaced.
        XCTAssertEqual(
            try store.importSecretItem(
                label: "Chromium Safe Storage", attributes: chromium.attributes, secret: [1],
                created: 0, modified: 0), .added)
        XCTAssertEqual(try store.searchSecretItems(["application": "chromium"]).unlocked.count, 2)
        XCTAssertEqual(try store.secretItem(chromium.row, includeSecret: true).secret, Array("c2VjcmV0LWtleQ==".utf8))
    }

    /// One import's index: look-alikes all come; what it added, and what the keychain held before
    /// it (read once per attribute set), is already there; the label and the secret both count.
    func testImportIndexKnowsWhatCameAndWhatWasThere() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let store = try scratch.create()
        let attributes = ["xdg:schema": "org.freedesktop.Secret.Generic", "service": "mail", "username": "ann"]
        func bring(_ label: String, _ secret: String, _ index: inout SecretImportIndex) throws -> KeychainStore.ImportOutcome {
            try store.importSecretItem(label: label, attributes: attributes, secret: Array(secret.utf8), created: 0, modified: 0, index: &index)
        }
        _ = try store.addSecretItem(label: "Mail", attributes: attributes, secret: Array("before".utf8), contentType: "text/plain", replace: false)
        var first = try SecretImportIndex()
        XCTAssertEqual(try bring("Mail", "before", &first), .alreadyThere, "held before the import")
        for n in 0..<50 { XCTAssertEqual(try bring("Mail", "s\(n)", &first), .added) }
        XCTAssertEqual(try bring("Mail", "s7", &first), .alreadyThere, "added by this import")
        XCTAssertEqual(try bring("Other label", "s7", &first), .added, "another label: another item")
        XCTAssertEqual(try bring("Mail", "s7x", &first), .added, "another secret: another item")
        var second = try SecretImportIndex()
        for n in 0..<50 { XCTAssertEqual(try bring("Mail", "s\(n)", &second), .alreadyThere) }
        XCTAssertEqual(try bring("Other label", "s7", &second), .alreadyThere)
        XCTAssertEqual(try store.searchSecretItems(attributes).unlocked.count, 53)
        XCTAssertFalse(try store.holdsSecretItem(label: "Mail", attributes: ["service": "mail"], secret: Array("s1".utf8)), "a subset is other attributes")
    }
}

/// Writes the encrypted format field by field (gkm-secret-binary.c's layout), with knobs for what
/// gnome-keyring never writes: extreme counts and lengths, other attribute types, bad digests.
struct KeyringWriter {
    enum Value {
        case string(String?)
        case uint32(UInt32)
        /// A type number the format does not have, followed by a uint32.
        case raw(UInt32)
    }

    struct Entry {
        var label: String?
        var secret: Bytes?
        var attributes: [(String, Value)] = []
        var type: UInt32 = 0
        var secretLength: UInt32?
        var attributeCount: UInt32?
        var rawLabel: Bytes?
    }

    var name: String? = "Test"
    var iterations: UInt32 = 1234
    var salt: Bytes = [8, 7, 6, 5, 4, 3, 2, 1]
    var items: [Entry]
    var itemCount: UInt32?

    private struct Out {
        var bytes = Bytes()
        mutating func u32(_ v: UInt32) { bytes += [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
        mutating func data(_ b: Bytes?) {
            guard let b else { return u32(0xffff_ffff) }
            u32(UInt32(b.count))
            bytes += b
        }
        mutating func string(_ s: String?) { data(s.map { Array($0.utf8) }) }
        mutating func time(_ t: UInt64) { u32(UInt32(t >> 32)); u32(UInt32(t & 0xffff_ffff)) }
        mutating func attributes(_ list: [(String, Value)], count: UInt32? = nil) {
            u32(count ?? UInt32(list.count))
            for (name, value) in list {
                string(name)
                switch value {
                case .string(let s): u32(0); string(s)
                case .uint32(let n): u32(1); u32(n)
                case .raw(let type): u32(type); u32(0)
                }
            }
        }
    }

    func bytes(password: Bytes, encryptedSize: UInt32? = nil, damageDigest: Bool = false) -> Bytes {
        var out = Out()
        out.bytes = GnomeKeyring.header + [0, 0, 0, 0]
        out.string(name)
        out.time(1_700_000_000)
        out.time(1_700_000_000)
        out.u32(0)
        out.u32(0)
        out.u32(iterations)
        out.bytes += salt
        for _ in 0..<4 { out.u32(0) }
        out.u32(itemCount ?? UInt32(items.count))
        for (index, item) in items.enumerated() {
            out.u32(UInt32(index + 1))
            out.u32(item.type)
            out.attributes(
                item.attributes.map { name, value in
                    if case .string(let s) = value { return (name, .string(Crypto.md5(Array((s ?? "").utf8)).hex)) }
                    return (name, value)
                })
        }
        var inner = Out()
        inner.bytes = Bytes(repeating: 0, count: 16)
        for item in items {
            if let raw = item.rawLabel { inner.data(raw) } else { inner.string(item.label) }
            if let length = item.secretLength {
                inner.u32(length)
                inner.bytes += item.secret ?? []
            } else {
                inner.data(item.secret)
            }
            inner.time(1_700_000_000)
            inner.time(1_700_000_100)
            inner.string(nil)
            for _ in 0..<4 { inner.u32(0) }
            inner.attributes(item.attributes, count: item.attributeCount)
            inner.u32(0)
        }
        while inner.bytes.count % 16 != 0 { inner.bytes.append(0) }
        var digest = Crypto.md5(Array(inner.bytes[16...]))
        if damageDigest { digest[0] ^= 1 }
        inner.bytes.replaceSubrange(0..<16, with: digest)
        let derived = Crypto.iteratedSHA256(password, salt: salt, iterations: iterations <= GnomeKeyring.maximumIterations ? Int(max(1, iterations)) : 1)
        let sealed = try! Crypto.aes128CBC(inner.bytes, key: Array(derived[0..<16]), iv: Array(derived[16..<32]), encrypt: true)
        out.u32(encryptedSize ?? UInt32(sealed.count))
        out.bytes += sealed
        return out.bytes
    }
}
