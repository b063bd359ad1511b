import Synchronization

/// A single-producer single-consumer ring of float samples.
///
/// Indices count samples ever written/read (they never wrap); storage positions are the index modulo
/// the capacity. The producer publishes with a releasing store of `writeIndex`, the consumer with a
/// releasing store of `readIndex`, so neither side takes a lock.
// @unchecked: single producer and single consumer, ordered by releasing stores of the indices.
package final class SampleRing: @unchecked Sendable {
    package let capacity: Int
    private let mask: Int
    private let storage: UnsafeMutablePointer<Float>
    private let writeIndex = Atomic<Int>(0)
    private let readIndex = Atomic<Int>(0)

    package init(minimumCapacity: Int) {
        var size = 64
        while size < minimumCapacity { size <<= 1 }
        capacity = size
        mask = size - 1
        // Left uninitialised (Float is a trivial type): the reader reads only what was written,
        // and pages the producer never reaches are never touched (a ring that offline renders
        // pass by costs no memory).
        storage = .allocate(capacity: size)
    }

    deinit { storage.deallocate() }

    // MARK: producer side

    /// The index the next written sample will have.
    package var writePosition: Int { writeIndex.load(ordering: .relaxed) }

    /// Samples that can be written now.
    package var writable: Int { capacity - (writeIndex.load(ordering: .relaxed) - readIndex.load(ordering: .acquiring)) }

    /// Copies `count` samples in (the caller checked ``writable``).
    package func write(_ source: UnsafePointer<Float>, count: Int) {
        let start = writeIndex.load(ordering: .relaxed)
        copyIn(at: start, count: count) { destination, offset, n in destination.update(from: source + offset, count: n) }
        writeIndex.store(start + count, ordering: .releasing)
    }

    /// The free storage at the write position up to where it wraps, at most `count` samples: a
    /// producer that converts straight into the ring writes there, then calls ``commitWrite(count:)``.
    package func contiguousWritable(upTo count: Int) -> UnsafeMutableBufferPointer<Float> {
        let start = writeIndex.load(ordering: .relaxed)
        let run = min(count, writable, capacity - (start & mask))
        return UnsafeMutableBufferPointer(start: storage + (start & mask), count: max(run, 0))
    }

    /// Publishes `count` samples written into ``contiguousWritable(upTo:)``.
    package func commitWrite(count: Int) {
        writeIndex.store(writeIndex.load(ordering: .relaxed) + count, ordering: .releasing)
    }

    /// Writes `count` zero samples (the caller checked ``writable``).
    package func writeZeros(count: Int) {
        let start = writeIndex.load(ordering: .relaxed)
        copyIn(at: start, count: count) { destination, _, n in destination.update(repeating: 0, count: n) }
        writeIndex.store(start + count, ordering: .releasing)
    }

    private func copyIn(at start: Int, count: Int, _ body: (UnsafeMutablePointer<Float>, Int, Int) -> Void) {
        let first = min(count, capacity - (start & mask))
        body(storage + (start & mask), 0, first)
        if count > first { body(storage, first, count - first) }
    }

    // MARK: consumer side

    /// The index of the next sample to read.
    package var readPosition: Int { readIndex.load(ordering: .relaxed) }

    /// Samples that can be read now.
    package var readable: Int { writeIndex.load(ordering: .acquiring) - readIndex.load(ordering: .relaxed) }

    /// Calls `body` with up to two contiguous runs covering `count` readable samples, then frees them.
    @inline(__always)
    package func consume(count: Int, _ body: (UnsafePointer<Float>, _ offset: Int, _ count: Int) -> Void) {
        let start = readIndex.load(ordering: .relaxed)
        let first = min(count, capacity - (start & mask))
        body(storage + (start & mask), 0, first)
        if count > first { body(storage, first, count - first) }
        readIndex.store(start + count, ordering: .releasing)
    }

    /// Drops everything before `position` (used when the producer discarded what it wrote).
    package func skip(to position: Int) {
        if position > readIndex.load(ordering: .relaxed) { readIndex.store(position, ordering: .releasing) }
    }
}

/// Something the render path must act on at an exact sample position.
struct RenderMarker {
    enum Kind: UInt8 {
        /// A buffer's first untrimmed frame: apply its parameters.
        case bufferStart
        /// The last frame before an asynchronous stop: signal when it has been rendered.
        case endOfStream
        /// Frames from here on have another channel count or rate.
        case formatChange
        /// The end of a run of buffers (a flush): a converter drains here.
        case flush
    }
    var position: Int
    var epoch: Int
    var kind: Kind
    /// NaN when the buffer sets no volume.
    var volume: Float = .nan
    /// NaN when the buffer sets no pan.
    var pan: Float = .nan
    /// NaN when the buffer sets no play rate.
    var rate: Float = .nan
    /// NaN when the buffer sets no pitch (cents).
    var pitch: Float = .nan
    /// NaN when the buffer sets no gain.
    var gain: Float = .nan
    var sampleRate: Double = 0
    var channels: Int = 0
}

/// A single-producer single-consumer ring of ``RenderMarker``s.
// @unchecked: single producer and single consumer, ordered by releasing stores of the indices.
final class MarkerRing: @unchecked Sendable {
    let capacity: Int
    private let storage: UnsafeMutablePointer<RenderMarker>
    private let writeIndex = Atomic<Int>(0)
    private let readIndex = Atomic<Int>(0)

    init(capacity: Int) {
        var size = 16
        while size < capacity { size <<= 1 }
        self.capacity = size
        // Left uninitialised (RenderMarker is a trivial type): a slot is initialised when pushed,
        // and pages of slots never used are never touched.
        assert(_isPOD(RenderMarker.self), "RenderMarker must stay a trivial type")
        storage = .allocate(capacity: size)
    }

    deinit { storage.deallocate() }

    var isFull: Bool { writeIndex.load(ordering: .relaxed) - readIndex.load(ordering: .acquiring) >= capacity }

    /// Adds a marker (the caller checked ``isFull``).
    func push(_ marker: RenderMarker) {
        let index = writeIndex.load(ordering: .relaxed)
        (storage + (index & (capacity - 1))).initialize(to: marker)
        writeIndex.store(index + 1, ordering: .releasing)
    }

    /// The oldest marker, if any.
    @inline(__always)
    func peek() -> RenderMarker? {
        let index = readIndex.load(ordering: .relaxed)
        guard writeIndex.load(ordering: .acquiring) > index else { return nil }
        return storage[index & (capacity - 1)]
    }

    func pop() {
        readIndex.store(readIndex.load(ordering: .relaxed) + 1, ordering: .releasing)
    }

    /// Calls `body` with every marker not yet popped, oldest first (the reader's view).
    func forEachPending(_ body: (RenderMarker) -> Void) {
        let end = writeIndex.load(ordering: .acquiring)
        var index = readIndex.load(ordering: .relaxed)
        while index < end {
            body(storage[index & (capacity - 1)])
            index += 1
        }
    }
}

/// A fixed array of floats shared between the render path and readers, each element atomic.
final class AtomicFloats: Sendable {
    /// The floats' bits, one word each.
    private let words: AtomicWords
    var count: Int { words.count }

    init(count: Int) { words = AtomicWords(count: count) }

    @inline(__always)
    subscript(index: Int) -> Float {
        get { Float(bitPattern: UInt32(truncatingIfNeeded: words[index])) }
        set { words[index] = UInt64(newValue.bitPattern) }
    }
}

/// A fixed number of 64-bit words, each atomic (relaxed; callers order them with fences, as a sequence
/// lock does).
// @unchecked: every access goes through an Atomic in the storage.
final class AtomicWords: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<Atomic<UInt64>>
    let count: Int

    init(count: Int) {
        self.count = count
        storage = .allocate(capacity: max(count, 1))
        for i in 0..<count { (storage + i).initialize(to: Atomic<UInt64>(0)) }
    }

    deinit {
        storage.deinitialize(count: count)
        storage.deallocate()
    }

    @inline(__always)
    subscript(index: Int) -> UInt64 {
        get { storage[index].load(ordering: .relaxed) }
        set { storage[index].store(newValue, ordering: .relaxed) }
    }
}
