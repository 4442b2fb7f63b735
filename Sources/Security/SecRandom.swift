import Foundation

/// Apple's SecRandomRef: which generator to use. There is one here, the kernel's.
public final class SecRandom: @unchecked Sendable {
    fileprivate init() {}
}

public let kSecRandomDefault: SecRandom? = nil

/// Fills `bytes` with `count` cryptographically secure random bytes (getrandom(2), through
/// Swift's SystemRandomNumberGenerator). errSecSuccess, or errSecParam for a negative count.
public func SecRandomCopyBytes(_ rnd: SecRandom?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return errSecParam }
    var generator = SystemRandomNumberGenerator()
    var offset = 0
    while offset < count {
        var word = generator.next()
        let n = min(MemoryLayout<UInt64>.size, count - offset)
        withUnsafeBytes(of: &word) { bytes.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: n) }
        offset += n
    }
    return errSecSuccess
}
