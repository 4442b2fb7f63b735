import Glibc

/// One time limit for a whole command (or a whole unlock), shared by every helper call inside it.
/// A per-call limit alone let a TPM that accepts and never answers hold `create-keychain --tpm`
/// for three limits in a row (seal, counter look-up, counter creation: 91 s of a 30 s limit):
/// inside `command`, the clock starts at the first TPM call and each call is given what is left.
/// It starts at the first call, not at `command`'s start, so a password typed slowly at a prompt
/// costs the TPM nothing. Outside any `command` (an application's own calls), each call has the
/// whole limit, as before.
package enum TPMDeadline {
    private static let mutex = Mutex()
    nonisolated(unsafe) private static var depth = 0
    nonisolated(unsafe) private static var end: Double?

    /// Runs `body` as one command: nested commands share the outermost one's deadline.
    package static func command<T>(_ body: () throws -> T) rethrows -> T {
        mutex.withLock { depth += 1 }
        defer {
            mutex.withLock {
                depth -= 1
                if depth == 0 { end = nil }
            }
        }
        return try body()
    }

    /// When the next helper call must have answered: the command's deadline (started now if this
    /// is its first call), or `limit` seconds from now outside a command.
    package static func deadline(limit: UInt32) -> Double {
        let now = SystemClock.monotonic()
        return mutex.withLock {
            guard depth > 0 else { return now + Double(limit) }
            if let end { return end }
            end = now + Double(limit)
            return end!
        }
    }
}
