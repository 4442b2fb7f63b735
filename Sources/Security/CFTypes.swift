@_exported import Foundation
internal import KeychainCore

// Core Foundation as Swift code on Apple's platforms sees it. There, CFString, CFDictionary, CFData
// ... are classes toll-free bridged to NSString, NSDictionary, NSData; on Linux,
// swift-corelibs-foundation's NS classes bridge with `as` to String, Dictionary, Data, so naming
// the CF types for those classes gives the same behaviour: `kSecClass as String`,
// `[kSecClass: kSecClassGenericPassword] as CFDictionary`, a constant passed as `AnyObject`,
// `[String: Any]` bridged `as CFDictionary`, results read back with `as? [String: Any]` or `as? Data`.

public typealias OSStatus = Int32
public typealias CFIndex = Int
public typealias CFTypeID = UInt
public typealias CFOptionFlags = UInt
public typealias CFHashCode = UInt
public typealias CFTypeRef = AnyObject
public typealias CFString = NSString
public typealias CFMutableString = NSMutableString
public typealias CFDictionary = NSDictionary
public typealias CFMutableDictionary = NSMutableDictionary
public typealias CFArray = NSArray
public typealias CFMutableArray = NSMutableArray
public typealias CFData = NSData
public typealias CFMutableData = NSMutableData
public typealias CFNumber = NSNumber
/// Apple's CFBoolean is a class of its own; Foundation on Linux holds booleans in NSNumber and
/// tells them from numbers by the objCType "c".
public typealias CFBoolean = NSNumber
public typealias CFDate = NSDate
public typealias CFNull = NSNull
public typealias CFError = NSError
public typealias CFErrorDomain = CFString

/// An allocator argument, accepted for source compatibility: memory here is Swift's.
public final class CFAllocator: @unchecked Sendable {
    fileprivate init() {}
}

public let kCFAllocatorDefault: CFAllocator! = CFAllocator()
public let kCFAllocatorSystemDefault: CFAllocator! = kCFAllocatorDefault
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
public let kCFNull: CFNull! = NSNull()

// MARK: Type identifiers

/// Core Foundation's own numbers for its types (stable on Apple's systems since 10.x); the
/// Security types take numbers of their own, above any CF uses.
enum TypeID {
    static let string: CFTypeID = 7
    static let null: CFTypeID = 16
    static let dictionary: CFTypeID = 18
    static let array: CFTypeID = 19
    static let data: CFTypeID = 20
    static let boolean: CFTypeID = 21
    static let number: CFTypeID = 22
    static let date: CFTypeID = 42
    static let error: CFTypeID = 43
    static let unknown: CFTypeID = 1
    static let keychain: CFTypeID = 1001
    static let keychainItem: CFTypeID = 1002
    static let certificate: CFTypeID = 1003
    static let key: CFTypeID = 1004
    static let identity: CFTypeID = 1005
    static let accessControl: CFTypeID = 1006
    static let access: CFTypeID = 1007
    static let trustedApplication: CFTypeID = 1008
    static let acl: CFTypeID = 1009
}

public func CFStringGetTypeID() -> CFTypeID { TypeID.string }
public func CFNullGetTypeID() -> CFTypeID { TypeID.null }
public func CFDictionaryGetTypeID() -> CFTypeID { TypeID.dictionary }
public func CFArrayGetTypeID() -> CFTypeID { TypeID.array }
public func CFDataGetTypeID() -> CFTypeID { TypeID.data }
public func CFBooleanGetTypeID() -> CFTypeID { TypeID.boolean }
public func CFNumberGetTypeID() -> CFTypeID { TypeID.number }
public func CFDateGetTypeID() -> CFTypeID { TypeID.date }
public func CFErrorGetTypeID() -> CFTypeID { TypeID.error }

/// The CF type of a value, for code that dispatches on it (`CFGetTypeID(result) == CFDataGetTypeID()`).
/// Swift values that bridge (a `Data` passed `as AnyObject`) count as the CF type they bridge to.
public func CFGetTypeID(_ cf: CFTypeRef?) -> CFTypeID {
    switch cf {
    case nil: return TypeID.unknown
    case is SecAccessControl: return TypeID.accessControl
    case is SecAccess: return TypeID.access
    case is SecTrustedApplication: return TypeID.trustedApplication
    case is SecACL: return TypeID.acl
    case is SecKeychain: return TypeID.keychain
    case is SecKeychainItem: return TypeID.keychainItem
    case is SecCertificate: return TypeID.certificate
    case is SecKey: return TypeID.key
    case is SecIdentity: return TypeID.identity
    case is NSNull: return TypeID.null
    case let number as NSNumber: return isBoolean(number) ? TypeID.boolean : TypeID.number
    case is NSString, is String: return TypeID.string
    case is NSData, is Data: return TypeID.data
    case is NSDictionary: return TypeID.dictionary
    case is NSArray: return TypeID.array
    case is NSDate, is Date: return TypeID.date
    case is NSError: return TypeID.error
    default: return TypeID.unknown
    }
}

/// A boolean NSNumber (what kCFBooleanTrue and Swift's `true` bridge to), not a number that holds 0 or 1.
func isBoolean(_ number: NSNumber) -> Bool {
    String(cString: number.objCType) == "c" && (number.int64Value == 0 || number.int64Value == 1)
}

// MARK: Equality, hashing, descriptions

/// Value equality across bridged forms (an NSString equals the String it bridges to).
public func CFEqual(_ cf1: CFTypeRef?, _ cf2: CFTypeRef?) -> Bool {
    switch (cf1, cf2) {
    case (nil, nil): return true
    case (nil, _), (_, nil): return false
    case let (a as SecAccessControl, b as SecAccessControl): return a == b
    case let (a as NSObject, b as NSObject): return a.isEqual(b)
    case let (a?, b?): return a === b
    }
}

public func CFHash(_ cf: CFTypeRef?) -> CFHashCode {
    guard let object = cf as? NSObject else { return cf.map { CFHashCode(bitPattern: ObjectIdentifier($0).hashValue) } ?? 0 }
    return CFHashCode(bitPattern: object.hash)
}

public func CFCopyDescription(_ cf: CFTypeRef?) -> CFString! {
    cf.map { String(describing: $0) as NSString }
}

// MARK: Booleans, numbers, strings, data, collections

public func CFBooleanGetValue(_ boolean: CFBoolean!) -> Bool { boolean.boolValue }

public func CFStringGetLength(_ string: CFString!) -> CFIndex { string.length }

public func CFDataCreate(_ allocator: CFAllocator?, _ bytes: UnsafePointer<UInt8>?, _ length: CFIndex) -> CFData! {
    guard let bytes, length > 0 else { return NSData() }
    return NSData(bytes: bytes, length: length)
}

public func CFDataGetLength(_ data: CFData!) -> CFIndex { data.length }

/// The bytes of `data`, valid while `data` is alive (as on Apple's systems).
public func CFDataGetBytePtr(_ data: CFData!) -> UnsafePointer<UInt8>! {
    data.bytes.assumingMemoryBound(to: UInt8.self)
}

public func CFArrayGetCount(_ array: CFArray!) -> CFIndex { array.count }
public func CFDictionaryGetCount(_ dictionary: CFDictionary!) -> CFIndex { dictionary.count }

// MARK: Errors

public let kCFErrorDomainOSStatus: CFErrorDomain! = NSString(string: "NSOSStatusErrorDomain")
public let kCFErrorDomainPOSIX: CFErrorDomain! = NSString(string: "NSPOSIXErrorDomain")
public let kCFErrorLocalizedDescriptionKey: CFString! = NSString(string: "NSLocalizedDescription")
public let kCFErrorLocalizedFailureReasonKey: CFString! = NSString(string: "NSLocalizedFailureReason")

public func CFErrorCreate(
    _ allocator: CFAllocator?, _ domain: CFErrorDomain!, _ code: CFIndex,
    _ userInfo: CFDictionary!
) -> CFError! {
    var info: [String: Any] = [:]
    for (key, value) in userInfo ?? [:] {
        if let name = key as? String { info[name] = value }
    }
    return NSError(domain: domain as String, code: code, userInfo: info)
}

public func CFErrorGetDomain(_ error: CFError!) -> CFErrorDomain! { error.domain as NSString }
public func CFErrorGetCode(_ error: CFError!) -> CFIndex { error.code }

public func CFErrorCopyUserInfo(_ error: CFError!) -> CFDictionary! {
    NSDictionary(dictionary: error.userInfo)
}

public func CFErrorCopyDescription(_ error: CFError!) -> CFString! {
    error.localizedDescription as NSString
}

public func CFErrorCopyFailureReason(_ error: CFError!) -> CFString? {
    error.localizedFailureReason.map { $0 as NSString }
}

/// The CFError the Security functions report: Apple's OSStatus domain, the code, and a message.
func securityError(_ status: OSStatus, _ message: String) -> CFError {
    NSError(domain: "NSOSStatusErrorDomain", code: Int(status), userInfo: [NSLocalizedDescriptionKey: message])
}

/// Fills a `CFErrorRef *` out-parameter as Apple does: retained, for `takeRetainedValue()`.
func report(_ error: Error, _ out: UnsafeMutablePointer<Unmanaged<CFError>?>?) {
    let secError = SecError(error)
    out?.pointee = Unmanaged.passRetained(securityError(secError.status, secError.message))
}

// MARK: Result codes

/// Apple's text for a result code (SecBase.h's); "OSStatus N" for a code it does not know.
/// The `reserved` argument exists on macOS and is ignored there too.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    KeychainError.message(for: status) as NSString
}

/// The error the Swift conveniences throw: the OSStatus and a line for people.
public struct SecError: Error, Equatable, CustomStringConvertible {
    public let status: OSStatus
    public let message: String

    public init(_ status: OSStatus, _ message: String? = nil) {
        self.status = status
        self.message = message ?? KeychainError.message(for: status)
    }

    init(_ error: Error) {
        if let e = error as? KeychainError {
            self.init(e.status, e.description)
        } else if let e = error as? SecError {
            self = e
        } else {
            self.init(errSecParam, "\(error)")
        }
    }

    public var description: String { "\(KeychainError.name(for: status)) (\(status)): \(message)" }
}
