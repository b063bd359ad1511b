import Dispatch
import Synchronization

/// An output audio queue: Apple's Audio Queue Services (output side) for Linux.
///
/// You create a queue for a stream format, allocate buffers from it, fill them with packets and
/// enqueue them, optionally trimming frames at either end (how gapless playback removes encoder
/// priming and padding) and scheduling them at a sample time. The queue decodes ahead on its own
/// worker, hands each buffer back through the output callback once it no longer needs the bytes,
/// and plays through an ``AudioSink`` — or renders offline into memory, with the same frames bit
/// for bit.
///
/// ```swift
/// let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16)) { queue, buffer in
///     // refill `buffer` and enqueue it again
/// }
/// let buffer = try queue.allocateBuffer(capacity: 16384)
/// try buffer.setData(pcmBytes)
/// try queue.enqueue(buffer)
/// try queue.start()
/// ```
///
/// Threads: every method may be called from any thread. The output callback and
/// ``events(bufferingPolicy:)`` are delivered serially on the callback queue given in
/// ``Configuration``, never on the sink's real-time thread, and never after
/// ``dispose(immediately:)`` has returned (unless it was called from inside a callback).
public final class AudioQueue: Sendable {
    /// Choices made when creating a queue.
    public struct Configuration: Sendable {
        /// Where the sound goes. `nil` means a real-time paced ``NullSink``.
        public var sink: (any AudioSink)?
        /// Frames the queue decodes ahead of the sink (Core Audio's decode buffer size).
        public var decodeBufferFrames: Int
        /// The dispatch queue callbacks run on (they are serialized either way). `nil`: a private one.
        public var callbackQueue: DispatchQueue?
        /// Where decoders are found.
        public var decoderRegistry: AudioDecoderRegistry
        /// Where resamplers are found, for an offline render format with another sample rate
        /// (import `SoxrConverter` and call its `register()`).
        public var resamplerRegistry: AudioResamplerRegistry
        /// How hard the resampler works (Core Audio's `kAudioQueueProperty_…SRCQuality`).
        public var converterQuality: AudioConverterQuality
        /// Where the ``TimePitchAlgorithm/spectral`` algorithm finds its engine (import
        /// `RubberBandTimePitch` and call its `register()`).
        public var timePitchRegistry: TimePitchEngineRegistry
        /// What the sink plays when the decoded format changes mid-stream or at a
        /// ``AudioQueue/beginStream(format:magicCookie:)``.
        public var sinkFormat: SinkFormat
        /// When the buffers an offline render finishes with reach the output callback.
        public var offlineCallbacks: OfflineCallbackDelivery
        /// Called with every event except ``AudioQueueEvent/bufferReturned(_:)`` (which is the
        /// output callback's), on the callback queue, in one order with the output callbacks:
        /// what a C-style property listener needs, where an ``AudioQueue/events(bufferingPolicy:)``
        /// stream would be read on another executor.
        public var eventHandler: (@Sendable (AudioQueueEvent) -> Void)?

        /// A configuration; every value has the default the type's properties describe.
        public init(sink: (any AudioSink)? = nil, decodeBufferFrames: Int = 16384,
                    callbackQueue: DispatchQueue? = nil, decoderRegistry: AudioDecoderRegistry = .shared,
                    resamplerRegistry: AudioResamplerRegistry = .shared, converterQuality: AudioConverterQuality = .veryHigh,
                    timePitchRegistry: TimePitchEngineRegistry = .shared, sinkFormat: SinkFormat = .followDecoded,
                    offlineCallbacks: OfflineCallbackDelivery = .asynchronous,
                    eventHandler: (@Sendable (AudioQueueEvent) -> Void)? = nil) {
            self.eventHandler = eventHandler
            self.sinkFormat = sinkFormat
            self.offlineCallbacks = offlineCallbacks
            self.timePitchRegistry = timePitchRegistry
            self.sink = sink
            self.decodeBufferFrames = decodeBufferFrames
            self.callbackQueue = callbackQueue
            self.decoderRegistry = decoderRegistry
            self.resamplerRegistry = resamplerRegistry
            self.converterQuality = converterQuality
        }
    }

    /// When the buffers an ``AudioQueue/offlineRender(at:into:frames:)-(_,UnsafeMutableRawBufferPointer,_)``
    /// call finishes with reach the output callback (and ``AudioQueueEvent/bufferReturned(_:)``).
    /// Either way they are delivered in order, serialized with every other callback and event on
    /// the callback queue.
    public enum OfflineCallbackDelivery: Sendable, Equatable {
        /// Handed to the callback queue, which runs them on its own thread, as in playback.
        case asynchronous
        /// Run on the rendering thread before the render call returns — what running the callback
        /// run loop yourself between renders does with Apple's queue. A thread that renders and
        /// refills in turn then never waits for another thread to hand its buffers back: when
        /// the call returns, the buffers it used up are free (``AudioQueueBuffer/isInQueue`` is
        /// false) and the callback has run.
        ///
        /// The render waits for a callback already running on another thread. So a callback must
        /// not wait for the rendering thread, and a render called from inside a callback (or on
        /// the callback queue) delivers asynchronously instead.
        case beforeReturning
    }

    /// The format the sink plays, when the decoded format changes.
    public enum SinkFormat: Sendable, Equatable {
        /// The sink follows the decoded format: it is closed and reopened at each change
        /// (bit-perfect; there is a short gap in what is heard where the format changes).
        case followDecoded
        /// The sink keeps the format of the first frames it plays; later formats are converted to
        /// it on the render path without a gap (rate conversion needs a registered resampler,
        /// `SoxrConverter`; the converters are made ahead on the queue's worker).
        case keepFirst
        /// The sink plays this rate and channel count; every decoded format is converted to it.
        case fixed(sampleRate: Double, channels: Int)
    }

    /// What the state lock guards: the lifecycle state machine and the settings it needs.
    struct Control {
        var lifecycle = QueueLifecycle()
        var offlineFormat: AudioStreamDescription?
        var offlineLayout: PCMSampleLayout?
        var channelLayout: AudioChannelLayout
        var timePitch: TimePitchAlgorithm?
        /// The format the sink was opened with (nil while it is closed).
        var sinkStreamFormat: AudioStreamDescription?
    }

    /// What the serial lock guards: the sink as it really is (only lifecycle actions touch it).
    struct SinkHandle {
        var isOpen = false
    }

    /// Buffers and markers waiting for the producer, and whether enqueues are accepted.
    struct Input {
        var entries: [PendingEntry] = []
        var head = 0
        var scheduledEnd = 0
        var refusal: AudioQueueError?
        /// The format of what is enqueued now (the last ``AudioQueue/beginStream(format:magicCookie:)``'s).
        var format: AudioStreamDescription

        var hasPendingBuffers: Bool {
            entries[head...].contains { if case .buffer = $0 { return true } else { return false } }
        }

        mutating func popFirst() -> PendingEntry? {
            guard head < entries.count else { return nil }
            let entry = entries[head]
            head += 1
            if head > 64 && head * 2 > entries.count {
                entries.removeFirst(head)
                head = 0
            }
            return entry
        }

        /// Removes every entry; returns the buffers and the last stream switch among them (which
        /// still applies to what is enqueued next).
        mutating func removeAllBuffers() -> (buffers: [AudioQueueBuffer], stream: (AudioStreamDescription, [UInt8]?)?) {
            var buffers: [AudioQueueBuffer] = []
            var stream: (AudioStreamDescription, [UInt8]?)?
            for entry in entries[head...] {
                switch entry {
                case .buffer(let pending): buffers.append(pending.buffer)
                case .newStream(let format, let cookie): stream = (format, cookie)
                case .flush, .endOfStream: break
                }
            }
            entries.removeAll()
            head = 0
            return (buffers, stream)
        }
    }

    /// The format of what is enqueued.
    public let streamDescription: AudioStreamDescription
    /// Frames decoded ahead of the sink.
    public let decodeBufferFrames: Int
    let decoderRegistry: AudioDecoderRegistry
    let sinkFormat: SinkFormat
    let sink: any AudioSink
    let stage: RenderStage
    let renderSource: AudioRenderSource
    /// What ``RenderThreadObserver`` passes for this queue's renders (for a test's instrument).
    package var renderSourceIdentity: UnsafeRawPointer { renderSource.identity }
    /// Lock order: `serial` → `control` → `pipeline` → `input`. `serial` orders lifecycle calls
    /// and the actions they perform (it is never taken on a sink's or the render thread);
    /// `control` is held only to decide; `pipeline` is the producer and the render stage's
    /// non-sink reader.
    let serial = Lock(SinkHandle())
    let control: Lock<Control>
    let input: Lock<Input>
    let pipeline: Lock<Producer>
    let delivery: EventDelivery
    let offlineCallbacks: OfflineCallbackDelivery
    let workQueue: DispatchQueue
    let wake: WakeSignal
    private let nextBufferID = Atomic<Int>(0)
    /// Threads blocked in ``waitWhileStopping(until:unless:)``, woken by every lifecycle change.
    let lifecycleWaiters = Lock<[Int: DispatchSemaphore]>([:])
    let nextLifecycleWaiter = Atomic<Int>(0)
    /// Render signals already handled by the worker (underruns, ends of stream).
    /// Render events taken from the stage's ring and not yet acted on; its lock serialises the
    /// ring's consumers (the worker, an offline-rendering thread).
    let takenRenderEvents = Lock(TakenRenderEvents())

    /// Checks what a stream format must satisfy to be decoded here.
    static func validate(_ format: AudioStreamDescription, registry: AudioDecoderRegistry) throws {
        guard format.sampleRate > 0, format.sampleRate.isFinite, format.sampleRate <= 1_536_000 else {
            throw AudioQueueError(.invalidPropertyValue, "sample rate \(format.sampleRate) is out of range (0 < rate <= 1536000)")
        }
        guard (1...RenderStage.maxChannels).contains(format.channelsPerFrame) else {
            throw AudioQueueError(.invalidPropertyValue, "\(format.channelsPerFrame) channels is out of range (1...\(RenderStage.maxChannels))")
        }
        guard format.bytesPerPacket >= 0, format.framesPerPacket >= 0 else {
            throw AudioQueueError(.invalidPropertyValue, "negative bytes or frames per packet")
        }
        guard registry.factory(for: format.formatID) != nil else {
            throw registry.missingDecoder(for: format.formatID)
        }
        if format.isLinearPCM { _ = try PCMSampleLayout(format) }
    }

    /// Creates a queue for `format`.
    ///
    /// - Parameters:
    ///   - format: what will be enqueued. A decoder for its format id must be registered.
    ///   - configuration: sink, decode-ahead size, callback queue and decoder registry.
    ///   - outputCallback: called once for every enqueued buffer when the queue no longer needs it.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when no decoder handles the format,
    ///   ``AudioQueueError/Code/invalidPropertyValue`` for an impossible format.
    public init(format: AudioStreamDescription, configuration: Configuration = Configuration(),
                outputCallback: (@Sendable (AudioQueue, AudioQueueBuffer) -> Void)? = nil) throws {
        try Self.validate(format, registry: configuration.decoderRegistry)
        guard (256...(1 << 22)).contains(configuration.decodeBufferFrames) else {
            throw AudioQueueError(.invalidPropertyValue, "decode buffer of \(configuration.decodeBufferFrames) frames is out of range (256...4194304)")
        }
        streamDescription = format
        input = Lock(Input(format: format))
        decodeBufferFrames = configuration.decodeBufferFrames
        decoderRegistry = configuration.decoderRegistry
        sinkFormat = configuration.sinkFormat
        sink = configuration.sink ?? NullSink()
        let stage = RenderStage(capacityFrames: configuration.decodeBufferFrames, channels: format.channelsPerFrame,
                                sampleRate: format.sampleRate, resamplers: configuration.resamplerRegistry,
                                converterQuality: configuration.converterQuality,
                                timePitchEngines: configuration.timePitchRegistry)
        self.stage = stage
        control = Lock(Control(channelLayout: .default(channels: format.channelsPerFrame)))
        pipeline = Lock(Producer(format: format, registry: configuration.decoderRegistry, stage: stage,
                                       decodeBufferFrames: configuration.decodeBufferFrames))
        workQueue = DispatchQueue(label: "BufferQueue.worker")
        wake = WakeSignal(queue: workQueue)
        let weakBox = WeakReference<AudioQueue>()
        var bufferCallback: (@Sendable (AudioQueueBuffer) -> Void)?
        if let outputCallback {
            bufferCallback = { buffer in if let queue = weakBox.object { outputCallback(queue, buffer) } }
        }
        delivery = EventDelivery(label: "BufferQueue.callbacks", target: configuration.callbackQueue,
                                 outputCallback: bufferCallback, eventHandler: configuration.eventHandler)
        offlineCallbacks = configuration.offlineCallbacks
        let workQueue = self.workQueue
        let delivery = self.delivery
        renderSource = AudioRenderSource(stage: stage, errorHandler: { error in
            // Never on the caller's thread: a sink may report from inside its own control methods.
            workQueue.async { weakBox.object?.sinkFailed(error) }
        }, deviceHandler: { name in delivery.deliver(.outputDeviceChanged(name)) })
        weakBox.object = self
        if case .fixed(let rate, let channels) = configuration.sinkFormat {
            guard rate > 0, rate.isFinite, rate <= 1_536_000, (1...RenderStage.maxChannels).contains(channels) else {
                throw AudioQueueError(.invalidPropertyValue, "sink format of \(channels) channels at \(rate) Hz is out of range")
            }
            try stage.withExclusiveAccess { try stage.setSinkTarget((rate, channels)) }
        }
        let wake = self.wake
        stage.notify = { wake.signalUnlessMuted() }
        wake.setHandler { weakBox.object?.serviceWorker() }
    }

    deinit {
        wake.cancel()
        if serial.withLock({ $0.isOpen }) { sink.close() }
        delivery.shutDown()
    }

    // MARK: buffers

    /// Allocates a buffer owned by this queue (Core Audio's `AudioQueueAllocateBufferWithPacketDescriptions`).
    ///
    /// The storage starts out zeroed. When a buffer of 64 KiB to 1 MiB is freed, its storage is
    /// kept (up to 2 MiB in all, for the whole process) and handed to the next buffer of the same
    /// size, from any queue: a program that makes queue after queue then does not fault in new
    /// pages for each one.
    /// - Parameters:
    ///   - capacity: bytes of storage, at least 1.
    ///   - packetDescriptionCapacity: how many packet descriptions may accompany it (0 for PCM).
    public func allocateBuffer(capacity: Int, packetDescriptionCapacity: Int = 0) throws -> AudioQueueBuffer {
        guard capacity > 0, capacity <= 1 << 30 else {
            throw AudioQueueError(.invalidParameter, "buffer capacity \(capacity) is out of range (1...1073741824 bytes)")
        }
        guard packetDescriptionCapacity >= 0 else {
            throw AudioQueueError(.invalidParameter, "negative packet description capacity")
        }
        try checkNotDisposed()
        let id = nextBufferID.add(1, ordering: .relaxed).newValue
        return try AudioQueueBuffer(capacity: capacity, packetDescriptionCapacity: packetDescriptionCapacity, id: id,
                                    queueID: ObjectIdentifier(self))
    }

    /// Adds a buffer to the queue.
    ///
    /// - Parameters:
    ///   - buffer: a buffer from ``allocateBuffer(capacity:packetDescriptionCapacity:)`` holding
    ///     ``AudioQueueBuffer/byteSize`` bytes of data.
    ///   - packetDescriptions: where each packet lies; required when the format has variable packet
    ///     sizes (`bytesPerPacket == 0`), optional otherwise.
    ///   - trimFramesAtStart: decoded output frames of this buffer to drop at its start (priming).
    ///   - trimFramesAtEnd: decoded output frames of this buffer to drop at its end (remainder).
    ///   - parameters: volume, pan, play rate and gain that take effect when this buffer starts to
    ///     play and stay (a play rate needs time-pitch on: ``setTimePitch(_:)``).
    ///   - startTime: the timeline frame at which the first untrimmed frame plays; a gap before it
    ///     plays silence, also when the trims leave the buffer no frame (the timeline then reaches
    ///     `startTime` in silence). `nil`: right after the previous buffer.
    /// - Returns: the timeline frame at which the buffer's first untrimmed frame will play. For
    ///   compressed formats this assumes the packets decode to the frames the format declares.
    /// - Throws: ``AudioQueueError`` with ``AudioQueueError/Code/bufferEmpty``,
    ///   ``AudioQueueError/Code/bufferInQueue``, ``AudioQueueError/Code/invalidBuffer``,
    ///   ``AudioQueueError/Code/invalidPacketDescription``, ``AudioQueueError/Code/invalidTrim``
    ///   (for PCM, where the frame count is known), ``AudioQueueError/Code/timeNotAscending``,
    ///   ``AudioQueueError/Code/invalidParameter``, ``AudioQueueError/Code/enqueueDuringReset`` while
    ///   an asynchronous stop is under way, ``AudioQueueError/Code/disposalPending``. When it throws
    ///   the buffer stays the caller's.
    @discardableResult
    public func enqueue(_ buffer: AudioQueueBuffer, packetDescriptions: [AudioPacketDescription] = [],
                        trimFramesAtStart: Int = 0, trimFramesAtEnd: Int = 0,
                        parameters: AudioQueueParameters = AudioQueueParameters(),
                        startTime: Int64? = nil) throws -> Int64 {
        guard buffer.queueID == ObjectIdentifier(self) else {
            throw AudioQueueError(.invalidBuffer, "buffer \(buffer.id) was allocated by another queue")
        }
        let byteSize = buffer.byteSize
        guard byteSize > 0 else {
            throw AudioQueueError(.bufferEmpty, "buffer \(buffer.id) holds 0 bytes; set its byte size after filling it")
        }
        let params = try parameters.validated()
        guard trimFramesAtStart >= 0, trimFramesAtEnd >= 0 else {
            throw AudioQueueError(.invalidTrim, "trims must not be negative (got \(trimFramesAtStart) and \(trimFramesAtEnd))")
        }
        let format = input.withLock { $0.format }
        let frames = try framesIn(buffer, format: format, size: byteSize, packetDescriptions: packetDescriptions)
        if format.isLinearPCM, let frames, trimFramesAtStart + trimFramesAtEnd > frames {
            throw AudioQueueError(.invalidTrim,
                "buffer \(buffer.id) holds \(frames) frames but the trims remove \(trimFramesAtStart) + \(trimFramesAtEnd); split the trim across buffers")
        }
        if let startTime, startTime < 0 {
            throw AudioQueueError(.timeNotAscending, "start time \(startTime) is negative")
        }
        let start: Int = try pastFinishedStop { try input.withLock { input in
            if let refusal = input.refusal { throw refusal }
            let start = startTime.map { Int($0) } ?? input.scheduledEnd
            guard start >= input.scheduledEnd else {
                throw AudioQueueError(.timeNotAscending,
                    "start time \(start) lies before the end of what is scheduled (\(input.scheduledEnd)); times must ascend")
            }
            guard buffer.claim() else {
                throw AudioQueueError(.bufferInQueue, "buffer \(buffer.id) is already in the queue; wait for the output callback")
            }
            input.entries.append(.buffer(PendingBuffer(
                buffer: buffer, byteSize: byteSize, packets: packetDescriptions, trimStart: trimFramesAtStart, trimEnd: trimFramesAtEnd,
                volume: params.volume, pan: params.pan, playRate: params.playRate, pitch: params.pitch, gain: params.gain,
                startTime: startTime == nil ? nil : start)))
            if let frames { input.scheduledEnd = start + max(frames - trimFramesAtStart - trimFramesAtEnd, 0) }
            return start
        } }
        wake.signalUnlessMuted()
        return Int64(start)
    }

    /// Starts another stream in the same queue: the buffers enqueued after this call hold packets
    /// of `format` (with `magicCookie`), for instance the next item of a playlist in another codec
    /// or at another rate. Not in Apple's API, which needs a queue per format.
    ///
    /// In order with the buffers: the ones enqueued before are decoded completely (the decoder is
    /// drained, its last frames play), then a new decoder takes the ones after. Nothing is flushed
    /// on the render path: the frames of the two streams follow each other without a gap, and
    /// play-rate, taps and volume carry on. When the decoded format changes, the sink follows
    /// ``Configuration/sinkFormat``. A ``reset()`` keeps the switch for what is enqueued next.
    /// - Throws: what creating a queue for `format` throws (``AudioQueueError/Code/codecNotFound``,
    ///   ``AudioQueueError/Code/invalidPropertyValue``); ``AudioQueueError/Code/enqueueDuringReset``
    ///   or ``AudioQueueError/Code/disposalPending`` while enqueues are refused.
    public func beginStream(format: AudioStreamDescription, magicCookie: [UInt8]? = nil) throws {
        try Self.validate(format, registry: decoderRegistry)
        try pastFinishedStop { try input.withLock { input in
            if let refusal = input.refusal { throw refusal }
            input.entries.append(.newStream(format, magicCookie: magicCookie))
            input.format = format
        } }
        wake.signalUnlessMuted()
    }

    /// The format of the buffers enqueued now: ``streamDescription``, or the last
    /// ``beginStream(format:magicCookie:)``'s.
    public var currentStreamDescription: AudioStreamDescription { input.withLock { $0.format } }

    /// Frames a buffer declares (nil when a packet's frame count is unknown); validates the layout.
    private func framesIn(_ buffer: AudioQueueBuffer, format: AudioStreamDescription, size: Int,
                          packetDescriptions: [AudioPacketDescription]) throws -> Int? {
        if packetDescriptions.isEmpty {
            guard format.bytesPerPacket > 0 else {
                throw AudioQueueError(.invalidPacketDescription,
                    "\(format.formatID) has packets of varying size: enqueue buffer \(buffer.id) with packet descriptions")
            }
            guard size % format.bytesPerPacket == 0 else {
                throw AudioQueueError(.invalidBuffer,
                    "buffer \(buffer.id) holds \(size) bytes, not a whole number of \(format.bytesPerPacket)-byte packets")
            }
            return format.framesPerPacket > 0 ? size / format.bytesPerPacket * format.framesPerPacket : nil
        }
        guard packetDescriptions.count <= buffer.packetDescriptionCapacity else {
            throw AudioQueueError(.invalidPacketDescription,
                "\(packetDescriptions.count) packet descriptions exceed buffer \(buffer.id)'s capacity of \(buffer.packetDescriptionCapacity)")
        }
        var total = 0
        var known = true
        for (index, packet) in packetDescriptions.enumerated() {
            guard packet.startOffset >= 0, packet.dataByteSize > 0, packet.variableFramesInPacket >= 0,
                  packet.startOffset <= size, packet.dataByteSize <= size - packet.startOffset else {
                throw AudioQueueError(.invalidPacketDescription,
                    "packet \(index) of buffer \(buffer.id) (offset \(packet.startOffset), \(packet.dataByteSize) bytes) lies outside its \(size) bytes or is empty")
            }
            if format.bytesPerPacket > 0 && packet.dataByteSize != format.bytesPerPacket {
                throw AudioQueueError(.invalidPacketDescription,
                    "packet \(index) of buffer \(buffer.id) has \(packet.dataByteSize) bytes; the format has \(format.bytesPerPacket)-byte packets")
            }
            let frames = packet.variableFramesInPacket > 0 ? packet.variableFramesInPacket : format.framesPerPacket
            if frames == 0 { known = false }
            total += frames
        }
        return known ? total : nil
    }

    // MARK: events

    /// A stream of everything that happens in the queue, in order: returned buffers, running
    /// changes, underruns, format changes and errors. Each call makes a new stream that receives
    /// events from then on; the stream finishes when the queue is disposed of.
    public func events(bufferingPolicy: AsyncStream<AudioQueueEvent>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<AudioQueueEvent> {
        delivery.makeStream(bufferingPolicy: bufferingPolicy)
    }

    /// Blocks until every callback and event produced so far has been delivered.
    /// Must not be called from inside a callback of this queue.
    public func waitForCallbacks() {
        workQueue.sync {}
        delivery.waitUntilDelivered()
    }
}


