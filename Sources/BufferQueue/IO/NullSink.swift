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
// @unchecked: device state is touched only on its own dispatch queue; what others read is atomic or locked.
public final class NullSink: AudioSink, @unchecked Sendable {
    /// How the sink pulls frames.
    public enum Pacing: Sendable, Hashable {
        /// On a clock at the stream's sample rate.
        case realTime
        /// As fast as the queue delivers.
        case unpaced
    }

    public let pacing: Pacing
    /// Simulated output latency.
    public let latency: Duration
    /// How often a real-time sink pulls.
    public let period: Duration
    /// Whether received frames are kept.
    public let isCapturing: Bool

    private let queue = DispatchQueue(label: "BufferQueue.NullSink")
    private let captured = Lock<[Float]>([])
    private let latencyFramesNow = Atomic<Int>(0)
    private let pulledTotal = Atomic<Int>(0)
    private let waiterCount = Atomic<Int>(0)
    private let waiters = Lock<[Int: (frames: Int, continuation: CheckedContinuation<Bool, Never>)]>([:])
    private let nextWaiter = Atomic<Int>(0)

    // Touched only on `queue`.
    private var source: AudioRenderSource?
    private var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    private var scratch: UnsafeMutablePointer<Float>?
    private var scratchFrames = 0
    private var active = false
    private var timer: DispatchSourceTimer?
    private var framesPulled = 0
    private var deviceFrames = 0
    /// Uptime nanoseconds at which heard frame 0 played.
    private var originNanos: UInt64 = 0
    private var heardWhenPaused = 0
    /// Who waits in ``waitUntilStopped(timeout:)``, by id.
    private var stopWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]

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
    }

    deinit {
        scratch?.deallocate()
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
                guard active else { return continuation.resume(returning: true) }
                stopWaiters[id] = continuation
                queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in
                    stopWaiters.removeValue(forKey: id)?.resume(returning: false)
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
            self.format = format
            self.source = source
            scratchFrames = max(Int(format.sampleRate * period.seconds) * 2, 1024)
            scratch?.deallocate()
            scratch = .allocate(capacity: scratchFrames * format.channelsPerFrame)
            deviceFrames = Int((latency.seconds * format.sampleRate).rounded())
            framesPulled = 0
            heardWhenPaused = 0
            latencyFramesNow.store(0, ordering: .relaxed)
        }
    }

    public func start() throws {
        queue.sync {
            guard !active, source != nil else { return }
            active = true
            let now = DispatchTime.now().uptimeNanoseconds
            originNanos = now &- UInt64(Double(heardWhenPaused) / format.sampleRate * 1e9)
            switch pacing {
            case .realTime:
                let timer = DispatchSource.makeTimerSource(flags: .strict, queue: queue)
                timer.schedule(deadline: .now(), repeating: .nanoseconds(Int(period.seconds * 1e9)), leeway: .microseconds(200))
                timer.setEventHandler { [weak self] in self?.tick() }
                self.timer = timer
                timer.activate()
            case .unpaced:
                pullAvailable()
            }
        }
    }

    public func pause() {
        queue.sync {
            guard active else { return }
            active = false
            for waiter in stopWaiters.values { waiter.resume(returning: true) }
            stopWaiters.removeAll()
            timer?.cancel()
            timer = nil
            heardWhenPaused = max(framesPulled - deviceFrames, heardWhenPaused)
            if pacing == .realTime {
                heardWhenPaused = min(heardFrames(at: DispatchTime.now().uptimeNanoseconds), framesPulled)
            }
        }
    }

    public func flush() {
        queue.sync {
            // The device buffer is gone: what was pulled counts as heard, and the next pull refills.
            heardWhenPaused = framesPulled
            originNanos = DispatchTime.now().uptimeNanoseconds &- UInt64(Double(framesPulled) / format.sampleRate * 1e9)
            latencyFramesNow.store(0, ordering: .relaxed)
        }
    }

    public func drain(_ completion: @escaping @Sendable () -> Void) {
        queue.async { [self] in
            guard pacing == .realTime, active else { completion(); return }
            let doneAt = originNanos &+ UInt64(Double(framesPulled) / format.sampleRate * 1e9)
            queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: doneAt)) { completion() }
        }
    }

    public func close() {
        pause()
        queue.sync {
            source = nil
            framesPulled = 0
            heardWhenPaused = 0
            latencyFramesNow.store(0, ordering: .relaxed)
        }
    }

    public var latencyFrames: Int { latencyFramesNow.load(ordering: .relaxed) }

    public func sourceHasData() {
        guard pacing == .unpaced else { return }
        queue.async { [weak self] in self?.pullAvailable() }
    }

    private func heardFrames(at nanos: UInt64) -> Int {
        Int(Double(nanos &- originNanos) / 1e9 * format.sampleRate)
    }

    private func tick() {
        guard active, let source, let scratch else { return }
        let heard = heardFrames(at: DispatchTime.now().uptimeNanoseconds)
        var wanted = heard + deviceFrames - framesPulled
        while wanted > 0 {
            let frames = min(wanted, scratchFrames)
            _ = source.render(into: scratch, frames: frames, fillSilence: true)
            keep(scratch, frames: frames)
            framesPulled += frames
            wanted -= frames
        }
        latencyFramesNow.store(max(min(framesPulled - heard, deviceFrames), 0), ordering: .relaxed)
    }

    private func pullAvailable() {
        guard active, let source, let scratch else { return }
        while active {
            let frames = source.render(into: scratch, frames: scratchFrames, fillSilence: false)
            if frames == 0 { break }
            keep(scratch, frames: frames)
            framesPulled += frames
        }
        latencyFramesNow.store(deviceFrames, ordering: .relaxed)
    }

    private func keep(_ samples: UnsafeMutablePointer<Float>, frames: Int) {
        if isCapturing {
            let buffer = UnsafeBufferPointer(start: samples, count: frames * format.channelsPerFrame)
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
