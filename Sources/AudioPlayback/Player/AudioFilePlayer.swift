import AudioFileStream
import BufferQueue
import Dispatch
import Synchronization

/// What the player reports as it goes.
public enum AudioPlayerEvent: Sendable {
    case state(AudioPlayerState)
    /// Item `index` began to be fed (its frames follow the previous item's without a gap).
    case itemStarted(index: Int)
    /// A stream announced a new title (ICY `StreamTitle`) for item `index`.
    case streamTitle(String, index: Int)
    /// A stream property such as `icy-name` or `icy-genre`, for item `index`.
    case property(name: String, value: String, index: Int)
}

/// What a source reports about itself; the player adds the item's index.
public enum AudioSourceEvent: Sendable {
    /// Opening a connection, reconnecting, buffering.
    case state(AudioPlayerState)
    /// A new title (ICY `StreamTitle`).
    case streamTitle(String)
    /// A stream property such as `icy-name`.
    case property(name: String, value: String)
}

/// Where the player is.
public enum AudioPlayerState: Sendable, Equatable {
    /// Opening a stream (before its first bytes).
    case connecting
    /// Decoding ahead before playback starts, or after an underrun.
    case buffering
    /// Audio is being heard.
    case playing
    /// Paused by ``AudioFilePlayer/pause()``.
    case paused
    /// Moving to a new position.
    case seeking
    /// A stream lost its connection and is reconnecting.
    case reconnecting
    /// Everything played (final).
    case finished
    /// Stopped by an error, described (final).
    case failed(String)
}

/// How a source tells the player about itself: its events, and that more packets arrived.
public struct AudioSourceContext: Sendable {
    /// Events about the source (titles, connection state).
    public let report: @Sendable (AudioSourceEvent) -> Void
    /// More packets can be read now (after ``PacketRead/waiting``).
    public let available: @Sendable () -> Void

    public init(report: @escaping @Sendable (AudioSourceEvent) -> Void = { _ in }, available: @escaping @Sendable () -> Void = {}) {
        self.report = report
        self.available = available
    }
}

/// One entry of the player's list: how to open its packets.
public struct AudioPlayerItem: Sendable {
    /// A name for messages and the status line.
    public let name: String
    /// Opens the item's packets; `context` takes what the source has to tell.
    public let open: @Sendable (_ context: AudioSourceContext) throws -> any PacketSource

    public init(name: String, open: @escaping @Sendable (_ context: AudioSourceContext) throws -> any PacketSource) {
        self.name = name
        self.open = open
    }

    /// A local file; it is opened and indexed once, however often the item is played.
    public static func file(_ path: String) -> AudioPlayerItem {
        let cache = Lock<AudioFile?>(nil)
        return AudioPlayerItem(name: path) { _ in
            let file = try cache.withLock { cached -> AudioFile in
                if let cached { return cached }
                let opened = try AudioFile(path: path)
                cached = opened
                return opened
            }
            return FilePacketSource(file: file)
        }
    }
}

/// Plays a list of items (files, streams) through one ``AudioQueue`` and one sink, gaplessly.
///
/// One engine: a ``PacketFeeder`` per item puts its packets, with the item's trims, straight into
/// the playback queue; each item is a new stream of the queue
/// (``AudioQueue/beginStream(format:magicCookie:)``), so its decoder starts clean and the frames
/// of consecutive items join sample-exactly, whatever their codecs. The sink plays one format,
/// chosen by ``OutputFormat``: items of other rates or channel counts, and mid-stream rate
/// changes, are converted on the render path (register `SoxrConverter`), each item contributing
/// its valid frames converted to the output rate (±1 frame). ``OutputFormat/itemFormat`` reopens
/// the sink at each item's own format instead (bit-perfect, with a gap where it changes).
///
/// No polling: the queue's output callback hands buffers back and the feeder refills them; a
/// stream that has no packets yet calls back when it has. Everything the player does runs on
/// one serial dispatch queue of its own; ``play()`` awaits the end without blocking a thread.
public final class AudioFilePlayer: @unchecked Sendable {
    /// What is playing now.
    public struct Status: Sendable {
        /// Index in the item list, or nil before the first frame is heard.
        public var fileIndex: Int?
        /// The item's title: a stream's latest `StreamTitle`, else its metadata's.
        public var title: String?
        /// Seconds into the current item (as heard, latency-corrected).
        public var position: Double
        /// The item's length in seconds (0 when unknown, e.g. live).
        public var duration: Double
        /// Whether ``duration`` is an estimate (from a bit rate) rather than exact.
        public var durationIsEstimated: Bool
        /// Seconds enqueued ahead of what is heard (before decoding).
        public var buffered: Double
        /// The format the sink plays (nil before it opens).
        public var outputFormat: AudioStreamDescription?
    }

    /// How much audio the player keeps ahead of what is heard.
    public struct Buffering: Sendable {
        /// Enqueued ahead before playback starts (and after a seek).
        public var startSeconds: Double
        /// Enqueued ahead before playback resumes after an underrun.
        public var restartSeconds: Double
        /// At most about this much is enqueued ahead (in compressed buffers; the queue decodes
        /// about 1.5 s more ahead of the sink).
        public var maximumSeconds: Double
        public init(startSeconds: Double = 1, restartSeconds: Double = 2, maximumSeconds: Double = 3) {
            self.startSeconds = max(startSeconds, 0)
            self.restartSeconds = max(restartSeconds, 0)
            self.maximumSeconds = max(maximumSeconds, startSeconds, restartSeconds, 0.5)
        }
    }

    /// The format the sink plays.
    public enum OutputFormat: Sendable, Equatable {
        /// The first item's decoded format; later items are converted to it (gapless).
        case firstItem
        /// This rate and channel count; every item is converted to it (gapless).
        case fixed(sampleRate: Double, channels: Int)
        /// Each item's own format: the sink is reopened where it changes (bit-perfect, not gapless there).
        case itemFormat
    }

    /// What is played, in order.
    public let items: [AudioPlayerItem]
    /// The items' names (paths or URLs).
    public var paths: [String] { items.map(\.name) }
    /// How many times the whole list plays.
    public let loops: Int
    /// Where in the first item playback starts.
    public let startSeconds: Double
    /// How much is enqueued ahead.
    public let buffering: Buffering
    /// The format the sink plays.
    public let outputFormat: OutputFormat
    /// How play rate and pitch apply (nil: time-pitch off, the rate cannot change).
    public let timePitch: TimePitchAlgorithm?

    private let timePitchEngines: TimePitchEngineRegistry
    private let decoders: AudioDecoderRegistry
    private let resamplers: AudioResamplerRegistry
    private let makeSink: @Sendable () -> any AudioSink
    private let record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)?
    private let eventStream: AsyncStream<AudioPlayerEvent>
    private let eventSink: AsyncStream<AudioPlayerEvent>.Continuation
    private let eventHandler: (@Sendable (AudioPlayerEvent) -> Void)?
    /// Where everything the player does happens, in order.
    private let work = DispatchQueue(label: "AudioPlayback.player")

    // MARK: confined to `work`
    private var queue: AudioQueue?
    private var free: [AudioQueueBuffer] = []
    private var bufferCount = 0
    private var feeder: PacketFeeder?
    private var itemIndex = 0
    private var loop = 0
    /// The next item must begin a new stream of the queue.
    private var needsNewStream = false
    /// Every item is fed: the queue plays out what it has.
    private var inputDone = false
    private var queueStarted = false
    private var tapInstalled = false
    private var begun = false
    /// Frames kept of the items fed before the current one (the timeline where it starts).
    private var timelineBeforeItem: Int64 = 0
    private var sourceFailure: (any Error)?

    // MARK: shared
    private struct Mark {
        /// Timeline frame where this item's first kept frame plays.
        var start: Int64
        var index: Int
        /// Position in the item of that frame (nonzero after a seek).
        var offset: Int64
        var rate: Double
        var frames: Int64
        var estimated: Bool
        var title: String?
    }

    private struct Shared {
        var queue: AudioQueue?
        var marks: [Mark] = []
        var enqueuedEnd: Int64 = 0
        var playerState: AudioPlayerState = .buffering
        var streamTitles: [Int: String] = [:]
        var playRate: Float = 1
        var volume: Float = 1
        var pan: Float = 0
        var pitch: Float = 0
        var userPaused = false
        var underrun = false
        var result: Result<Int64, any Error>?
        var waiters: [@Sendable (Result<Int64, any Error>) -> Void] = []
        var stopped = false
    }
    private let shared = Lock(Shared())
    /// Frames handed to the sink (counted by a siphon on the render path).
    private let framesHanded = FrameCounter()
    /// The recording's hand-over, when `record` is given.
    private let recorderBox = RecorderBox()

    /// - Parameters:
    ///   - startSeconds: where in the first item to start (frame-exact).
    ///   - outputFormat: the format the sink plays (see ``OutputFormat``).
    ///   - makeSink: the sink (called once, when playback begins).
    ///   - record: receives exactly the frames handed to the sink, in order, after volume and play
    ///     rate, on a thread of its own (the render thread only copies them into a ring); all of
    ///     them before ``play()`` returns. Needs one output format (not ``OutputFormat/itemFormat``).
    ///   - onEvent: called with every ``AudioPlayerEvent`` (also available from ``events``).
    ///   - timePitch: turns play rate (and, for ``TimePitchAlgorithm/spectral``, pitch) on:
    ///     see ``setPlayRate(_:pitch:)``.
    ///   - playRate: the play rate to start with (0.25...4).
    ///   - pitch: the pitch shift in cents to start with (-2400...2400, spectral only).
    ///   - pan: the balance to start with (-1 left ... 1 right; no effect on mono).
    ///   - processingTap: the caller's processing tap on the player's queue (see ``ProcessingTap``).
    ///   - timePitchEngines: where the spectral algorithm finds its engine (register `RubberBandTimePitch`).
    public init(items: [AudioPlayerItem], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                buffering: Buffering = Buffering(), outputFormat: OutputFormat = .firstItem,
                makeSink: @escaping @Sendable () -> any AudioSink,
                record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil,
                onEvent: (@Sendable (AudioPlayerEvent) -> Void)? = nil,
                timePitch: TimePitchAlgorithm? = nil, playRate: Float = 1, pitch: Float = 0,
                pan: Float = 0, processingTap: ProcessingTap? = nil,
                decoders: AudioDecoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
                timePitchEngines: TimePitchEngineRegistry = .shared) {
        self.items = items
        self.loops = max(loops, 1)
        self.processingTap = processingTap
        self.startSeconds = max(startSeconds, 0)
        self.buffering = buffering
        self.outputFormat = outputFormat
        self.makeSink = makeSink
        self.record = record
        self.timePitch = timePitch
        self.timePitchEngines = timePitchEngines
        self.decoders = decoders
        self.resamplers = resamplers
        eventHandler = onEvent
        (eventStream, eventSink) = AsyncStream.makeStream(of: AudioPlayerEvent.self)
        shared.withLock { $0.playRate = playRate; $0.pitch = pitch; $0.volume = volume; $0.pan = pan }
    }

    /// Plays local files (see ``AudioPlayerItem/file(_:)``).
    public convenience init(paths: [String], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                            makeSink: @escaping @Sendable () -> any AudioSink,
                            record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil) {
        self.init(items: paths.map { AudioPlayerItem.file($0) }, loops: loops, volume: volume, startSeconds: startSeconds,
                  makeSink: makeSink, record: record)
    }

    /// The gain applied to everything now (0...1): see ``setVolume(_:)``.
    public var volume: Float { shared.withLock { $0.volume } }

    /// The balance now (-1 left ... 1 right): see ``setPan(_:)``.
    public var pan: Float { shared.withLock { $0.pan } }

    /// A processing tap for the player's queue: the caller's code on the render path, as with
    /// ``BufferQueue/AudioQueue/installProcessingTap(_:callback:)``. The player's own frame count
    /// and recording do not take its place.
    public struct ProcessingTap: Sendable {
        /// Where it sits: before time-pitch, conversion and volume/pan, after them, or a siphon.
        public var position: AudioQueueProcessingTapPosition
        /// Called on the render path for every block; the tap it gets tells the processing
        /// format: the output format, or for `.preEffects` the first item's decoded format (with
        /// items of other formats, use `.postEffects` or `.siphon`, which see one format).
        public var callback: AudioQueueProcessingTapCallback
        public init(position: AudioQueueProcessingTapPosition, callback: @escaping AudioQueueProcessingTapCallback) {
            self.position = position
            self.callback = callback
        }
    }

    /// The caller's processing tap, installed when playback begins.
    public let processingTap: ProcessingTap?

    /// Every event, in order, for one consumer; it finishes when playback ends.
    public var events: AsyncStream<AudioPlayerEvent> { eventStream }

    /// The current state.
    public var playerState: AudioPlayerState { shared.withLock { $0.playerState } }

    // MARK: control

    /// Plays every item `loops` times and returns when all has been heard (or ``stop()``), with
    /// the frames handed to the sink. Cancelling the task stops playback. Blocks no thread.
    /// - Throws: what opening, reading or the sink reported; what was decoded before it has played.
    @discardableResult
    public func play() async throws -> Int64 {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int64, any Error>) in
                whenDone { continuation.resume(with: $0) }
                begin()
            }
        } onCancel: {
            stop()
        }
    }

    /// ``play()`` for a caller that may block its thread (a command-line tool's main thread):
    /// never call it from a Swift task or a Dispatch queue the player's callbacks need.
    @discardableResult
    public func run() throws -> Int64 {
        let done = DispatchSemaphore(value: 0)
        let outcome = Lock<Result<Int64, any Error>?>(nil)
        whenDone { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        begin()
        done.wait()
        return try outcome.withLock { $0 }!.get()
    }

    /// Stops now (from any thread); ``play()`` returns soon after.
    public func stop() {
        shared.withLock { $0.stopped = true }
        work.async { [self] in
            feeder = nil
            inputDone = true
            if let queue { queue.dispose(immediately: true) }
            complete()
        }
    }

    /// Pauses playback (enqueueing ahead goes on up to the buffer limit).
    public func pause() {
        let queue = shared.withLock { s -> AudioQueue? in s.userPaused = true; return s.queue }
        try? queue?.pause()
        setState(.paused)
    }

    /// Resumes after ``pause()``.
    public func resume() {
        shared.withLock { $0.userPaused = false }
        work.async { [self] in
            if queueStarted { try? queue?.start() } else { startIfReady(waiting: true) }
        }
        setState(.playing)
    }

    /// Moves to `seconds` into the item heard now (frame-exact): what was enqueued is dropped and
    /// the item is fed again from there; what plays from then on equals a render of the item from
    /// that frame. Returns once the move is under way.
    public func seek(to seconds: Double) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            work.async { [self] in
                performSeek(to: max(seconds, 0))
                continuation.resume()
            }
        }
    }

    /// Changes the play rate (0.25...4) and, optionally, the pitch shift in cents (-2400...2400;
    /// spectral only) of what plays now and later, within about 20 ms. Needs `timePitch` at init.
    /// ``Status/position`` stays the position in the item (source time).
    /// - Throws: ``BufferQueue/AudioQueueError/Code/invalidParameter`` for values out of range, or
    ///   without time-pitch.
    public func setPlayRate(_ rate: Float, pitch: Float? = nil) throws {
        guard timePitch != nil else {
            throw AudioQueueError(.invalidParameter, "the player was made without time-pitch: pass timePitch: to init")
        }
        if let pitch, pitch != 0, timePitch != .spectral {
            throw AudioQueueError(.invalidParameter, "a pitch shift needs the spectral time-pitch algorithm")
        }
        let parameters = try AudioQueueParameters(playRate: rate, pitch: pitch).validated()
        let queue = shared.withLock { s -> AudioQueue? in
            s.playRate = rate
            if let pitch { s.pitch = pitch }
            return s.queue
        }
        try queue?.setParameters(parameters)
    }

    /// Changes the gain (0...1) of what plays now and later; the change glides over a few
    /// milliseconds, as the queue's volume does.
    /// - Throws: ``BufferQueue/AudioQueueError/Code/invalidParameter`` outside 0...1.
    public func setVolume(_ volume: Float) throws {
        try setMix(AudioQueueParameters(volume: volume).validated()) { $0.volume = volume }
    }

    /// Changes the balance (-1 left only ... 1 right only; no effect on mono).
    /// - Throws: ``BufferQueue/AudioQueueError/Code/invalidParameter`` outside -1...1.
    public func setPan(_ pan: Float) throws {
        try setMix(AudioQueueParameters(pan: pan).validated()) { $0.pan = pan }
    }

    private func setMix(_ parameters: AudioQueueParameters, _ keep: (inout Shared) -> Void) throws {
        let queue = shared.withLock { s -> AudioQueue? in
            keep(&s)
            return s.queue
        }
        try queue?.setParameters(parameters)
    }

    /// What is heard now.
    public var status: Status {
        shared.withLock { s in
            guard let queue = s.queue else {
                return Status(fileIndex: nil, title: nil, position: 0, duration: 0, durationIsEstimated: false, buffered: 0, outputFormat: nil)
            }
            let heard = queue.currentTime().sampleTime
            let mark = s.marks.last { $0.start <= heard } ?? s.marks.first
            let position = mark.map { Double(heard - $0.start + $0.offset) / $0.rate } ?? 0
            let title = mark.flatMap { s.streamTitles[$0.index] ?? $0.title }
            let rate = mark?.rate ?? 44100
            return Status(fileIndex: mark?.index, title: title, position: max(position, 0),
                          duration: mark.map { Double($0.frames) / $0.rate } ?? 0, durationIsEstimated: mark?.estimated ?? false,
                          buffered: max(Double(s.enqueuedEnd - heard) / rate, 0), outputFormat: queue.outputFormat)
        }
    }

    // MARK: events

    private func emit(_ event: AudioPlayerEvent) {
        if case .streamTitle(let title, let index) = event { shared.withLock { $0.streamTitles[index] = title } }
        eventSink.yield(event)
        eventHandler?(event)
    }

    private func setState(_ new: AudioPlayerState) {
        let changed = shared.withLock { s -> Bool in
            if s.playerState == new || s.playerState == .finished { return false }   // finished and failed are final
            if case .failed = s.playerState { return false }
            s.playerState = new
            return true
        }
        if changed { emit(.state(new)) }
    }

    /// The context a source of item `index` reports through: its events get the item's index here.
    private func context(forItem index: Int) -> AudioSourceContext {
        AudioSourceContext(report: { [weak self] event in
            guard let self else { return }
            switch event {
            case .state(let state): self.setState(state)
            case .streamTitle(let title): self.emit(.streamTitle(title, index: index))
            case .property(let name, let value): self.emit(.property(name: name, value: value, index: index))
            }
        }, available: { [weak self] in
            guard let self else { return }
            self.work.async { self.pump() }
        })
    }

    private func whenDone(_ waiter: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        let ready = shared.withLock { s -> Result<Int64, any Error>? in
            if let result = s.result { return result }
            s.waiters.append(waiter)
            return nil
        }
        if let ready { waiter(ready) }
    }

    // MARK: feeding (on `work`)

    private func begin() {
        work.async { [self] in
            guard !begun else { return }
            begun = true
            if shared.withLock({ $0.stopped }) || items.isEmpty { return complete() }
            if record != nil && outputFormat == .itemFormat {
                // The recording has one format; with the sink reopened per item it would change under it.
                return fail(AudioQueueError(.invalidParameter, "record needs one output format: use .firstItem or .fixed, not .itemFormat"),
                            playOut: false)
            }
            openItem(startingAt: startSeconds)
            pump()
        }
    }

    /// Opens item `itemIndex` `seconds` in; a failure to open ends the input there.
    private func openItem(startingAt seconds: Double) {
        do {
            let source = try items[itemIndex].open(context(forItem: itemIndex))
            feeder = PacketFeeder(source: source, startSeconds: seconds, registry: decoders)
            needsNewStream = queue != nil
            emit(.itemStarted(index: itemIndex))
        } catch {
            fail(error)
        }
    }

    /// Moves to the next item (or the next loop); false at the end.
    private func advance() -> Bool {
        if let feeder { timelineBeforeItem += feeder.framesKept }
        feeder = nil
        itemIndex += 1
        if itemIndex >= items.count {
            loop += 1
            guard loop < loops else { return false }
            itemIndex = 0
        }
        openItem(startingAt: 0)
        return feeder != nil
    }

    /// Enqueues into free buffers until they are all in the queue, the source waits, or the input ends.
    private func pump() {
        guard !inputDone else { return }
        do {
            while let feeder {
                let source = feeder.source
                if queue == nil {
                    guard source.isReady else { return }
                    try makeQueue(for: source)
                }
                guard let queue, let buffer = free.last else { break }
                if needsNewStream {
                    guard source.isReady else { return }
                    try queue.beginStream(format: source.format, magicCookie: source.magicCookie)
                    needsNewStream = false
                }
                let before = feeder.framesKept
                let progress = try feeder.enqueueNext(buffer, on: queue)
                switch progress {
                case .enqueued:
                    free.removeLast()
                    noteEnqueued(feeder, before: before)
                case .waiting:
                    startIfReady(waiting: true)
                    return
                case .finished:
                    if !advance() { finishInput() }
                }
            }
        } catch {
            fail(error)
            return
        }
        startIfReady(waiting: false)
    }

    /// Records where the item's first kept frame plays, once known.
    private func noteEnqueued(_ feeder: PacketFeeder, before: Int64) {
        let source = feeder.source
        let end = timelineBeforeItem + feeder.framesKept
        let heard = queue?.currentTime().sampleTime ?? 0
        shared.withLock { s in
            s.enqueuedEnd = end
            // Items heard to the end no longer need their mark: the list stays a few long.
            while s.marks.count > 1 && s.marks[1].start <= heard { s.marks.removeFirst() }
            if before == 0 && feeder.framesKept > 0 {
                let duration = source.duration
                s.marks.append(Mark(start: timelineBeforeItem, index: itemIndex, offset: feeder.startFrame,
                                    rate: source.format.sampleRate, frames: duration?.frames ?? 0,
                                    estimated: duration?.isEstimated ?? false, title: source.title))
            }
        }
    }

    private func makeQueue(for source: any PacketSource) throws {
        let sinkFormat: AudioQueue.SinkFormat
        switch outputFormat {
        case .firstItem: sinkFormat = .keepFirst
        case .fixed(let rate, let channels): sinkFormat = .fixed(sampleRate: rate, channels: channels)
        case .itemFormat: sinkFormat = .followDecoded
        }
        let made = try AudioQueue(format: source.format,
                                  configuration: .init(sink: makeSink(), decodeBufferFrames: 65536, callbackQueue: work,
                                                       decoderRegistry: decoders, resamplerRegistry: resamplers,
                                                       timePitchRegistry: timePitchEngines, sinkFormat: sinkFormat)) { [weak self] _, buffer in
            // On `work`: the buffer is free again.
            guard let self else { return }
            self.free.append(buffer)
            self.pump()
        }
        if let cookie = source.magicCookie { try made.setMagicCookie(cookie) }
        let (volume, pan) = shared.withLock { ($0.volume, $0.pan) }
        if volume != 1 || pan != 0 { try made.setParameters(.init(volume: volume, pan: pan)) }
        if let timePitch {
            try made.setTimePitch(timePitch)
            let (rate, pitch) = shared.withLock { ($0.playRate, $0.pitch) }
            try made.setParameters(.init(playRate: rate, pitch: pitch))
        }
        bufferCount = max(4, Int((buffering.maximumSeconds / 0.5).rounded(.up)))
        for _ in 0..<bufferCount { free.append(try made.allocateBuffer(capacity: 1 << 15, packetDescriptionCapacity: 128)) }
        queue = made
        shared.withLock { $0.queue = made }
        let events = made.events()
        Task { [weak self] in
            for await event in events {
                guard let self else { return }
                self.work.async { self.handle(event, from: made) }
            }
        }
    }

    /// Starts playback once enough is enqueued (or nothing more will come for now).
    private func startIfReady(waiting: Bool) {
        guard let queue else { return }
        let (paused, underrun, ahead) = shared.withLock { s -> (Bool, Bool, Double) in
            let heard = queue.currentTime().sampleTime
            let rate = s.marks.last?.rate ?? queue.streamDescription.sampleRate
            return (s.userPaused, s.underrun, Double(s.enqueuedEnd - heard) / rate)
        }
        // Every buffer in the queue (not merely none returned yet, as right after a seek), or
        // nothing more to come.
        let enough = (free.isEmpty && ahead > 0) || inputDone
        if !queueStarted {
            guard enough || (waiting && ahead >= buffering.startSeconds) else { return }
            queueStarted = true
            do {
                try queue.prime()
                // Counts (and hands to `record`, through a ring and a thread of its own) exactly
                // what goes to the sink.
                if !tapInstalled {
                    tapInstalled = true
                    let handed = framesHanded, box = recorderBox
                    // An observer, not a tap: the caller's processing tap keeps its place.
                    let format = try queue.setOutputObserver { output, frames in
                        box.recorder?.push(output, frames: frames)
                        handed.frames.add(Int64(frames), ordering: .relaxed)
                    }
                    // Set before the first start, so before the first render.
                    if let record { box.recorder = SiphonRecorder(format: format, record: record) }
                    if let processingTap { try queue.installProcessingTap(processingTap.position, callback: processingTap.callback) }
                }
                if !paused {
                    try queue.start()
                }
            } catch {
                fail(error)
            }
        } else if underrun && !paused && (enough || ahead >= buffering.restartSeconds) {
            shared.withLock { $0.underrun = false }
            try? queue.start()
            setState(.playing)
        }
    }

    private func handle(_ event: AudioQueueEvent, from source: AudioQueue) {
        guard source === queue else { return }
        switch event {
        case .error(let error) where error.code == .sinkError:
            fail(error, playOut: false)
        case .underrun:
            // A stream that has not caught up: hold until enough is enqueued again.
            guard !inputDone, !shared.withLock({ $0.userPaused }) else { return }
            shared.withLock { $0.underrun = true }
            try? source.pause()
            setState(.buffering)
        case .runningChanged(true):
            if !shared.withLock({ $0.userPaused || $0.underrun }) { setState(.playing) }
        case .runningChanged(false):
            if inputDone && !source.isStopping { complete() }
        default:
            break
        }
    }

    /// Every item is fed: play out what is queued, then finish.
    private func finishInput() {
        guard !inputDone else { return }
        inputDone = true
        feeder = nil
        guard let queue else { return complete() }
        startIfReady(waiting: false)
        do {
            if !queue.isRunning && !shared.withLock({ $0.userPaused }) { try queue.start() }
            try queue.stop(immediately: false)
        } catch {
            fail(error, playOut: false)
        }
    }

    /// A source or the sink failed: what was enqueued before plays out (a source's failure),
    /// then playback ends with the error.
    private func fail(_ error: any Error, playOut: Bool = true) {
        if sourceFailure == nil { sourceFailure = error }
        if playOut && !inputDone {
            finishInput()
        } else {
            queue?.dispose(immediately: true)
            complete()
        }
    }

    private func performSeek(to seconds: Double) {
        guard let queue, shared.withLock({ $0.result == nil }) else { return }
        let heardIndex = status.fileIndex ?? itemIndex
        setState(.seeking)
        let restarts = inputDone
        do {
            if restarts {
                // Everything was fed and the queue plays out: stop it at once (its timeline restarts).
                try queue.stop(immediately: true)
            } else {
                try queue.pause()
                try queue.reset()
            }
        } catch {
            return fail(error, playOut: false)
        }
        // A stopped queue's timeline starts again from 0; a reset one goes on from the frame reached.
        timelineBeforeItem = restarts ? 0 : queue.currentTime().sampleTime
        shared.withLock { s in
            s.marks.removeAll()
            s.underrun = false
            s.enqueuedEnd = timelineBeforeItem
        }
        queueStarted = false
        inputDone = false
        if itemIndex != heardIndex { loop = max(loop - (heardIndex > itemIndex ? 1 : 0), 0) }
        itemIndex = heardIndex
        openItem(startingAt: seconds)
        needsNewStream = true
        pump()
    }

    /// Ends playback (once): the final state, the waiters, the event stream.
    private func complete() {
        let played = framesHanded.frames.load(ordering: .relaxed)
        let failure = sourceFailure
        let (waiters, result) = shared.withLock { s -> ([@Sendable (Result<Int64, any Error>) -> Void], Result<Int64, any Error>?) in
            guard s.result == nil else { return ([], nil) }
            let result: Result<Int64, any Error> = failure.map { .failure($0) } ?? .success(played)
            s.result = result
            defer { s.waiters.removeAll() }
            return (s.waiters, result)
        }
        guard let result else { return }
        recorderBox.recorder?.finish()
        if let failure { setState(.failed("\(failure)")) } else { setState(.finished) }
        eventSink.finish()
        for waiter in waiters { waiter(result) }
    }
}

/// The recorder the siphon pushes to: set on the player's queue before the first render, read on
/// the render thread after (the queue's start orders the two).
final class RecorderBox: @unchecked Sendable {
    nonisolated(unsafe) var recorder: SiphonRecorder?
}

/// A frame count shared with the render path.
final class FrameCounter: Sendable {
    let frames = Atomic<Int64>(0)
}
