import Foundation

/// The class of the kSec* and kCF* string constants: an NSString that, put in an AnyHashable,
/// is the Swift String it bridges to, as Darwin's NSString is. Code written for Apple's
/// platforms looks results up with the constant itself (`attributes[kSecAttrAccount]` in an
/// `[AnyHashable: Any]` whose keys are Strings); swift-corelibs-foundation's NSString would hash
/// as an object there and find nothing.
final class CFStringConstant: NSString, _HasCustomAnyHashableRepresentation {
    /// The Swift string, as SecItemRequest reads a key or value without bridging it.
    let value: String
    private let units: [unichar]

    required init(string value: String) {
        self.value = value
        units = Array(value.utf16)
        super.init(characters: units, length: units.count)
    }

    required convenience init(stringLiteral value: StaticString) { self.init(string: value.description) }
    required convenience init(unicodeScalarLiteral value: StaticString) { self.init(string: value.description) }
    required convenience init(extendedGraphemeClusterLiteral value: StaticString) { self.init(string: value.description) }

    required init?(coder: NSCoder) { nil }

    // NSString's primitives, which a subclass must give.
    override var length: Int { units.count }
    override func character(at index: Int) -> unichar { units[index] }

    func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(value) }
}
