/// An MP4 track's samples (offset and size of each), kept as runs of samples stored back to back:
/// a chunk of the `moov` tables, or a fragment's `trun`.
///
/// A run of equal-size samples costs the same whatever count it claims, so an index of a few bytes
/// that claims millions of samples costs no memory until those samples' bytes really arrive; sizes
/// given one by one (`stsz`, `stz2`, a `trun` with sizes) are kept as given, a bounded multiple of
/// the index's own bytes.
struct MP4SampleTable {
    private struct Run {
        /// Index of the run's first sample in the track.
        var first: Int
        var count: Int
        /// Absolute offset of the run's first sample.
        var start: Int64
        /// Every sample's size, or 0 when sizes are listed one by one from `listed`.
        var size: Int32
        var listed: Int
    }

    private var runs: [Run] = []
    /// For runs with sizes listed one by one: each sample's offset from its run's start, and its
    /// size (a run is a chunk or a fragment's `trun`, far below 4 GiB).
    private var listedOffsets: [UInt32] = []
    private var listedSizes: [Int32] = []
    private(set) var count = 0
    private(set) var totalBytes: Int64 = 0
    private(set) var maximumSize: Int32 = 0

    var isEmpty: Bool { count == 0 }
    /// How many runs hold the samples (for tests of the representation).
    var runCount: Int { runs.count }
    var firstOffset: Int64? { runs.first?.start }
    /// The offset of the last sample, where the next run may not start before.
    var lastOffset: Int64? {
        guard let run = runs.last else { return nil }
        return run.size > 0 ? run.start + Int64(run.count - 1) * Int64(run.size) : run.start + Int64(listedOffsets[run.listed + run.count - 1])
    }

    /// Makes room for `count` more sizes listed one by one, so a table whose sample count is known
    /// (`stsz`) is allocated once, at its size.
    mutating func reserveListed(_ count: Int) {
        listedOffsets.reserveCapacity(listedOffsets.count + count)
        listedSizes.reserveCapacity(listedSizes.count + count)
    }

    /// Appends `count` samples of `size` bytes each, the first at `start`.
    mutating func append(start: Int64, count: Int, size: Int32) {
        guard count > 0 else { return }
        precondition(size > 0, "a run of equal-size samples needs a size")
        if let last = runs.last, last.size == size, start == last.start + Int64(last.count) * Int64(size) {
            runs[runs.count - 1].count += count   // chunks of one track usually follow each other
        } else {
            runs.append(Run(first: self.count, count: count, start: start, size: size, listed: 0))
        }
        self.count += count
        totalBytes += Int64(count) * Int64(size)
        maximumSize = max(maximumSize, size)
    }

    /// Appends samples of the listed sizes, back to back from `start`.
    mutating func append(start: Int64, sizes: some Collection<Int32>) {
        guard !sizes.isEmpty else { return }
        // Listed sizes only ever grow at the end, so the last listed run ends with the arrays.
        let runStart: Int64
        if let last = runs.last, last.size == 0, let lastOffset = listedOffsets.last,
           last.start + Int64(lastOffset) + Int64(listedSizes[listedSizes.count - 1]) == start,
           start - last.start + totalSize(sizes) <= Int64(UInt32.max) {
            runs[runs.count - 1].count += sizes.count
            runStart = last.start
        } else {
            runs.append(Run(first: count, count: sizes.count, start: start, size: 0, listed: listedSizes.count))
            runStart = start
        }
        var offset = start
        for size in sizes {
            listedOffsets.append(UInt32(truncatingIfNeeded: offset - runStart))
            listedSizes.append(size)
            offset += Int64(size)
            maximumSize = max(maximumSize, size)
        }
        count += sizes.count
        totalBytes += offset - start
    }

    /// Sample `index`'s absolute offset and size (`index` below ``count``).
    subscript(index: Int) -> (offset: Int64, size: Int) {
        let run = runs[runIndex(of: index)]
        let within = index - run.first
        if run.size > 0 { return (run.start + Int64(within) * Int64(run.size), Int(run.size)) }
        return (run.start + Int64(listedOffsets[run.listed + within]), Int(listedSizes[run.listed + within]))
    }

    private func totalSize(_ sizes: some Collection<Int32>) -> Int64 {
        var total: Int64 = 0
        for size in sizes { total += Int64(size) }
        return total
    }

    private func runIndex(of index: Int) -> Int {
        precondition(index >= 0 && index < count, "sample \(index) of \(count)")
        var low = 0, high = runs.count - 1
        while low < high {   // the last run whose first sample is at most `index`
            let middle = (low + high + 1) / 2
            if runs[middle].first <= index { low = middle } else { high = middle - 1 }
        }
        return low
    }
}
