import CSDBus
import Glibc
import XCTest

@testable import SecretServiceBus

/// The spec's object paths: a keychain's name as one path element, the shape that tells which
/// interfaces a path has, and what a path names.
final class ObjectPathTests: XCTestCase {
    override func tearDown() {
        // The session collection's folder, made on the first look at its file.
        SessionCollection.remove()
    }

    func testKeychainNamesAsPathElements() {
        XCTAssertEqual(ObjectPaths.element(for: "login"), "login")
        XCTAssertEqual(ObjectPaths.element(for: "Work2"), "Work2")
        XCTAssertEqual(ObjectPaths.element(for: "my keys"), "my_20keys")
        XCTAssertEqual(ObjectPaths.element(for: "a_b-c.d"), "a_5fb_2dc_2ed")
        XCTAssertEqual(ObjectPaths.element(for: "é"), "_c3_a9")
        XCTAssertEqual(ObjectPaths.element(for: ""), "")
    }

    /// A keychain file's collection: its name from the file, and a file named `session` kept off
    /// the session collection's path.
    func testCollectionsNamedAfterTheirFile() {
        let login = Collection(file: "/home/ann/Library/Keychains/login.keychain-db")
        XCTAssertEqual(login.name, "login")
        XCTAssertEqual(login.path, "/org/freedesktop/secrets/collection/login")
        XCTAssertEqual(login.itemPath(12), "/org/freedesktop/secrets/collection/login/12")
        XCTAssertFalse(login.isSession)
        XCTAssertEqual(Collection(file: "/k/my keys.keychain-db").path, "/org/freedesktop/secrets/collection/my_20keys")
        XCTAssertEqual(Collection(file: "/k/session.keychain-db").element, "session_2")
        XCTAssertEqual(Collection(file: "/k/other.keychain").name, "other.keychain")
    }

    /// What sd-bus asks before a call reaches the handler: by the path's shape alone, so a deleted
    /// item answers NoSuchObject, not UnknownObject.
    func testInterfacesByShape() throws {
        var bus: OpaquePointer?
        XCTAssertGreaterThanOrEqual(sd_bus_new(&bus), 0)
        defer { sd_bus_unref(bus) }
        let service = SecretService(bus: try XCTUnwrap(bus), pinentryProgram: "pinentry")
        let root = "/org/freedesktop/secrets"
        XCTAssertTrue(service.exists(root + "/collection/login", Interface.collection))
        XCTAssertTrue(service.exists(root + "/aliases/default", Interface.collection))
        XCTAssertFalse(service.exists(root + "/collection/login", Interface.item))
        XCTAssertTrue(service.exists(root + "/collection/login/7", Interface.item))
        XCTAssertTrue(service.exists(root + "/aliases/default/7", Interface.item))
        XCTAssertFalse(service.exists(root + "/collection/login/7/1", Interface.item))
        XCTAssertFalse(service.exists(root + "/collection/login//7", Interface.item))
        XCTAssertFalse(service.exists(root + "/collection/", Interface.collection))
        XCTAssertTrue(service.exists(root + "/session/s1", Interface.session))
        XCTAssertFalse(service.exists(root + "/session/s1", Interface.prompt))
        XCTAssertTrue(service.exists(root + "/prompt/p2", Interface.prompt))
        XCTAssertFalse(service.exists(root + "/collection/login", "org.example.Other"))
        XCTAssertFalse(service.exists("/org/freedesktop/secretsX/collection/login", Interface.collection))
    }

    /// The session collection is always there, under its path and its alias; item rows are
    /// positive numbers of at most 18 digits.
    func testResolvingPaths() throws {
        let registry = CollectionRegistry()
        let session = registry.session
        let base = "/org/freedesktop/secrets/collection/session"
        let found = try XCTUnwrap(registry.resolve(base))
        XCTAssertTrue(found.collection === session)
        XCTAssertNil(found.row)
        XCTAssertEqual(registry.resolve(base + "/42")?.row, 42)
        XCTAssertTrue(registry.resolve("/org/freedesktop/secrets/aliases/session/42")?.collection === session)
        XCTAssertEqual(registry.resolve(base + "/" + String(repeating: "9", count: 18))?.row, 999_999_999_999_999_999)
        for bad in [
            base + "/0", base + "/-1", base + "/12a", base + "/", base + "/" + String(repeating: "9", count: 19), base + "/1/2",
            "/org/freedesktop/secrets/collection/", "/org/freedesktop/secrets/session/s1", "/", "",
            "/org/freedesktop/secrets/aliases/no-such-alias"
        ] {
            XCTAssertNil(registry.resolve(bad), bad)
        }
        XCTAssertEqual(registry.aliasNames(of: session), ["session"])
    }
}
