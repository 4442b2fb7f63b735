import Glibc

/// The one place the engine and its front ends read the time. Two clocks, for two needs: the wall
/// clock for what is dated (item dates, certificate validity, password expiry, a reset's record),
/// and the monotonic clock for deadlines and durations, which must not jump when the wall clock
/// is set.
package enum SystemClock {
    /// Seconds since 1970 (CLOCK_REALTIME), as Foundation's Date.timeIntervalSince1970.
    package static func now() -> Double { seconds(CLOCK_REALTIME) }

    /// Seconds on CLOCK_MONOTONIC: only differences between two readings mean anything.
    package static func monotonic() -> Double { seconds(CLOCK_MONOTONIC) }

    /// Seconds since boot, suspended time included (CLOCK_BOOTTIME): the clock /proc/PID/stat
    /// counts a process's start on.
    package static func sinceBoot() -> Double { seconds(CLOCK_BOOTTIME) }

    /// How long `body` took, in seconds.
    package static func measure(_ body: () throws -> Void) rethrows -> Double {
        let start = monotonic()
        try body()
        return monotonic() - start
    }

    private static func seconds(_ clock: clockid_t) -> Double {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
