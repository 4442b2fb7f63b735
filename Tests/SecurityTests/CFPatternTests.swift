import Security
import XCTest

/// The Core Foundation patterns Swift keychain code written for Apple's platforms uses, each
/// compiled and run here as it is written there.
final class CFPatternTests: XCTestCase {
    var keychain: TestKeychain!

    override func setUpWithError() throws { keychain = try TestKeychain() }
    override func tearDown() { keychain.tearDown() }

    private func addPassword(_ account: String, _ secret: String = "pw") {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
            kSecAttrAccount as String: account, kSecValueData as String: Data(secret.utf8)
        ]
        XCTAssertEqual(SecItemAdd(query as CFDictionary, nil), errSecSuccess)
    }

    func testConstantsAsStringKeysAndAsObjects() {
        let key: String = kSecClass as String
        XCTAssertEqual(key, "class")
        let object: AnyObject = kSecClassGenericPassword
        XCTAssertEqual(object as? String, "genp")
        func takesObject(_ value: AnyObject) -> String? { value as? String }
        XCTAssertEqual(takesObject(kSecAttrAccessibleWhenUnlocked), "ak")
        XCTAssertTrue(kSecClass == "class" as CFString)
        let booleans: [AnyObject] = [kCFBooleanTrue, kCFBooleanFalse]
        XCTAssertEqual(booleans.map { ($0 as? Bool) ?? false }, [true, false])
        XCTAssertTrue(CFBooleanGetValue(kCFBooleanTrue))
        XCTAssertEqual(CFGetTypeID(kCFBooleanTrue), CFBooleanGetTypeID())
        XCTAssertEqual(CFGetTypeID(kSecClass), CFStringGetTypeID())
        let lookup: [String: CFString] = ["always": kSecAttrAccessibleAlways]
        XCTAssertEqual(lookup["always"].map { $0 as String }, "dk")
    }

    func testDictionaryLiteralWithConstantKeysAsCFDictionary() {
        let add =
            [
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "literal",
                kSecValueData: Data("x".utf8), kSecReturnData: kCFBooleanTrue!
            ] as CFDictionary
        var result: CFTypeRef?
        XCTAssertEqual(SecItemAdd(add, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("x".utf8))
    }

    func testStringAnyStringAnyObjectAndOptionalKeysBridge() {
        let any: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "any",
            kSecValueData as String: Data("1".utf8)
        ]
        XCTAssertEqual(SecItemAdd(any as CFDictionary, nil), errSecSuccess)
        let objects: [String: AnyObject] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "objects" as NSString,
            kSecValueData as String: Data("2".utf8) as NSData
        ]
        XCTAssertEqual(SecItemAdd(objects as CFDictionary, nil), errSecSuccess)
        var optionalKeys = [String?: AnyObject]()
        optionalKeys[kSecClass as String] = kSecClassGenericPassword
        optionalKeys[kSecAttrAccount as String] = "optional" as NSString
        optionalKeys[kSecValueData as String] = Data("3".utf8) as NSData
        XCTAssertEqual(SecItemAdd(optionalKeys as CFDictionary, nil), errSecSuccess)
        var result: CFTypeRef?
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecReturnAttributes: true,
                    kSecMatchLimit: kSecMatchLimitAll
                ] as CFDictionary, &result), errSecSuccess)
        let accounts = (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String }.sorted()
        XCTAssertEqual(accounts, ["any", "objects", "optional"])
    }

    /// SecItem reads a dictionary's objects as they are (CFoundationBridge) and converts the usual
    /// kinds itself: each form of a value must mean what Foundation's own conversion made of it.
    func testEveryFormOfAValueMeansTheSame() {
        let add = NSMutableDictionary()
        add[kSecClass] = kSecClassGenericPassword
        add[kSecAttrAccount] = NSMutableString(string: "mutable")
        add[kSecAttrService] = "svc" as NSString
        add[kSecAttrGeneric] = NSMutableData(data: Data([1, 2, 3]))
        add[kSecValueData] = NSData()
        add[kSecAttrIsInvisible] = kCFBooleanTrue
        add[kSecAttrCreator] = NSNumber(value: 0x6b6c)
        add[kSecAttrSynchronizable] = kCFBooleanFalse
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)
        var result: CFTypeRef?
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "mutable",
            kSecReturnAttributes as String: true, kSecReturnData as String: true
        ]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let found = result as? [String: Any]
        XCTAssertEqual(found?[kSecValueData as String] as? Data, Data(), "empty data is data")
        XCTAssertEqual(found?[kSecAttrGeneric as String] as? Data, Data([1, 2, 3]))
        XCTAssertEqual((found?[kSecAttrIsInvisible as String] as? NSNumber)?.boolValue, true)
        XCTAssertEqual((found?[kSecAttrCreator as String] as? NSNumber)?.intValue, 0x6b6c)
        // A boolean is no match limit, a number is.
        XCTAssertEqual(
            SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecMatchLimit: kCFBooleanTrue!] as CFDictionary, &result),
            errSecParam)
        XCTAssertEqual(
            SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecMatchLimit: NSNumber(value: 2),
                    kSecReturnAttributes: kCFBooleanTrue!
                ] as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual((result as? [Any])?.count, 1)
        // A value of a kind SecItem has no use for is still errSecParam.
        XCTAssertEqual(
            SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "odd", kSecAttrLabel: NSNull()] as CFDictionary, nil),
            errSecParam)
    }

    func testAKeyThatIsNotAStringIsErrSecParam() {
        let numberKeys: NSDictionary = [1: "x", kSecClass: kSecClassGenericPassword]
        XCTAssertEqual(SecItemAdd(numberKeys, nil), errSecParam)
        var nilKey = [String?: AnyObject]()
        nilKey[kSecClass as String] = kSecClassGenericPassword
        nilKey[nil] = "x" as NSString
        XCTAssertEqual(SecItemAdd(nilKey as CFDictionary, nil), errSecParam)
    }

    func testResultsReadBackEveryWay() throws {
        addPassword("reader", "secret")
        var result: CFTypeRef?
        let both =
            [
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: "reader",
                kSecReturnAttributes: true, kSecReturnData: true
            ] as CFDictionary
        XCTAssertEqual(SecItemCopyMatching(both, &result), errSecSuccess)
        XCTAssertEqual(CFGetTypeID(result), CFDictionaryGetTypeID())
        let swift = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(swift[kSecValueData as String] as? Data, Data("secret".utf8))
        let objects = try XCTUnwrap(result as? [String: AnyObject])
        XCTAssertEqual(objects[kSecAttrAccount as String] as? String, "reader")
        let ns = try XCTUnwrap(result as? NSDictionary)
        XCTAssertEqual(ns[kSecAttrAccount] as? String, "reader")
        XCTAssertEqual(ns[kSecAttrAccount as String] as? String, "reader")
        let cf = result as! CFDictionary
        XCTAssertEqual(CFDictionaryGetCount(cf), ns.count)
        let hashable = try XCTUnwrap(result as? [AnyHashable: Any])
        XCTAssertEqual(hashable[kSecAttrAccount as String] as? String, "reader")
        XCTAssertEqual(hashable[kSecAttrAccount] as? String, "reader", "a constant is the String it bridges to as an AnyHashable")
        XCTAssertEqual(AnyHashable(kSecAttrAccount), AnyHashable("acct"))

        result = nil
        let data = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "reader", kSecReturnData: true] as CFDictionary
        XCTAssertEqual(SecItemCopyMatching(data, &result), errSecSuccess)
        XCTAssertEqual(CFGetTypeID(result), CFDataGetTypeID())
        XCTAssertEqual(result as? Data, Data("secret".utf8))
        let nsData = try XCTUnwrap(result as? NSData)
        XCTAssertEqual(CFDataGetLength(nsData), 6)
        XCTAssertEqual(CFDataGetBytePtr(nsData)[0], UInt8(ascii: "s"))

        addPassword("second")
        result = nil
        let all = [kSecClass: kSecClassGenericPassword, kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll] as CFDictionary
        XCTAssertEqual(SecItemCopyMatching(all, &result), errSecSuccess)
        XCTAssertEqual(CFGetTypeID(result), CFArrayGetTypeID())
        XCTAssertEqual(CFArrayGetCount(result as? CFArray), 2)
        XCTAssertEqual((result as? [[String: Any]])?.count, 2)
        XCTAssertEqual((result as? [NSDictionary])?.count, 2)
        let first = try XCTUnwrap((result as? [[String: Any]])?.first)
        XCTAssertEqual(CFGetTypeID(first[kSecAttrAccount as String] as AnyObject), CFStringGetTypeID())
    }

    func testTypeIDsTellTheCFTypesApart() {
        let ids = [
            CFStringGetTypeID(), CFDictionaryGetTypeID(), CFArrayGetTypeID(), CFDataGetTypeID(), CFNumberGetTypeID(),
            CFBooleanGetTypeID(), CFDateGetTypeID(), CFNullGetTypeID(), CFErrorGetTypeID(), SecAccessControlGetTypeID()
        ]
        XCTAssertEqual(Set(ids).count, ids.count)
        XCTAssertEqual(CFGetTypeID("s" as NSString), CFStringGetTypeID())
        XCTAssertEqual(CFGetTypeID(NSDictionary()), CFDictionaryGetTypeID())
        XCTAssertEqual(CFGetTypeID(NSArray()), CFArrayGetTypeID())
        XCTAssertEqual(CFGetTypeID(NSData()), CFDataGetTypeID())
        XCTAssertEqual(CFGetTypeID(NSNumber(value: 5)), CFNumberGetTypeID())
        XCTAssertEqual(CFGetTypeID(NSNumber(value: 1)), CFNumberGetTypeID(), "a number that happens to be one is not a boolean")
        XCTAssertEqual(CFGetTypeID(kCFBooleanFalse), CFBooleanGetTypeID())
        XCTAssertEqual(CFGetTypeID(kCFNull), CFNullGetTypeID())
        XCTAssertEqual(CFGetTypeID(NSDate()), CFDateGetTypeID())
    }

    func testCFEqualAcrossBridgedForms() {
        XCTAssertTrue(CFEqual(kSecClassGenericPassword, "genp" as NSString))
        XCTAssertFalse(CFEqual(kSecClassGenericPassword, kSecClassInternetPassword))
        XCTAssertTrue(CFEqual(NSData(data: Data([1, 2])), Data([1, 2]) as NSData))
        XCTAssertTrue(CFEqual(kCFBooleanTrue, NSNumber(value: true)))
        XCTAssertTrue(CFEqual(nil, nil))
        XCTAssertFalse(CFEqual(kSecClass, nil))
        XCTAssertEqual(CFHash("genp" as NSString), CFHash(kSecClassGenericPassword))
        XCTAssertEqual(CFCopyDescription(kSecClass) as String, "class")
        XCTAssertEqual(CFStringGetLength(kSecAttrAccessibleWhenUnlockedThisDeviceOnly), 3)
        let made = CFDataCreate(kCFAllocatorDefault, [7, 8, 9], 3)
        XCTAssertEqual(made as Data?, Data([7, 8, 9]))
    }

    /// CFError as Apple's code sees it: the out-parameter taken with takeRetainedValue, then
    /// read with the CFError functions or as a Swift Error.
    func testCFErrorOutParameter() throws {
        var error: Unmanaged<CFError>?
        XCTAssertNil(
            SecKeyCreateWithData(
                Data([1, 2, 3]) as CFData,
                [
                    kSecAttrKeyType: kSecAttrKeyTypeRSA,
                    kSecAttrKeyClass: kSecAttrKeyClassPrivate
                ] as CFDictionary, &error))
        let cfError = try XCTUnwrap(error?.takeRetainedValue())
        XCTAssertEqual(CFGetTypeID(cfError), CFErrorGetTypeID())
        XCTAssertEqual(CFErrorGetDomain(cfError) as String, "NSOSStatusErrorDomain")
        XCTAssertEqual(CFErrorGetDomain(cfError), kCFErrorDomainOSStatus)
        XCTAssertNotEqual(CFErrorGetCode(cfError), 0)
        let info = try XCTUnwrap(CFErrorCopyUserInfo(cfError) as? [String: Any])
        XCTAssertNotNil(info[kCFErrorLocalizedDescriptionKey as String] as? String)
        XCTAssertEqual(CFErrorCopyDescription(cfError) as String, info[NSLocalizedDescriptionKey] as? String)
        let swiftError: Error = cfError as Error
        XCTAssertEqual((swiftError as NSError).code, CFErrorGetCode(cfError))

        let made = CFErrorCreate(nil, kCFErrorDomainOSStatus, CFIndex(errSecParam), [kCFErrorLocalizedDescriptionKey as String: "bad"] as CFDictionary)
        XCTAssertEqual(CFErrorGetCode(made), -50)
        XCTAssertEqual(CFErrorCopyDescription(made) as String, "bad")
    }

    /// Apple's Swift code compares results with MacTypes' noErr.
    func testNoErr() {
        addPassword("noerr")
        let status = SecItemCopyMatching([kSecClass: kSecClassGenericPassword] as CFDictionary, nil)
        XCTAssertTrue(status == noErr)
        XCTAssertEqual(noErr, errSecSuccess)
    }
}

final class SecRandomTests: XCTestCase {
    func testFillsTheBufferAsAsked() {
        var a = [UInt8](repeating: 0, count: 37), b = [UInt8](repeating: 0, count: 37)
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, a.count, &a), errSecSuccess)
        XCTAssertEqual(SecRandomCopyBytes(nil, b.count, &b), errSecSuccess)
        XCTAssertNotEqual(a, b)
        XCTAssertNotEqual(a.suffix(5), [0, 0, 0, 0, 0], "the tail past the last whole word is filled too")
        var none: UInt8 = 7
        XCTAssertEqual(SecRandomCopyBytes(nil, 0, &none), errSecSuccess)
        XCTAssertEqual(none, 7)
    }
}
