import Synchronization

/// A single-producer, single-consumer ring of captured interleaved float frames, with the losses
/// between them.
///
/// The producer (a source's thread) never blocks or allocates: frames that do not fit are counted
/// as lost. Once a loss starts, the producer keeps dropping until at least half the ring is free
/// (so a stalled reader yields one long loss, not many short ones), then records a gap — the
/// position in the ring and the number of frames lost — before writing again. The consumer reads
/// up to the next gap, takes the gap, and reads on. Nothing is ever invented to fill a gap.
// @unchecked: single producer (the source's thread) and single consumer (the work queue), ordered by the atomics' release/acquire.
final class CaptureRing: @unchecked Sendable {
    let capacityFrames: Int
    let channels: Int
    private let storage: UnsafeMutablePointer<Float>
    /// Frames written and read since the last reset (monotonic).
    private let written = Atomic<Int>(0)
    private let readCount = Atomic<Int>(0)
    /// Frames lost since the last reset, counted when a gap is recorded.
    private let lostTotal = Atomic<Int>(0)
    /// Gap records: a small ring of (position, lost) written by the producer.
    private static let gapSlots = 16
    private let gapPositions: UnsafeMutablePointer<Int>
    private let gapCounts: UnsafeMutablePointer<Int>
    private let gapsWritten = Atomic<Int>(0)
    private let gapsRead = Atomic<Int>(0)
    private let ended = Atomic<Bool>(false)
    /// Frames dropped and not yet recorded as a gap (written by the producer only).
    private let pendingLoss = Atomic<Int>(0)

    init(capacityFrames: Int, channels: Int) {
        self.capacityFrames = max(capacityFrames, 64)
        self.channels = max(channels, 1)
        storage = .allocate(capacity: self.capacityFrames * self.channels)
        storage.initialize(repeating: 0, count: self.capacityFrames * self.channels)
        gapPositions = .allocate(capacity: Self.gapSlots)
        gapPositions.initialize(repeating: 0, count: Self.gapSlots)
        gapCounts = .allocate(capacity: Self.gapSlots)
        gapCounts.initialize(repeating: 0, count: Self.gapSlots)
    }

    deinit {
        storage.deallocate()
        gapPositions.deallocate()
        gapCounts.deallocate()
    }

    // MARK: producer

    var writableFrames: Int {
        capacityFrames - (written.load(ordering: .relaxed) - readCount.load(ordering: .acquiring))
    }

    /// Frames the source delivered or lost since the last reset: the capture clock.
    var framesCaptured: Int { written.load(ordering: .acquiring) + lostTotal.load(ordering: .acquiring) + pendingLoss.load(ordering: .relaxed) }

    func write(_ samples: UnsafePointer<Float>, frames: Int) {
        let head = written.load(ordering: .relaxed)
        let free = capacityFrames - (head - readCount.load(ordering: .acquiring))
        if pendingLoss.load(ordering: .relaxed) > 0 {
            let gapSlotFree = gapsWritten.load(ordering: .relaxed) - gapsRead.load(ordering: .acquiring) < Self.gapSlots
            guard free >= capacityFrames / 2, gapSlotFree else {
                addLoss(frames)
                return
            }
            recordGap(at: head)
        }
        let take = min(frames, free)
        var done = 0
        while done < take {
            let slot = (head + done) % capacityFrames
            let run = min(take - done, capacityFrames - slot)
            (storage + slot * channels).update(from: samples + done * channels, count: run * channels)
            done += run
        }
        written.store(head + take, ordering: .releasing)
        if take < frames { addLoss(frames - take) }
    }

    func reportLost(frames: Int) { addLoss(frames) }

    private func addLoss(_ frames: Int) {
        pendingLoss.add(frames, ordering: .relaxed)
    }

    private func recordGap(at position: Int) {
        let index = gapsWritten.load(ordering: .relaxed)
        gapPositions[index % Self.gapSlots] = position
        // Counted as lost before it stops being pending, so the capture clock never steps back.
        let lost = pendingLoss.load(ordering: .relaxed)
        gapCounts[index % Self.gapSlots] = lost
        lostTotal.add(lost, ordering: .releasing)
        pendingLoss.subtract(lost, ordering: .relaxed)
        gapsWritten.store(index + 1, ordering: .releasing)
    }

    /// The source has no more frames (a loss still pending is recorded at the end).
    func markEnded() {
        if pendingLoss.load(ordering: .relaxed) > 0, gapsWritten.load(ordering: .relaxed) - gapsRead.load(ordering: .acquiring) < Self.gapSlots {
            recordGap(at: written.load(ordering: .relaxed))
        }
        ended.store(true, ordering: .releasing)
    }

    // MARK: consumer

    /// What the consumer finds next.
    enum Next {
        /// `frames` contiguous frames can be read (up to the next gap).
        case frames(Int)
        /// Frames were lost here.
        case gap(lost: Int)
        /// Nothing to read now (and the source has ended, when `ended`).
        case empty(ended: Bool)
    }

    /// Whether nothing (frames or gaps) waits to be read. Consumer side.
    var isEmpty: Bool {
        gapsRead.load(ordering: .relaxed) == gapsWritten.load(ordering: .acquiring)
            && readCount.load(ordering: .relaxed) == written.load(ordering: .acquiring)
    }

    func next() -> Next {
        let isEnded = ended.load(ordering: .acquiring)
        let tail = readCount.load(ordering: .relaxed)
        let head = written.load(ordering: .acquiring)
        let gapIndex = gapsRead.load(ordering: .relaxed)
        if gapIndex < gapsWritten.load(ordering: .acquiring) {
            let position = gapPositions[gapIndex % Self.gapSlots]
            if position == tail {
                let lost = gapCounts[gapIndex % Self.gapSlots]
                gapsRead.store(gapIndex + 1, ordering: .releasing)
                return .gap(lost: lost)
            }
            return .frames(position - tail)
        }
        return head > tail ? .frames(head - tail) : .empty(ended: isEnded)
    }

    /// Copies up to `frames` frames (no more than ``next()`` offered) into `destination` and
    /// consumes them; returns how many.
    func read(into destination: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        let tail = readCount.load(ordering: .relaxed)
        var done = 0
        while done < frames {
            let slot = (tail + done) % capacityFrames
            let run = min(frames - done, capacityFrames - slot)
            destination.advanced(by: done * channels).update(from: storage + slot * channels, count: run * channels)
            done += run
        }
        readCount.store(tail + frames, ordering: .releasing)
        return frames
    }

    /// Discards what is held and forgets every count. Only while the producer is not writing.
    func reset() {
        written.store(0, ordering: .releasing)
        readCount.store(0, ordering: .releasing)
        lostTotal.store(0, ordering: .releasing)
        gapsWritten.store(0, ordering: .releasing)
        gapsRead.store(0, ordering: .releasing)
        ended.store(false, ordering: .releasing)
        pendingLoss.store(0, ordering: .relaxed)
    }

    /// Drops what is held now (frames and gaps) without touching the clock. Consumer side; the
    /// producer may be writing.
    func discardReadable() -> Int {
        var dropped = 0
        while true {
            switch next() {
            case .frames(let count):
                readCount.add(count, ordering: .releasing)
                dropped += count
            case .gap(let lost): dropped += lost
            case .empty: return dropped
            }
        }
    }
}
