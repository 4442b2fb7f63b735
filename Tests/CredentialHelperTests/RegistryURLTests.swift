import CredentialHelperSupport
import KeychainCore
import XCTest

/// The URL forms docker, podman and skopeo send, read as docker-credential-helpers reads them.
final class RegistryURLTests: XCTestCase {
    private func parse(_ text: String) throws -> RegistryURL { try RegistryURL(parsing: text) }

    func testForms() throws {
        let cases: [(String, String, String, Int?, String)] = [
            ("foobar.docker.io", "https", "foobar.docker.io", nil, ""),
            ("foobar.docker.io:2376", "https", "foobar.docker.io", 2376, ""),
            ("//foobar.docker.io:2376", "https", "foobar.docker.io", 2376, ""),
            ("http://foobar.docker.io:2376", "http", "foobar.docker.io", 2376, ""),
            ("https://foobar.docker.io:2376", "https", "foobar.docker.io", 2376, ""),
            ("https://foobar.docker.io:2376/some/path", "https", "foobar.docker.io", 2376, "/some/path"),
            ("http://foobar.docker.io/some/path", "http", "foobar.docker.io", nil, "/some/path"),
            ("https://foobar.docker.io:2376/some/other/path?foo=bar", "https", "foobar.docker.io", 2376, "/some/other/path"),
            ("https://index.docker.io/v1/", "https", "index.docker.io", nil, "/v1/"),
            ("[::1]:5000", "https", "::1", 5000, ""),
            ("http://[::1]:5000/v2/", "http", "::1", 5000, "/v2/"),
            ("[fe80::1]", "https", "fe80::1", nil, ""),
            ("https://registry.example//////a/../../b", "https", "registry.example", nil, "//////a/../../b"),
            ("HTTPS://Registry.Example", "https", "Registry.Example", nil, ""),
            ("https://user@registry.example/x", "https", "registry.example", nil, "/x")
        ]
        for (text, scheme, server, port, path) in cases {
            let url = try parse(text)
            XCTAssertEqual(url.scheme, scheme, text)
            XCTAssertEqual(url.host.server, server, text)
            XCTAssertEqual(url.host.port, port, text)
            XCTAssertEqual(url.path, path, text)
        }
    }

    func testRejected() {
        let cases: [(String, String)] = [
            ("ftp://foobar.docker.io:2376", "unsupported scheme: ftp"),
            ("/foobar.docker.io", "no hostname in URL"),
            ("https://", "no hostname in URL"),
            ("https://host:port", "invalid port \":port\" after host"),
            ("https://host:99999", "invalid port \":99999\" after host")
        ]
        for (text, message) in cases {
            XCTAssertThrowsError(try parse(text), text) { error in
                XCTAssertEqual((error as? RegistryURL.Invalid)?.description, message, text)
            }
        }
    }

    func testRebuiltText() throws {
        XCTAssertEqual(try parse("[::1]:5000").text, "https://[::1]:5000")
        XCTAssertEqual(try parse("http://h:80/p").text, "http://h:80/p")
        XCTAssertEqual(HostAndPort(parsing: "[::1]:8080"), HostAndPort(server: "::1", port: 8080))
        XCTAssertEqual(HostAndPort(parsing: "host:0x10"), HostAndPort(server: "host:0x10", port: nil))
    }

    /// Stored by one URL, found (or not) by another: the strict cases must not match.
    func testMatching() throws {
        var template = Array("/tmp/registry-url-XXXXXX".utf8CString)
        let dir = String(cString: mkdtemp(&template)!)
        defer { _ = system("rm -rf '\(dir)'") }
        let store = try KeychainStore.create(
            at: dir + "/k/test.keychain-db", password: Array("pw".utf8),
            scrypt: .fastForTesting, storage: .process)
        func save(_ text: String) throws {
            try store.addOrUpdate(
                Item(
                    itemClass: .internetPassword, attributes: try parse(text).exactAttributes.merging([AttributeKey.account: .string(text)]) { a, _ in a },
                    secret: Array(text.utf8)),
                matching: Query(itemClass: .internetPassword, attributes: try parse(text).exactAttributes))
        }
        func found(_ text: String) throws -> [String] {
            do {
                return try store.find(Query(itemClass: .internetPassword, attributes: try parse(text).searchAttributes), limit: nil)
                    .compactMap { $0[AttributeKey.account]?.stringValue }.sorted()
            } catch let error as KeychainError where error.code == .itemNotFound {
                return []
            }
        }
        try save("https://registry.example:5000/v2/")
        try save("http://plain.example")
        try save("registry.example")
        XCTAssertEqual(try found("https://registry.example:5000/v2/"), ["https://registry.example:5000/v2/"])
        XCTAssertEqual(try found("registry.example:5000"), ["https://registry.example:5000/v2/"], "absent path is a wildcard")
        XCTAssertEqual(try found("registry.example"), ["https://registry.example:5000/v2/", "registry.example"], "absent port is a wildcard")
        XCTAssertEqual(try found("http://registry.example"), [], "http never matches https")
        XCTAssertEqual(try found("https://plain.example"), [], "https never matches http")
        XCTAssertEqual(try found("plain.example"), [], "no scheme means https")
        XCTAssertEqual(try found("http://plain.example"), ["http://plain.example"])
        XCTAssertEqual(try found("registry.example:5001"), [], "a different port")
        XCTAssertEqual(try found("https://registry.example:5000/v1/"), [], "a different path")
        XCTAssertEqual(try found("https://registry.example:5000//v2/"), [], "paths are compared as given, not cleaned")
        // Storing the same URL again replaces, whoever the user.
        try save("registry.example")
        XCTAssertEqual(try store.find(Query(itemClass: .internetPassword, attributes: [AttributeKey.server: .string("registry.example")]), limit: nil).count, 2)
    }
}

final class JSONTests: XCTestCase {
    func testParse() throws {
        XCTAssertEqual(
            try JSON.parse(Array(#" {"a": "b\u00e9\n", "n": -1.5e3, "t": true, "z": null, "l": [1, {}]} trailing"#.utf8)),
            .object([
                ("a", .string("bé\n")), ("n", .number("-1.5e3")), ("t", .bool(true)), ("z", .null),
                ("l", .array([.number("1"), .object([])]))
            ]))
        XCTAssertEqual(try JSON.parse(Array(#""\ud83d\ude00""#.utf8)), .string("😀"))
        for bad in ["", "{", "{\"a\"", "{\"a\":}", "nope", "[1,]", "\"\u{01}\"", "{\"a\" 1}", String(repeating: "[", count: 10_000)] {
            XCTAssertThrowsError(try JSON.parse(Array(bad.utf8)), bad)
        }
    }

    func testEncodeEscapesAsGo() {
        XCTAssertEqual(JSON.encode([("k", "<token>&\"\\\n\u{1}")]), #"{"k":"\u003ctoken\u003e\u0026\"\\\n\u0001"}"#)
        XCTAssertEqual(JSON.encode([]), "{}")
    }
}
