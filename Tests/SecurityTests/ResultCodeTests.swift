import Security
import XCTest

/// Every result code of Apple's SecBase.h: the public constant has Apple's value, and
/// SecCopyErrorMessageString gives Apple's text (ResultCodeExpectations.swift, from the header).
final class ResultCodeTests: XCTestCase {
    func testEveryConstantHasApplesValue() {
        XCTAssertGreaterThan(resultCodeExpectations.count, 400)
        for code in resultCodeExpectations {
            XCTAssertEqual(code.constant, code.value, code.name)
        }
        XCTAssertEqual(Set(resultCodeExpectations.map(\.value)).count, resultCodeExpectations.count, "no two codes share a value")
    }

    func testEveryCodeHasApplesMessage() {
        for code in resultCodeExpectations {
            XCTAssertEqual(SecCopyErrorMessageString(code.value, nil) as String?, code.message, code.name)
        }
    }

    func testTheCodesWrappersCompareWith() {
        XCTAssertEqual(noErr, 0)
        XCTAssertEqual(errSecUserCanceled, -128)
        XCTAssertEqual(errSecMissingEntitlement, -34018)
        XCTAssertEqual(errSecNoSuchAttr, -25303)
        XCTAssertEqual(errSecNoSuchClass, -25306)
        XCTAssertEqual(errSecItemNotFound, -25300)
        XCTAssertEqual(SecCopyErrorMessageString(errSecMissingEntitlement, nil) as String?, "A required entitlement isn't present.")
        XCTAssertEqual(
            SecCopyErrorMessageString(errSecInternalComponent, nil) as String?, "errSecInternalComponent",
            "a code without a text reads as its name, as in SecDebugErrorMessages.strings")
    }

    /// Codes SecBase.h does not list: errno values in Apple's errno range, else "OSStatus N".
    func testCodesOutsideTheHeader() {
        XCTAssertEqual(SecCopyErrorMessageString(100_000 + ENOENT, nil) as String?, "UNIX[No such file or directory]")
        XCTAssertEqual(SecCopyErrorMessageString(-1, nil) as String?, "OSStatus -1")
        XCTAssertEqual(SecCopyErrorMessageString(12345, nil) as String?, "OSStatus 12345")
    }
}
