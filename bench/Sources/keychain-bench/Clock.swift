import KeychainCore

/// The median of `batches` timings of `perBatch` calls, per call, in microseconds. Medians of
/// batches, not means of single calls: a single call is below the clock's useful resolution and
/// a mean is dragged by the odd page fault.
func medianMicroseconds(batches: Int = 15, perBatch: Int, _ body: (Int) -> Void) -> Double {
    var counter = 0
    for _ in 0..<perBatch { body(counter); counter += 1 }  // warm-up
    var timings: [Double] = []
    for _ in 0..<batches {
        let start = SystemClock.monotonic()
        for _ in 0..<perBatch { body(counter); counter += 1 }
        timings.append((SystemClock.monotonic() - start) / Double(perBatch) * 1e6)
    }
    timings.sort()
    return timings[timings.count / 2]
}

/// A seeded generator (SplitMix64), so every run looks up the same sequence of items.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
