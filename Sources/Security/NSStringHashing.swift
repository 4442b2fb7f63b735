import Foundation

/// An NSString in an AnyHashable is the Swift String it bridges to, as on Darwin, where
/// Foundation's overlay gives NSString this conformance. Code written for Apple's platforms
/// looks results up with a constant itself (`attributes[kSecAttrAccount]` in an
/// `[AnyHashable: Any]` whose keys are Strings); swift-corelibs-foundation's NSString would hash
/// as an object there and find nothing.
///
/// The kSec* and kCF* constants are plain NSStrings, not a subclass with this conformance of its
/// own: `kSecClass as String` on Linux reads a plain NSString's String at once, and copies any
/// subclass's characters out one by one and decodes them as UTF-16 (about 20 times slower, five
/// or six times for every query a caller builds).
///
/// Retroactive on purpose: Darwin's overlay declares this very conformance, and this module stands
/// in for that overlay's part of it.
// swift-format-ignore: AvoidRetroactiveConformances
extension NSString: @retroactive _HasCustomAnyHashableRepresentation {
    public func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(self as String) }
}
