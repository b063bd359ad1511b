import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A source that records no device: it generates frames, for tests, benchmarks and headless use.
///
/// - The signal is silence, a sine, or frames the caller supplies (then the source ends, and the
///   input queue stops after handing back the last of them).
/// - `.realTime` pacing delivers on a clock at the stream's rate, every ``period``, like a device.
///   `.unpaced` delivers as fast as the queue takes frames (it never overruns the queue): the
///   "offline" equivalent of recording. `.manual` delivers only what ``push(_:)`` is given, on the
///   caller's thread, so a test decides exactly what arrives when.
// @unchecked: device state is touched only on its own dispatch queue (pushes under pushLock); what others read is atomic.
public final class NullSource: AudioSource, @unchecked Sendable {
    /// What the source produces.
    public enum Signal: Sendable {
        /// Zeros, forever.
        case silence
        /// A sine of `frequency` Hz and linear `amplitude` in every channel, forever.
        case sine(frequency: Double, amplitude: Float)
        /// These interleaved frames (the source's channel count), then the end.
        case frames([Float])
    }

    /// How the source delivers.
    public enum Pacing: Sendable, Hashable {
        /// On a clock at the stream's rate.
        case realTime
        /// As fast as the queue takes them.
        case unpaced
        /// Only what ``NullSource/push(_:)`` is given.
        case manual
    }

    public let signal: Signal
    public let pacing: Pacing
    /// How often a real-time source delivers.
    public let period: Duration
    /// The rate and channel count delivered; nil = what the queue asks for.
    public let deliveredRate: Double?
    public let deliveredChannels: Int?

    private let queue = DispatchQueue(label: "BufferQueue.NullSource")
    private let produced = Atomic<Int>(0)
    // Touched only on `queue` (or, for `.manual`, on the pushing thread while started).
    private var target: AudioCaptureTarget?
    private var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    private var scratch: [Float] = []
    private var active = false
    private var ended = false
    private var timer: DispatchSourceTimer?
    private var originNanos: UInt64 = 0
    private var framesAtStart = 0
    private var position = 0
    private let pushLock = Lock<Void>(())

    /// - Parameters:
    ///   - signal: silence, a sine or supplied frames.
    ///   - pacing: on a clock, as fast as taken, or pushed by hand.
    ///   - period: how often a real-time source delivers (1...100 ms).
    ///   - sampleRate: the rate delivered; nil = the queue's (another rate makes the queue resample).
    ///   - channels: the channel count delivered; nil = the queue's.
    public init(signal: Signal = .silence, pacing: Pacing = .realTime, period: Duration = .milliseconds(10),
                sampleRate: Double? = nil, channels: Int? = nil) {
        self.signal = signal
        self.pacing = pacing
        self.period = min(max(period, .milliseconds(1)), .milliseconds(100))
        deliveredRate = sampleRate
        deliveredChannels = channels
    }

    /// Frames delivered (or attempted: the queue may have lost some) since the source was made.
    public var framesProduced: Int { produced.load(ordering: .acquiring) }

    public func open(format requested: AudioStreamDescription, target: AudioCaptureTarget) throws -> AudioStreamDescription {
        let delivered = AudioStreamDescription.float32(sampleRate: deliveredRate ?? requested.sampleRate,
                                                       channels: deliveredChannels ?? requested.channelsPerFrame)
        if case .frames(let samples) = signal, samples.count % delivered.channelsPerFrame != 0 {
            throw AudioQueueError(.invalidPropertyValue,
                "the null source's \(samples.count) samples are not whole frames of \(delivered.channelsPerFrame) channels")
        }
        queue.sync {
            format = delivered
            self.target = target
            position = 0
            ended = false
            scratch = Array(repeating: 0, count: 4096 * delivered.channelsPerFrame)
        }
        return delivered
    }

    public func start() throws {
        queue.sync {
            guard !active, let target else { return }
            active = true
            switch pacing {
            case .realTime:
                originNanos = DispatchTime.now().uptimeNanoseconds
                framesAtStart = position
                let timer = DispatchSource.makeTimerSource(flags: .strict, queue: queue)
                timer.schedule(deadline: .now() + .nanoseconds(Int(period.seconds * 1e9)),
                               repeating: .nanoseconds(Int(period.seconds * 1e9)), leeway: .microseconds(200))
                timer.setEventHandler { [weak self] in self?.tick() }
                self.timer = timer
                timer.activate()
            case .unpaced:
                let weakSelf = WeakNullSource(self)
                target.setSpaceHandler { weakSelf.source?.queue.async { weakSelf.source?.fillWritable() } }
                fillWritable()
            case .manual:
                break
            }
        }
    }

    public func pause() {
        queue.sync {
            active = false
            timer?.cancel()
            timer = nil
            target?.setSpaceHandler(nil)
        }
        // A push in progress finishes before this returns.
        pushLock.withLock { _ in }
    }

    public func close() {
        pause()
        queue.sync { target = nil }
    }

    /// Delivers `samples` (interleaved, the delivered channel count) now, on this thread, as a
    /// device would. Only for `.manual` pacing, between start and pause; returns false otherwise.
    @discardableResult
    public func push(_ samples: [Float]) -> Bool {
        pushLock.withLock { _ -> Bool in
            guard pacing == .manual, let target = queue.sync(execute: { active ? self.target : nil }) else { return false }
            let frames = samples.count / target.channels
            samples.withUnsafeBufferPointer { buffer in
                if let base = buffer.baseAddress { target.write(base, frames: frames) }
            }
            produced.add(frames, ordering: .releasing)
            return true
        }
    }

    /// Says the manual source has no more frames: the queue hands back what it holds and stops.
    public func finish() {
        let target = queue.sync { self.target }
        target?.reportEnd()
    }

    // MARK: generation (on `queue`)

    private func tick() {
        guard active, let target else { return }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds &- originNanos) / 1e9
        var due = framesAtStart + Int(elapsed * format.sampleRate) - position
        while due > 0, !ended {
            let made = generate(min(due, 4096), into: target)
            if made == 0 { break }
            due -= made
        }
    }

    private func fillWritable() {
        guard active, let target else { return }
        while !ended {
            let room = target.writableFrames
            if room <= 0 { return }
            if generate(min(room, 4096), into: target) == 0 { return }
        }
    }

    /// Makes up to `frames` frames, writes them, and reports the end of supplied frames.
    private func generate(_ frames: Int, into target: AudioCaptureTarget) -> Int {
        let channels = format.channelsPerFrame
        var count = frames
        switch signal {
        case .silence:
            for index in 0..<(count * channels) { scratch[index] = 0 }
        case .sine(let frequency, let amplitude):
            let step = 2 * Double.pi * frequency / format.sampleRate
            for frame in 0..<count {
                let value = amplitude * Float(sin(step * Double(position + frame)))
                for channel in 0..<channels { scratch[frame * channels + channel] = value }
            }
        case .frames(let samples):
            count = min(count, samples.count / channels - position)
            if count > 0 {
                let start = position * channels
                for index in 0..<(count * channels) { scratch[index] = samples[start + index] }
            }
        }
        if count > 0 {
            scratch.withUnsafeBufferPointer { buffer in
                if let base = buffer.baseAddress { target.write(base, frames: count) }
            }
            position += count
            produced.add(count, ordering: .releasing)
        }
        if case .frames(let samples) = signal, position >= samples.count / channels, !ended {
            ended = true
            timer?.cancel()
            timer = nil
            target.reportEnd()
        }
        return count
    }
}

private final class WeakNullSource: Sendable {
    weak let source: NullSource?
    init(_ source: NullSource) { self.source = source }
}
