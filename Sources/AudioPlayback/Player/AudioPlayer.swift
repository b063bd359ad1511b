import AudioFileStream
import BufferQueue
import Dispatch
import Synchronization

/// Plays a list of items (files, streams) through one ``/BufferQueue/AudioQueue`` and one sink, gaplessly.
///
/// One engine: a ``PacketFeeder`` per item puts its packets, with the item's trims, straight into
/// the playback queue; each item is a new stream of the queue
/// (``/BufferQueue/AudioQueue/beginStream(format:magicCookie:)``), so its decoder starts clean and the frames
/// of consecutive items join sample-exactly, whatever their codecs. The sink plays one format,
/// chosen by ``OutputFormat``: items of other rates or channel counts, and mid-stream rate
/// changes, are converted on the render path (register `SoxrConverter`), each item contributing
/// its valid frames converted to the output rate (±1 frame). ``OutputFormat/itemFormat`` reopens
/// the sink at each item's own format instead (bit-perfect, with a gap where it changes).
///
/// The list can change while it plays (``append(_:)``, ``insert(_:at:)``, ``remove(at:)``,
/// ``skip()``); every item has a state of its own (``AudioPlayerItemState``, reported as
/// ``AudioPlayerEvent/itemState(index:id:_:)``), and the player's state is the state of the item
/// heard. ``AudioPlayerEvent/itemStarted(index:id:outputFrame:gain:)`` means the item's first frame is heard.
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
public final class AudioPlayer: Sendable {
    /// The list now, in order (it changes with ``append(_:)``, ``insert(_:at:)``, ``remove(at:)``).
    public var items: [AudioPlayerItem] { shared.withLock { $0.items } }
    /// The items' names (paths or URLs).
    public var paths: [String] { items.map(\.name) }
    /// What the player was made with (``Configuration``).
    public let configuration: Configuration
    /// How many times the whole list plays.
    public var loops: Int { configuration.loops }
    /// Where in the first item playback starts.
    public var startSeconds: Double { configuration.startSeconds }
    /// How much is enqueued ahead.
    public var buffering: Buffering { configuration.buffering }
    /// The format the sink plays.
    public var outputFormat: OutputFormat { configuration.outputFormat }
    /// How play rate and pitch apply (nil: time-pitch off, the rate cannot change).
    public var timePitch: TimePitchAlgorithm? { configuration.timePitch }

    var timePitchEngines: TimePitchEngineRegistry { configuration.timePitchEngines }
    var decoders: AudioDecoderRegistry { configuration.decoders }
    var resamplers: AudioResamplerRegistry { configuration.resamplers }
    let makeSink: @Sendable () -> any AudioSink
    var record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? { configuration.record }
    var eventHandler: (@Sendable (AudioPlayerEvent) -> Void)? { configuration.onEvent }
    /// Where everything the player does with its queue happens, in order.
    let work = DispatchQueue(label: "AudioPlayback.player")

    // MARK: confined to `work`
    /// The feeding's state, reached only on `work`.
    let confined: QueueBound<PlayerFeed>
    /// The feeding's state (on `work` only: traps elsewhere).
    var feed: PlayerFeed { confined.value }
    /// The player's queue: the one reference, kept with the snapshot the getters read.
    var queue: AudioQueue? { shared.withLock { $0.queue } }
    /// The sink produces the queue's sound now (between `runningChanged(true)` and `(false)`).
    var soundRunning: Bool { shared.withLock { $0.machine.soundRunning } }

    // MARK: shared
    /// A time observer: its period, its stream, and the last value it was given (never given twice).
    struct PositionObserver {
        let period: Duration
        let continuation: AsyncStream<Status>.Continuation
        var last: Status?
    }

    struct Shared {
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
        var result: Result<Report, any Error>?
        var waiters: [@Sendable (Result<Report, any Error>) -> Void] = []
        /// What the report will say: the items skipped (in order), the warnings, the items heard.
        var skippedItems: [AudioPlayerError] = []
        var warnings: [Report.Warning] = []
        var itemsPlayed = 0
        /// Items just heard: where their first frame played on the output and their gain, for
        /// ``AudioPlayerEvent/itemStarted(index:id:outputFrame:gain:)``.
        var startsHeard: [AudioPlayerItem.ID: (output: Int64, gain: Float)] = [:]
        var subscribers: [Int: AsyncStream<AudioPlayerEvent>.Continuation] = [:]
        var nextSubscriber = 0
        /// The time observers: their period and stream.
        var positionObservers: [Int: PositionObserver] = [:]
    }
    let shared: Lock<Shared>
    /// Frames handed to the sink (counted by a siphon on the render path).
    let framesHanded = FrameCounter()
    /// The recording's hand-over, when `record` is given.
    let recorderBox = ObjectSlot<SiphonRecorder>()
    /// The loudness meter the output observer feeds, once ``installLoudnessMeter()`` made it.
    let loudnessSlot = ObjectSlot<OutputLoudness>()
    /// The meter asked for (it meters from the first frame once the output format is known).
    let loudnessRequest = Lock<AudioPlayerLoudnessMonitor?>(nil)

    /// A player of `items`, made as `configuration` says, that plays through the sink `makeSink`
    /// makes (called once, when playback begins: `AudioOutputDevice.makeSink` of the AudioOutput
    /// module, or a sink of your own).
    ///
    /// ```swift
    /// var configuration = AudioPlayer.Configuration()
    /// configuration.crossfade = try AudioPlayerCrossfade(seconds: 3)
    /// configuration.replayGain = ReplayGainSettings(mode: .auto, preamp: 3)
    /// configuration.effects = [.init(position: .postEffects, callback: equalizer.processingTapCallback)]
    /// let player = AudioPlayer(items: paths.map { .file($0) }, configuration: configuration) { PulseAudioSink() }
    /// ```
    public init(items: [AudioPlayerItem], configuration: Configuration = Configuration(),
                makeSink: @escaping @Sendable () -> any AudioSink) {
        var configuration = configuration
        configuration.loops = max(configuration.loops, 1)
        configuration.startSeconds = max(configuration.startSeconds, 0)
        configuration.transitionFade = configuration.transitionFade.isFinite ? min(max(configuration.transitionFade, 0), 0.1) : 0
        self.configuration = configuration
        self.makeSink = makeSink
        let crossfade = configuration.crossfade
        confined = QueueBound(PlayerFeed(join: crossfade.flatMap { $0.seconds > 0 ? CrossfadeJoin(crossfade: $0) : nil },
                                         start: configuration.startSeconds), on: work)
        var state = Shared(machine: PlayerMachine(items: items.map(\.id)), items: items)
        state.playRate = configuration.playRate
        state.pitch = configuration.pitch
        state.volume = configuration.volume
        state.pan = configuration.pan
        shared = Lock(state)
    }

    /// The initialiser before ``Configuration``: each of its parameters is the configuration's
    /// property of that name (`processingTap` is one of ``Configuration/effects``).
    @available(*, deprecated, message: "use init(items:configuration:makeSink:) with an AudioPlayer.Configuration")
    public convenience init(items: [AudioPlayerItem], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                            buffering: Buffering = Buffering(), outputFormat: OutputFormat = .firstItem,
                            makeSink: @escaping @Sendable () -> any AudioSink,
                            record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil,
                            onEvent: (@Sendable (AudioPlayerEvent) -> Void)? = nil,
                            timePitch: TimePitchAlgorithm? = nil, playRate: Float = 1, pitch: Float = 0,
                            pan: Float = 0, processingTap: ProcessingTap? = nil, onItemFailure: AudioPlayerItemFailurePolicy = .skip,
                            crossfade: AudioPlayerCrossfade? = nil, replayGain: ReplayGainSettings? = nil, transitionFade: Double = 0,
                            decoders: AudioDecoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
                            timePitchEngines: TimePitchEngineRegistry = .shared) {
        self.init(items: items, configuration: Configuration(
            loops: loops, startSeconds: startSeconds, volume: volume, pan: pan, buffering: buffering, outputFormat: outputFormat,
            crossfade: crossfade, transitionFade: transitionFade, replayGain: replayGain, effects: processingTap.map { [$0] } ?? [],
            onItemFailure: onItemFailure, timePitch: timePitch, playRate: playRate, pitch: pitch, record: record, onEvent: onEvent,
            decoders: decoders, resamplers: resamplers, timePitchEngines: timePitchEngines), makeSink: makeSink)
    }

    /// Plays local files (see ``AudioPlayerItem/file(_:)``).
    public convenience init(paths: [String], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                            makeSink: @escaping @Sendable () -> any AudioSink,
                            record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil) {
        self.init(items: paths.map { AudioPlayerItem.file($0) },
                  configuration: Configuration(loops: loops, startSeconds: startSeconds, volume: volume, record: record), makeSink: makeSink)
    }

    /// The caller's first processing tap (``Configuration/effects`` has them all).
    @available(*, deprecated, message: "use configuration.effects")
    public var processingTap: ProcessingTap? { configuration.effects.first }
    /// What happens when an item cannot be opened or read.
    public var onItemFailure: AudioPlayerItemFailurePolicy { configuration.onItemFailure }
    /// How items join (nil: gaplessly).
    public var crossfade: AudioPlayerCrossfade? { configuration.crossfade }
    /// How items' ReplayGain and R128 tags apply (nil: they do not).
    public var replayGain: ReplayGainSettings? { configuration.replayGain }
    /// Seconds of the fades at pause, resume, stop, seek and skip (0: none).
    public var transitionFade: Double { configuration.transitionFade }

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
            self.work.async { self.feed.positionTicks.removeValue(forKey: key)?.cancel() }
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
    /// what was played: the frames handed to the sink, the items played, the items skipped with
    /// their errors, the warnings (``Report``). Cancelling the task stops playback. Blocks no
    /// thread. On a player whose playback ended it plays the list again from the start (``replay()``).
    /// - Throws: ``AudioPlayerError`` when nothing could play (every item failed: the first
    ///   one's error), when the sink failed, or with ``AudioPlayerItemFailurePolicy/stop`` the
    ///   error that ended playback (what was decoded before it has played).
    @discardableResult
    public func play() async throws -> Report {
        if shared.withLock({ $0.result != nil }) { return try await replay() }
        return try await playToTheEnd()
    }

    /// Plays the list again from the first item after playback ended (finished, failed or
    /// stopped), as ``play()`` does the first time; while it plays, the same as ``play()``.
    @discardableResult
    public func replay() async throws -> Report {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            work.async { [self] in
                resetForReplay()
                continuation.resume()
            }
        }
        return try await playToTheEnd()
    }

    /// Begins (once) and waits for the end; cancelling the task stops playback.
    func playToTheEnd() async throws -> Report {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Report, any Error>) in
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
    public func run() throws -> Report {
        let done = DispatchSemaphore(value: 0)
        let outcome = Lock<Result<Report, any Error>?>(nil)
        whenDone { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        begin()
        done.wait()
        guard let result = outcome.withLock({ $0 }) else { return Report(framesPlayed: 0, itemsPlayed: 0, skipped: [], warnings: []) }
        return try result.get()
    }

    /// Stops now (from any thread); ``play()`` returns soon after.
    public func stop() {
        shared.withLock { $0.machine.requestStop() }
        work.async { [self] in
            afterFadingOut { [self] in
                feed.feeder = nil
                act { $0.stop() }
            }
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
                let fedSeekable = feed.feeder?.source.isSeekable ?? true
                let live = shared.withLock { s -> Bool in
                    let seekable = s.timeline.seekable(index: now.itemIndex) ?? fedSeekable
                    return s.machine.phase == .running && !seekable
                }
                if let index = now.itemIndex, live {
                    let name = shared.withLock { $0.items.indices.contains(index) ? $0.items[index].name : nil }
                    return continuation.resume(throwing: AudioPlayerError(.request, itemIndex: index, itemName: name,
                        underlying: AudioQueueError(.invalidRunState, "item \(index) is a live stream: it cannot seek; playback goes on")))
                }
                afterFadingOut { [self] in
                    // Waiting before the jump: its feeding may plan the start and feed the rest
                    // of the list at once (all of it fits in the free buffers), and the position
                    // is answered while its feeder is there.
                    feed.pendingSeeks.append(continuation)
                    guard performJump(toItem: nil, seconds: max(seconds, 0)) else {
                        // (Refused before anything ran: this one is still the last waiting.)
                        feed.pendingSeeks.removeLast()
                        return continuation.resume(throwing: AudioPlayerError(.request, underlying: AudioQueueError(.invalidRunState,
                            "the player can seek only while it plays (after play(), before the end)")))
                    }
                    resolveSeeks()
                }
            }
        }
    }

    /// Moves on to the next item now (the end, after the last one of the last loop).
    public func skip() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            work.async { [self] in
                let now = status
                let heardIndex = now.itemIndex ?? feed.itemIndex
                let next = heardIndex + 1
                if next < shared.withLock({ $0.items.count }) {
                    if feed.join != nil, now.itemIndex != nil {
                        // The item heard fades out from where it is while the next one fades in.
                        _ = performJump(toItem: heardIndex, seconds: now.position, fadingOut: true)
                        continuation.resume()
                    } else {
                        afterFadingOut { [self] in
                            _ = performJump(toItem: next, seconds: 0)
                            continuation.resume()
                        }
                    }
                } else {
                    afterFadingOut { [self] in
                        feed.feeder = nil
                        act { $0.stop() }
                        continuation.resume()
                    }
                }
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
            let heardIndex = status.itemIndex
            if heardIndex == index || (feed.feedingID == id && heardIndex == nil) {
                // The item heard (or about to be): on to the next, then out of the list.
                if index + 1 < count { _ = performJump(toItem: index + 1, seconds: 0) } else { feed.feeder = nil; act { $0.stop() } }
            } else if feed.feedingID == id {
                // Fed ahead, not heard yet: what is enqueued of it plays; the feeding moves on.
                if let feeder = feed.feeder { feed.timelineBeforeItem += feeder.framesKept }
                feed.feeder = nil
                feed.itemIndex -= 1
                if !advance() { finishInput() }
            }
            let removed = shared.withLock { s -> [PlayerMachine.Action] in
                s.items.removeAll { $0.id == id }
                s.timeline.itemRemoved(at: index)
                return s.machine.itemRemoved(id)
            }
            if feed.itemIndex > index { feed.itemIndex -= 1 }
            perform(removed, removedIndex: index)
            pump()
        }
    }

    /// On `work`: puts the item in the list; past the item fed last, the input goes on.
    func insertOnWork(_ item: AudioPlayerItem, at requested: Int) {
        let actions = shared.withLock { s -> [PlayerMachine.Action] in
            let index = min(max(requested, 0), s.items.count)
            s.items.insert(item, at: index)
            s.timeline.itemInserted(at: index)
            if index <= feed.itemIndex && (feed.feedingID != nil || s.machine.inputDone) && index < s.items.count - 1 { feed.itemIndex += 1 }
            return s.machine.itemAdded(item.id)
        }
        perform(actions)
        // Items past the one fed last: the input goes on (or after the drain).
        if shared.withLock({ $0.machine.inputDone && feed.itemIndex < $0.items.count }) {
            if feed.loop >= loops { feed.loop = loops - 1 }
            act { $0.moreInput() }
            pump()
        }
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

}

/// The name the player had before it played streams and HLS too.
@available(*, deprecated, renamed: "AudioPlayer")
public typealias AudioFilePlayer = AudioPlayer
