import Glibc
internal import KeychainCore

// macOS's file-based keychain access objects (SecAccess.h, SecTrustedApplication.h, SecACL.h),
// deprecated there since 10.10 and kept with Apple's signatures for code that still sets who may
// read an item. Here an access is the item's access list (AccessList): the programs that read
// the item without being asked. SecItemAdd takes it as kSecAttrAccess.

/// A program trusted by path (SecTrustedApplicationRef).
public final class SecTrustedApplication: CustomStringConvertible {
    let path: String

    init(path: String) { self.path = path }

    public var description: String { "<SecTrustedApplication \(path)>" }
}

/// Who may read an item without being asked (SecAccessRef): its access list.
public final class SecAccess: CustomStringConvertible {
    let list: AccessList
    let descriptor: String

    init(list: AccessList, descriptor: String) {
        self.list = list
        self.descriptor = descriptor
    }

    public var description: String { "<SecAccess \"\(descriptor)\": \(list.text.split(separator: "\n").joined(separator: ", "))>" }
}

/// One access control list entry of a SecAccess (SecACLRef). Here an access has one: reading
/// the item's data, by the programs of its list.
public final class SecACL {
    let access: SecAccess

    init(access: SecAccess) { self.access = access }
}

/// What SecACLCopyContents reports about prompting (SecKeychainPromptSelector).
public struct SecKeychainPromptSelector: OptionSet, Sendable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public static let requirePassphase = SecKeychainPromptSelector(rawValue: 0x0001)
    public static let unsigned = SecKeychainPromptSelector(rawValue: 0x0010)
    public static let unsignedAct = SecKeychainPromptSelector(rawValue: 0x0020)
    public static let invalid = SecKeychainPromptSelector(rawValue: 0x0040)
    public static let invalidAct = SecKeychainPromptSelector(rawValue: 0x0080)
}

/// kSecAttrAccess: a SecAccess in SecItemAdd's attributes; the item's access list.
public let kSecAttrAccess: CFString = NSString(string: "acls")

public func SecAccessGetTypeID() -> CFTypeID { TypeID.access }
public func SecTrustedApplicationGetTypeID() -> CFTypeID { TypeID.trustedApplication }
public func SecACLGetTypeID() -> CFTypeID { TypeID.acl }

/// A trusted application for the program at `path` (symbolic links resolved), or for the calling
/// program when `path` is nil. A path that names no file is errSecParam.
@available(macOS, introduced: 10.0, deprecated: 10.15)
public func SecTrustedApplicationCreateFromPath(
    _ path: UnsafePointer<CChar>?, _ app: UnsafeMutablePointer<SecTrustedApplication?>
) -> OSStatus {
    app.pointee = nil
    return secStatus {
        let given = path.map { String(cString: $0) } ?? "/proc/self/exe"
        guard let resolved = realpath(given, nil) else {
            throw KeychainError.param("SecTrustedApplicationCreateFromPath: \(given): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        app.pointee = SecTrustedApplication(path: String(cString: resolved))
    }
}

/// The program's path, as bytes (what macOS returns for an application by path).
@available(macOS, introduced: 10.0, deprecated: 10.15)
public func SecTrustedApplicationCopyData(_ appRef: SecTrustedApplication, _ data: UnsafeMutablePointer<CFData?>) -> OSStatus {
    data.pointee = Data(appRef.path.utf8) as NSData
    return errSecSuccess
}

/// An access that trusts the applications of `trustedlist` (SecTrustedApplication objects; an
/// empty array trusts none: every program is asked), or the calling program when it is nil.
@available(macOS, introduced: 10.0, deprecated: 10.10)
public func SecAccessCreate(_ descriptor: CFString, _ trustedlist: CFArray?, _ accessRef: UnsafeMutablePointer<SecAccess?>) -> OSStatus {
    accessRef.pointee = nil
    return secStatus {
        var list = AccessList([])
        if let trustedlist {
            for element in trustedlist {
                guard let application = element as? SecTrustedApplication else {
                    throw KeychainError.param("SecAccessCreate: the trusted list holds SecTrustedApplication objects only")
                }
                list.add(.executable(application.path))
            }
        } else {
            var calling: SecTrustedApplication?
            let status = SecTrustedApplicationCreateFromPath(nil, &calling)
            guard status == errSecSuccess, let calling else { throw KeychainError(.param, "SecAccessCreate: the calling program has no path") }
            list.add(.executable(calling.path))
        }
        accessRef.pointee = SecAccess(list: list, descriptor: descriptor as String)
    }
}

/// The access's entries: one here, for reading the item.
@available(macOS, introduced: 10.0, deprecated: 10.10)
public func SecAccessCopyACLList(_ accessRef: SecAccess, _ aclList: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    aclList.pointee = [SecACL(access: accessRef)] as NSArray
    return errSecSuccess
}

/// An entry's trusted applications (nil: any application, the list's `any`), its description
/// and prompt selector. Entries that name no program by path (flatpak:, apple-tool: ...) have no
/// SecTrustedApplication form and are left out of the array.
@available(macOS, introduced: 10.0, deprecated: 10.7)
public func SecACLCopyContents(
    _ acl: SecACL, _ applicationList: UnsafeMutablePointer<CFArray?>, _ description: UnsafeMutablePointer<CFString?>,
    _ promptSelector: UnsafeMutablePointer<SecKeychainPromptSelector>
) -> OSStatus {
    let list = acl.access.list
    if list.allowsAnyProgram {
        applicationList.pointee = nil
    } else {
        applicationList.pointee =
            list.entries.compactMap { entry -> SecTrustedApplication? in
                switch entry {
                case .executable(let path), .executableUnder(let path, _), .interpreter(let path): return SecTrustedApplication(path: path)
                default: return nil
                }
            } as NSArray
    }
    description.pointee = acl.access.descriptor as NSString
    promptSelector.pointee = []
    return errSecSuccess
}
