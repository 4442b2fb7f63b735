@_exported import Foundation
@_exported import KeychainCore

// Source compatibility with code written for Apple's Security framework: on Linux there is no
// CoreFoundation bridging, so the CF names stand for the Swift types they bridge to.
public typealias OSStatus = Int32
public typealias CFString = String
public typealias CFTypeRef = AnyObject
public typealias CFDictionary = [String: Any]
public typealias CFArray = [Any]
public typealias CFData = Data
public typealias CFBoolean = NSNumber
public typealias CFNumber = NSNumber
public typealias CFDate = Date

public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)

// Result codes (SecBase.h).
public let errSecSuccess: OSStatus = 0
public let errSecUnimplemented: OSStatus = -4
public let errSecIO: OSStatus = -36
public let errSecParam: OSStatus = -50
public let errSecAllocate: OSStatus = -108
public let errSecNotAvailable: OSStatus = -25291
public let errSecAuthFailed: OSStatus = -25293
public let errSecNoSuchKeychain: OSStatus = -25294
public let errSecDuplicateKeychain: OSStatus = -25296
public let errSecDuplicateItem: OSStatus = -25299
public let errSecItemNotFound: OSStatus = -25300
public let errSecInteractionNotAllowed: OSStatus = -25308
public let errSecDecode: OSStatus = -26275

/// Apple's text for a result code. The `reserved` argument exists on macOS and is ignored there too.
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    KeychainError.message(for: status)
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
        if let e = error as? KeychainError { self.init(e.status, e.description) }
        else if let e = error as? SecError { self = e }
        else { self.init(errSecParam, "\(error)") }
    }

    public var description: String { "\(KeychainError.name(for: status)) (\(status)): \(message)" }
}
