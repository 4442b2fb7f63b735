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
