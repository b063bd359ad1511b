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

        public init(sink: (any AudioSink)? = nil, decodeBufferFrames: Int = 16384,
                    callbackQueue: DispatchQueue? = nil, decoderRegistry: AudioDecoderRegistry = .shared) {
            self.sink = sink
            self.decodeBufferFrames = decodeBufferFrames
            self.callbackQueue = callbackQueue
            self.decoderRegistry = decoderRegistry
        }
    }

    enum RunState { case idle, running, paused, stopping, disposingAfterPlay, disposed }

    struct Control {
        var state: RunState = .idle
        var sinkOpen = false
        var sinkActive = false
        var isRunning = false
        var stoppedBefore = false
        var offlineFormat: AudioStreamDescription?
        var offlineLayout: PCMSampleLayout?
        var seenUnderruns = 0
        var seenEndOfStream = 0
        var startToken = 0
        var channelLayout: AudioChannelLayout
    }

    struct Input {
        var entries: [PendingEntry] = []
        var head = 0
        var scheduledEnd = 0
        var refusal: AudioQueueError?

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

        mutating func removeAllBuffers() -> [AudioQueueBuffer] {
            var buffers: [AudioQueueBuffer] = []
            for entry in entries[head...] { if case .buffer(let pending) = entry { buffers.append(pending.buffer) } }
            entries.removeAll()
            head = 0
            return buffers
        }
    }

    /// The format of what is enqueued.
    public let streamDescription: AudioStreamDescription
    /// Frames decoded ahead of the sink.
    public let decodeBufferFrames: Int
    let sink: any AudioSink
    let stage: RenderStage
    private let renderSource: AudioRenderSource
    private let control: Lock<Control>
    private let input = Lock(Input())
    private let pipeline: Lock<Producer>
    private let delivery: EventDelivery
    private let workQueue: DispatchQueue
    private let wake: WakeSignal
    private let nextBufferID = Atomic<Int>(0)
    private let volumeRamp = Atomic<UInt64>(0)

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
        guard format.sampleRate > 0, format.sampleRate.isFinite, format.sampleRate <= 1_536_000 else {
            throw AudioQueueError(.invalidPropertyValue, "sample rate \(format.sampleRate) is out of range (0 < rate <= 1536000)")
        }
        guard (1...RenderStage.maxChannels).contains(format.channelsPerFrame) else {
            throw AudioQueueError(.invalidPropertyValue, "\(format.channelsPerFrame) channels is out of range (1...\(RenderStage.maxChannels))")
        }
        guard format.bytesPerPacket >= 0, format.framesPerPacket >= 0 else {
            throw AudioQueueError(.invalidPropertyValue, "negative bytes or frames per packet")
        }
        guard configuration.decoderRegistry.factory(for: format.formatID) != nil else {
            throw AudioQueueError(.codecNotFound, "no decoder is registered for \(format.formatID); register the codec module's decoder before creating the queue")
        }
        if format.isLinearPCM { _ = try PCMSampleLayout(format) }
        guard (256...(1 << 22)).contains(configuration.decodeBufferFrames) else {
            throw AudioQueueError(.invalidPropertyValue, "decode buffer of \(configuration.decodeBufferFrames) frames is out of range (256...4194304)")
        }
        streamDescription = format
        decodeBufferFrames = configuration.decodeBufferFrames
        sink = configuration.sink ?? NullSink()
        let stage = RenderStage(capacityFrames: configuration.decodeBufferFrames, channels: format.channelsPerFrame,
                                sampleRate: format.sampleRate)
        self.stage = stage
        control = Lock(Control(channelLayout: .default(channels: format.channelsPerFrame)))
        pipeline = Lock(Producer(format: format, registry: configuration.decoderRegistry, stage: stage))
        workQueue = DispatchQueue(label: "BufferQueue.worker")
        wake = WakeSignal(queue: workQueue)
        let weakBox = WeakQueue()
        var bufferCallback: (@Sendable (AudioQueueBuffer) -> Void)?
        if let outputCallback {
            bufferCallback = { buffer in if let queue = weakBox.queue { outputCallback(queue, buffer) } }
        }
        delivery = EventDelivery(label: "BufferQueue.callbacks", target: configuration.callbackQueue,
                                 outputCallback: bufferCallback)
        renderSource = AudioRenderSource(stage: stage) { error in
            weakBox.queue?.sinkFailed(error)
        }
        weakBox.queue = self
        let wake = self.wake
        stage.notify = { wake.signal() }
        wake.setHandler { weakBox.queue?.serviceWorker() }
    }

    deinit {
        wake.cancel()
        let active = control.withLock { $0.sinkOpen }
        if active { sink.close() }
        delivery.shutDown()
    }

    // MARK: buffers

    /// Allocates a buffer owned by this queue (Core Audio's `AudioQueueAllocateBufferWithPacketDescriptions`).
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
        return AudioQueueBuffer(capacity: capacity, packetDescriptionCapacity: packetDescriptionCapacity, id: id,
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
    ///   - parameters: volume and pan that take effect when this buffer starts to play and stay.
    ///   - startTime: the timeline frame at which the first untrimmed frame plays; a gap before it
    ///     plays silence. `nil`: right after the previous buffer.
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
        guard buffer.byteSize > 0 else {
            throw AudioQueueError(.bufferEmpty, "buffer \(buffer.id) holds 0 bytes; set byteSize after filling it")
        }
        let params = try parameters.validated()
        guard trimFramesAtStart >= 0, trimFramesAtEnd >= 0 else {
            throw AudioQueueError(.invalidTrim, "trims must not be negative (got \(trimFramesAtStart) and \(trimFramesAtEnd))")
        }
        let frames = try framesIn(buffer, packetDescriptions: packetDescriptions)
        if streamDescription.isLinearPCM, let frames, trimFramesAtStart + trimFramesAtEnd > frames {
            throw AudioQueueError(.invalidTrim,
                "buffer \(buffer.id) holds \(frames) frames but the trims remove \(trimFramesAtStart) + \(trimFramesAtEnd); split the trim across buffers")
        }
        if let startTime, startTime < 0 {
            throw AudioQueueError(.timeNotAscending, "start time \(startTime) is negative")
        }
        let start: Int = try input.withLock { input in
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
                buffer: buffer, packets: packetDescriptions, trimStart: trimFramesAtStart, trimEnd: trimFramesAtEnd,
                volume: params.volume, pan: params.pan, startTime: startTime == nil ? nil : start)))
            if let frames { input.scheduledEnd = start + max(frames - trimFramesAtStart - trimFramesAtEnd, 0) }
            return start
        }
        wake.signal()
        return Int64(start)
    }

    /// Frames a buffer declares (nil when a packet's frame count is unknown); validates the layout.
    private func framesIn(_ buffer: AudioQueueBuffer, packetDescriptions: [AudioPacketDescription]) throws -> Int? {
        let format = streamDescription
        let size = buffer.byteSize
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

    // MARK: lifecycle

    /// Decodes ahead so that ``start(at:)`` produces sound at once (Core Audio's `AudioQueuePrime`).
    ///
    /// - Parameter frames: frames wanted ready; 0 means as many as the decode buffer holds. The
    ///   queue never holds more than ``decodeBufferFrames``.
    /// - Returns: the frames ready to play.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when no decoder could be made for the stream,
    ///   ``AudioQueueError/Code/disposalPending``.
    @discardableResult
    public func prime(frames: Int = 0) throws -> Int {
        try checkNotDisposed()
        guard frames >= 0 else { throw AudioQueueError(.invalidParameter, "cannot prime \(frames) frames") }
        let (ready, failure) = pipeline.withLock { producer -> (Int, AudioQueueError?) in
            producer.pump(next: takeEntry)
            flushOutbox(producer)
            let channels = max(producer.ringFormat.channelsPerFrame, 1)
            return (stage.ring.readable / channels, producer.decoderFailure)
        }
        if ready == 0, let failure { throw failure }
        return ready
    }

    /// Starts or resumes playback (Core Audio's `AudioQueueStart`).
    ///
    /// - Parameter time: when the sink should start pulling; `nil` = now.
    /// - Throws: ``AudioQueueError/Code/cannotStart`` when the sink fails to open or start,
    ///   ``AudioQueueError/Code/invalidRunState`` while an asynchronous stop is under way,
    ///   ``AudioQueueError/Code/disposalPending``.
    public func start(at time: DispatchTime? = nil) throws {
        let deferredToken: Int? = try control.withLock { c in
            switch c.state {
            case .disposed, .disposingAfterPlay:
                throw AudioQueueError(.disposalPending, "the queue is being disposed of")
            case .running:
                return nil
            case .stopping:
                // Asked to stop once everything has played, before playback ran: play it now.
                if c.sinkActive || c.offlineFormat != nil { return nil }
                try activateSink(&c)
                return nil
            case .idle, .paused:
                break
            }
            if c.state == .idle && c.stoppedBefore {
                stage.resetTimeline()
                c.stoppedBefore = false
            }
            if c.offlineFormat != nil {
                c.state = .running
                setRunning(true, &c)
                return nil
            }
            if let time, time > .now() {
                c.state = .running
                c.startToken += 1
                return c.startToken
            }
            try activateSink(&c)
            c.state = .running
            return nil
        }
        if let deferredToken, let time {
            workQueue.asyncAfter(deadline: time) { [weak self] in self?.deferredStart(token: deferredToken) }
        }
    }

    private func deferredStart(token: Int) {
        let failure: AudioQueueError? = control.withLock { c in
            guard c.state == .running, c.startToken == token, !c.sinkActive, c.offlineFormat == nil else { return nil }
            do { try activateSink(&c); return nil } catch let error as AudioQueueError {
                c.state = .idle
                return error
            } catch { return nil }
        }
        if let failure { delivery.deliver(.error(failure)) }
    }

    /// Opens (if needed) and starts the sink; call with the control lock held.
    private func activateSink(_ c: inout Control) throws {
        if !c.sinkOpen {
            pipeline.withLock { producer in
                producer.pump(next: takeEntry)
                flushOutbox(producer)
                stage.adoptLeadingFormatChange()
            }
            let format = AudioStreamDescription.float32(sampleRate: stage.sampleRate, channels: stage.channels)
            do { try sink.open(format: format, source: renderSource) } catch {
                throw AudioQueueError(.cannotStart, "the sink could not open \(format): \(error)")
            }
            c.sinkOpen = true
        }
        stage.playing.store(true, ordering: .releasing)
        stage.startGeneration.add(1, ordering: .releasing)
        do { try sink.start() } catch {
            stage.playing.store(false, ordering: .releasing)
            throw AudioQueueError(.cannotStart, "the sink could not start: \(error)")
        }
        c.sinkActive = true
    }

    /// Stops the sink pulling; with `close`, also discards what it holds and releases it.
    private func deactivateSink(_ c: inout Control, close: Bool) {
        if c.sinkActive {
            sink.pause()
            c.sinkActive = false
        }
        stage.playing.store(false, ordering: .releasing)
        if close && c.sinkOpen {
            sink.flush()
            sink.close()
            c.sinkOpen = false
        }
    }

    /// Pauses playback, keeping every buffer and the decoder state (Core Audio's `AudioQueuePause`).
    /// Queue time stands still until ``start(at:)``.
    public func pause() throws {
        try control.withLock { c in
            switch c.state {
            case .disposed, .disposingAfterPlay: throw AudioQueueError(.disposalPending, "the queue is being disposed of")
            case .running:
                deactivateSink(&c, close: false)
                c.state = .paused
                setRunning(false, &c)
            case .stopping:
                if c.sinkActive {
                    deactivateSink(&c, close: false)
                    setRunning(false, &c)
                }
            case .idle, .paused:
                break
            }
        }
    }

    /// Marks the end of a run of buffers: once they have played, the decoder's tail is drained and
    /// its state cleared. Discards nothing; the queue keeps running (Core Audio's `AudioQueueFlush`).
    public func flush() throws {
        try checkNotDisposed()
        try input.withLock { input in
            if let refusal = input.refusal { throw refusal }
            input.entries.append(.flush)
        }
        wake.signal()
    }

    /// Stops playback (Core Audio's `AudioQueueStop`).
    ///
    /// - Parameter immediately: `true` stops now, discards what has not played and returns every
    ///   buffer still in the queue through the callback before ``isRunning`` turns false. `false`
    ///   returns at once; the queue flushes, plays everything enqueued, then stops (``isRunning``
    ///   turns false when the sink has played the last frame). Buffers cannot be enqueued meanwhile.
    ///   On a queue that is not started or paused, `false` marks the end: playback stops once
    ///   ``start(at:)`` (or offline rendering) has played everything enqueued before it.
    public func stop(immediately: Bool) throws {
        try control.withLock { c in
            switch c.state {
            case .disposed, .disposingAfterPlay:
                throw AudioQueueError(.disposalPending, "the queue is being disposed of")
            case .stopping where !immediately:
                return
            case .running where !immediately, .idle where !immediately, .paused where !immediately:
                input.withLock { input in
                    input.entries.append(.endOfStream)
                    input.refusal = AudioQueueError(.enqueueDuringReset, "an asynchronous stop is under way; enqueue after isRunning turns false")
                }
                c.state = .stopping
                wake.signal()
            default:
                stopNow(&c)
            }
        }
    }

    /// Stops at once; call with the control lock held.
    private func stopNow(_ c: inout Control) {
        deactivateSink(&c, close: true)
        discardEverything(timeline: 0, returnBuffers: true)
        stage.applyDiscardIfNeeded()
        stage.resetTimeline()
        c.state = .idle
        c.stoppedBefore = false
        setRunning(false, &c)
    }

    /// Discards every buffer and all decoder and DSP state without stopping: the seek primitive
    /// (Core Audio's `AudioQueueReset`). Discarded buffers come back through the callback; the
    /// timeline goes on from where it is, with the discontinuity flag set. A reset during an
    /// asynchronous stop completes the stop immediately.
    public func reset() throws {
        try control.withLock { c in
            switch c.state {
            case .disposed, .disposingAfterPlay:
                throw AudioQueueError(.disposalPending, "the queue is being disposed of")
            case .stopping:
                stopNow(&c)
                return
            default:
                break
            }
            discardEverything(timeline: stage.timelineFrames.load(ordering: .acquiring), returnBuffers: true)
            stage.discontinuity.store(true, ordering: .relaxed)
            if c.sinkActive {
                sink.flush()
            } else {
                stage.applyDiscardIfNeeded()
            }
        }
        wake.signal()
    }

    private func discardEverything(timeline: Int, returnBuffers: Bool) {
        pipeline.withLock { producer in
            flushOutbox(producer)
            let interrupted = producer.discard(timelineContinuesAt: timeline)
            let pending = input.withLock { input -> [AudioQueueBuffer] in
                input.scheduledEnd = timeline
                input.refusal = nil
                return input.removeAllBuffers()
            }
            guard returnBuffers else { return }
            var items: [Outgoing] = []
            if let interrupted { items.append(.buffer(interrupted)) }
            items += pending.map { .buffer($0) }
            delivery.deliver(items)
        }
    }

    /// Releases the queue (Core Audio's `AudioQueueDispose`).
    ///
    /// - Parameter immediately: `true` stops and releases now; no callback runs after this returns
    ///   (unless called from inside a callback). `false` returns at once and releases the queue
    ///   after everything enqueued has played.
    public func dispose(immediately: Bool) {
        let now: Bool = control.withLock { c in
            switch c.state {
            case .disposed: return false
            case .running where !immediately:
                input.withLock { input in
                    input.entries.append(.endOfStream)
                    input.refusal = AudioQueueError(.disposalPending, "the queue is being disposed of")
                }
                c.state = .disposingAfterPlay
                return false
            case .stopping where !immediately, .disposingAfterPlay where !immediately:
                input.withLock { $0.refusal = AudioQueueError(.disposalPending, "the queue is being disposed of") }
                c.state = .disposingAfterPlay
                return false
            default:
                deactivateSink(&c, close: true)
                c.state = .disposed
                c.isRunning = false
                return true
            }
        }
        if now { disposeNow() } else { wake.signal() }
    }

    private func disposeNow() {
        delivery.shutDown()
        discardEverything(timeline: 0, returnBuffers: false)
        input.withLock { $0.refusal = AudioQueueError(.disposalPending, "the queue has been disposed of") }
        wake.cancel()
    }

    /// Whether an asynchronous stop (or disposal) is still playing out what was enqueued.
    public var isStopping: Bool {
        control.withLock { $0.state == .stopping || $0.state == .disposingAfterPlay }
    }

    /// Whether the sink is producing the queue's sound (Core Audio's `kAudioQueueProperty_IsRunning`).
    /// Changes are announced by ``AudioQueueEvent/runningChanged(_:)`` when they really happen.
    public var isRunning: Bool { control.withLock { $0.isRunning } }

    private func setRunning(_ running: Bool, _ c: inout Control) {
        guard c.isRunning != running else { return }
        c.isRunning = running
        delivery.deliver(.runningChanged(running))
    }

    private func checkNotDisposed() throws {
        let state = control.withLock { $0.state }
        if state == .disposed || state == .disposingAfterPlay {
            throw AudioQueueError(.disposalPending, "the queue is being disposed of")
        }
    }

    // MARK: worker

    private func takeEntry() -> PendingEntry? { input.withLock { $0.popFirst() } }

    private func flushOutbox(_ producer: Producer) {
        if !producer.outbox.isEmpty {
            delivery.deliver(producer.outbox)
            producer.outbox.removeAll(keepingCapacity: true)
        }
    }

    /// Runs on the worker queue whenever something woke it: render signals first, then decoding.
    private func serviceWorker() {
        let offline = handleRenderSignals()
        // Offline rendering decodes on demand on the rendering thread; decoding here as well
        // would only contend for the pipeline lock.
        if offline { return }
        let wrote = pipeline.withLock { producer -> Bool in
            let wrote = producer.pump(next: takeEntry)
            flushOutbox(producer)
            return wrote
        }
        if wrote { sink.sourceHasData() }
    }

    /// Acts on what the render stage signalled; returns whether the queue renders offline.
    private func handleRenderSignals() -> Bool {
        var drainSink = false
        var finishStop = false
        let offline = control.withLock { c -> Bool in
            if c.sinkActive, !c.isRunning, c.state == .running || c.state == .stopping || c.state == .disposingAfterPlay,
               stage.startedGeneration.load(ordering: .acquiring) == stage.startGeneration.load(ordering: .acquiring),
               !sink.reportsPlaybackStart || stage.heardGeneration.load(ordering: .acquiring) == stage.startGeneration.load(ordering: .acquiring) {
                setRunning(true, &c)
            }
            let underruns = stage.underrunCount.load(ordering: .acquiring)
            if underruns != c.seenUnderruns {
                c.seenUnderruns = underruns
                delivery.deliver(.underrun)
            }
            let ends = stage.endOfStreamCount.load(ordering: .acquiring)
            if ends != c.seenEndOfStream {
                c.seenEndOfStream = ends
                if c.state == .stopping || c.state == .disposingAfterPlay {
                    if c.sinkActive { drainSink = true } else { finishStop = true }
                }
            }
            if c.sinkActive, let format = stage.pendingFormat() {
                sink.pause()
                sink.close()
                stage.acceptFormatChange()
                do {
                    try sink.open(format: .float32(sampleRate: format.sampleRate, channels: format.channels), source: renderSource)
                    try sink.start()
                } catch {
                    c.sinkActive = false
                    c.sinkOpen = false
                    delivery.deliver(.error(AudioQueueError(.sinkError, "the sink could not follow the format change to \(format.channels) ch \(format.sampleRate) Hz: \(error)")))
                }
            }
            return c.offlineFormat != nil
        }
        if drainSink {
            let workQueue = self.workQueue
            let weakBox = WeakQueue()
            weakBox.queue = self
            sink.drain {
                workQueue.async { weakBox.queue?.completeAsyncStop() }
            }
        }
        if finishStop { completeAsyncStop() }
        return offline
    }

    private func completeAsyncStop() {
        let dispose: Bool = control.withLock { c in
            guard c.state == .stopping || c.state == .disposingAfterPlay else { return false }
            deactivateSink(&c, close: true)
            pipeline.withLock { $0.restartAfterEnd() }
            input.withLock { input in
                input.scheduledEnd = 0
                if c.state == .stopping { input.refusal = nil }
            }
            c.stoppedBefore = true
            setRunning(false, &c)
            if c.state == .disposingAfterPlay {
                c.state = .disposed
                return true
            }
            c.state = .idle
            return false
        }
        if dispose { disposeNow() }
    }

    private func sinkFailed(_ error: AudioQueueError) {
        control.withLock { c in
            delivery.deliver(.error(error))
            if c.sinkActive {
                sink.pause()
                c.sinkActive = false
                stage.playing.store(false, ordering: .releasing)
                if c.state == .running { c.state = .paused }
                setRunning(false, &c)
            }
            // Released now, opened afresh by the next start (a device or server that came back).
            if c.sinkOpen {
                sink.close()
                c.sinkOpen = false
            }
        }
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

    // MARK: time

    /// The timeline frame being heard now, corrected for the sink's latency (Core Audio's
    /// `AudioQueueGetCurrentTime`). It counts scheduled audio and scheduled gaps; it stands still
    /// while paused or starved. `discontinuity` reports an underrun or reset since the last call.
    public func currentTime() -> AudioQueueTime {
        let offline = control.withLock { $0.offlineFormat != nil || !$0.sinkOpen }
        let rendered = stage.timelineFrames.load(ordering: .acquiring)
        let silence = stage.silenceFramesSinceAudio.load(ordering: .relaxed)
        let latency = offline ? 0 : sink.latencyFrames
        let heard = max(rendered - max(latency - silence, 0), 0)
        let discontinuity = stage.discontinuity.exchange(false, ordering: .relaxed)
        return AudioQueueTime(sampleTime: Int64(heard), discontinuity: discontinuity)
    }

    // MARK: parameters and properties

    /// Sets volume and/or pan now. Later volume changes glide over ``volumeRampTime``.
    public func setParameters(_ parameters: AudioQueueParameters) throws {
        let valid = try parameters.validated()
        if let volume = valid.volume {
            stage.volumeTarget.store(volume.bitPattern, ordering: .relaxed)
            stage.volumeGeneration.add(1, ordering: .releasing)
        }
        if let pan = valid.pan {
            stage.panTarget.store(pan.bitPattern, ordering: .relaxed)
            stage.panGeneration.add(1, ordering: .releasing)
        }
    }

    /// The volume last set with ``setParameters(_:)`` (per-buffer values are not reflected).
    public var volume: Float { Float(bitPattern: stage.volumeTarget.load(ordering: .relaxed)) }
    /// The pan last set with ``setParameters(_:)``.
    public var pan: Float { Float(bitPattern: stage.panTarget.load(ordering: .relaxed)) }

    /// Seconds over which volume and pan changes glide (Core Audio's `kAudioQueueParam_VolumeRampTime`).
    public var volumeRampTime: Double { Double(Float(bitPattern: stage.rampSeconds.load(ordering: .relaxed))) }

    /// Sets ``volumeRampTime``; 0 applies changes at once.
    public func setVolumeRampTime(_ seconds: Double) throws {
        guard seconds >= 0, seconds <= 60 else {
            throw AudioQueueError(.invalidParameter, "volume ramp time \(seconds) s is outside 0...60")
        }
        stage.rampSeconds.store(Float(seconds).bitPattern, ordering: .relaxed)
    }

    /// The decoder's magic cookie (codec configuration), if set.
    public var magicCookie: [UInt8]? { pipeline.withLock { $0.magicCookie } }

    /// Sets the magic cookie. Set it before the first enqueue (or after a stop or reset).
    /// - Throws: ``AudioQueueError/Code/invalidRunState`` while buffers are queued or decoding.
    public func setMagicCookie(_ cookie: [UInt8]?) throws {
        try checkNotDisposed()
        try pipeline.withLock { producer in
            let queued = input.withLock { $0.head < $0.entries.count }
            guard producer.isIdle, !queued else {
                throw AudioQueueError(.invalidRunState, "set the magic cookie before enqueuing, or after a stop or reset")
            }
            producer.setMagicCookie(cookie)
        }
    }

    /// The channel layout given to the sink.
    public var channelLayout: AudioChannelLayout { control.withLock { $0.channelLayout } }

    /// Sets the channel layout; it must have the stream's channel count.
    public func setChannelLayout(_ layout: AudioChannelLayout) throws {
        guard layout.channelCount == streamDescription.channelsPerFrame else {
            throw AudioQueueError(.invalidPropertyValue,
                "a layout of \(layout.channelCount) channels does not fit a \(streamDescription.channelsPerFrame)-channel stream")
        }
        control.withLock { $0.channelLayout = layout }
    }

    /// The format of the decoded frames (interleaved float32 at the decoded rate), as far as known.
    public var outputFormat: AudioStreamDescription { pipeline.withLock { $0.outputFormat } }

    /// The last non-fatal decoding problem (Core Audio's `kAudioQueueProperty_ConverterError`).
    public var lastConverterError: AudioQueueError? { pipeline.withLock { $0.lastConverterError } }

    /// Whether level metering runs (Core Audio's `kAudioQueueProperty_EnableLevelMetering`).
    public var isLevelMeteringEnabled: Bool {
        get { stage.meteringEnabled.load(ordering: .relaxed) }
        set { stage.meteringEnabled.store(newValue, ordering: .relaxed) }
    }

    /// Levels per channel over the most recently rendered block, linear; use
    /// ``AudioLevelMeter/decibels`` for dB. Empty until metering is enabled and something rendered.
    public var currentLevelMeters: [AudioLevelMeter] {
        guard isLevelMeteringEnabled else { return [] }
        let channels = stage.meterChannels.load(ordering: .acquiring)
        return (0..<channels).map { AudioLevelMeter(average: stage.meterAverage[$0], peak: stage.meterPeak[$0]) }
    }

    // MARK: offline render

    /// Switches between rendering offline into memory (`format` non-nil) and playing through the
    /// sink (`nil`). Core Audio's `AudioQueueSetOfflineRenderFormat`.
    ///
    /// - Parameter format: interleaved linear PCM (8-bit unsigned, 16/24/32-bit integer or 32/64-bit
    ///   float) with the decoded rate and channel count; the queue converts samples, never rates or
    ///   channel counts.
    public func setOfflineRenderFormat(_ format: AudioStreamDescription?) throws {
        let layout = try format.map { try PCMSampleLayout($0) }
        try control.withLock { c in
            if c.state == .disposed || c.state == .disposingAfterPlay {
                throw AudioQueueError(.disposalPending, "the queue is being disposed of")
            }
            if let format {
                deactivateSink(&c, close: true)
                // No sink pulls now: the stage's format is that of the next frames to render.
                let next = pipeline.withLock { _ -> (channels: Int, sampleRate: Double) in
                    stage.adoptLeadingFormatChange()
                    return stage.pendingFormat() ?? (stage.channels, stage.sampleRate)
                }
                guard format.channelsPerFrame == next.channels, format.sampleRate == next.sampleRate else {
                    throw AudioQueueError(.invalidPropertyValue,
                        "offline render format \(format.channelsPerFrame) ch \(format.sampleRate) Hz does not match the decoded \(next.channels) ch \(next.sampleRate) Hz; the queue does not resample or remix")
                }
                c.offlineFormat = format
                c.offlineLayout = layout
            } else if c.offlineFormat != nil {
                c.offlineFormat = nil
                c.offlineLayout = nil
                if c.state == .running { try activateSink(&c) }
            }
        }
    }

    /// The frame the next ``offlineRender(at:into:frames:)`` must start at: frames rendered so far.
    public var offlineRenderPosition: Int64 { Int64(stage.timelineFrames.load(ordering: .acquiring)) }

    /// Renders up to `frames` frames into `buffer` in the offline render format (Core Audio's
    /// `AudioQueueOfflineRender`). Returns the frames rendered and sets the buffer's ``AudioQueueBuffer/byteSize``.
    ///
    /// It decodes what it needs on the calling thread, returns fewer frames when fewer have been
    /// enqueued, never blocks waiting for data and never invents silence that was not scheduled.
    /// - Parameter sampleTime: must equal ``offlineRenderPosition``.
    @discardableResult
    public func offlineRender(at sampleTime: Int64, into buffer: AudioQueueBuffer, frames: Int) throws -> Int {
        guard buffer.queueID == ObjectIdentifier(self) else {
            throw AudioQueueError(.invalidBuffer, "buffer \(buffer.id) was allocated by another queue")
        }
        guard !buffer.isInQueue else {
            throw AudioQueueError(.bufferInQueue, "buffer \(buffer.id) is in the queue; render into a free buffer")
        }
        let rendered = try buffer.withUnsafeMutableBytes { bytes in
            try offlineRender(at: sampleTime, into: bytes, frames: frames)
        }
        let bytesPerFrame = control.withLock { $0.offlineFormat?.bytesPerFrame ?? 0 }
        buffer.byteSize = rendered * bytesPerFrame
        return rendered
    }

    /// Renders up to `frames` frames into raw memory in the offline render format; see
    /// ``offlineRender(at:into:frames:)-(_,AudioQueueBuffer,_)``.
    public func offlineRender(at sampleTime: Int64, into destination: UnsafeMutableRawBufferPointer, frames: Int) throws -> Int {
        let (format, layout): (AudioStreamDescription, PCMSampleLayout) = try control.withLock { c in
            if c.state == .disposed || c.state == .disposingAfterPlay {
                throw AudioQueueError(.disposalPending, "the queue is being disposed of")
            }
            guard let format = c.offlineFormat, let layout = c.offlineLayout else {
                throw AudioQueueError(.invalidOfflineMode, "no offline render format is set; call setOfflineRenderFormat first")
            }
            return (format, layout)
        }
        guard frames >= 0 else { throw AudioQueueError(.invalidParameter, "cannot render \(frames) frames") }
        guard destination.count >= frames * format.bytesPerFrame, let base = destination.baseAddress ?? (frames == 0 ? UnsafeMutableRawPointer(bitPattern: 16) : nil) else {
            throw AudioQueueError(.invalidBuffer, "\(frames) frames of \(format.bytesPerFrame) bytes do not fit in \(destination.count) bytes")
        }
        let position = stage.timelineFrames.load(ordering: .acquiring)
        guard sampleTime == Int64(position) else {
            throw AudioQueueError(.invalidOfflineMode,
                "offline render asked to start at frame \(sampleTime) but \(position) frames have been rendered; pass offlineRenderPosition")
        }
        let channels = format.channelsPerFrame
        let rendered: Int = try pipeline.withLock { producer in
            defer { flushOutbox(producer) }
            // Native float32 renders straight into the caller's memory; other layouts via scratch.
            let direct = layout.isNativeFloat32 && Int(bitPattern: base) % MemoryLayout<Float>.alignment == 0
            if !direct && producer.offlineScratch.count < frames * channels {
                producer.offlineScratch = [Float](repeating: 0, count: frames * channels)
            }
            stage.adoptLeadingFormatChange()
            var done = 0
            try producer.offlineScratch.withUnsafeMutableBufferPointer { scratch in
                guard let scratchBase = direct ? base.assumingMemoryBound(to: Float.self) : scratch.baseAddress else { return }
                while done < frames {
                    if stage.channels != channels || stage.sampleRate != format.sampleRate {
                        if done > 0 { return }
                        throw AudioQueueError(.formatChanged,
                            "the decoded audio is now \(stage.channels) ch \(stage.sampleRate) Hz; set an offline render format with that rate and channel count")
                    }
                    let produced = producer.pump(next: takeEntry)
                    let n = stage.render(into: scratchBase + done * channels, frames: frames - done, fillSilence: false)
                    done += n
                    if n == 0 {
                        if let pending = stage.pendingFormat() {
                            if pending.channels == channels && pending.sampleRate == format.sampleRate {
                                stage.acceptFormatChange()
                                continue
                            }
                            stage.acceptFormatChange()
                            continue  // the check at the top reports the change
                        }
                        if !produced { return }
                    }
                }
            }
            if !direct { layout.fromFloat(producer.offlineScratch, count: done * channels, into: base) }
            return done
        }
        return rendered
    }
}

/// A weak reference to a queue, for closures the queue's parts hold.
final class WeakQueue: @unchecked Sendable {
    weak var queue: AudioQueue?
}

/// Wakes a dispatch queue from any thread without allocating: a user-data-add dispatch source.
final class WakeSignal: @unchecked Sendable {
    private let source: DispatchSourceUserDataAdd
    private let cancelled = Atomic<Bool>(false)

    init(queue: DispatchQueue) {
        source = DispatchSource.makeUserDataAddSource(queue: queue)
    }

    func setHandler(_ handler: @escaping @Sendable () -> Void) {
        source.setEventHandler(handler: handler)
        source.activate()
    }

    func signal() {
        if !cancelled.load(ordering: .relaxed) { source.add(data: 1) }
    }

    func cancel() {
        if !cancelled.exchange(true, ordering: .acquiringAndReleasing) { source.cancel() }
    }
}
