import CSDBus
import KeychainCore
import KeychainTestSupport
import SecretServiceItems
import XCTest

@testable import SecretServiceBus

/// The portal's per-app secret, one of the places a secret leaves the service: the same for one
/// app across calls, another for another app, and gnome-keyring's adopted as the app's own.
final class PortalSecretTests: StoreTestCase {
    private var bus: OpaquePointer?
    private var service: SecretService!
    private var portal: SecretPortal!

    override func setUpWithError() throws {
        try super.setUpWithError()
        XCTAssertGreaterThanOrEqual(sd_bus_new(&bus), 0)
        service = SecretService(bus: try XCTUnwrap(bus), pinentryProgram: "pinentry")
        portal = SecretPortal(service: service)
    }

    override func tearDown() {
        portal = nil
        service = nil
        sd_bus_unref(bus)
        SessionCollection.remove()
        super.tearDown()
    }

    func testEachAppHasASecretOfItsOwn() throws {
        let first = try portal.secret(of: "org.example.One", in: store)
        XCTAssertEqual(first.count, SecretPortal.secretLength)
        XCTAssertEqual(try portal.secret(of: "org.example.One", in: store), first)
        let other = try portal.secret(of: "org.example.Two", in: store)
        XCTAssertNotEqual(other, first)
        // Each is the app's own item: another app's search does not find it, nor does an
        // unconfined program's see an app's view of it.
        let attributes = [SecretPortal.appIDAttribute: "org.example.One"]
        XCTAssertEqual(try store.searchSecretItems(attributes, owner: "org.example.One").unlocked.count, 1)
        XCTAssertEqual(try store.searchSecretItems(attributes, owner: "org.example.Two").unlocked.count, 0)
    }

    /// A secret brought from gnome-keyring (no owner, only `app_id`) becomes the app's, once.
    func testABroughtSecretIsAdopted() throws {
        let attributes = [SecretPortal.appIDAttribute: "org.example.App"]
        let brought = Bytes(repeating: 0x5A, count: 64)
        _ = try store.addSecretItem(
            label: "gnome-keyring's", attributes: attributes, secret: brought, contentType: "application/octet-stream", replace: false)
        XCTAssertEqual(try portal.secret(of: "org.example.App", in: store), brought)
        XCTAssertEqual(try store.searchSecretItems(attributes, owner: "org.example.App").unlocked.count, 1)
        XCTAssertEqual(try store.searchSecretItems(attributes).unlocked.filter { $0.owner == nil }.count, 0, "the unowned copy is gone")
        XCTAssertEqual(try portal.secret(of: "org.example.App", in: store), brought)
    }
}
