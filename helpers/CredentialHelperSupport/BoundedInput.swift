import Glibc
import KeychainCore

/// Standard input, read with a bound. A credential request is a few hundred bytes; one past the
/// bound is refused as soon as the bound is crossed, before it can cost memory (a 400 MB line
/// once cost the git helper 786 MB).
package enum BoundedInput {
    /// A git request or a docker one: far beyond any credential, OAuth token or header.
    package static let requestLimit = 1 << 20

    package struct TooLarge: Error {
        package let limit: Int
        package var message: String { "the request is larger than \(limit) bytes; refused, nothing stored" }
    }

    /// Reads until the end of input, or until `isComplete` says the request has ended (git's
    /// blank line), and throws past `limit` bytes.
    package static func read(limit: Int = requestLimit, isComplete: (Bytes, _ newFrom: Int) -> Bool = { _, _ in false }) throws -> Bytes {
        var input = Bytes()
        var chunk = Bytes(repeating: 0, count: 1 << 16)
        defer { chunk.wipe() }
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            let start = input.count
            input += chunk[0..<n]
            if input.count > limit {
                input.wipe()
                throw TooLarge(limit: limit)
            }
            if isComplete(input, start) { break }
        }
        return input
    }
}
