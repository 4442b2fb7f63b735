import CredentialHelperSupport
import KeychainCore
import XCTest

/// The sources `security import-secrets` reads besides gnome-keyring: git's credential-store
/// lines (as git's credential_from_url_gently reads them) and docker's config.json (as docker's
/// CLI reads its inline auths), and the items they map to (the helpers' own mapping).
final class ImportSourceTests: XCTestCase {
    private func line(_ text: String) throws -> GitCredentialStoreLine { try GitCredentialStoreLine(parsing: text) }

    func testCredentialStoreLines() throws {
        let cases: [(String, String, String, String?, String, String)] = [
            ("https://alice:s3cret@example.com", "https", "example.com", nil, "alice", "s3cret"),
            ("https://al%40ice:p%3Aw%2Fd%25@example.com:8443/org/repo.git", "https", "example.com:8443", "org/repo.git", "al@ice", "p:w/d%"),
            ("https://u:p@host/path///", "https", "host", "path", "u", "p"),
            ("https://u:p@host///", "https", "host", nil, "u", "p"),
            ("https://u:a+b@h", "https", "h", nil, "u", "a+b"),
            ("https://u:%zz%4@h", "https", "h", nil, "u", "%zz%4"),
            ("https://u:%C3%BC%e2%82%ac@h", "https", "h", nil, "u", "ü€"),
            ("http://u:p@[::1]:8080/x", "http", "[::1]:8080", "x", "u", "p"),
            ("https://u:p@ss@host", "https", "ss@host", nil, "u", "p"),
            ("https://u:p@h?x=1", "https", "h", "?x=1", "u", "p"),
            ("https://u:@h", "https", "h", nil, "u", ""),
            ("https://:p@h", "https", "h", nil, "", "p"),
            ("imaps://m%20x:p%20w@mail.example", "imaps", "mail.example", nil, "m x", "p w")
        ]
        for (text, scheme, host, path, user, password) in cases {
            let parsed = try line(text)
            XCTAssertEqual(parsed.credential.scheme, scheme, text)
            XCTAssertEqual(parsed.credential.host, host, text)
            XCTAssertEqual(parsed.credential.path, path, text)
            XCTAssertEqual(parsed.credential.username, user, text)
            XCTAssertEqual(parsed.password, password, text)
        }
    }

    func testLinesGitIgnores() {
        let cases: [(String, GitCredentialStoreLine.Problem)] = [
            ("https://u@host", .noUsernameOrPassword),
            ("https://host", .noUsernameOrPassword),
            ("https://host:443/u:p@x", .noUsernameOrPassword),
            ("host", .notAURL),
            ("://u:p@h", .notAURL),
            ("", .notAURL),
            ("https://u:p%0Aq@h", .newline("password")),
            ("https://u%0a:p@h", .newline("username"))
        ]
        for (text, problem) in cases {
            XCTAssertThrowsError(try line(text), text) { XCTAssertEqual($0 as? GitCredentialStoreLine.Problem, problem, text) }
        }
    }

    /// The item is the one git-credential-keychain's store makes for the same request.
    func testCredentialMapsAsTheHelperStoresIt() throws {
        let parsed = try line("https://alice:pw@example.com:8443/org/repo.git")
        let item = try XCTUnwrap(parsed.credential.item(account: parsed.credential.username, secret: StoredSecret(password: parsed.password)))
        XCTAssertEqual(item.itemClass, .internetPassword)
        XCTAssertEqual(item["srvr"], .string("example.com"))
        XCTAssertEqual(item["port"], .int(8443))
        XCTAssertEqual(item["ptcl"], .string("htps"))
        XCTAssertEqual(item["path"], .string("org/repo.git"))
        XCTAssertEqual(item["acct"], .string("alice"))
        XCTAssertEqual(item["labl"], .string("https://example.com:8443 (git)"))
        XCTAssertEqual(item.secret, Array("pw".utf8))
        // No host: nothing the helper could look up again, so nothing is made.
        let hostless = try line("cert://u:p@/path/to/cert.pem")
        XCTAssertNil(hostless.credential.item(account: "u", secret: StoredSecret(password: "p")))
    }

    // MARK: docker

    private func config(_ text: String) throws -> DockerConfig { try DockerConfig(parsing: Array(text.utf8)) }

    func testInlineAuths() throws {
        let text = """
            {"auths": {
              "https://index.docker.io/v1/": {"auth": "\(Base64.encode(Array("alice:pa:ss".utf8)))", "email": "a@example"},
              "registry.example:5000": {"identitytoken": "tok-1", "auth": "\(Base64.encode(Array("bob:x".utf8)))"},
              "plain.example": {"username": "carol", "password": "pw3"},
              "nul.example": {"auth": "\(Base64.encode(Array("dave:pw\0\0".utf8)))"},
              "empty.example": {},
              "email-only.example": {"email": "e@example"}
            }, "credsStore": "keychain"}
            """
        let parsed = try config(text)
        XCTAssertEqual(parsed.credsStore, "keychain")
        let entries = parsed.inlineEntries
        XCTAssertEqual(entries.map(\.serverURL), ["https://index.docker.io/v1/", "registry.example:5000", "plain.example", "nul.example"])
        XCTAssertEqual(
            entries.map(\.credential),
            [
                DockerCredential(serverURL: "https://index.docker.io/v1/", username: "alice", secret: "pa:ss"),
                DockerCredential(serverURL: "registry.example:5000", username: "<token>", secret: "tok-1"),
                DockerCredential(serverURL: "plain.example", username: "carol", secret: "pw3"),
                DockerCredential(serverURL: "nul.example", username: "dave", secret: "pw")
            ])
        XCTAssertTrue(entries.allSatisfy { $0.problem == nil })
    }

    func testUnreadableAuths() throws {
        let text = """
            {"auths": {"a": {"auth": "not base64!"}, "b": {"auth": "\(Base64.encode(Array("nocolon".utf8)))"},
                       "c": {"auth": "\(Base64.encode(Array(":pw".utf8)))"}, "d": "string", "e": {"password": "p"}}}
            """
        let entries = try config(text).inlineEntries
        XCTAssertEqual(entries.map(\.serverURL), ["a", "b", "c", "d", "e"])
        XCTAssertTrue(entries.allSatisfy { $0.credential == nil && $0.problem != nil })
        XCTAssertThrowsError(try config("[1]"))
        XCTAssertThrowsError(try config("{\"auths\": "))
        XCTAssertEqual(try config("{}").inlineEntries.count, 0)
        XCTAssertEqual(try config("{\"auths\": []}").inlineEntries.count, 0)
        XCTAssertNil(try config("{\"credsStore\": 1}").credsStore)
    }

    /// As docker leaves the file after a login through a credential store: registries kept with
    /// their secrets gone, credsStore set, the rest untouched and in order, tabs as Go indents.
    func testMigratedFile() throws {
        let text = """
            {"auths": {"https://index.docker.io/v1/": {"auth": "YTpi", "email": "a@b"}, "kept.example": {"auth": "YzpkZA=="}},
             "HttpHeaders": {"User-Agent": "x<y>"}, "psFormat": "table", "list": [1, 2.5e3, true, null, []], "credsStore": ""}
            """
        let migrated = try config(text).migrated(to: "keychain", moved: ["https://index.docker.io/v1/"])
        XCTAssertEqual(
            String(decoding: migrated, as: UTF8.self),
            """
            {
            \t"auths": {
            \t\t"https://index.docker.io/v1/": {
            \t\t\t"email": "a@b"
            \t\t},
            \t\t"kept.example": {
            \t\t\t"auth": "YzpkZA=="
            \t\t}
            \t},
            \t"HttpHeaders": {
            \t\t"User-Agent": "x\\u003cy\\u003e"
            \t},
            \t"psFormat": "table",
            \t"list": [
            \t\t1,
            \t\t2.5e3,
            \t\ttrue,
            \t\tnull,
            \t\t[]
            \t],
            \t"credsStore": "keychain"
            }

            """)
        let added = try config("{\"auths\": {\"x\": {\"identitytoken\": \"t\", \"username\": \"u\", \"password\": \"p\", \"registrytoken\": \"r\"}}}")
            .migrated(to: "keychain", moved: ["x"])
        XCTAssertEqual(
            String(decoding: added, as: UTF8.self),
            "{\n\t\"auths\": {\n\t\t\"x\": {\n\t\t\t\"registrytoken\": \"r\"\n\t\t}\n\t},\n\t\"credsStore\": \"keychain\"\n}\n")
        // What comes out reads back as the same configuration, now without inline logins.
        let again = try DockerConfig(parsing: migrated)
        XCTAssertEqual(again.credsStore, "keychain")
        XCTAssertEqual(again.inlineEntries.map(\.serverURL), ["kept.example"])
    }

    func testDockerCredentialMapsAsTheHelperStoresIt() throws {
        let (item, query) = try DockerCredential(serverURL: "https://index.docker.io/v1/", username: "alice", secret: "pw").item()
        XCTAssertEqual(item["labl"], .string("Docker Credentials"))
        XCTAssertEqual(item["icmt"], .string("https://index.docker.io/v1/"))
        XCTAssertEqual(item["srvr"], .string("index.docker.io"))
        XCTAssertEqual(item["path"], .string("/v1/"))
        XCTAssertEqual(item["port"], .int(0))
        XCTAssertEqual(item["acct"], .string("alice"))
        XCTAssertEqual(query.attributes["srvr"], .string("index.docker.io"))
        XCTAssertThrowsError(try DockerCredential(serverURL: "ftp://x", username: "u", secret: "p").item())
    }

    func testBase64AsGoDecodesIt() {
        XCTAssertEqual(Base64.decode("YWxpY2U6cHc="), Array("alice:pw".utf8))
        XCTAssertEqual(Base64.decode("YWxp\r\nY2U="), Array("alice".utf8))
        XCTAssertEqual(Base64.decode(""), [])
        XCTAssertEqual(Base64.decode("YQ=="), [0x61])
        XCTAssertEqual(Base64.decode("+/+/"), [0xfb, 0xff, 0xbf])
        for bad in ["YWxpY2U", "YQ=", "Y===", "YQ==YQ==", "YW-x", "=YQ=", "Y"] {
            XCTAssertNil(Base64.decode(bad), bad)
        }
        var g = SystemRandomNumberGenerator()
        for length in 0..<40 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &g) }
            XCTAssertEqual(Base64.decode(Base64.encode(bytes)), bytes)
        }
    }
}
