#if canImport(Glibc)
import Glibc
#endif
import BufferQueue
import Dispatch
import Synchronization

/// Something ``AudioFilePlayer`` can play: interleaved float32 frames with the item's gapless trims
/// already applied. ``AudioFileRenderer`` is one; the `AudioStreaming` module adds HTTP streams.
public protocol AudioFrameSource: AnyObject {
    /// The format of the frames (float32, interleaved).
    var outputFormat: AudioStreamDescription { get }
    /// The item's whole length in frames, and whether it is estimated (nil: unknown, e.g. live).
    var duration: (frames: Int64, isEstimated: Bool)? { get }
    /// A title from the item's metadata.
    var title: String? { get }
    /// Renders up to `frames` frames; returns 0 at the end. May block while data arrives.
    func render(into destination: UnsafeMutableBufferPointer<Float>, frames: Int) throws -> Int
    /// Makes a blocked ``render(into:frames:)`` return soon (with 0 or an error); called from another thread.
    func cancel()
}

extension AudioFileRenderer: AudioFrameSource {
    public var duration: (frames: Int64, isEstimated: Bool)? {
        file.packetTableInfo.map { ($0.validFrames, false) } ?? (file.totalFrames, true)
    }
    public var title: String? { file.metadata.title }
    public func cancel() {}
}

/// What the player reports as it goes.
public enum AudioPlayerEvent: Sendable {
    case state(AudioPlayerState)
    /// Item `index` began to be decoded (its frames follow the previous item's without a gap).
    case itemStarted(index: Int)
    /// A stream announced a new title (ICY `StreamTitle`).
    case streamTitle(String, index: Int)
    /// A stream property such as `icy-name` or `icy-genre`.
    case property(name: String, value: String, index: Int)
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

/// One entry of the player's list: how to open it at a position.
public struct AudioPlayerItem: Sendable {
    /// A name for messages and the status line.
    public let name: String
    /// Opens the item `startSeconds` in; `report` takes the events the item has to tell.
    public let open: @Sendable (_ startSeconds: Double, _ report: @escaping @Sendable (AudioPlayerEvent) -> Void) throws -> any AudioFrameSource

    public init(name: String, open: @escaping @Sendable (_ startSeconds: Double, _ report: @escaping @Sendable (AudioPlayerEvent) -> Void) throws -> any AudioFrameSource) {
        self.name = name
        self.open = open
    }

    /// A local file, decoded through an ``AudioFileRenderer`` (frame-exact start); the file is
    /// opened and indexed once, however often the item is played.
    public static func file(_ path: String) -> AudioPlayerItem {
        let cache = Lock<AudioFile?>(nil)
        return AudioPlayerItem(name: path) { startSeconds, _ in
            let file = try cache.withLock { cached -> AudioFile in
                if let cached { return cached }
                let opened = try AudioFile(path: path)
                cached = opened
                return opened
            }
            let rate = (file.formatList.first ?? file.dataFormat).sampleRate
            return try AudioFileRenderer(file: file, startFrame: Int64((startSeconds * rate).rounded()))
        }
    }
}

/// Plays a list of items (files, streams) through one ``AudioSink``, gaplessly.
///
/// Each item is decoded by its ``AudioFrameSource`` (so its priming and padding are trimmed
/// exactly) and the float32 frames are fed to a single playback ``AudioQueue``: consecutive items
/// join sample-exactly, whatever their codecs, as long as their output rate and channel count
/// match. When those change, the player lets the current queue play out and opens a new queue
/// (and sink) at the new format — there is a gap at that point; it does not resample.
///
/// Buffering follows ``Buffering``: playback starts once `startSeconds` are decoded ahead, pauses
/// on an underrun (state ``AudioPlayerState/buffering``) until `restartSeconds` are, and never
/// holds more than `maximumSeconds`.
///
/// `run()` blocks until everything has played (or ``stop()`` is called): call it on a thread of its
/// own, not from a Dispatch queue or a Swift task, whose shared worker threads the queues need.
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
        /// Seconds decoded ahead of what is heard.
        public var buffered: Double
    }

    /// How much decoded audio the player keeps ahead of what is heard.
    public struct Buffering: Sendable {
        /// Decoded ahead before playback starts (and after a seek).
        public var startSeconds: Double
        /// Decoded ahead before playback resumes after an underrun.
        public var restartSeconds: Double
        /// At most this much is decoded ahead.
        public var maximumSeconds: Double
        public init(startSeconds: Double = 1, restartSeconds: Double = 2, maximumSeconds: Double = 3) {
            self.startSeconds = max(startSeconds, 0)
            self.restartSeconds = max(restartSeconds, 0)
            self.maximumSeconds = max(maximumSeconds, startSeconds, restartSeconds, 0.5)
        }
    }

    /// Frames in each playback buffer (about 0.37 s at 44.1 kHz): few enough wake-ups per second.
    static let bufferFrames = 16384

    /// What is played, in order.
    public let items: [AudioPlayerItem]
    /// The items' names (paths or URLs).
    public var paths: [String] { items.map(\.name) }
    /// How many times the whole list plays.
    public let loops: Int
    /// Gain applied to every frame (0...1).
    public let volume: Float
    /// Where in the first item playback starts.
    public let startSeconds: Double
    /// How much is decoded ahead.
    public let buffering: Buffering
    /// How play rate and pitch apply (nil: time-pitch off, the rate cannot change).
    public let timePitch: TimePitchAlgorithm?
    private let timePitchEngines: TimePitchEngineRegistry
    private let makeSink: @Sendable () -> any AudioSink
    private let record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)?
    private let stopped = Atomic<Bool>(false)
    private let state = Lock(PlayState())
    private let eventStream: AsyncStream<AudioPlayerEvent>
    private let eventSink: AsyncStream<AudioPlayerEvent>.Continuation
    private let eventHandler: (@Sendable (AudioPlayerEvent) -> Void)?

    private struct Mark {
        /// Frame of the queue timeline where this stretch starts.
        var start: Int64
        var index: Int
        /// Position in the item of that first frame (nonzero after a seek).
        var offset: Int64
        var frames: Int64
        var estimated: Bool
        var title: String?
    }

    private struct PlayState {
        var queue: AudioQueue?
        var pool: BufferPool?
        var source: (any AudioFrameSource)?
        var queueStartFrame: Int64 = 0
        var marks: [Mark] = []
        var rate: Double = 44100
        var enqueued: Int64 = 0
        var failure: AudioQueueError?
        var pendingSeek: Double?
        var underrun = false
        var userPaused = false
        var playerState: AudioPlayerState = .buffering
        var streamTitles: [Int: String] = [:]
        var playRate: Float = 1
        var pitch: Float = 0
    }

    /// - Parameters:
    ///   - startSeconds: where in the first item to start (frame-exact for files).
    ///   - makeSink: a new sink for each playback queue.
    ///   - record: receives exactly the frames handed to the sink, in order.
    ///   - onEvent: called with every ``AudioPlayerEvent`` (also available from ``events``).
    ///   - timePitch: turns play rate (and, for ``TimePitchAlgorithm/spectral``, pitch) on:
    ///     see ``setPlayRate(_:pitch:)``. `record` then receives the frames before the rate applies.
    ///   - playRate: the play rate to start with (0.25...4).
    ///   - pitch: the pitch shift in cents to start with (-2400...2400, spectral only).
    ///   - timePitchEngines: where the spectral algorithm finds its engine (register `RubberBandTimePitch`).
    public init(items: [AudioPlayerItem], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                buffering: Buffering = Buffering(),
                makeSink: @escaping @Sendable () -> any AudioSink,
                record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil,
                onEvent: (@Sendable (AudioPlayerEvent) -> Void)? = nil,
                timePitch: TimePitchAlgorithm? = nil, playRate: Float = 1, pitch: Float = 0,
                timePitchEngines: TimePitchEngineRegistry = .shared) {
        self.timePitch = timePitch
        self.timePitchEngines = timePitchEngines
        state.withLock { $0.playRate = playRate; $0.pitch = pitch }
        self.items = items
        self.loops = max(loops, 1)
        self.volume = volume
        self.startSeconds = max(startSeconds, 0)
        self.buffering = buffering
        self.makeSink = makeSink
        self.record = record
        eventHandler = onEvent
        (eventStream, eventSink) = AsyncStream.makeStream(of: AudioPlayerEvent.self)
    }

    /// Plays local files (see ``AudioPlayerItem/file(_:)``).
    public convenience init(paths: [String], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                            makeSink: @escaping @Sendable () -> any AudioSink,
                            record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil) {
        self.init(items: paths.map { AudioPlayerItem.file($0) }, loops: loops, volume: volume, startSeconds: startSeconds,
                  makeSink: makeSink, record: record)
    }

    /// Every event, in order, from one consumer.
    public var events: AsyncStream<AudioPlayerEvent> { eventStream }

    private func emit(_ event: AudioPlayerEvent) {
        if case .streamTitle(let title, let index) = event { state.withLock { $0.streamTitles[index] = title } }
        eventSink.yield(event)
        eventHandler?(event)
    }

    /// What a source reports through. A source does not know its place in the list: events it
    /// reports about itself (titles, properties) get the index of the item it plays here.
    private func reporter(forItem index: Int) -> @Sendable (AudioPlayerEvent) -> Void {
        { [weak self] event in
            guard let self else { return }
            switch event {
            case .state(let s): self.setState(s)
            case .streamTitle(let title, _): self.emit(.streamTitle(title, index: index))
            case .property(let name, let value, _): self.emit(.property(name: name, value: value, index: index))
            case .itemStarted: self.emit(event)
            }
        }
    }

    private func setState(_ new: AudioPlayerState) {
        let changed = state.withLock { s -> Bool in
            if s.playerState == new || s.playerState == .finished { return false }   // finished and failed are final
            if case .failed = s.playerState { return false }
            s.playerState = new
            return true
        }
        if changed { emit(.state(new)) }
    }

    /// The current state.
    public var playerState: AudioPlayerState { state.withLock { $0.playerState } }

    /// Stops now (from any thread); ``run()`` returns soon after.
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
        let queue = state.withLock { s -> AudioQueue? in
            s.playRate = rate
            if let pitch { s.pitch = pitch }
            return s.queue
        }
        try queue?.setParameters(parameters)
    }

    public func stop() {
        stopped.store(true, ordering: .releasing)
        let (queue, pool, source) = state.withLock { ($0.queue, $0.pool, $0.source) }
        pool?.cancel()
        source?.cancel()
        try? queue?.stop(immediately: true)
    }

    /// Pauses playback (decoding ahead goes on up to the buffer limit).
    public func pause() {
        let queue = state.withLock { s -> AudioQueue? in s.userPaused = true; return s.queue }
        try? queue?.pause()
        setState(.paused)
    }

    /// Resumes after ``pause()``.
    public func resume() {
        let queue = state.withLock { s -> AudioQueue? in s.userPaused = false; return s.queue }
        try? queue?.start()
        setState(.playing)
    }

    /// Moves to `seconds` into the current item (frame-exact where the item allows it). What was
    /// buffered is dropped; the position reported afterwards is the position heard.
    public func seek(to seconds: Double) {
        let (pool, source) = state.withLock { s -> (BufferPool?, (any AudioFrameSource)?) in
            s.pendingSeek = max(seconds, 0)
            return (s.pool, s.source)
        }
        source?.cancel()
        pool?.interrupt()
    }

    /// What is heard now.
    public var status: Status {
        state.withLock { s in
            guard let queue = s.queue else {
                return Status(fileIndex: nil, title: nil, position: 0, duration: 0, durationIsEstimated: false, buffered: 0)
            }
            let heard = s.queueStartFrame + queue.currentTime().sampleTime
            let mark = s.marks.last { $0.start <= heard } ?? s.marks.first
            let position = mark.map { Double(heard - $0.start + $0.offset) / s.rate } ?? 0
            let title = mark.flatMap { s.streamTitles[$0.index] ?? $0.title }
            return Status(fileIndex: mark?.index, title: title, position: max(position, 0),
                          duration: mark.map { Double($0.frames) / s.rate } ?? 0, durationIsEstimated: mark?.estimated ?? false,
                          buffered: max(Double(s.enqueued - heard) / s.rate, 0))
        }
    }

    /// Plays every item `loops` times. Returns the frames handed to the sink.
    /// - Throws: what opening, decoding or the sink reported; frames before it have played.
    @discardableResult
    public func run() throws -> Int64 {
        var format: AudioStreamDescription?
        var queue: AudioQueue?
        var pool: BufferPool?
        var total: Int64 = 0
        // A source that fails (a stream gone, a damaged file) still lets what was decoded before
        // play out; a sink failure (in `state.failure`) ends at once.
        var sourceFailure: (any Error)?
        defer {
            if let queue { finish(queue) }
            let final: AudioPlayerState
            if let failure = state.withLock({ $0.failure }) { final = .failed(failure.message) }
            else if let sourceFailure { final = .failed("\(sourceFailure)") } else { final = .finished }
            setState(final)
            eventSink.finish()
        }
        do {
            var begin = startSeconds
            for _ in 0..<loops {
                var index = 0
                while index < items.count {
                    if stopped.load(ordering: .acquiring) { return total }
                    let source = try items[index].open(begin, reporter(forItem: index))
                    let offsetFrames = Int64((begin * source.outputFormat.sampleRate).rounded())
                    begin = 0
                    state.withLock { $0.source = source }
                    let out = source.outputFormat
                    if queue == nil || format != out {
                        if let old = queue { finish(old) }
                        (queue, pool) = try makeQueue(out, startingAt: total)
                        format = out
                    }
                    guard let activeQueue = queue, let activePool = pool else { return total }
                    emit(.itemStarted(index: index))
                    let duration = source.duration
                    state.withLock {
                        $0.marks.append(Mark(start: total, index: index, offset: offsetFrames, frames: duration?.frames ?? 0,
                                             estimated: duration?.isEstimated ?? false, title: source.title))
                    }
                    if let seekTo = try feed(source, into: activeQueue, pool: activePool, total: &total) {
                        // A seek: drop what is queued, start a fresh queue, reopen this item there.
                        setState(.seeking)
                        activeQueue.dispose(immediately: true)
                        state.withLock { $0.queue = nil; $0.pool = nil }
                        queue = nil
                        pool = nil
                        begin = seekTo
                        continue
                    }
                    index += 1
                }
            }
            if let queue, !queue.isRunning, !stopped.load(ordering: .acquiring) { try queue.start() }
        } catch {
            sourceFailure = error
            throw error
        }
        if let failure = state.withLock({ $0.failure }) { throw failure }
        return total
    }

    private func makeQueue(_ out: AudioStreamDescription, startingAt total: Int64) throws -> (AudioQueue, BufferPool) {
        let made = BufferPool()
        let newQueue = try AudioQueue(format: out, configuration: .init(sink: makeSink(), decodeBufferFrames: 32768,
                                                                        timePitchRegistry: timePitchEngines)) { _, buffer in
            made.returned(buffer)
        }
        if let timePitch {
            try newQueue.setTimePitch(timePitch)
            let (rate, pitch) = state.withLock { ($0.playRate, $0.pitch) }
            try newQueue.setParameters(.init(playRate: rate, pitch: pitch))
        }
        let secondsPerBuffer = Double(Self.bufferFrames) / out.sampleRate
        let count = max(3, Int((buffering.maximumSeconds / secondsPerBuffer).rounded(.up)))
        for _ in 0..<count { made.add(try newQueue.allocateBuffer(capacity: Self.bufferFrames * out.channelsPerFrame * 4)) }
        let events = newQueue.events()
        Task.detached { [weak self] in
            for await event in events {
                guard let self else { return }
                switch event {
                case .error(let e) where e.code == .sinkError:
                    self.state.withLock { $0.failure = e }
                    made.cancel()   // no buffer may come back: do not wait for one
                    newQueue.wakeLifecycleWaiters()
                case .underrun:
                    self.underrun(newQueue)
                case .runningChanged(true):
                    if !self.state.withLock({ $0.userPaused || $0.underrun }) { self.setState(.playing) }
                default:
                    break
                }
            }
        }
        state.withLock { s in
            s.queue = newQueue
            s.pool = made
            s.queueStartFrame = total
            s.rate = out.sampleRate
        }
        return (newQueue, made)
    }

    /// An underrun while more is coming: hold playback until `restartSeconds` are buffered.
    private func underrun(_ queue: AudioQueue) {
        let hold = state.withLock { s -> Bool in
            guard s.queue === queue, s.source != nil, !s.userPaused else { return false }
            s.underrun = true
            return true
        }
        guard hold else { return }
        try? queue.pause()
        setState(.buffering)
    }

    /// Feeds one source into the playback queue until it ends; returns a seek target if one was asked.
    private func feed(_ source: any AudioFrameSource, into queue: AudioQueue, pool: BufferPool, total: inout Int64) throws -> Double? {
        let out = source.outputFormat
        var scratch = [Float](repeating: 0, count: Self.bufferFrames * out.channelsPerFrame)
        var started = queue.isRunning || state.withLock { $0.userPaused }
        defer { state.withLock { $0.source = nil } }
        func buffered() -> Double {
            Double(total - (state.withLock { $0.queueStartFrame } + queue.currentTime().sampleTime)) / out.sampleRate
        }
        while !stopped.load(ordering: .acquiring) {
            if let seek = state.withLock({ s -> Double? in defer { s.pendingSeek = nil }; return s.pendingSeek }) { return seek }
            if let failure = state.withLock({ $0.failure }) { throw failure }
            // Fill a whole buffer (a source hands out what one decode step made).
            var n = 0
            // A failing source: what it rendered before the failure is played, then the error goes up.
            var failure: (any Error)?
            while n < Self.bufferFrames {
                let got: Int
                do {
                    got = try scratch.withUnsafeMutableBufferPointer {
                        try source.render(into: UnsafeMutableBufferPointer(rebasing: $0[(n * out.channelsPerFrame)...]), frames: Self.bufferFrames - n)
                    }
                } catch {
                    failure = error
                    break
                }
                if got == 0 { break }
                n += got
            }
            if let seek = state.withLock({ s -> Double? in defer { s.pendingSeek = nil }; return s.pendingSeek }) { return seek }
            if n == 0 {
                if let failure { throw failure }
                break
            }
            let samples = n * out.channelsPerFrame
            if volume != 1 { for i in 0..<samples { scratch[i] *= volume } }
            guard let buffer = pool.take() else {
                if let seek = state.withLock({ s -> Double? in defer { s.pendingSeek = nil }; return s.pendingSeek }) { return seek }
                break
            }
            try scratch.withUnsafeBytes { try buffer.setData($0.prefix(samples * 4)) }
            try queue.enqueue(buffer)
            scratch.withUnsafeBufferPointer { record?(UnsafeBufferPointer(rebasing: $0[0..<samples]), out) }
            total += Int64(n)
            state.withLock { $0.enqueued = total }
            if !started && (buffered() >= buffering.startSeconds || pool.freeCount == 0) {
                try queue.prime()
                try queue.start()
                started = true
            }
            if let failure {
                if !started && !stopped.load(ordering: .acquiring) { try queue.start() }
                throw failure
            }
            let resume = state.withLock { s -> Bool in
                guard s.underrun, !s.userPaused else { return false }
                return true
            }
            if resume && (buffered() >= buffering.restartSeconds || pool.freeCount == 0) {
                state.withLock { $0.underrun = false }
                try queue.start()
                setState(.playing)
            }
        }
        if !started && !stopped.load(ordering: .acquiring) { try queue.start() }
        // The source ended: an underrun from here on is the end, not a stall.
        let wasHolding = state.withLock { s -> Bool in defer { s.underrun = false }; return s.underrun }
        if wasHolding && !stopped.load(ordering: .acquiring) { try queue.start() }
        return nil
    }

    /// Lets a queue play out what it has, then releases it.
    private func finish(_ queue: AudioQueue) {
        if !stopped.load(ordering: .acquiring) {
            if !queue.isRunning && !state.withLock({ $0.userPaused }) { try? queue.start() }
            try? queue.stop(immediately: false)
            // Wait for the stop to complete (the queue has played everything out), for stop(),
            // or for a sink failure; each wakes this wait. A minute bounds a sink that never drains.
            _ = queue.waitWhileStopping(until: .now() + 60) {
                stopped.load(ordering: .acquiring) || state.withLock { $0.failure } != nil
            }
        }
        queue.dispose(immediately: true)
        state.withLock { if $0.queue === queue { $0.queue = nil; $0.pool = nil } }
    }
}

/// Free playback buffers, handed back by the output callback. Waiting for one costs no wake-ups:
/// ``cancel()`` (from ``AudioFilePlayer/stop()``) releases a waiting ``take()``.
private final class BufferPool: @unchecked Sendable {
    private let lock = Lock((free: [AudioQueueBuffer](), cancelled: false, interrupted: false))
    private let available = DispatchSemaphore(value: 0)
    private let count = Atomic<Int>(0)

    func add(_ buffer: AudioQueueBuffer) {
        count.add(1, ordering: .relaxed)
        returned(buffer)
    }

    func returned(_ buffer: AudioQueueBuffer) {
        lock.withLock { $0.free.append(buffer) }
        available.signal()
    }

    func cancel() {
        lock.withLock { $0.cancelled = true }
        available.signal()
    }

    /// Makes a waiting ``take()`` return nil once (a seek).
    func interrupt() {
        lock.withLock { $0.interrupted = true }
        available.signal()
    }

    var freeCount: Int { lock.withLock { $0.free.count } }

    /// A free buffer, waiting for one; nil once cancelled.
    func take() -> AudioQueueBuffer? {
        while true {
            available.wait()
            let (buffer, cancelled, interrupted) = lock.withLock { s in
                defer { s.interrupted = false }
                return (s.cancelled || s.interrupted ? nil : s.free.popLast(), s.cancelled, s.interrupted)
            }
            if cancelled { available.signal(); return nil }
            if interrupted { return nil }
            if let buffer { return buffer }
        }
    }
}
