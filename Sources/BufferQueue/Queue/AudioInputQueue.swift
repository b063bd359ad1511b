import Dispatch
import Synchronization

/// Something that happened in an input queue, delivered in order on the queue's callback executor.
public enum AudioInputQueueEvent: Sendable, CustomStringConvertible {
    /// A buffer holds captured frames and belongs to the caller again (the input callback got it too).
    case bufferFilled(AudioQueueBuffer, AudioCapturedFrames)
    /// A buffer came back empty (a ``AudioInputQueue/reset()``); it belongs to the caller again.
    case bufferReturned(AudioQueueBuffer)
    /// Capture started or stopped.
    case runningChanged(Bool)
    /// Frames were lost: no buffer was there to take them in time (or the device dropped them).
    /// The timeline jumps by exactly `framesLost`: the next buffer starts at `atSampleTime + framesLost`.
    case overrun(framesLost: Int, atSampleTime: Int64)
    /// A problem: the source failed (server gone, device removed) — capture stops — or a converter error.
    case error(AudioQueueError)

    public var description: String {
        switch self {
        case .bufferFilled(let buffer, let frames): return "bufferFilled(\(buffer.id), \(frames.frameCount) frames at \(frames.startSampleTime))"
        case .bufferReturned(let buffer): return "bufferReturned(\(buffer.id))"
        case .runningChanged(let running): return "runningChanged(\(running))"
        case .overrun(let lost, let time): return "overrun(\(lost) frames lost at \(time))"
        case .error(let error): return "error(\(error))"
        }
    }
}

/// Where a filled buffer's frames lie on the input queue's timeline (Core Audio passes the same as
/// the input callback's `inStartTime` and packet count).
public struct AudioCapturedFrames: Hashable, Sendable {
    /// Timeline frame of the buffer's first frame: frames captured since ``AudioInputQueue/start()``,
    /// counting frames lost in overruns.
    public var startSampleTime: Int64
    /// Frames in the buffer (its byte size divided by the bytes per frame; for a compressed queue
    /// the frames its packets decode to); 0 for a buffer returned empty by ``AudioInputQueue/reset()``.
    public var frameCount: Int
    /// For a compressed queue, where each packet lies in the buffer and the frames it decodes to
    /// (Core Audio's `inPacketDescs`); empty for linear PCM.
    public var packetDescriptions: [AudioPacketDescription]

    /// Frames from `startSampleTime` on, `frameCount` of them, in packets of `packetDescriptions` (empty for PCM).
    public init(startSampleTime: Int64, frameCount: Int, packetDescriptions: [AudioPacketDescription] = []) {
        self.startSampleTime = startSampleTime
        self.frameCount = frameCount
        self.packetDescriptions = packetDescriptions
    }

    /// Packets in the buffer (Core Audio's `inNumberPacketDescriptions`): for linear PCM, its frames.
    public var packetCount: Int { packetDescriptions.isEmpty ? frameCount : packetDescriptions.count }
}

/// A recording audio queue: Apple's `AudioQueueNewInput` for Linux.
///
/// It has the output queue's shape turned around: allocate buffers, enqueue them empty, and the
/// input callback hands each back filled — with its start sample time and frame count — for the
/// caller to consume and enqueue again. Frames come from an ``AudioSource`` (`PulseAudioSource`, a
/// ``NullSource``), and are converted to the queue's linear PCM format (16/24/32-bit integer or
/// float, any rate and channel count; a source at another rate goes through the resampler of
/// ``Configuration/resamplerRegistry``).
///
/// ```swift
/// let queue = try AudioInputQueue(format: .linearPCM(sampleRate: 48000, channels: 2, bitsPerChannel: 16),
///                                 configuration: .init(source: PulseAudioSource())) { queue, buffer, frames in
///     write(buffer)                      // frames.frameCount frames from frames.startSampleTime
///     try? queue.enqueue(buffer)
/// }
/// for _ in 0..<3 { try queue.enqueue(queue.allocateBuffer(capacity: 19200)) }
/// try queue.start()
/// ```
///
/// Nothing is invented: when the caller does not hand buffers back in time the capture ring fills,
/// later frames are lost, and the queue reports an ``AudioInputQueueEvent/overrun(framesLost:atSampleTime:)``
/// with the exact count; the buffer being filled is handed back short, and the next one starts
/// that many frames later on the timeline.
///
/// Threads: every method may be called from any thread (including the input callback). Callbacks
/// and ``events(bufferingPolicy:)`` are delivered serially on the configured callback queue, never
/// on the source's thread, and never after ``dispose(immediately:)`` has returned (unless it was
/// called from inside a callback).
public final class AudioInputQueue: Sendable {
    /// Choices made when creating an input queue.
    public struct Configuration: Sendable {
        /// Where frames come from. `nil`: a real-time ``NullSource`` of silence.
        public var source: (any AudioSource)?
        /// Frames (at the source's rate) the capture ring holds while no buffer is there to take
        /// them. `nil`: half a second.
        public var captureBufferFrames: Int?
        /// The dispatch queue callbacks run on (serialized either way). `nil`: a private one.
        public var callbackQueue: DispatchQueue?
        /// Where the resampler comes from when the source delivers another rate.
        public var resamplerRegistry: AudioResamplerRegistry
        /// How hard the resampler works.
        public var converterQuality: AudioConverterQuality
        /// For a compressed format: the encoder's bit rate, quality and packet size.
        public var encoderSettings: AudioEncoderSettings
        /// Where the encoder of a compressed format comes from.
        public var encoderRegistry: AudioEncoderRegistry
        /// Frames after which capture ends by itself, exactly, as if the source had ended (the
        /// queue stops and hands back what it holds); nil records until stopped.
        public var frameLimit: Int?
        /// Called with every event except ``AudioInputQueueEvent/bufferFilled(_:_:)`` and
        /// ``AudioInputQueueEvent/bufferReturned(_:)`` (which are the input callback's), on the
        /// callback queue, in one order with the input callbacks: what a C-style property listener
        /// needs, where an ``AudioInputQueue/events(bufferingPolicy:)`` stream would be read on
        /// another executor.
        public var eventHandler: (@Sendable (AudioInputQueueEvent) -> Void)?

        /// A configuration; every value has the default the type's properties describe.
        public init(source: (any AudioSource)? = nil, captureBufferFrames: Int? = nil, callbackQueue: DispatchQueue? = nil,
                    resamplerRegistry: AudioResamplerRegistry = .shared, converterQuality: AudioConverterQuality = .veryHigh,
                    encoderSettings: AudioEncoderSettings = .init(), encoderRegistry: AudioEncoderRegistry = .shared, frameLimit: Int? = nil,
                    eventHandler: (@Sendable (AudioInputQueueEvent) -> Void)? = nil) {
            self.eventHandler = eventHandler
            self.source = source
            self.captureBufferFrames = captureBufferFrames
            self.callbackQueue = callbackQueue
            self.resamplerRegistry = resamplerRegistry
            self.converterQuality = converterQuality
            self.encoderSettings = encoderSettings
            self.encoderRegistry = encoderRegistry
            self.frameLimit = frameLimit
        }
    }

    struct Control {
        /// The lifecycle: decided here, under the lock; acted on after it.
        var lifecycle = InputLifecycle()
        var phase: InputLifecycle.Phase { lifecycle.phase }
        /// Enqueued empty buffers, oldest first.
        var buffers: [AudioQueueBuffer] = []
        var discontinuity = false
        var metering = false
        /// The source is open (the worker has its target): what the queue's end must close.
        var sourceOpen = false
    }

    /// The format recorded into the buffers (for a compressed format, as the encoder fills it in).
    public let streamDescription: AudioStreamDescription
    /// The linear PCM frames are captured in before they are encoded (the queue's format itself
    /// for linear PCM).
    let captureFormat: AudioStreamDescription
    let source: any AudioSource
    let configuration: Configuration
    let layout: PCMSampleLayout
    let control: Lock<Control>
    /// The worker state, on `workQueue` only (checked at every access).
    private let confined: QueueBound<CaptureWorker>
    /// The largest packet the encoder makes (nil for linear PCM), known from its creation.
    private let encodedPacketSize: Int?
    let workQueue = DispatchQueue(label: "BufferQueue.input")
    let wake: WakeSignal
    let callbacks: DispatchQueue
    private let callbackKey = DispatchSpecificKey<UInt8>()
    private let streams = EventStreams<AudioInputQueueEvent>()
    private let nextBufferID = Atomic<Int>(0)
    private let closed = Atomic<Bool>(false)
    private let meters = Lock<[AudioLevelMeter]>([])
    private let inputCallback: (@Sendable (AudioInputQueue, AudioQueueBuffer, AudioCapturedFrames) -> Void)?

    /// - Parameters:
    ///   - format: interleaved linear PCM to record (8-bit unsigned, 16/24/32-bit signed, 32/64-bit
    ///     float), or a format an encoder of ``Configuration/encoderRegistry`` makes (AAC, Apple
    ///     Lossless, FLAC, Opus, IMA4, µ-law, A-law …), as Apple's input queues record: its rate
    ///     and channel count, and for the lossless codecs a bit depth. Compressed buffers hold
    ///     whole packets, described in the callback's ``AudioCapturedFrames/packetDescriptions``,
    ///     and come back when the next packet would not fit or when they hold as many packets as
    ///     the largest (``maximumPacketSize``) would fill them with: size buffers as
    ///     `maximumPacketSize × packets` for a duration, as with Apple's queues;
    ///     ``magicCookie`` and ``encodingTotals`` give what a file needs besides.
    ///   - configuration: source, capture ring size, callback queue, resampler, encoder settings.
    ///   - inputCallback: called with each filled buffer, its frames and where they lie on the timeline.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` for a format nothing records,
    ///   ``AudioQueueError/Code/invalidPropertyValue`` for an impossible one.
    public init(format: AudioStreamDescription, configuration: Configuration = Configuration(),
                inputCallback: (@Sendable (AudioInputQueue, AudioQueueBuffer, AudioCapturedFrames) -> Void)? = nil) throws {
        var encoder: AudioEncodingConverter?
        var format = format
        let captureFormat: AudioStreamDescription
        if format.isLinearPCM {
            captureFormat = format
        } else {
            guard format.sampleRate > 0, format.sampleRate <= 1_536_000, (1...RenderStage.maxChannels).contains(format.channelsPerFrame) else {
                throw AudioQueueError(.invalidPropertyValue, "recording \(format.formatID) needs a rate and 1...\(RenderStage.maxChannels) channels (got \(format))")
            }
            captureFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
            let made = try AudioEncodingConverter(from: captureFormat, to: format, settings: configuration.encoderSettings,
                                                  quality: configuration.converterQuality, encoders: configuration.encoderRegistry,
                                                  resamplers: configuration.resamplerRegistry)
            encoder = made
            format = made.outputFormat
        }
        if let limit = configuration.frameLimit, limit < 1 {
            throw AudioQueueError(.invalidPropertyValue, "a frame limit of \(limit) frames is not one (at least 1)")
        }
        self.captureFormat = captureFormat
        layout = try PCMSampleLayout(captureFormat)
        guard format.channelsPerFrame <= RenderStage.maxChannels else {
            throw AudioQueueError(.invalidPropertyValue, "recording \(format.channelsPerFrame) channels is not supported (1...\(RenderStage.maxChannels))")
        }
        if let frames = configuration.captureBufferFrames, !(64...(1 << 24)).contains(frames) {
            throw AudioQueueError(.invalidPropertyValue, "capture buffer of \(frames) frames is out of range (64...16777216)")
        }
        streamDescription = format
        self.configuration = configuration
        source = configuration.source ?? NullSource()
        control = Lock(Control())
        confined = QueueBound(CaptureWorker(format: captureFormat, layout: layout, encoder: encoder, frameLimit: configuration.frameLimit),
                              on: workQueue)
        encodedPacketSize = encoder?.maximumPacketSize
        wake = WakeSignal(queue: workQueue)
        callbacks = DispatchQueue(label: "BufferQueue.input.callbacks", target: configuration.callbackQueue)
        callbacks.setSpecific(key: callbackKey, value: 1)
        self.inputCallback = inputCallback
        let weakSelf = WeakReference<AudioInputQueue>()
        weakSelf.object = self
        wake.setHandler { weakSelf.object?.service() }
    }

    /// The worker state; traps off `workQueue`.
    var worker: CaptureWorker { confined.value }

    deinit {
        wake.cancel()
        if control.withLock({ $0.sourceOpen }) { source.close() }
    }

    // MARK: buffers

    /// Allocates a buffer owned by this queue (Core Audio's `AudioQueueAllocateBuffer`). A buffer
    /// holds `capacity / bytesPerFrame` frames.
    public func allocateBuffer(capacity: Int) throws -> AudioQueueBuffer {
        let least = encodedPacketSize ?? streamDescription.bytesPerFrame
        guard capacity >= least, capacity <= 1 << 30 else {
            throw AudioQueueError(.invalidParameter,
                "buffer capacity \(capacity) is out of range (\(least)...1073741824 bytes: at least one \(encodedPacketSize == nil ? "frame" : "packet of the largest size"))")
        }
        if control.withLock({ $0.phase == .disposed }) {
            throw AudioQueueError(.disposalPending, "the input queue has been disposed of")
        }
        let id = nextBufferID.add(1, ordering: .relaxed).newValue
        return try AudioQueueBuffer(capacity: capacity, packetDescriptionCapacity: 0, id: id, queueID: ObjectIdentifier(self))
    }

    /// Hands an empty buffer to the queue to be filled (Core Audio's `AudioQueueEnqueueBuffer` on
    /// an input queue). Whatever it held is overwritten.
    /// - Throws: ``AudioQueueError/Code/invalidBuffer`` for another queue's buffer,
    ///   ``AudioQueueError/Code/bufferInQueue`` when it is already enqueued,
    ///   ``AudioQueueError/Code/enqueueDuringReset`` while an asynchronous stop finishes,
    ///   ``AudioQueueError/Code/disposalPending`` after disposal.
    public func enqueue(_ buffer: AudioQueueBuffer) throws {
        guard buffer.queueID == ObjectIdentifier(self) else {
            throw AudioQueueError(.invalidBuffer, "buffer \(buffer.id) was allocated by another queue")
        }
        try control.withLock { control in
            try control.lifecycle.checkEnqueue()
            guard buffer.claim() else {
                throw AudioQueueError(.bufferInQueue, "buffer \(buffer.id) is already in the queue; wait for the input callback")
            }
            buffer.setByteSizeInternal(0)
            control.buffers.append(buffer)
        }
        wake.signal()
    }

    // MARK: lifecycle

    /// Starts (or resumes) recording. The first start after creation or a stop opens the source and
    /// starts a new timeline at 0.
    /// - Throws: ``AudioQueueError/Code/cannotStart`` when the source cannot be opened or started,
    ///   ``AudioQueueError/Code/disposalPending`` after disposal.
    public func start() throws {
        let sourceIsOpen = workQueue.sync { worker.target != nil }
        let (previous, actions) = try control.withLock { control -> (InputLifecycle.Phase, [InputLifecycle.Action]) in
            (control.phase, try control.lifecycle.start(sourceIsOpen: sourceIsOpen))
        }
        var reported = false
        for action in actions {
            do {
                switch action {
                case .openSource:
                    try openSource()
                case .report(let running):
                    deliver(.runningChanged(running))
                    reported = true
                case .startSource:
                    // Running before the source starts: a source may deliver (and even end) at once.
                    try source.start()
                default:
                    perform([action], onWorker: false)
                }
            } catch {
                perform(control.withLock { $0.lifecycle.startFailed(restoring: previous, reported: reported) }, onWorker: false)
                if action == .startSource {
                    throw error as? AudioQueueError ?? AudioQueueError(.cannotStart, "the source did not start: \(error)")
                }
                throw error
            }
        }
    }

    /// Stops capturing; the timeline holds. Frames already captured still fill buffers.
    public func pause() throws {
        perform(try control.withLock { try $0.lifecycle.pause() }, onWorker: false)
    }

    /// Stops recording.
    ///
    /// - Parameter immediately: `true` stops capture now: every frame captured is handed back (the
    ///   buffer being filled comes back short), and frames no enqueued buffer can take are reported as
    ///   an overrun. `false` records on until every buffer enqueued now is full, then stops; enqueues
    ///   are refused meanwhile. Either way the buffers still enqueued stay for the next start, and the
    ///   next start begins a new timeline.
    public func stop(immediately: Bool) throws {
        perform(try control.withLock { try $0.lifecycle.stop(immediately: immediately) }, onWorker: false)
    }

    /// Whether capture is under way (started, not paused or stopped; true while an asynchronous stop finishes).
    public var isRunning: Bool { control.withLock { $0.lifecycle.isRunning } }

    /// Whether an asynchronous stop is finishing.
    public var isStopping: Bool { control.withLock { $0.phase == .stopping } }

    /// Discards every frame captured and not yet handed back, and returns every enqueued buffer
    /// empty (``AudioInputQueueEvent/bufferReturned(_:)``; the input callback gets it with 0
    /// frames). A running queue keeps running; the timeline keeps counting.
    public func reset() throws {
        perform(try control.withLock { try $0.lifecycle.reset() }, onWorker: false)
    }

    /// Stops and releases the source. After it returns no callback runs (unless called from one)
    /// and every method throws ``AudioQueueError/Code/disposalPending``.
    /// - Parameter immediately: `false` first hands back what was captured, as ``stop(immediately:)`` with `true` does.
    public func dispose(immediately: Bool) {
        perform(control.withLock { $0.lifecycle.dispose(immediately: immediately) }, onWorker: false)
    }

    /// Performs the lifecycle's actions in order (`onWorker`: already on the worker's queue).
    private func perform(_ actions: [InputLifecycle.Action], onWorker: Bool) {
        for action in actions {
            switch action {
            case .openSource, .startSource:
                // Only a start opens or starts (it handles their failures itself); a reset restarts.
                do { try source.start() } catch {
                    deliver(.error(error as? AudioQueueError ?? AudioQueueError(.sinkError, "the source did not restart: \(error)")))
                }
            case .pauseSource:
                source.pause()
            case .wakeWorker:
                wake.signal()
            case .drainAndClose:
                let close = { [self] in
                    drainForStop()
                    closeSource()
                }
                if onWorker { close() } else { workQueue.sync(execute: close) }
            case .discardCaptured:
                let (returned, time) = workQueue.sync { () -> ([AudioQueueBuffer], Int) in
                    var returned = worker.discardAll()
                    returned += control.withLock { control in
                        defer { control.buffers.removeAll() }
                        return control.buffers
                    }
                    return (returned, worker.capturedOutputFrames)
                }
                control.withLock { $0.discontinuity = true }
                deliverReturned(returned, at: time)
            case .release(let handBackFirst):
                release(handBackFirst: handBackFirst)
            case .report(let running):
                deliver(.runningChanged(running))
            }
        }
    }

    /// Disposal: what was captured handed back (or not), the source closed, every buffer released,
    /// the callbacks and streams ended.
    private func release(handBackFirst: Bool) {
        workQueue.sync {
            if handBackFirst { drainForStop() }
            for buffer in worker.discardAll() { buffer.release() }
            closeSource()
        }
        let buffers = control.withLock { control in
            defer { control.buffers.removeAll() }
            return control.buffers
        }
        for buffer in buffers { buffer.release() }
        wake.cancel()
        let onCallbackQueue = DispatchQueue.getSpecific(key: callbackKey) != nil
        // What `immediately: false` handed back reaches the callback before delivery closes.
        if handBackFirst && !onCallbackQueue { callbacks.sync {} }
        closed.store(true, ordering: .releasing)
        if !onCallbackQueue { callbacks.sync {} }
        streams.finishAll()
    }

    // MARK: time and meters

    /// The timeline position of the frame the source captured last: frames captured since the
    /// start (at the queue's rate), counting frames lost. `discontinuity` is true when an overrun
    /// or a reset happened since the last call.
    public func currentTime() -> AudioQueueTime {
        let captured = workQueue.sync { worker.capturedOutputFrames }
        let discontinuity = control.withLock { control -> Bool in
            defer { control.discontinuity = false }
            return control.discontinuity
        }
        return AudioQueueTime(sampleTime: Int64(captured), discontinuity: discontinuity)
    }

    /// Whether the queue measures levels of what it records (Core Audio's `kAudioQueueProperty_EnableLevelMetering`).
    public var isLevelMeteringEnabled: Bool {
        get { control.withLock { $0.metering } }
    }

    /// Turns level metering on or off.
    public func setLevelMeteringEnabled(_ enabled: Bool) {
        control.withLock { $0.metering = enabled }
        workQueue.async { [confined] in confined.value.metering = enabled }
        if !enabled { meters.withLock { $0 = [] } }
    }

    /// Levels of each channel over the last buffer filled (empty while metering is off).
    public var currentLevelMeters: [AudioLevelMeter] { meters.withLock { $0 } }

    /// The format the source delivers now (nil before the first start): its rate may differ from
    /// ``streamDescription``'s, in which case the queue resamples.
    ///
    /// For a compressed queue, the encoder's figures follow.
    public var sourceFormat: AudioStreamDescription? { workQueue.sync { worker.sourceFormat } }

    /// A compressed queue's magic cookie (Core Audio's `kAudioQueueProperty_MagicCookie` /
    /// `kAudioConverterCompressionMagicCookie`): final once the queue has stopped (FLAC's MD5,
    /// ALAC's largest packet); nil for linear PCM and formats without one.
    public var magicCookie: [UInt8]? { workQueue.sync { worker.encoder?.magicCookie } }

    /// The largest packet a compressed queue makes (`kAudioConverterPropertyMaximumOutputPacketSize`);
    /// the bytes per frame for linear PCM.
    public var maximumPacketSize: Int { encodedPacketSize ?? streamDescription.bytesPerFrame }

    /// A compressed recording's gapless numbers since the start: the frames captured (valid), the
    /// encoder's priming and the last packet's padding (final once the queue has stopped); nil for
    /// linear PCM. They describe the packets handed back: packets dropped (by an immediate stop
    /// with no buffer enqueued to take them, or by ``reset()``) are not counted.
    public var encodingTotals: AudioEncodingTotals? { workQueue.sync { worker.encodingTotals } }

    // MARK: events

    /// A stream of everything that happens in the queue, in order. Each call makes a new stream
    /// that receives events from then on; it finishes when the queue is disposed of.
    public func events(bufferingPolicy: AsyncStream<AudioInputQueueEvent>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<AudioInputQueueEvent> {
        streams.make(bufferingPolicy: bufferingPolicy)
    }

    /// Blocks until every callback and event produced so far has been delivered. Not from inside a callback.
    public func waitForCallbacks() {
        workQueue.sync {}
        if DispatchQueue.getSpecific(key: callbackKey) == nil { callbacks.sync {} }
    }

    // MARK: internals

    private func openSource() throws {
        let weakSelf = WeakReference<AudioInputQueue>()
        weakSelf.object = self
        let workQueue = self.workQueue
        try workQueue.sync {
            closeSource()
            let wake = self.wake
            let target = AudioCaptureTarget(notify: { wake.signal() },
                                            errorHandler: { error in workQueue.async { weakSelf.object?.sourceFailed(error) } },
                                            endHandler: { workQueue.async { weakSelf.object?.worker.sourceEnded = true; weakSelf.object?.service() } })
            let delivered: AudioStreamDescription
            do { delivered = try source.open(format: captureFormat, target: target) } catch {
                throw error as? AudioQueueError ?? AudioQueueError(.cannotStart, "the source did not open: \(error)")
            }
            guard delivered.isFloat32Interleaved, (1...RenderStage.maxChannels).contains(delivered.channelsPerFrame),
                  delivered.sampleRate > 0, delivered.sampleRate <= 1_536_000 else {
                source.close()
                throw AudioQueueError(.cannotStart, "the source delivers \(delivered), not interleaved float32 the queue can take")
            }
            target.prepare(capacityFrames: configuration.captureBufferFrames ?? max(Int(delivered.sampleRate / 2), 1024),
                           channels: delivered.channelsPerFrame)
            try worker.open(target: target, sourceFormat: delivered, configuration: configuration)
            worker.metering = control.withLock { control in
                control.sourceOpen = true
                return control.metering
            }
        }
    }

    /// On the worker: closes the source when it is open, and hands back what the worker held.
    private func closeSource() {
        if worker.target != nil {
            source.close()
            control.withLock { $0.sourceOpen = false }
        }
        requeue(worker.close())
    }

    /// On the worker: moves captured frames into buffers and hands full ones back.
    func service() {
        guard worker.target != nil else { return }
        var outgoing: [CaptureWorker.Outgoing] = []
        let stopping = control.withLock { $0.phase == .stopping }
        worker.run(takeBuffer: { [control] in
            control.withLock { control in control.buffers.isEmpty ? nil : control.buffers.removeFirst() }
        }, into: &outgoing)
        if outgoing.contains(where: { if case .overrun = $0 { return true } else { return false } }) {
            control.withLock { $0.discontinuity = true }
        }
        publish(outgoing)
        let noMoreBuffers = worker.current == nil && control.withLock { $0.buffers.isEmpty }
        if worker.sourceEnded && worker.isDrained {
            completeStop(final: [])
        } else if stopping && noMoreBuffers {
            completeStop(final: [])
        }
        worker.target?.spaceFreed()
    }

    /// On the worker: the source has stopped writing; hand back everything, close it.
    private func completeStop(final: [CaptureWorker.Outgoing]) {
        perform(control.withLock { $0.lifecycle.captureEnded() }, onWorker: true)
    }

    /// On the worker, with the source paused: everything held goes into buffers; what none can take is an overrun.
    private func drainForStop() {
        var outgoing: [CaptureWorker.Outgoing] = []
        worker.run(takeBuffer: { [control] in
            control.withLock { control in control.buffers.isEmpty ? nil : control.buffers.removeFirst() }
        }, into: &outgoing, finishing: true)
        publish(outgoing)
    }

    /// On the worker: the source failed. What was captured is handed back, capture stops.
    private func sourceFailed(_ error: AudioQueueError) {
        guard worker.target != nil else { return }
        deliver(.error(error))
        completeStop(final: [])
    }

    /// Puts back an empty buffer the worker had taken (it stays first in line).
    private func requeue(_ buffer: AudioQueueBuffer?) {
        guard let buffer else { return }
        if control.withLock({ $0.phase == .disposed }) {
            buffer.release()
        } else {
            control.withLock { $0.buffers.insert(buffer, at: 0) }
        }
    }

    private func publish(_ outgoing: [CaptureWorker.Outgoing]) {
        guard !outgoing.isEmpty else { return }
        for item in outgoing {
            switch item {
            case .filled(let buffer, let frames, let levels):
                if let levels { meters.withLock { $0 = levels } }
                deliverFilled(buffer, frames)
            case .overrun(let lost, let time):
                deliver(.overrun(framesLost: lost, atSampleTime: time))
            case .error(let error):
                deliver(.error(error))
            }
        }
    }

    private func deliverFilled(_ buffer: AudioQueueBuffer, _ frames: AudioCapturedFrames) {
        callbacks.async { [self] in
            buffer.release()
            guard !closed.load(ordering: .acquiring) else { return }
            inputCallback?(self, buffer, frames)
            yield(.bufferFilled(buffer, frames))
        }
    }

    private func deliverReturned(_ buffers: [AudioQueueBuffer], at time: Int) {
        guard !buffers.isEmpty else { return }
        callbacks.async { [self] in
            for buffer in buffers {
                buffer.setByteSizeInternal(0)
                buffer.release()
                guard !closed.load(ordering: .acquiring) else { continue }
                inputCallback?(self, buffer, AudioCapturedFrames(startSampleTime: Int64(time), frameCount: 0))
                yield(.bufferReturned(buffer))
            }
        }
    }

    func deliver(_ event: AudioInputQueueEvent) {
        callbacks.async { [self] in
            guard !closed.load(ordering: .acquiring) else { return }
            configuration.eventHandler?(event)
            yield(event)
        }
    }

    private func yield(_ event: AudioInputQueueEvent) { streams.yield(event) }
}

