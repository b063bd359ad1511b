import AudioFileStream
import BufferQueue
import Dispatch
import Synchronization

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
/// The list can change while it plays (``append(_:)``, ``insert(_:at:)``, ``remove(at:)``,
/// ``skip()``); every item has a state of its own (``AudioPlayerItemState``, reported as
/// ``AudioPlayerEvent/itemState(index:id:_:)``), and the player's state is the state of the item
/// heard. ``AudioPlayerEvent/itemStarted(index:)`` means the item's first frame is heard.
/// ``seek(to:)`` reports the position it reached; ``events()`` serves any number of consumers and
/// ``positions(every:)`` reports where playback is at a period; ``replay()`` plays the list again.
///
/// The lifecycle is one value (`PlayerMachine`): each call and each report of the queue, the
/// sources and the clock is an event that returns actions, performed after the lock is released.
/// No polling: the queue's output callback hands buffers back and the feeder refills them; a
/// stream that has no packets yet calls back when it has; the moment an item will be heard is
/// computed from the queue's timeline and checked when it comes. Everything the player does with
/// its queue runs on one serial dispatch queue of its own; ``play()`` awaits the end without
/// blocking a thread.
public final class AudioPlayer: @unchecked Sendable {
    /// What is playing now.
    public struct Status: Sendable, Equatable {
        /// Index in the item list of the item heard; before its first frame is heard (at the
        /// start, after a seek) the item being fed; nil before any is opened.
        public var fileIndex: Int?
        /// The identity of that item.
        public var itemID: AudioPlayerItem.ID?
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

    /// The list now, in order (it changes with ``append(_:)``, ``insert(_:at:)``, ``remove(at:)``).
    public var items: [AudioPlayerItem] { shared.withLock { $0.items } }
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
    private let eventHandler: (@Sendable (AudioPlayerEvent) -> Void)?
    /// Where everything the player does with its queue happens, in order.
    private let work = DispatchQueue(label: "AudioPlayback.player")

    // MARK: confined to `work`
    private var queue: AudioQueue?
    private var free: [AudioQueueBuffer] = []
    private var bufferCount = 0
    private var feeder: (any ItemFeeding)?
    /// The crossfading join (nil: the gapless player, items' packets straight into the queue).
    private let join: CrossfadeJoin?
    /// The item being fed (index into the list) and its identity.
    private var itemIndex = 0
    private var feedingID: AudioPlayerItem.ID?
    private var loop = 0
    /// The next item must begin a new stream of the queue.
    private var needsNewStream = false
    private var tapInstalled = false
    /// Where the next opened item starts (seconds into it).
    private var nextStart: Double = 0
    /// Frames kept of the items fed before the current one (the timeline where it starts).
    private var timelineBeforeItem: Int64 = 0
    /// The sink produces the queue's sound now (between `runningChanged(true)` and `(false)`).
    private var soundRunning: Bool { shared.withLock { $0.machine.soundRunning } }
    /// The check that the next item is heard, when one is scheduled.
    private var heardCheck: DispatchWorkItem?
    /// Seeks waiting for the position they reach.
    private var pendingSeeks: [CheckedContinuation<Double, any Error>] = []
    /// The next report of each time observer (``positions(every:)``), scheduled while sound plays.
    private var positionTicks: [Int: DispatchWorkItem] = [:]

    // MARK: shared
    /// A time observer: its period, its stream, and the last value it was given (never given twice).
    private struct PositionObserver {
        let period: Duration
        let continuation: AsyncStream<Status>.Continuation
        var last: Status?
    }

    private struct Shared {
        var machine: PlayerMachine
        var items: [AudioPlayerItem]
        var queue: AudioQueue?
        var timeline = PlayerTimeline()
        var streamTitles: [AudioPlayerItem.ID: String] = [:]
        /// The speakers of the sink's channels (the first item's, as its container says).
        var channelLayout: AudioChannelLayout?
        var playRate: Float = 1
        var volume: Float = 1
        var pan: Float = 0
        var pitch: Float = 0
        var metering = false
        var result: Result<Int64, any Error>?
        var waiters: [@Sendable (Result<Int64, any Error>) -> Void] = []
        var subscribers: [Int: AsyncStream<AudioPlayerEvent>.Continuation] = [:]
        var nextSubscriber = 0
        /// The time observers: their period and stream.
        var positionObservers: [Int: PositionObserver] = [:]
    }
    private let shared: Lock<Shared>
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
    ///   - onEvent: called with every ``AudioPlayerEvent`` (also available from ``events()``).
    ///   - timePitch: turns play rate (and, for ``TimePitchAlgorithm/spectral``, pitch) on:
    ///     see ``setPlayRate(_:pitch:)``.
    ///   - playRate: the play rate to start with (0.25...4).
    ///   - pitch: the pitch shift in cents to start with (-2400...2400, spectral only).
    ///   - pan: the balance to start with (-1 left ... 1 right; no effect on mono).
    ///   - processingTap: the caller's processing tap on the player's queue (see ``ProcessingTap``).
    ///   - onItemFailure: an item that cannot be opened or read is skipped (the default: the rest
    ///     of the list plays, gaplessly) or ends playback.
    ///   - crossfade: items join with a crossfade (see ``AudioPlayerCrossfade``); nil or 0 seconds:
    ///     gaplessly. Crossfading items are decoded and converted to the output format on the
    ///     player's queue and enqueued as PCM; it needs one output format (not ``OutputFormat/itemFormat``).
    ///   - replayGain: applies each item's ReplayGain (or Opus R128) tags as its gain, read once
    ///     its source is ready; nil (the default) or ``ReplayGainSettings/Mode/off``: none. It
    ///     multiplies ``AudioPlayerItem/gain`` and applies before a crossfade.
    ///   - timePitchEngines: where the spectral algorithm finds its engine (register `RubberBandTimePitch`).
    public init(items: [AudioPlayerItem], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                buffering: Buffering = Buffering(), outputFormat: OutputFormat = .firstItem,
                makeSink: @escaping @Sendable () -> any AudioSink,
                record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil,
                onEvent: (@Sendable (AudioPlayerEvent) -> Void)? = nil,
                timePitch: TimePitchAlgorithm? = nil, playRate: Float = 1, pitch: Float = 0,
                pan: Float = 0, processingTap: ProcessingTap? = nil, onItemFailure: AudioPlayerItemFailurePolicy = .skip,
                crossfade: AudioPlayerCrossfade? = nil, replayGain: ReplayGainSettings? = nil,
                decoders: AudioDecoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
                timePitchEngines: TimePitchEngineRegistry = .shared) {
        self.loops = max(loops, 1)
        self.replayGain = replayGain
        self.processingTap = processingTap
        self.onItemFailure = onItemFailure
        self.crossfade = crossfade
        join = crossfade.flatMap { $0.seconds > 0 ? CrossfadeJoin(crossfade: $0) : nil }
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
        nextStart = max(startSeconds, 0)
        var state = Shared(machine: PlayerMachine(items: items.map(\.id)), items: items)
        state.playRate = playRate
        state.pitch = pitch
        state.volume = volume
        state.pan = pan
        shared = Lock(state)
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
    /// What happens when an item cannot be opened or read.
    public let onItemFailure: AudioPlayerItemFailurePolicy
    /// How items join (nil: gaplessly).
    public let crossfade: AudioPlayerCrossfade?
    /// How items' ReplayGain and R128 tags apply (nil: they do not).
    public let replayGain: ReplayGainSettings?

    /// A new stream of every event from now on, in order; any number of consumers may each have
    /// one. It finishes when playback ends (at once, when it has ended).
    public func events() -> AsyncStream<AudioPlayerEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: AudioPlayerEvent.self)
        let ended = shared.withLock { s -> Bool in
            guard s.result == nil else { return true }
            let key = s.nextSubscriber
            s.nextSubscriber += 1
            s.subscribers[key] = continuation
            continuation.onTermination = { [weak self] _ in self?.shared.withLock { _ = $0.subscribers.removeValue(forKey: key) } }
            return false
        }
        if ended { continuation.finish() }
        return stream
    }

    /// Where playback is, as it changes, until playback ends: a time observer, as AVPlayer's
    /// periodic one. A value comes at once, then every `interval` (at least 10 ms) while sound
    /// plays, and whenever the state changes (a seek, a pause, an item heard). Nothing comes
    /// while the position stands still (paused, buffering), so nothing wakes then either.
    public func positions(every interval: Duration) -> AsyncStream<Status> {
        let period = max(interval, .milliseconds(10))
        let (stream, continuation) = AsyncStream.makeStream(of: Status.self)
        let key = shared.withLock { s -> Int? in
            guard s.result == nil else { return nil }
            let key = s.nextSubscriber
            s.nextSubscriber += 1
            s.positionObservers[key] = PositionObserver(period: period, continuation: continuation)
            return key
        }
        guard let key else {
            continuation.yield(status)
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.shared.withLock { _ = $0.positionObservers.removeValue(forKey: key) }
            self.work.async { self.positionTicks.removeValue(forKey: key)?.cancel() }
        }
        report(status, to: key)
        work.async { [self] in schedulePositionTick(key) }
        return stream
    }

    /// The player's state now (the state of the item heard).
    public var playerState: AudioPlayerState { shared.withLock { $0.machine.state } }

    /// The state of every item in the list, in order.
    public var itemStates: [AudioPlayerItemState] {
        shared.withLock { s in s.items.map { s.machine.itemStates[$0.id] ?? .queued } }
    }

    /// Level meters of what is heard (one per output channel), once ``isMeteringEnabled``.
    public var levelMeters: [AudioLevelMeter] { shared.withLock { $0.queue }?.currentLevelMeters ?? [] }

    /// Whether the output's level is metered (``levelMeters``).
    public var isMeteringEnabled: Bool {
        get { shared.withLock { $0.metering } }
        set {
            let queue = shared.withLock { s -> AudioQueue? in s.metering = newValue; return s.queue }
            queue?.isLevelMeteringEnabled = newValue
        }
    }

    // MARK: control

    /// Plays the list `loops` times and returns when all has been heard (or ``stop()``), with
    /// the frames handed to the sink. Cancelling the task stops playback. Blocks no thread.
    /// On a player whose playback ended it plays the list again from the start (``replay()``).
    /// - Throws: ``AudioPlayerError``: what failed, for which item; what was decoded before it has played.
    @discardableResult
    public func play() async throws -> Int64 {
        if shared.withLock({ $0.result != nil }) { return try await replay() }
        return try await playToTheEnd()
    }

    /// Plays the list again from the first item after playback ended (finished, failed or
    /// stopped), as ``play()`` does the first time; while it plays, the same as ``play()``.
    @discardableResult
    public func replay() async throws -> Int64 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            work.async { [self] in
                resetForReplay()
                continuation.resume()
            }
        }
        return try await playToTheEnd()
    }

    /// Begins (once) and waits for the end; cancelling the task stops playback.
    private func playToTheEnd() async throws -> Int64 {
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
        guard let result = outcome.withLock({ $0 }) else { return 0 }
        return try result.get()
    }

    /// Stops now (from any thread); ``play()`` returns soon after.
    public func stop() {
        shared.withLock { $0.machine.requestStop() }
        work.async { [self] in
            feeder = nil
            act { $0.stop() }
        }
    }

    /// Pauses playback (enqueueing ahead goes on up to the buffer limit).
    public func pause() {
        perform(shared.withLock { $0.machine.pause() })
    }

    /// Resumes after ``pause()``.
    public func resume() {
        perform(shared.withLock { $0.machine.resume() })
        work.async { [self] in
            if !shared.withLock({ $0.machine.queueStarted }) { evaluateBuffer(waiting: true) }
            scheduleHeardCheck()
        }
    }

    /// Moves to `seconds` into the item heard now (frame-exact): what was enqueued is dropped and
    /// the item is fed again from there; what plays from then on equals a render of the item from
    /// that frame.
    /// - Returns: the position reached, in seconds into the item (`seconds`, rounded to a frame;
    ///   the item's end when `seconds` is past it), once the item's source has planned the start.
    /// - Throws: ``AudioPlayerError`` (`request`) before playback began or after it ended, and
    ///   for a live item (its source says it cannot seek): then nothing is dropped and playback goes on; the item's
    ///   error when it cannot be read from there.
    @discardableResult
    public func seek(to seconds: Double) async throws -> Double {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Double, any Error>) in
            work.async { [self] in
                let now = status
                let fedSeekable = feeder?.source.isSeekable ?? true
                let live = shared.withLock { s -> Bool in
                    let seekable = s.timeline.seekable(index: now.fileIndex) ?? fedSeekable
                    return s.machine.phase == .running && !seekable
                }
                if let index = now.fileIndex, live {
                    let name = shared.withLock { $0.items.indices.contains(index) ? $0.items[index].name : nil }
                    return continuation.resume(throwing: AudioPlayerError(.request, itemIndex: index, itemName: name,
                        underlying: AudioQueueError(.invalidRunState, "item \(index) is a live stream: it cannot seek; playback goes on")))
                }
                guard performJump(toItem: nil, seconds: max(seconds, 0)) else {
                    return continuation.resume(throwing: AudioPlayerError(.request, underlying: AudioQueueError(.invalidRunState,
                        "the player can seek only while it plays (after play(), before the end)")))
                }
                pendingSeeks.append(continuation)
                resolveSeeks()
            }
        }
    }

    /// Moves on to the next item now (the end, after the last one of the last loop).
    public func skip() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            work.async { [self] in
                let now = status
                let heardIndex = now.fileIndex ?? itemIndex
                let next = heardIndex + 1
                if next < shared.withLock({ $0.items.count }) {
                    if join != nil, now.fileIndex != nil {
                        // The item heard fades out from where it is while the next one fades in.
                        _ = performJump(toItem: heardIndex, seconds: now.position, fadingOut: true)
                    } else {
                        _ = performJump(toItem: next, seconds: 0)
                    }
                } else {
                    feeder = nil
                    act { $0.stop() }
                }
                continuation.resume()
            }
        }
    }

    /// Adds an item at the end of the list. It plays after the others, without a gap when it
    /// comes before the last one is decoded (else after the queue has played out).
    public func append(_ item: AudioPlayerItem) {
        work.async { [self] in insertOnWork(item, at: shared.withLock { $0.items.count }) }
    }

    /// Inserts an item at `index` (clamped to the list). One inserted before the item being fed
    /// is not played in this pass of the list.
    public func insert(_ item: AudioPlayerItem, at index: Int) {
        work.async { [self] in insertOnWork(item, at: index) }
    }

    /// Takes the item at `index` out of the list; the one heard or being fed is skipped.
    public func remove(at index: Int) {
        work.async { [self] in
            let (id, count) = shared.withLock { s -> (AudioPlayerItem.ID?, Int) in
                (s.items.indices.contains(index) ? s.items[index].id : nil, s.items.count)
            }
            guard let id else { return }
            let heardIndex = status.fileIndex
            if heardIndex == index || (feedingID == id && heardIndex == nil) {
                // The item heard (or about to be): on to the next, then out of the list.
                if index + 1 < count { _ = performJump(toItem: index + 1, seconds: 0) } else { feeder = nil; act { $0.stop() } }
            } else if feedingID == id {
                // Fed ahead, not heard yet: what is enqueued of it plays; the feeding moves on.
                if let feeder { timelineBeforeItem += feeder.framesKept }
                feeder = nil
                itemIndex -= 1
                if !advance() { finishInput() }
            }
            let removed = shared.withLock { s -> [PlayerMachine.Action] in
                s.items.removeAll { $0.id == id }
                s.timeline.itemRemoved(at: index)
                return s.machine.itemRemoved(id)
            }
            if itemIndex > index { itemIndex -= 1 }
            perform(removed, removedIndex: index)
            pump()
        }
    }

    /// On `work`: puts the item in the list; past the item fed last, the input goes on.
    private func insertOnWork(_ item: AudioPlayerItem, at requested: Int) {
        let actions = shared.withLock { s -> [PlayerMachine.Action] in
            let index = min(max(requested, 0), s.items.count)
            s.items.insert(item, at: index)
            s.timeline.itemInserted(at: index)
            if index <= itemIndex && (feedingID != nil || s.machine.inputDone) && index < s.items.count - 1 { itemIndex += 1 }
            return s.machine.itemAdded(item.id)
        }
        perform(actions)
        // Items past the one fed last: the input goes on (or after the drain).
        if shared.withLock({ $0.machine.inputDone && itemIndex < $0.items.count }) {
            if loop >= loops { loop = loops - 1 }
            act { $0.moreInput() }
            pump()
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

    /// The speaker of each channel the sink plays (and `record` receives), as the first item's
    /// container says (a WAV's channel mask; AAC and ALAC's own order); nil before playback
    /// begins, or when the container does not say.
    public var channelLayout: AudioChannelLayout? { shared.withLock { $0.channelLayout } }

    /// What is heard now. Before the first frame of an item is heard (at the start, right after a
    /// seek) the item being fed gives the position it starts at and its duration (once its
    /// container told it).
    public var status: Status {
        shared.withLock { s in
            s.timeline.status(heard: s.timeline.marks.isEmpty ? nil : s.queue?.currentTime().sampleTime, titles: s.streamTitles,
                              outputFormat: s.queue?.sinkStreamFormat)
        }
    }

    // MARK: events and actions

    /// Decides under the lock, acts after it.
    private func act(_ decide: (inout PlayerMachine) -> [PlayerMachine.Action]) {
        perform(shared.withLock { decide(&$0.machine) })
    }

    private func perform(_ actions: [PlayerMachine.Action], removedIndex: Int? = nil) {
        for action in actions {
            switch action {
            case .publish(let state):
                emit(.state(state))
                reportPositions()
            case .publishItem(let id, let state):
                let index = shared.withLock { s in s.items.firstIndex { $0.id == id } } ?? removedIndex ?? -1
                emit(.itemState(index: index, id: id, state))
                if state == .playing { emit(.itemStarted(index: index)) }
                reportPositions()
            case .openItem:
                openItem()
            case .startQueue(let play):
                startQueue(play: play)
            case .resumeQueue:
                try? shared.withLock({ $0.queue })?.start()
            case .pauseQueue:
                try? shared.withLock({ $0.queue })?.pause()
            case .finishQueue:
                finishQueue()
            case .stopQueue:
                do { try queue?.stop(immediately: false) } catch { fail(AudioPlayerError(.sink, underlying: error), playOut: false) }
            case .restartRun:
                restartRun()
            case .disposeQueue:
                shared.withLock({ $0.queue })?.dispose(immediately: true)
            case .complete:
                complete()
            }
        }
    }

    private func emit(_ event: AudioPlayerEvent) {
        let subscribers = shared.withLock { s -> [AsyncStream<AudioPlayerEvent>.Continuation] in
            if case .streamTitle(let title, let index) = event, s.items.indices.contains(index) { s.streamTitles[s.items[index].id] = title }
            return Array(s.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(event) }
        eventHandler?(event)
    }

    /// The context a source of an item reports through: its events get the item's index here.
    private func context(forItem id: AudioPlayerItem.ID) -> AudioSourceContext {
        AudioSourceContext(report: { [weak self] event in
            guard let self else { return }
            let index = self.shared.withLock { s in s.items.firstIndex { $0.id == id } } ?? -1
            switch event {
            case .state(let state): self.act { $0.sourceReported(state, item: id) }
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
            if record != nil && outputFormat == .itemFormat && shared.withLock({ $0.machine.phase == .ready }) {
                // The recording has one format; with the sink reopened per item it would change under it.
                return fail(AudioPlayerError(.request, underlying: AudioQueueError(.invalidParameter,
                    "record needs one output format: use .firstItem or .fixed, not .itemFormat")), playOut: false)
            }
            if join != nil && outputFormat == .itemFormat {
                return fail(AudioPlayerError(.request, underlying: AudioQueueError(.invalidParameter,
                    "a crossfade mixes two items into one output format: use .firstItem or .fixed, not .itemFormat")), playOut: false)
            }
            let hasItems = shared.withLock { !$0.items.isEmpty }
            act { $0.begin(hasItems: hasItems) }
        }
    }

    /// Opens the item at `itemIndex`, `nextStart` seconds in; a failure to open ends the input there.
    private func openItem(fadingOut: Bool = false) {
        let item = shared.withLock { s in s.items.indices.contains(itemIndex) ? s.items[itemIndex] : nil }
        guard let item else { return finishInput() }
        let seconds = nextStart
        nextStart = 0
        do {
            let source = try item.open(context(forItem: item.id))
            if let join {
                feeder = crossfadeFeeder(source, item: item, seconds: seconds, join: join, fadingOut: fadingOut)
            } else {
                let packets = PacketFeeder(source: source, startSeconds: seconds, registry: decoders)
                // Every item sets its gain (the one before it stays in force otherwise); its tags'
                // gain once the source knows them.
                let (gain, settings) = (item.gain, replayGain)
                packets.parametersAtStart = { source in AudioQueueParameters(gain: Self.gain(gain, settings, source)) }
                feeder = packets
            }
            feedingID = item.id
            needsNewStream = queue != nil
            shared.withLock { $0.timeline.feeding = nil }
            act { $0.itemOpened(item.id) }
            for warning in source.warnings { emit(.itemWarning(index: itemIndex, id: item.id, warning)) }
        } catch {
            feedingID = item.id
            let failure = AudioPlayerError(.open, itemIndex: itemIndex, itemName: item.name, underlying: error)
            if skipFailedItem(failure) { return }
            fail(failure, item: item.id)
        }
        pump()
    }

    /// An item's gain: its own times what its tags say for `settings` (at most 16).
    static func gain(_ own: Float, _ settings: ReplayGainSettings?, _ source: any PacketSource) -> Float {
        guard let settings, settings.mode != .off else { return own }
        let tags = source.metadata.flatMap { ReplayGain(metadata: $0, format: source.format.formatID) }
        return min(own * settings.linearGain(tags), 16)
    }

    /// A crossfading item's feeder: decoded and converted to the output format (the first item's,
    /// or the fixed one); `fadingOut`: only its next D frames (the item heard, on a skip).
    private func crossfadeFeeder(_ source: any PacketSource, item: AudioPlayerItem, seconds: Double, join: CrossfadeJoin,
                                 fadingOut: Bool) -> CrossfadeItemFeeder {
        var target: (rate: Double, channels: Int)?
        if let format = join.format {
            target = (format.sampleRate, format.channelsPerFrame)
        } else if case .fixed(let rate, let channels) = outputFormat {
            target = (rate, channels)
        }
        let index = itemIndex, id = item.id
        let (decoders, resamplers, engines) = (self.decoders, self.resamplers, timePitchEngines)
        return CrossfadeItemFeeder(source: source, join: join, gain: Self.gain(item.gain, replayGain, source), limit: fadingOut ? Int64(join.frames) : nil,
                                   hasNext: { [unowned self] in itemIndex + 1 < shared.withLock { $0.items.count } || loop + 1 < loops },
                                   shortened: { [unowned self] frames in
                                       emit(.crossfadeShortened(index: index, id: id, frames: frames, requested: join.frames))
                                   }) { source in
            try PacketSourceRenderer(source: source, name: item.name, maximumPacketSize: source.maximumPacketSize,
                                     start: .seconds(seconds), sampleRate: target?.rate, channels: target?.channels,
                                     registry: decoders, resamplers: resamplers, timePitchEngines: engines)
        }
    }

    /// After the last item of a crossfading player: what its join still holds is enqueued (true), if anything.
    private func crossfadeTail(after previous: (any ItemFeeding)?) -> Bool {
        guard let join, let previous, join.heldFrames > 0 else { return false }
        feeder = CrossfadeItemFeeder(tailOf: previous.source, join: join)
        return true
    }

    /// With ``AudioPlayerItemFailurePolicy/skip``, reports the item being fed as failed and goes on
    /// with the next one (true); false when the policy stops, or no item is being fed.
    private func skipFailedItem(_ error: AudioPlayerError) -> Bool {
        guard onItemFailure == .skip, let id = feedingID, shared.withLock({ $0.result == nil }) else { return false }
        // Nothing of a failed item's source is read again: its enqueued frames play, the next item follows.
        act { $0.itemSkipped(id, error) }
        if advance() {
            pump()
        } else if queue == nil {
            // Every item failed before any audio: that is no success.
            fail(error, playOut: false)
        } else {
            finishInput()
        }
        return true
    }

    /// Moves to the next item (or the next loop); false at the end.
    private func advance() -> Bool {
        let previous = feeder
        if let feeder { timelineBeforeItem += feeder.framesKept }
        feeder = nil
        feedingID = nil
        itemIndex += 1
        let count = shared.withLock { $0.items.count }
        if itemIndex >= count {
            loop += 1
            guard loop < loops else { return crossfadeTail(after: previous) }
            itemIndex = 0
        }
        openItem()
        return feeder != nil
    }

    /// Enqueues into free buffers until they are all in the queue, the source waits, or the input ends.
    private func pump() {
        guard !shared.withLock({ $0.machine.inputDone }) else { return allDecodedIfSo() }
        do {
            while let feeder {
                let source = feeder.source
                if queue == nil {
                    guard source.isReady else { return }
                    do { try makeQueue(for: source, feeder: feeder) } catch {
                        throw AudioPlayerError(.decode, itemIndex: itemIndex, itemName: currentName, underlying: error)
                    }
                }
                guard let queue, let buffer = free.last else { break }
                if needsNewStream && join == nil {
                    guard source.isReady else { return }
                    try queue.beginStream(format: source.format, magicCookie: source.magicCookie)
                    needsNewStream = false
                }
                let before = feeder.framesKept
                let progress = try feeder.enqueueNext(buffer, on: queue)
                noteSource(feeder)
                if progress == .enqueued {
                    free.removeLast()
                    noteEnqueued(feeder, before: before)
                }
                resolveSeeks()
                switch progress {
                case .enqueued:
                    break
                case .waiting:
                    evaluateBuffer(waiting: true)
                    return
                case .finished:
                    if feeder.isTail || !advance() { finishInput() }
                }
            }
        } catch {
            let failure = error as? AudioPlayerError ?? AudioPlayerError(.read, itemIndex: itemIndex, itemName: currentName, underlying: error)
            if skipFailedItem(failure) { return }
            fail(failure, item: feedingID)
            return
        }
        evaluateBuffer(waiting: false)
    }

    private var currentName: String? { shared.withLock { s in s.items.indices.contains(itemIndex) ? s.items[itemIndex].name : nil } }

    /// The item being fed: its duration and rate, once its source is ready.
    private func noteSource(_ feeder: any ItemFeeding) {
        guard let id = feedingID, feeder.source.isReady else { return }
        let source = feeder.source
        shared.withLock { s in
            let feeding = s.timeline.feeding
            guard feeding?.id != id || (feeder.started && feeding?.start == 0 && feeder.startFrame > 0) else { return }
            let duration = source.duration
            s.timeline.feeding = .init(index: itemIndex, id: id, rate: source.format.sampleRate, frames: duration?.frames ?? 0,
                                       estimated: duration?.isEstimated ?? false, start: Double(feeder.startFrame) / source.format.sampleRate)
        }
    }

    /// Records where the item's first kept frame plays, once known.
    private func noteEnqueued(_ feeder: any ItemFeeding, before: Int64) {
        let source = feeder.source
        let end = timelineBeforeItem + feeder.framesKept
        let heard = queue?.currentTime().sampleTime ?? 0
        let added = shared.withLock { s -> Bool in
            s.timeline.enqueued(upTo: end, heard: heard)
            guard before == 0 && feeder.framesKept > 0, let id = feedingID else { return false }
            let duration = source.duration
            // On the timeline's frames (the output's when crossfading, each item's own otherwise).
            let scale = feeder.timelineRate / source.format.sampleRate
            func onTimeline(_ frames: Int64) -> Int64 { scale == 1 ? frames : Int64((Double(frames) * scale).rounded()) }
            s.timeline.add(.init(start: timelineBeforeItem + feeder.leadFrames, index: itemIndex, id: id, offset: onTimeline(feeder.startFrame),
                                rate: feeder.timelineRate, frames: onTimeline(duration?.frames ?? 0),
                                estimated: duration?.isEstimated ?? false, title: source.title, seekable: source.isSeekable))
            return true
        }
        if added { scheduleHeardCheck() }
    }

    /// Seeks waiting for their position: answered once the feeder has planned its start.
    private func resolveSeeks() {
        guard !pendingSeeks.isEmpty, let feeder, feeder.started else { return }
        let position = Double(feeder.startFrame) / feeder.source.format.sampleRate
        let waiting = pendingSeeks
        pendingSeeks.removeAll()
        for continuation in waiting { continuation.resume(returning: position) }
    }

    private func makeQueue(for source: any PacketSource, feeder: any ItemFeeding) throws {
        let sinkFormat: AudioQueue.SinkFormat
        switch outputFormat {
        case .firstItem: sinkFormat = .keepFirst
        case .fixed(let rate, let channels): sinkFormat = .fixed(sampleRate: rate, channels: channels)
        case .itemFormat: sinkFormat = .followDecoded
        }
        // A crossfading player enqueues PCM of the output format, which its first item decided.
        let crossfading = try (feeder as? CrossfadeItemFeeder).map { feeder in
            try feeder.prepare()
            guard let format = feeder.outputFormat else { throw AudioQueueError(.invalidRunState, "the first item decided no output format") }
            return format
        }
        let made = try AudioQueue(format: crossfading ?? source.format,
                                  configuration: .init(sink: makeSink(), decodeBufferFrames: 65536, callbackQueue: work,
                                                       decoderRegistry: decoders, resamplerRegistry: resamplers,
                                                       timePitchRegistry: timePitchEngines, sinkFormat: sinkFormat)) { [weak self] _, buffer in
            // On `work`: the buffer is free again.
            guard let self else { return }
            self.free.append(buffer)
            self.pump()
        }
        if crossfading == nil, let cookie = source.magicCookie { try made.setMagicCookie(cookie) }
        // The sink (and a recording) learn which speaker each channel is for.
        if let layout = source.channelLayout, layout.channelCount == source.format.channelsPerFrame, (try? made.setChannelLayout(layout)) != nil {
            shared.withLock { $0.channelLayout = layout }
        }
        let (volume, pan, metering) = shared.withLock { ($0.volume, $0.pan, $0.metering) }
        if volume != 1 || pan != 0 { try made.setParameters(.init(volume: volume, pan: pan)) }
        if metering { made.isLevelMeteringEnabled = true }
        if let timePitch {
            try made.setTimePitch(timePitch)
            let (rate, pitch) = shared.withLock { ($0.playRate, $0.pitch) }
            try made.setParameters(.init(playRate: rate, pitch: pitch))
        }
        bufferCount = max(4, Int((buffering.maximumSeconds / 0.5).rounded(.up)))
        // 32 KiB holds many packets of most formats; a format with larger packets (multichannel
        // ALAC) gets buffers that hold two of its largest, or four times a decoded packet's PCM.
        let largest = source.maximumPacketSize ?? source.format.framesPerPacket * source.format.channelsPerFrame * 4
        // PCM of a crossfade: half a second a buffer, as the compressed buffers hold about.
        let capacity = crossfading.map { Int(($0.sampleRate / 2).rounded(.up)) * $0.channelsPerFrame * 4 }
            ?? max(1 << 15, 2 * min(max(largest, 0), 1 << 22))
        for _ in 0..<bufferCount { free.append(try made.allocateBuffer(capacity: capacity, packetDescriptionCapacity: 128)) }
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
    private func evaluateBuffer(waiting: Bool) {
        guard let queue else { return }
        let ahead = shared.withLock { s -> Double in
            let heard = queue.currentTime().sampleTime
            return s.timeline.secondsAhead(of: heard, rate: queue.streamDescription.sampleRate)
        }
        // Every buffer in the queue (not merely none returned yet, as right after a seek), or
        // nothing more to come.
        let (inputDone, started) = shared.withLock { ($0.machine.inputDone, $0.machine.queueStarted) }
        if free.isEmpty, ahead <= 0, !inputDone, !started {
            // Every buffer is in the queue and none holds a frame to hear (a long pre-roll after a
            // seek, all trimmed): the queue decodes them now, so they come back for more packets.
            // (Waiting for audible frames in them would wait forever.)
            _ = try? queue.prime()
        }
        let enough = (free.isEmpty && ahead > 0) || inputDone
        act { $0.buffered(enough: enough, ahead: ahead, waiting: waiting, buffering: buffering) }
    }

    /// Primes the queue and starts it (`play`), installing the frame count and the caller's tap first.
    private func startQueue(play: Bool) {
        guard let queue else { return }
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
                if let record { box.set(SiphonRecorder(format: format, record: record)) }
                if let processingTap { try queue.installProcessingTap(processingTap.position, callback: processingTap.callback) }
            }
            if play { try queue.start() }
        } catch {
            fail(AudioPlayerError(.sink, underlying: error), playOut: false)
        }
    }

    private func handle(_ event: AudioQueueEvent, from source: AudioQueue) {
        guard source === queue else { return }
        switch event {
        case .error(let error) where error.code == .sinkError:
            fail(AudioPlayerError(.sink, underlying: error), playOut: false)
        case .underrun:
            // A stream that has not caught up: hold until enough is enqueued again.
            act { $0.underran() }
            schedulePositionTicks()
        case .runningChanged(let running):
            act { $0.runningChanged(running, queueStopping: source.isStopping) }
            if soundRunning { scheduleHeardCheck() }
            schedulePositionTicks()
        default:
            break
        }
    }

    // MARK: what is heard

    /// Reports the items whose first frame is heard by now, and schedules the next check for when
    /// the next item's first frame will be heard (from the timeline and the item's rate; checked
    /// again then, so a pause or an underrun meanwhile only moves it later).
    private func scheduleHeardCheck() {
        heardCheck?.cancel()
        heardCheck = nil
        guard soundRunning, let queue else { return }
        let now = queue.currentTime().sampleTime
        let (reached, next) = shared.withLock { $0.timeline.reached(by: now) }
        for id in reached { act { $0.itemHeard(id) } }
        guard let next else { return }
        let rate = Double(shared.withLock { $0.playRate })
        let seconds = Double(next.start - now) / next.rate / max(rate, 0.25)
        let check = DispatchWorkItem { [weak self] in self?.scheduleHeardCheck() }
        heardCheck = check
        work.asyncAfter(deadline: .now() + seconds + 0.002, execute: check)
    }

    // MARK: time observers

    /// Gives every time observer the status now.
    private func reportPositions() {
        let keys = shared.withLock { Array($0.positionObservers.keys) }
        guard !keys.isEmpty else { return }
        let now = status
        for key in keys { report(now, to: key) }
    }

    /// Gives observer `key` the status, unless it is the one it was given last.
    private func report(_ status: Status, to key: Int) {
        shared.withLock { s in
            guard let observer = s.positionObservers[key], observer.last != status else { return }
            s.positionObservers[key]?.last = status
            observer.continuation.yield(status)
        }
    }

    /// (Re)schedules every observer's next report: only while sound plays (the position moves).
    private func schedulePositionTicks() {
        for key in shared.withLock({ Array($0.positionObservers.keys) }) { schedulePositionTick(key) }
    }

    /// On `work`: the next report of observer `key`, one period from now while sound plays.
    private func schedulePositionTick(_ key: Int) {
        positionTicks.removeValue(forKey: key)?.cancel()
        guard soundRunning, let period = shared.withLock({ $0.positionObservers[key]?.period }) else { return }
        let tick = DispatchWorkItem { [weak self] in
            guard let self else { return }
            self.report(self.status, to: key)
            self.schedulePositionTick(key)
        }
        positionTicks[key] = tick
        let parts = period.components
        work.asyncAfter(deadline: .now() + Double(parts.seconds) + Double(parts.attoseconds) / 1e18, execute: tick)
    }

    // MARK: ending

    /// Every item is fed: the queue plays out what it has.
    private func finishInput() {
        act { $0.inputFinished(hasQueue: queue != nil) }
    }

    /// Starts the queue if it has not started, and stops it after what it holds once all of it is decoded.
    private func finishQueue() {
        feeder = nil
        feedingID = nil
        guard let queue else { return act { $0.noQueueToPlayOut() } }
        evaluateBuffer(waiting: false)
        let paused = shared.withLock { $0.machine.userPaused }
        do {
            if !queue.isRunning && !paused { try queue.start() }
        } catch {
            return fail(AudioPlayerError(.sink, underlying: error), playOut: false)
        }
        allDecodedIfSo()
    }

    /// After the input finished: once every buffer is back (all of it decoded), the queue may stop.
    private func allDecodedIfSo() {
        guard queue != nil, free.count == bufferCount else { return }
        act { $0.allDecoded() }
    }

    /// Items came while the queue played out: a new run of the queue feeds them.
    private func restartRun() {
        timelineBeforeItem = 0
        join?.reset()
        shared.withLock { s in
            s.timeline.restart(at: 0)
        }
        needsNewStream = true
        openItem()
    }

    /// A source or the sink failed: what was enqueued before plays out (a source's failure),
    /// then playback ends with the error.
    private func fail(_ error: AudioPlayerError, playOut: Bool = true, item: AudioPlayerItem.ID? = nil) {
        let waiting = pendingSeeks
        pendingSeeks.removeAll()
        for continuation in waiting { continuation.resume(throwing: error) }
        if let item {
            act { $0.itemFailed(item, error) }
        } else {
            act { $0.failed(error, playOut: playOut) }
        }
    }

    /// A seek in the item heard (`item` nil) or a jump to the start of another item. False when
    /// the player is not playing.
    private func performJump(toItem target: Int?, seconds: Double, fadingOut: Bool = false) -> Bool {
        guard let queue, shared.withLock({ $0.result == nil && $0.machine.phase == .running }) else { return false }
        let heardIndex = status.fileIndex ?? itemIndex
        let restarts = shared.withLock { $0.machine.stopIssued }
        // The queue's report that it stopped running (for the pause or stop here) is not the end of playback.
        let reportsStop = queue.isRunning || queue.isStopping
        act { $0.seekBegan(queueWillReportStop: reportsStop) }
        heardCheck?.cancel()
        do {
            if restarts {
                // The queue was told to stop after what it holds: stop it at once (its timeline restarts).
                try queue.stop(immediately: true)
            } else {
                try queue.pause()
                try queue.reset()
            }
        } catch {
            fail(AudioPlayerError(.sink, underlying: error), playOut: false)
            return true
        }
        // The frame reached, now that the queue stands: a skip's fade out starts there (not where
        // the status said before the pause, which the sink may have played past).
        let reached = queue.currentTime().sampleTime
        let start = fadingOut ? shared.withLock { $0.timeline.status(heard: reached, titles: [:], outputFormat: nil).position } : seconds
        // A stopped queue's timeline starts again from 0; a reset one goes on from the frame reached.
        timelineBeforeItem = restarts ? 0 : reached
        shared.withLock { s in
            s.timeline.restart(at: timelineBeforeItem)
        }
        let index = target ?? heardIndex
        if itemIndex != index { loop = max(loop - (index > itemIndex ? 1 : 0), 0) }
        itemIndex = index
        nextStart = start
        feeder = nil
        join?.reset()
        openItem(fadingOut: fadingOut)
        needsNewStream = true
        pump()
        return true
    }

    private func resetForReplay() {
        guard shared.withLock({ $0.result != nil }) else { return }
        queue?.dispose(immediately: true)
        queue = nil
        free.removeAll()
        feeder = nil
        feedingID = nil
        itemIndex = 0
        loop = 0
        needsNewStream = false
        join?.reset()
        tapInstalled = false
        timelineBeforeItem = 0
        nextStart = startSeconds
        framesHanded.frames.store(0, ordering: .relaxed)
        recorderBox.clear()
        shared.withLock { s in
            s.machine.reset(items: s.items.map(\.id))
            s.queue = nil
            s.timeline = PlayerTimeline()
            s.result = nil
        }
    }

    /// Ends playback (once): the waiters, the event streams.
    private func complete() {
        heardCheck?.cancel()
        for tick in positionTicks.values { tick.cancel() }
        positionTicks.removeAll()
        let played = framesHanded.frames.load(ordering: .relaxed)
        let (waiters, subscribers, observers, result) = shared.withLock { s in
            guard s.result == nil else { return ([@Sendable (Result<Int64, any Error>) -> Void](), [AsyncStream<AudioPlayerEvent>.Continuation](),
                                                  [AsyncStream<Status>.Continuation](), Result<Int64, any Error>?.none) }
            let result: Result<Int64, any Error> = s.machine.outcomeFailure.map { .failure($0) } ?? .success(played)
            s.result = result
            defer {
                s.waiters.removeAll()
                s.subscribers.removeAll()
                s.positionObservers.removeAll()
            }
            return (s.waiters, Array(s.subscribers.values), s.positionObservers.values.map(\.continuation), result)
        }
        guard let result else { return }
        recorderBox.recorder?.finish()
        let waiting = pendingSeeks
        pendingSeeks.removeAll()
        for continuation in waiting {
            continuation.resume(throwing: AudioPlayerError(.request, underlying: AudioQueueError(.invalidRunState, "playback ended before the seek took effect")))
        }
        for subscriber in subscribers { subscriber.finish() }
        for observer in observers { observer.finish() }
        for waiter in waiters { waiter(result) }
    }
}

/// The name the player had before it played streams and HLS too.
@available(*, deprecated, renamed: "AudioPlayer")
public typealias AudioFilePlayer = AudioPlayer

/// The recorder the siphon pushes to: set on the player's queue before the first render (the
/// queue's start orders the store before the render thread's loads), read lock-free there.
final class RecorderBox: Sendable {
    /// An `Unmanaged` reference to the recorder (0: none), retained while set.
    private let storage = Atomic<Int>(0)

    var recorder: SiphonRecorder? {
        let bits = storage.load(ordering: .acquiring)
        guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
        return Unmanaged<SiphonRecorder>.fromOpaque(pointer).takeUnretainedValue()
    }

    func set(_ recorder: SiphonRecorder) {
        let bits = Int(bitPattern: Unmanaged.passRetained(recorder).toOpaque())
        let old = storage.exchange(bits, ordering: .acquiringAndReleasing)
        if let pointer = UnsafeRawPointer(bitPattern: old) { Unmanaged<SiphonRecorder>.fromOpaque(pointer).release() }
    }

    /// Drops the recorder (between runs, when no render runs).
    func clear() {
        let old = storage.exchange(0, ordering: .acquiringAndReleasing)
        if let pointer = UnsafeRawPointer(bitPattern: old) { Unmanaged<SiphonRecorder>.fromOpaque(pointer).release() }
    }

    deinit { clear() }
}

/// A frame count shared with the render path.
final class FrameCounter: Sendable {
    let frames = Atomic<Int64>(0)
}
