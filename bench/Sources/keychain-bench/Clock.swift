import KeychainCore

/// The median of `batches` timings of `perBatch` calls, per call, in microseconds. Medians of
/// batches, not means of single calls: a single call is below the clock's useful resolution and
/// a mean is dragged by the odd page fault.
func medianMicroseconds(batches: Int = 15, perBatch: Int, _ body: (Int) -> Void) -> Double {
    withoutActuallyEscaping(body) { alternatingMedianMicroseconds(batches: batches, perBatch: perBatch, [$0])[0] }
}

/// `medianMicroseconds` of several bodies measured side by side: each batch of one is followed by
/// a batch of the next, so a ratio between them does not move with the machine's speed, which on
/// a shared VM drifts within a minute.
func alternatingMedianMicroseconds(batches: Int = 15, perBatch: Int, _ bodies: [(Int) -> Void]) -> [Double] {
    var counters = [Int](repeating: 0, count: bodies.count)
    for (n, body) in bodies.enumerated() {
        for _ in 0..<perBatch { body(counters[n]); counters[n] += 1 }  // warm-up
    }
    var timings = [[Double]](repeating: [], count: bodies.count)
    for _ in 0..<batches {
        for (n, body) in bodies.enumerated() {
            let start = SystemClock.monotonic()
            for _ in 0..<perBatch { body(counters[n]); counters[n] += 1 }
            timings[n].append((SystemClock.monotonic() - start) / Double(perBatch) * 1e6)
        }
    }
    return timings.map { $0.sorted()[$0.count / 2] }
}
