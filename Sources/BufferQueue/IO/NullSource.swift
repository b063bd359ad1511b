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
public final class NullSource: AudioSource, Sendable {
    /// What the source produces.
    public enum Signal: Sendable {
        /// Zeros, forever.
        case silence
        /// A sine of `frequency` Hz and linear `amplitude` (half of full scale unless given) in
        /// every channel, forever.
        case sine(frequency: Double, amplitude: Float = 0.5)
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

    /// What the source delivers.
    public let signal: Signal
    /// Whether frames come at the real-time rate or as fast as the input queue takes them.
    public let pacing: Pacing
    /// How often a real-time source delivers.
    public let period: Duration
    /// The rate and channel count delivered; nil = what the queue asks for.
    public let deliveredRate: Double?
    /// The channels the source delivers when not the queue's (nil: the queue's).
    public let deliveredChannels: Int?

    private let queue: DispatchQueue
    private let produced = Atomic<Int>(0)
    /// The device's state: its own dispatch queue's.
    private struct Device {
        var target: AudioCaptureTarget?
        var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
        var scratch: [Float] = []
        var active = false
        var ended = false
        var timer: DispatchSourceTimer?
        var originNanos: UInt64 = 0
        var framesAtStart = 0
        var position = 0
    }
    private let device: QueueBound<Device>
    /// Held while a manual push writes (a pause waits for it).
    private let pushLock = Lock<Bool>(false)

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
        queue = DispatchQueue(label: "BufferQueue.NullSource")
        device = QueueBound(Device(), on: queue)
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
            device.value.format = delivered
            device.value.target = target
            device.value.position = 0
            device.value.ended = false
            device.value.scratch = Array(repeating: 0, count: 4096 * delivered.channelsPerFrame)
        }
        return delivered
    }

    public func start() throws {
        queue.sync {
            guard !device.value.active, let target = device.value.target else { return }
            device.value.active = true
            switch pacing {
            case .realTime:
                device.value.originNanos = DispatchTime.now().uptimeNanoseconds
                device.value.framesAtStart = device.value.position
                let timer = DispatchSource.makeTimerSource(flags: .strict, queue: queue)
                timer.schedule(deadline: .now() + .nanoseconds(Int(period.seconds * 1e9)),
                               repeating: .nanoseconds(Int(period.seconds * 1e9)), leeway: .microseconds(200))
                let weakSelf = WeakNullSource(self)
                timer.setEventHandler { weakSelf.source?.tick() }
                device.value.timer = timer
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
            device.value.active = false
            device.value.timer?.cancel()
            device.value.timer = nil
            device.value.target?.setSpaceHandler(nil)
        }
        // A push in progress finishes before this returns.
        pushLock.withLock { _ in }
    }

    public func close() {
        pause()
        queue.sync { device.value.target = nil }
    }

    /// Delivers `samples` (interleaved, the delivered channel count) now, on this thread, as a
    /// device would. Only for `.manual` pacing, between start and pause; returns false otherwise.
    @discardableResult
    public func push(_ samples: [Float]) -> Bool {
        pushLock.withLock { _ -> Bool in
            guard pacing == .manual, let target = queue.sync(execute: { device.value.active ? device.value.target : nil }) else { return false }
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
        let target = queue.sync { device.value.target }
        target?.reportEnd()
    }

    // MARK: generation (on `queue`)

    private func tick() {
        generating { d in
            guard d.active, let target = d.target else { return }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds &- d.originNanos) / 1e9
            var due = d.framesAtStart + Int(elapsed * d.format.sampleRate) - d.position
            while due > 0, !d.ended {
                let made = generate(min(due, 4096), into: target, &d)
                if made == 0 { break }
                due -= made
            }
        }
    }

    private func fillWritable() {
        generating { d in
            guard d.active, let target = d.target else { return }
            while !d.ended {
                let room = target.writableFrames
                if room <= 0 { return }
                if generate(min(room, 4096), into: target, &d) == 0 { return }
            }
        }
    }

    /// Runs `body` with the device's state (on `queue`: one check for the whole body).
    private func generating(_ body: (inout Device) -> Void) {
        body(&device.value)
    }

    /// Makes up to `frames` frames, writes them, and reports the end of supplied frames.
    private func generate(_ frames: Int, into target: AudioCaptureTarget, _ d: inout Device) -> Int {
        let channels = d.format.channelsPerFrame
        var count = frames
        switch signal {
        case .silence:
            for index in 0..<(count * channels) { d.scratch[index] = 0 }
        case .sine(let frequency, let amplitude):
            let step = 2 * Double.pi * frequency / d.format.sampleRate
            for frame in 0..<count {
                let value = amplitude * Float(sin(step * Double(d.position + frame)))
                for channel in 0..<channels { d.scratch[frame * channels + channel] = value }
            }
        case .frames(let samples):
            count = min(count, samples.count / channels - d.position)
            if count > 0 {
                let start = d.position * channels
                for index in 0..<(count * channels) { d.scratch[index] = samples[start + index] }
            }
        }
        if count > 0 {
            d.scratch.withUnsafeBufferPointer { buffer in
                if let base = buffer.baseAddress { target.write(base, frames: count) }
            }
            d.position += count
            produced.add(count, ordering: .releasing)
        }
        if case .frames(let samples) = signal, d.position >= samples.count / channels, !d.ended {
            d.ended = true
            d.timer?.cancel()
            d.timer = nil
            target.reportEnd()
        }
        return count
    }
}

private final class WeakNullSource: Sendable {
    weak let source: NullSource?
    init(_ source: NullSource) { self.source = source }
}
