internal import KeychainCore

/// Apple's SecAccessControlCreateFlags, with Apple's values (SecAccessControl.h).
public struct SecAccessControlCreateFlags: OptionSet, Hashable, Sendable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    @available(*, deprecated, renamed: "biometryAny")
    public static let touchIDAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static let touchIDCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    public static let companion = SecAccessControlCreateFlags(rawValue: 1 << 5)
    @available(*, deprecated, renamed: "companion")
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)

    /// The constraints that stand for a person: satisfying one needs someone at the machine.
    static let needingAPerson: SecAccessControlCreateFlags = [
        .userPresence, .biometryAny, .biometryCurrentSet,
        .devicePasscode, .companion, .applicationPassword
    ]
}

/// What kSecAttrAccessControl holds: a protection class (a kSecAttrAccessible value) and the
/// conditions on using the item. The item is stored in that protection class; the flags are kept
/// with the item and come back in its attributes.
public final class SecAccessControl: Equatable, CustomStringConvertible {
    let protection: Protection
    public let flags: SecAccessControlCreateFlags

    init(protection: Protection, flags: SecAccessControlCreateFlags) {
        self.protection = protection
        self.flags = flags
    }

    public static func == (a: SecAccessControl, b: SecAccessControl) -> Bool {
        a.protection == b.protection && a.flags == b.flags
    }

    public var description: String { "<SecAccessControl: \(protection.rawValue), flags 0x\(String(flags.rawValue, radix: 16))>" }
}

public func SecAccessControlGetTypeID() -> CFTypeID { TypeID.accessControl }

/// An access control for `protection` with `flags`, checked as Apple checks them: a known
/// protection class, at most one of `.or`/`.and`, one biometry constraint, and `.userPresence`
/// combined only with `.applicationPassword` and `.privateKeyUsage`. Failures are errSecParam.
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef,
    _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    do {
        guard let name = protection as? String, let protectionClass = Protection(rawValue: name) else {
            throw KeychainError.param("SecAccessControl: invalid protection: \(CFCopyDescription(protection) ?? "nil")")
        }
        if flags.contains(.or) && flags.contains(.and) {
            throw KeychainError.param("only one logical operation can be set")
        }
        if flags.isSuperset(of: [.biometryAny, .biometryCurrentSet]) {
            throw KeychainError.param("only one bio constraint can be set")
        }
        if flags.contains(.userPresence),
            !flags.subtracting([.userPresence, .applicationPassword, .privateKeyUsage]).isEmpty
        {
            throw KeychainError.param(
                "kSecAccessControlUserPresence can be combined only with kSecAccessControlApplicationPassword and kSecAccessControlPrivateKeyUsage")
        }
        let known: SecAccessControlCreateFlags = [.needingAPerson, .or, .and, .privateKeyUsage]
        if !flags.subtracting(known).isEmpty {
            throw KeychainError.param("SecAccessControl: unknown flags 0x\(String(flags.subtracting(known).rawValue, radix: 16))")
        }
        return SecAccessControl(protection: protectionClass, flags: flags)
    } catch let caught {
        report(caught, error)
        return nil
    }
}

/// Apple's SPI, kept for code that reads an access control's protection back.
public func SecAccessControlGetProtection(_ accessControl: SecAccessControl) -> CFTypeRef {
    accessControl.protection.rawValue as NSString
}
