import Dispatch
import Synchronization

/// A sink that plays nothing: for tests, headless use and rendering as fast as possible.
///
/// - `.realTime` pacing pulls frames on a clock at the stream's rate, like a device would, and
///   models a device buffer of ``latency``: frames pulled at time *t* count as heard at
///   *t + latency*.
/// - `.unpaced` pulls whatever the queue has, as soon as it has it, and never pads with silence.
///
/// With `capturing: true` it keeps every frame it received, so tests can compare what was
/// "played" against the queue's offline render.
public final class NullSink: AudioSink, Sendable {
    /// How the sink pulls frames.
    public enum Pacing: Sendable, Hashable {
        /// On a clock at the stream's sample rate.
        case realTime
        /// As fast as the queue delivers.
        case unpaced
    }

    /// Whether the sink takes frames at the real-time rate or as fast as the queue makes them.
    public let pacing: Pacing
    /// Simulated output latency.
    public let latency: Duration
    /// How often a real-time sink pulls.
    public let period: Duration
    /// Whether received frames are kept.
    public let isCapturing: Bool

    private let queue: DispatchQueue
    private let captured = Lock<[Float]>([])
    private let latencyFramesNow = Atomic<Int>(0)
    private let pulledTotal = Atomic<Int>(0)
    private let waiterCount = Atomic<Int>(0)
    private let waiters = Lock<[Int: (frames: Int, continuation: CheckedContinuation<Bool, Never>)]>([:])
    private let nextWaiter = Atomic<Int>(0)
    /// The simulated device, owned by `queue`.
    private let device: QueueBound<Device>

    /// What the simulated device holds between its pulls: only on the sink's queue.
    private struct Device {
        var source: AudioRenderSource?
        var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
        var scratch: Scratch?
        var active = false
        var timer: DispatchSourceTimer?
        var framesPulled = 0
        var deviceFrames = 0
        /// Uptime nanoseconds at which heard frame 0 played.
        var originNanos: UInt64 = 0
        var heardWhenPaused = 0
        /// Who waits in ``waitUntilStopped(timeout:)``, by id.
        var stopWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    }

    /// The memory a pull renders into, freed with the device.
    private final class Scratch {
        let samples: UnsafeMutablePointer<Float>
        let frames: Int
        init(frames: Int, channels: Int) {
            self.frames = frames
            samples = .allocate(capacity: frames * channels)
        }
        deinit { samples.deallocate() }
    }

    /// - Parameters:
    ///   - pacing: on a clock, or as fast as fed.
    ///   - latency: the simulated device buffer (real-time pacing) or the reported latency (unpaced).
    ///   - period: how often a real-time sink pulls (1...100 ms).
    ///   - capturing: keep every received frame for ``capturedSamples()``.
    public init(pacing: Pacing = .realTime, latency: Duration = .zero, period: Duration = .milliseconds(10),
                capturing: Bool = false) {
        self.pacing = pacing
        self.latency = max(latency, .zero)
        self.period = min(max(period, .milliseconds(1)), .milliseconds(100))
        isCapturing = capturing
        let queue = DispatchQueue(label: "BufferQueue.NullSink")
        self.queue = queue
        device = QueueBound(Device(), on: queue)
    }

    /// Every sample received so far, interleaved (empty unless capturing).
    public func capturedSamples() -> [Float] { captured.withLock { $0 } }

    /// Forgets the captured samples.
    public func clearCapture() { captured.withLock { $0.removeAll() } }

    /// Frames pulled from the queue since the sink was created (including padding silence).
    public var framesReceived: Int { pulledTotal.load(ordering: .relaxed) }

    /// Waits until ``framesReceived`` reaches `frames` (true) or `timeout` passes (false). The
    /// sink's own pulls wake the waiter; nothing polls.
    public func waitForFrames(_ frames: Int, timeout: Duration = .seconds(10)) async -> Bool {
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        // The deadline is a dispatch timer: if the frames come first, it finds no waiter.
        let nanoseconds = Int(min(max(timeout.seconds, 0), 86_400) * 1e9)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.resumeWaiter(id, with: false) }
        return await withCheckedContinuation { continuation in
            // Registered (and counted) before the total is read: a pull either sees the count and
            // wakes the waiter, or is seen here. Read first, a pull between the read and the count
            // would find no waiter and this one would sleep through its frames until the timeout.
            let ready = waiters.withLock { list -> Bool in
                list[id] = (frames, continuation)
                waiterCount.add(1, ordering: .sequentiallyConsistent)
                guard pulledTotal.load(ordering: .sequentiallyConsistent) >= frames else { return false }
                list[id] = nil
                waiterCount.subtract(1, ordering: .relaxed)
                return true
            }
            if ready { continuation.resume(returning: true) }
        }
    }

    /// Waits until the sink is not pulling: paused or closed by its queue (true), or until
    /// `timeout` passes (false). At once when it is not pulling now. The sink's pause wakes the
    /// waiter; nothing polls.
    public func waitUntilStopped(timeout: Duration = .seconds(10)) async -> Bool {
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        let nanoseconds = Int(min(max(timeout.seconds, 0), 86_400) * 1e9)
        return await withCheckedContinuation { continuation in
            queue.async { [self] in
                guard device.value.active else { return continuation.resume(returning: true) }
                device.value.stopWaiters[id] = continuation
                queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in
                    device.value.stopWaiters.removeValue(forKey: id)?.resume(returning: false)
                }
            }
        }
    }

    private func resumeWaiter(_ id: Int, with result: Bool) {
        let waiter = waiters.withLock { list -> (frames: Int, continuation: CheckedContinuation<Bool, Never>)? in
            guard let waiter = list.removeValue(forKey: id) else { return nil }
            waiterCount.subtract(1, ordering: .releasing)
            return waiter
        }
        waiter?.continuation.resume(returning: result)
    }

    private func wakeWaiters() {
        // Sequentially consistent with the waiter's count-then-read (see ``waitForFrames(_:timeout:)``).
        guard waiterCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        let total = pulledTotal.load(ordering: .acquiring)
        let due = waiters.withLock { list -> [CheckedContinuation<Bool, Never>] in
            let ids = list.filter { $0.value.frames <= total }.map(\.key)
            waiterCount.subtract(ids.count, ordering: .releasing)
            return ids.compactMap { list.removeValue(forKey: $0)?.continuation }
        }
        for continuation in due { continuation.resume(returning: true) }
    }

    public func open(format: AudioStreamDescription, source: AudioRenderSource) throws {
        guard format.isFloat32Interleaved else {
            throw AudioQueueError(.invalidPropertyValue, "the null sink takes interleaved float32, not \(format)")
        }
        queue.sync {
            device.value.format = format
            device.value.source = source
            device.value.scratch = Scratch(frames: max(Int(format.sampleRate * period.seconds) * 2, 1024), channels: format.channelsPerFrame)
            device.value.deviceFrames = Int((latency.seconds * format.sampleRate).rounded())
            device.value.framesPulled = 0
            device.value.heardWhenPaused = 0
            latencyFramesNow.store(0, ordering: .relaxed)
        }
    }

    public func start() throws {
        queue.sync {
            guard !device.value.active, device.value.source != nil else { return }
            device.value.active = true
            let now = DispatchTime.now().uptimeNanoseconds
            device.value.originNanos = now &- UInt64(Double(device.value.heardWhenPaused) / device.value.format.sampleRate * 1e9)
            switch pacing {
            case .realTime:
                let timer = DispatchSource.makeTimerSource(flags: .strict, queue: queue)
                timer.schedule(deadline: .now(), repeating: .nanoseconds(Int(period.seconds * 1e9)), leeway: .microseconds(200))
                timer.setEventHandler { [weak self] in self?.tick() }
                device.value.timer = timer
                timer.activate()
            case .unpaced:
                pullAvailable()
            }
        }
    }

    public func pause() {
        queue.sync {
            guard device.value.active else { return }
            device.value.active = false
            for waiter in device.value.stopWaiters.values { waiter.resume(returning: true) }
            device.value.stopWaiters.removeAll()
            device.value.timer?.cancel()
            device.value.timer = nil
            let d = device.value
            device.value.heardWhenPaused = max(d.framesPulled - d.deviceFrames, d.heardWhenPaused)
            if pacing == .realTime {
                device.value.heardWhenPaused = min(heardFrames(at: DispatchTime.now().uptimeNanoseconds), d.framesPulled)
            }
        }
    }

    public func flush() {
        queue.sync {
            // The device buffer is gone: what was pulled counts as heard, and the next pull refills.
            let pulled = device.value.framesPulled
            device.value.heardWhenPaused = pulled
            device.value.originNanos = DispatchTime.now().uptimeNanoseconds &- UInt64(Double(pulled) / device.value.format.sampleRate * 1e9)
            latencyFramesNow.store(0, ordering: .relaxed)
        }
    }

    public func drain(_ completion: @escaping @Sendable () -> Void) {
        queue.async { [self] in
            let d = device.value
            guard pacing == .realTime, d.active else { completion(); return }
            let doneAt = d.originNanos &+ UInt64(Double(d.framesPulled) / d.format.sampleRate * 1e9)
            queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: doneAt)) { completion() }
        }
    }

    public func close() {
        pause()
        queue.sync {
            device.value.source = nil
            device.value.framesPulled = 0
            device.value.heardWhenPaused = 0
            latencyFramesNow.store(0, ordering: .relaxed)
        }
    }

    public var latencyFrames: Int { latencyFramesNow.load(ordering: .relaxed) }

    public func sourceHasData() {
        guard pacing == .unpaced else { return }
        queue.async { [weak self] in self?.pullAvailable() }
    }

    /// Frames heard by `nanos` (on the queue).
    private func heardFrames(at nanos: UInt64) -> Int {
        let d = device.value
        return Int(Double(nanos &- d.originNanos) / 1e9 * d.format.sampleRate)
    }

    /// A real-time pull: what the clock says the device has played since the last (on the queue).
    private func tick() {
        guard device.value.active, let source = device.value.source, let scratch = device.value.scratch else { return }
        let heard = heardFrames(at: DispatchTime.now().uptimeNanoseconds)
        var wanted = heard + device.value.deviceFrames - device.value.framesPulled
        while wanted > 0 {
            let frames = min(wanted, scratch.frames)
            _ = source.render(into: scratch.samples, frames: frames, fillSilence: true)
            keep(scratch.samples, frames: frames)
            device.value.framesPulled += frames
            wanted -= frames
        }
        latencyFramesNow.store(max(min(device.value.framesPulled - heard, device.value.deviceFrames), 0), ordering: .relaxed)
    }

    /// An unpaced pull: everything the queue has (on the queue).
    private func pullAvailable() {
        guard device.value.active, let source = device.value.source, let scratch = device.value.scratch else { return }
        while device.value.active {
            let frames = source.render(into: scratch.samples, frames: scratch.frames, fillSilence: false)
            if frames == 0 { break }
            keep(scratch.samples, frames: frames)
            device.value.framesPulled += frames
        }
        latencyFramesNow.store(device.value.deviceFrames, ordering: .relaxed)
    }

    private func keep(_ samples: UnsafeMutablePointer<Float>, frames: Int) {
        if isCapturing {
            let buffer = UnsafeBufferPointer(start: samples, count: frames * device.value.format.channelsPerFrame)
            captured.withLock { $0.append(contentsOf: buffer) }
        }
        pulledTotal.add(frames, ordering: .sequentiallyConsistent)
        wakeWaiters()
    }
}

extension Duration {
    /// The duration in seconds as a Double.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) * 1e-18
    }
}
