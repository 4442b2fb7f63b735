import CSDBus
import Glibc
import KeychainCore
import XCTest

@testable import SessionBus

/// The engine's errors as the Secret Service names them: what libsecret and its peers act on.
final class ServiceErrorTests: XCTestCase {
    private func name(_ error: Error) -> String { ServiceError(error).name }

    func testEngineCodesMapToTheSpecsErrors() {
        XCTAssertEqual(name(KeychainError(.interactionNotAllowed)), "org.freedesktop.Secret.Error.IsLocked")
        XCTAssertEqual(name(KeychainError(.itemNotFound)), "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(name(KeychainError(.param, "bad")), "org.freedesktop.DBus.Error.InvalidArgs")
        XCTAssertEqual(name(KeychainError(.authFailed)), "org.freedesktop.DBus.Error.AccessDenied")
        XCTAssertEqual(name(KeychainError(.allocate)), "org.freedesktop.DBus.Error.LimitsExceeded")
        XCTAssertEqual(name(KeychainError(.io, "disk")), "org.freedesktop.DBus.Error.Failed")
        XCTAssertEqual(ServiceError(KeychainError(.param, "bad attribute")).message, "bad attribute")
        XCTAssertTrue(ServiceError(KeychainError(.io, "disk")).message.hasPrefix("disk ("))
    }

    /// An item that asks for the user is no locked collection: IsLocked would send libsecret to
    /// Unlock and round again.
    func testPresenceIsAccessDeniedNotLocked() {
        let presence = KeychainError.presence(.interactionNotAllowed, "needs the user")
        XCTAssertEqual(name(presence), "org.freedesktop.DBus.Error.AccessDenied")
        XCTAssertEqual(ServiceError(presence).message, "needs the user")
    }

    func testServiceErrorsPassThroughAndOthersFail() {
        XCTAssertEqual(name(ServiceError.noSession("x")), "org.freedesktop.Secret.Error.NoSession")
        XCTAssertEqual(name(ServiceError.notSupported("x")), "org.freedesktop.DBus.Error.NotSupported")
        struct Other: Error {}
        XCTAssertEqual(name(Other()), "org.freedesktop.DBus.Error.Failed")
    }

    /// sd-bus sends the filled error as the reply; the return value is the errno it stands for.
    func testSetFillsTheBusError() {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        let rc = ServiceError.accessDenied("no").set(&error)
        XCTAssertEqual(rc, -EACCES)
        XCTAssertEqual(String(cString: error.name), "org.freedesktop.DBus.Error.AccessDenied")
        XCTAssertEqual(String(cString: error.message), "no")
    }

    func testBusCallErrors() {
        for name in ["org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.DBus.Error.UnknownMethod"] {
            XCTAssertTrue(BusCallError(name: name, message: "").isNoSuchObject, name)
        }
        XCTAssertFalse(BusCallError(name: "org.freedesktop.DBus.Error.AccessDenied", message: "").isNoSuchObject)
        XCTAssertEqual(BusCallError(name: "a.B", message: "").description, "a.B")
        XCTAssertEqual(BusCallError(name: "a.B", message: "went wrong").description, "went wrong (a.B)")
    }
}
