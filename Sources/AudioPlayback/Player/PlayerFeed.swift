import AudioFileStream
import BufferQueue
import Dispatch
import Synchronization

/// What the player's feeding holds between two steps: the item being fed and where the list is,
/// the free buffers, the crossfading join, the timers it scheduled. It belongs to the player's
/// serial queue (a ``/BufferQueue/QueueBound`` there) and is not `Sendable`: nothing else touches it.
final class PlayerFeed {
    /// Buffers handed back by the queue, ready for packets; how many the queue has in all.
    var free: [AudioQueueBuffer] = []
    var bufferCount = 0
    /// The item's feeder (nil between items and after the input).
    var feeder: (any ItemFeeding)?
    /// The crossfading join (nil: the gapless player, items' packets straight into the queue).
    let join: CrossfadeJoin?
    /// The item being fed (index into the list) and its identity.
    var itemIndex = 0
    var feedingID: AudioPlayerItem.ID?
    /// The pass over the list (0 ..< loops).
    var loop = 0
    /// The next item must begin a new stream of the queue.
    var needsNewStream = false
    /// ``AudioPlayerEvent/itemOpened(index:id:format:metadata:)`` was given for the item being fed.
    var openedReported = false
    /// The frame count, the recording and the caller's tap are on the queue.
    var tapInstalled = false
    /// The output's format as the observer sees it (once ``tapInstalled``).
    var observedFormat: AudioStreamDescription?
    /// Where the next opened item starts (seconds into it).
    var nextStart: Double
    /// Frames kept of the items fed before the current one (the timeline where it starts).
    var timelineBeforeItem: Int64 = 0
    /// The check that the next item is heard, when one is scheduled.
    var heardCheck: DispatchWorkItem?
    /// Seeks waiting for the position they reach.
    var pendingSeeks: [CheckedContinuation<Double, any Error>] = []
    /// The next report of each time observer, scheduled while sound plays.
    var positionTicks: [Int: DispatchWorkItem] = [:]
    /// What waits for the output's fade out to be heard (a pause, a stop, a seek), the next
    /// check of it, and when the wait gives up (a sink that stopped taking frames).
    var afterFade: [() -> Void] = []
    var fadeCheck: DispatchWorkItem?
    var fadeDeadline = DispatchTime.now()

    init(join: CrossfadeJoin?, start: Double) {
        self.join = join
        nextStart = start
    }

    /// Back to the first item, nothing fed (a replay).
    func rewind(to start: Double) {
        free.removeAll()
        feeder = nil
        feedingID = nil
        itemIndex = 0
        loop = 0
        needsNewStream = false
        join?.reset()
        tapInstalled = false
        observedFormat = nil
        timelineBeforeItem = 0
        nextStart = start
    }

    /// Ends the current item's feeding: its kept frames join the timeline before the next.
    func closeItem() {
        if let feeder { timelineBeforeItem += feeder.framesKept }
        feeder = nil
        feedingID = nil
    }

    /// Every seek waiting is answered with `result`.
    func resolvePendingSeeks(with result: Result<Double, any Error>) {
        let waiting = pendingSeeks
        pendingSeeks.removeAll()
        for continuation in waiting { continuation.resume(with: result) }
    }

    /// Cancels every timer (the end of playback).
    func cancelTimers() {
        heardCheck?.cancel()
        heardCheck = nil
        fadeCheck?.cancel()
        fadeCheck = nil
        for tick in positionTicks.values { tick.cancel() }
        positionTicks.removeAll()
    }
}
/// An object the render path reads lock-free (the recorder the output observer pushes to, the
/// loudness meter it feeds): set before the first render that needs it (the queue's start orders
/// the store before the render thread's loads), or swapped in while it renders; read with one load.
final class ObjectSlot<Object: AnyObject & Sendable>: Sendable {
    /// An `Unmanaged` reference to the object (0: none), retained while set.
    private let storage = Atomic<Int>(0)

    /// The object set, if any (on the render path: one atomic load, no retain).
    var object: Object? {
        let bits = storage.load(ordering: .acquiring)
        guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
        return Unmanaged<Object>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Sets `object` in place of the one before, which is released once no render can still
    /// read it: only set while no render runs, or for an object that is never replaced.
    func set(_ object: Object) {
        let bits = Int(bitPattern: Unmanaged.passRetained(object).toOpaque())
        let old = storage.exchange(bits, ordering: .acquiringAndReleasing)
        if let pointer = UnsafeRawPointer(bitPattern: old) { Unmanaged<Object>.fromOpaque(pointer).release() }
    }

    /// Drops the object (between runs, when no render runs).
    func clear() {
        let old = storage.exchange(0, ordering: .acquiringAndReleasing)
        if let pointer = UnsafeRawPointer(bitPattern: old) { Unmanaged<Object>.fromOpaque(pointer).release() }
    }

    deinit { clear() }
}

/// A frame count shared with the render path.
final class FrameCounter: Sendable {
    let frames = Atomic<Int64>(0)
}
