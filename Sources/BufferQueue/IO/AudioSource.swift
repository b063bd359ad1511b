/// Where an ``AudioInputQueue``'s frames come from: a device, a sound server, or a generator
/// (``NullSource``). The input side's mirror of ``AudioSink``.
///
/// A source runs its own clock. Once started it pushes interleaved float32 frames into the
/// ``AudioCaptureTarget`` it was opened with, from its own thread, as the device delivers them.
/// The queue calls the control methods below from its own threads, never concurrently with each
/// other.
///
/// The capture target never blocks, allocates or locks; a source's thread can be real-time.
public protocol AudioSource: AnyObject, Sendable {
    /// Prepares to capture. `format` is what the queue was asked to record (its rate and channel
    /// count); the source returns the format it will really deliver: interleaved float32, at the
    /// device's own rate if it differs (the queue then converts with its resampler) and with any
    /// channel count (the queue mixes it to the asked one).
    func open(format: AudioStreamDescription, target: AudioCaptureTarget) throws -> AudioStreamDescription

    /// Starts (or resumes) delivering frames.
    func start() throws

    /// Stops delivering. When this returns no ``AudioCaptureTarget/write(_:frames:)`` is in progress
    /// and none starts until ``start()``.
    func pause()

    /// Stops and releases the device or stream. The source may be opened again.
    func close()

    /// Frames the device captured that have not been delivered yet: the input latency right now.
    var latencyFrames: Int { get }
}

extension AudioSource {
    public var latencyFrames: Int { 0 }
}

/// What a source writes captured frames into. It wraps the input queue's capture ring.
///
/// ``write(_:frames:)`` and ``reportLost(frames:)`` are safe on a real-time thread: they
/// allocate nothing, take no lock and make no blocking call. Frames that do not fit (the queue's
/// owner has not handed buffers back in time) are lost and counted, never replaced by silence:
/// the queue reports an ``AudioInputQueueEvent/overrun(framesLost:atSampleTime:)`` and its
/// timeline jumps by exactly that many frames.
// @unchecked: `ring` is replaced only in prepare, before the source starts writing; the rest is immutable or locked.
public final class AudioCaptureTarget: @unchecked Sendable {
    /// Made once the source has said what it delivers, before it starts (so never while it writes).
    private(set) var ring: CaptureRing
    private let notify: @Sendable () -> Void
    private let errorHandler: @Sendable (AudioQueueError) -> Void
    private let endHandler: @Sendable () -> Void
    private let spaceHandler = Lock<(@Sendable () -> Void)?>(nil)

    init(notify: @escaping @Sendable () -> Void,
         errorHandler: @escaping @Sendable (AudioQueueError) -> Void, endHandler: @escaping @Sendable () -> Void) {
        ring = CaptureRing(capacityFrames: 64, channels: 1)
        self.notify = notify
        self.errorHandler = errorHandler
        self.endHandler = endHandler
    }

    /// Sizes the ring for what the source delivers (after its `open`, before its `start`).
    func prepare(capacityFrames: Int, channels: Int) {
        ring = CaptureRing(capacityFrames: capacityFrames, channels: channels)
    }

    /// The channel count frames are written with (what the source's ``AudioSource/open(format:target:)`` returned).
    public var channels: Int { ring.channels }

    /// Delivers `frames` interleaved frames. What does not fit is lost and counted.
    public func write(_ samples: UnsafePointer<Float>, frames: Int) {
        guard frames > 0 else { return }
        ring.write(samples, frames: frames)
        notify()
    }

    /// Reports that the device lost `frames` frames before the next ones written (a hole in the
    /// server's stream, a device overrun). The queue's timeline skips them.
    public func reportLost(frames: Int) {
        guard frames > 0 else { return }
        ring.reportLost(frames: frames)
        notify()
    }

    /// Frames that can be written now without loss (for a source that produces on demand).
    public var writableFrames: Int { ring.writableFrames }

    /// Sets what runs (on the queue's worker) after it took frames out, freeing room: a source that
    /// produces on demand refills from it instead of polling. Not for the real-time path.
    public func setSpaceHandler(_ handler: (@Sendable () -> Void)?) {
        spaceHandler.withLock { $0 = handler }
    }

    func spaceFreed() {
        if let handler = spaceHandler.withLock({ $0 }) { handler() }
    }

    /// Tells the queue the source has no more frames (a finite generator): the queue delivers what
    /// it holds and stops, as after ``AudioInputQueue/stop(immediately:)`` with `false`. Not for the
    /// real-time thread.
    public func reportEnd() {
        ring.markEnded()
        endHandler()
        notify()
    }

    /// Tells the queue the source failed (server gone, device removed). Not for the real-time thread.
    public func reportError(_ error: AudioQueueError) { errorHandler(error) }
}
