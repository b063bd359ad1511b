import Synchronization

/// The consumer end of the queue: turns the sample ring into output frames.
///
/// **Exactly one reader at a time.** The reader is either the sink's thread (through
/// ``render(into:frames:fillSilence:)``, only while the sink runs) or a holder of the queue's
/// pipeline lock (offline render, and control calls that discard or restart the timeline, only
/// while the sink does not pull) inside ``withExclusiveAccess(_:)``. Both sides claim ``reader``
/// with a compare-and-swap, so a second reader cannot act on the ring: a sink that pulls while the
/// control path holds the stage gets silence, an offline render while the sink pulls is refused,
/// and a control call that finds the sink still rendering after `pause()` returned (a broken sink)
/// stops the program with a message rather than corrupt the timeline. The reader-side state is
/// plain stored properties for that reason; everything shared with other threads is atomic.
/// Nothing here allocates, locks or blocks.
// @unchecked: reader-side fields belong to the one render thread (checked: a second reader traps); shared state is atomic.
final class RenderStage: @unchecked Sendable {
    /// Who reads the stage: nobody, the sink's thread, or the pipeline-lock holder.
    enum Reader: Int { case none = 0, sink = 1, exclusive = 2 }
    static let maxChannels = 64

    let ring: SampleRing
    let markers: MarkerRing
    /// Wakes the queue's worker; must be safe to call from a real-time thread.
    var notify: @Sendable () -> Void = {}
    /// Fault injection for tests: runs on the reader's thread after a render took its frames and
    /// before they count on the timeline (set before the sink starts; nil in normal use).
    var afterConsumeHook: (@Sendable () -> Void)?

    // MARK: written by the control path, read here
    /// Volume, pan, play rate, pitch and ramp: one block, one generation.
    let parameters = RenderParameters()
    /// Time-pitch bypass: the stretch passes frames through whatever the rate.
    let timePitchBypass = Atomic<Bool>(false)
    let meteringEnabled = Atomic<Bool>(false)
    let discardEpoch = Atomic<Int>(0)
    let discardPosition = Atomic<Int>(0)
    /// The timeline position a discard continues from.
    let discardTimeline = Atomic<Int>(0)
    let startGeneration = Atomic<Int>(0)
    /// Started and not paused: a short render then counts as an underrun.
    let playing = Atomic<Bool>(false)
    /// The output's hold, for a pause or seek without a click: odd asks the render to fade out
    /// over ``holdFadeFrames`` output frames and then give silence without taking frames (no
    /// frame is lost: the next render goes on from the next one); even lets it go on, fading in.
    let holdGeneration = Atomic<Int>(0)
    let holdFadeFrames = Atomic<Int>(0)

    // MARK: written here, read elsewhere
    let timelineFrames = Atomic<Int>(0)
    /// How often the timeline restarted at 0 (a run ended); changes only while no sink pulls.
    let timelineRestarts = Atomic<Int>(0)
    /// Silent frames rendered since the last frame of queue audio (underrun or past the end).
    let silenceFramesSinceAudio = Atomic<Int>(0)
    let startedGeneration = Atomic<Int>(0)
    /// The hold generation whose fade-out the render has finished (it gives silence now).
    let heldGeneration = Atomic<Int>(0)
    /// The start generation whose audio the sink reported as heard (sinks that report it).
    let heardGeneration = Atomic<Int>(0)
    /// Underruns, ends of stream rendered and resampler shortfalls, in the order they happened,
    /// for the worker to drain (``RenderEventRing``).
    let events = RenderEventRing()
    let waitingForFormat = Atomic<Bool>(false)
    /// Discontinuities (underruns, resets) so far; each timeline remembers how many it has seen.
    let discontinuities = Atomic<Int>(0)
    /// The format a render stopped at (valid while ``waitingForFormat``).
    let pendingChannels = Atomic<Int>(0)
    let pendingRate = Atomic<UInt64>(0)
    /// The current reader (a ``Reader`` raw value).
    let reader = Atomic<Int>(Reader.none.rawValue)
    /// ``channels`` as other threads may read it (a sink filling silence while it is not the reader).
    let publishedChannels: Atomic<Int>
    let meterChannels = Atomic<Int>(0)
    let meterPeak = AtomicFloats(count: RenderStage.maxChannels)
    let meterAverage = AtomicFloats(count: RenderStage.maxChannels)

    /// The sink keeps its format (``AudioQueue/SinkFormat/keepFirst`` or ``AudioQueue/SinkFormat/fixed(sampleRate:channels:)``)
    /// and no offline format is set: a decoded format change is converted with nodes the worker
    /// made ahead (``prepareNodes(sampleRate:channels:epoch:)``), swapped in without a gap.
    let convertsFormatChanges = Atomic<Bool>(false)
    /// The output target as the worker may read it (rate bits, channels; 0 channels: none).
    let targetRateBits = Atomic<UInt64>(0)
    let targetChannels = Atomic<Int>(0)
    /// The time-pitch algorithm as the worker may read it (see ``algorithmCode(_:)``).
    let publishedAlgorithm = Atomic<Int>(-1)
    /// Nodes made ahead for the format changes on their way; installed ones hold the nodes they
    /// replaced until the worker frees them (nothing is freed on the render thread).
    let prepared = Lock<[PreparedNodes]>([])

    /// Converter and play-rate node for one decoded format, made on the worker.
    struct PreparedNodes {
        let epoch: Int
        let sampleRate: Double
        let channels: Int
        var converter: ConversionNode?
        var rateNode: (any PlayRateNode)?
        let failure: AudioQueueError?
        var installed = false
    }

    /// Output frames rendered since the timeline began (``timelineFrames`` counts source frames;
    /// the two differ while a converter changes the rate).
    let outputFrames = Atomic<Int>(0)
    /// Source frames one output frame plays now (rate conversion and play rate), as Double bits:
    /// converts the sink's latency (output frames) to the timeline's frames.
    let sourceFramesPerOutputFrame = Atomic<UInt64>(Double(1).bitPattern)
    private var publishedScale: Double = 1

    // MARK: consumer-local
    /// The decoded format of the frames in the ring.
    private(set) var channels: Int
    private(set) var sampleRate: Double
    /// The format frames leave in: the decoded one, or the ``outputTarget``'s after conversion.
    private(set) var outputChannels: Int
    private(set) var outputRate: Double
    /// What the output must be (nil: the decoded format); set while no sink pulls.
    private(set) var outputTarget: (rate: Double, channels: Int)?
    /// What the sink plays when it keeps its format (nil: it follows the decoded format).
    private(set) var sinkTarget: (rate: Double, channels: Int)?
    /// Converts the decoded frames to the target (nil when they already match).
    private(set) var converter: ConversionNode?
    /// Why the converter or the spectral play-rate node for the current decoded format could not
    /// be made (offline render throws it; a sink that reopens for the format reports it).
    private(set) var nodeFailure: AudioQueueError?
    let resamplers: AudioResamplerRegistry
    let timePitchEngines: TimePitchEngineRegistry
    let converterQuality: AudioConverterQuality
    /// Play rate with pitch kept (nil while time-pitch is off).
    private(set) var timeStretch: (any PlayRateNode)?
    /// The time-pitch algorithm in use (nil: off).
    private(set) var timePitchAlgorithm: TimePitchAlgorithm?
    /// The parameter block's generation last read, and the block as applied.
    private var parametersSeen = 0
    private var applied = RenderParameters.Values()
    /// The volume ramp's length, from the block.
    private var rampSeconds: Float = 0
    /// The play rate now (per-buffer rates included).
    private var playRate: Double = 1
    /// The pitch shift in cents now (per-buffer shifts included); only the spectral node applies it.
    private var pitch: Double = 0
    /// The stretch's lookahead already taken off the timeline.
    private var reportedLag = 0
    /// The processing taps installed, in order per position (nil: none).
    private(set) var taps: TapChain?
    /// Sees every output frame after the tap (a player's frame count and recording), beside the
    /// caller's one tap.
    private(set) var outputObserver: AudioQueue.OutputObserver?
    /// The stretch's input position of the pull in progress (where per-buffer rates apply).
    private var stretchPullBase = 0
    private var epochSeen = 0
    private var startSeen = 0
    private var volume: Float = 1
    /// The multiplier on the volume (``AudioQueueParameters/gain``): applied at once, no ramp.
    private var gainFactor: Float = 1
    private var volumeGoal: Float = 1
    private var volumeStep: Float = 0
    private var volumeRampLeft = 0
    private var pan: Float = 0
    private var panGoal: Float = 0
    private var panStep: Float = 0
    private var panRampLeft = 0
    private var hadAudio = false
    /// A frame was rendered since the timeline began or the last discard: volume changes glide
    /// from then on; before it they apply at once (a fade-in from silence starts silent).
    private var renderedSinceDiscard = false
    private var holdAfterEnd = false
    /// Ends of stream this stage has passed, counted by its reader (an offline render compares
    /// the count before and after, to know that it rendered an end).
    private(set) var endsPassed = 0
    /// The output hold's side here: the hold generation seen, whether the fade-out is done (the
    /// render takes no frames), and the gain the last frame was given.
    private var holdSeen = 0
    private var outputHeld = false
    private var fadeGain: Float = 1
    /// The fade under way: from `fadeFrom` to `fadeTo` over `fadeLength` frames, `fadeLeft` to go
    /// (each frame's gain computed from its index, not summed, so a full fade's i-th is 1 - i/N).
    private var fadeFrom: Float = 1
    private var fadeTo: Float = 1
    private var fadeLength = 0
    private var fadeLeft = 0
    /// Set when a format change swapped in prepared nodes during this render.
    private var nodesChanged = false
    private let meterScratch: UnsafeMutablePointer<Float>
    /// The render chain's running totals while a render is under way (see ``renderChain(into:frames:consumed:signal:)``).
    private var chainConsumed = 0
    private var chainSignal = false
    /// What a pre-effects tap pulls (the ring) and what a post-effects tap pulls (everything
    /// before it): made once, at init.
    private var preTapSource: PullSource = { _, _ in (0, .starved) }
    private var postTapSource: PullSource = { _, _ in (0, .starved) }

    init(capacityFrames: Int, channels: Int, sampleRate: Double, resamplers: AudioResamplerRegistry = .shared,
         converterQuality: AudioConverterQuality = .veryHigh, timePitchEngines: TimePitchEngineRegistry = .shared) {
        self.timePitchEngines = timePitchEngines
        ring = SampleRing(minimumCapacity: max(capacityFrames, 256) * max(channels, 2))
        markers = MarkerRing(capacity: 4096)
        self.channels = channels
        self.sampleRate = sampleRate
        outputChannels = channels
        outputRate = sampleRate
        self.resamplers = resamplers
        self.converterQuality = converterQuality
        publishedChannels = Atomic(channels)
        meterScratch = .allocate(capacity: 2 * RenderStage.maxChannels)
        meterScratch.initialize(repeating: 0, count: 2 * RenderStage.maxChannels)
        preTapSource = { [unowned self] destination, wanted in self.chainSource(destination, wanted) }
        postTapSource = { [unowned self] destination, wanted in self.chainWithGain(destination, wanted) }
    }

    deinit { meterScratch.deallocate() }

    /// Steps over a format-change marker once the sink follows the new format; only while no sink pulls.
    func acceptFormatChange() {
        if let marker = markers.peek(), marker.kind == .formatChange, marker.epoch == epochSeen {
            channels = marker.channels
            sampleRate = marker.sampleRate
            markers.pop()
            formatChanged()
        }
        waitingForFormat.store(false, ordering: .releasing)
    }

    /// Installs or removes the processing tap; only while no sink pulls.
    func setTaps(_ list: [AudioQueueProcessingTap]) {
        taps = list.isEmpty ? nil : TapChain(taps: list, ring: preTapSource, processed: postTapSource)
    }

    /// Sets or removes the output observer; only while no sink pulls.
    func setOutputObserver(_ observer: AudioQueue.OutputObserver?) { outputObserver = observer }

    /// Turns time-pitch on with an algorithm, or off; only while no sink pulls.
    /// - Throws: when the spectral algorithm has no engine for the format.
    func setTimePitch(_ algorithm: TimePitchAlgorithm?) throws {
        timeStretch = try makeRateNode(algorithm)
        timePitchAlgorithm = algorithm
        publishedAlgorithm.store(Self.algorithmCode(algorithm), ordering: .releasing)
        let engines = timePitchEngines
        prepared.withLock { list in
            for index in list.indices where !list[index].installed {
                list[index].rateNode = try? Self.makeRateNode(algorithm, channels: list[index].channels,
                                                              sampleRate: list[index].sampleRate, engines: engines)
            }
        }
        reportedLag = 0
    }

    /// The decoded format changed (the nodes before it drained at the boundary): the play-rate
    /// node is made for the new format, the converter from it to the target.
    private func formatChanged() {
        nodeFailure = nil
        do {
            timeStretch = try makeRateNode(timePitchAlgorithm)
        } catch {
            // An engine that cannot take the new format: the rate has no effect from here on.
            timeStretch = nil
            nodeFailure = error as? AudioQueueError ?? AudioQueueError(.codecNotFound, "no time-pitch engine: \(error)")
        }
        rebuildConverter()
    }

    /// A play-rate node for `algorithm` and the decoded format (nil: time-pitch off).
    /// - Throws: when the spectral algorithm has no engine for the format.
    private func makeRateNode(_ algorithm: TimePitchAlgorithm?) throws -> (any PlayRateNode)? {
        let node = try Self.makeRateNode(algorithm, channels: channels, sampleRate: sampleRate, engines: timePitchEngines)
        node?.setRate(playRate)
        node?.setPitch(pitch)
        return node
    }

    private static func makeRateNode(_ algorithm: TimePitchAlgorithm?, channels: Int, sampleRate: Double,
                                     engines: TimePitchEngineRegistry) throws -> (any PlayRateNode)? {
        switch algorithm {
        case .timeDomain: return TimeStretchNode(channels: channels, sampleRate: sampleRate)
        case .varispeed: return VarispeedNode(channels: channels)
        case .spectral:
            return SpectralNode(engine: try engines.makeEngine(sampleRate: sampleRate, channels: channels), channels: channels)
        case nil: return nil
        }
    }

    static func algorithmCode(_ algorithm: TimePitchAlgorithm?) -> Int {
        switch algorithm {
        case .timeDomain: return 0
        case .varispeed: return 1
        case .spectral: return 2
        case nil: return -1
        }
    }

    static func algorithm(code: Int) -> TimePitchAlgorithm? {
        switch code {
        case 0: return .timeDomain
        case 1: return .varispeed
        case 2: return .spectral
        default: return nil
        }
    }

    /// Makes, on the worker, the nodes a decoded format of `sampleRate` and `channels` needs to
    /// reach the sink's format, before the producer publishes the change (so the render thread
    /// finds them when it reaches it). Only while ``convertsFormatChanges``.
    func prepareNodes(sampleRate: Double, channels: Int, epoch: Int) {
        guard convertsFormatChanges.load(ordering: .acquiring) else { return }
        let target = (rate: Double(bitPattern: targetRateBits.load(ordering: .acquiring)), channels: targetChannels.load(ordering: .acquiring))
        var converter: ConversionNode?
        var rateNode: (any PlayRateNode)?
        var failure: AudioQueueError?
        do {
            if target.rate != sampleRate || target.channels != channels {
                converter = try ConversionNode(from: (sampleRate, channels), to: target, quality: converterQuality, registry: resamplers)
            }
            rateNode = try Self.makeRateNode(Self.algorithm(code: publishedAlgorithm.load(ordering: .acquiring)),
                                             channels: channels, sampleRate: sampleRate, engines: timePitchEngines)
        } catch {
            failure = error as? AudioQueueError ?? AudioQueueError(.codecNotFound, "cannot convert \(sampleRate) Hz: \(error)")
        }
        let entry = PreparedNodes(epoch: epoch, sampleRate: sampleRate, channels: channels, converter: converter,
                                  rateNode: rateNode, failure: failure)
        // What is dropped is freed after the lock is released: the render thread only try-locks it.
        let dropped = prepared.withLock { list -> [PreparedNodes] in
            let stale = list.filter { $0.installed || $0.epoch < epoch }
            list.removeAll { $0.installed || $0.epoch < epoch }
            list.append(entry)
            return stale
        }
        _ = dropped
    }

    /// What ``installPreparedNodes(for:)`` found.
    private enum Installation { case installed, none, busy }

    /// Swaps in the nodes made for the format change at the front. Allocates and frees nothing.
    /// `.none`: none were made (the control path then reopens the sink); `.busy`: the worker holds
    /// the list for a moment (the next render tries again).
    private func installPreparedNodes(for marker: RenderMarker) -> Installation {
        let installed: Bool? = prepared.withLockIfAvailable { list -> Bool in
            guard let index = list.firstIndex(where: { !$0.installed && $0.epoch == marker.epoch && $0.sampleRate == marker.sampleRate
                                                           && $0.channels == marker.channels }),
                  list[index].failure == nil else { return false }
            if let converter {
                let short = converter.takeShortfall()
                if short > 0 { events.push(.shortfall(frames: short)) }
            }
            swap(&list[index].converter, &converter)
            swap(&list[index].rateNode, &timeStretch)
            list[index].installed = true
            return true
        }
        guard let installed else { return .busy }
        guard installed else { return .none }
        channels = marker.channels
        sampleRate = marker.sampleRate
        timeStretch?.setRate(playRate)
        timeStretch?.setPitch(pitch)
        return .installed
    }

    /// Sets the format frames must leave in (nil: as decoded) and makes the converter; only while
    /// no sink pulls.
    /// - Throws: when a converter is needed and cannot be made (no resampler registered).
    func setOutputTarget(_ target: (rate: Double, channels: Int)?) throws {
        outputTarget = target ?? sinkTarget
        convertsFormatChanges.store(target == nil && sinkTarget != nil, ordering: .releasing)
        publishTarget()
        nodeFailure = nil
        rebuildConverter()
        if let nodeFailure { throw nodeFailure }
    }

    /// Sets the format the sink keeps (nil: it follows the decoded format); only while no sink
    /// pulls and no offline format is set.
    /// - Throws: when a converter is needed and cannot be made (no resampler registered).
    func setSinkTarget(_ target: (rate: Double, channels: Int)?) throws {
        sinkTarget = target
        try setOutputTarget(nil)
        // Format changes decoded before the target was known get their nodes now.
        markers.forEachPending { marker in
            guard marker.kind == .formatChange, marker.epoch == epochSeen else { return }
            prepareNodes(sampleRate: marker.sampleRate, channels: marker.channels, epoch: marker.epoch)
        }
    }

    private func publishTarget() {
        targetRateBits.store((outputTarget?.rate ?? 0).bitPattern, ordering: .releasing)
        targetChannels.store(outputTarget?.channels ?? 0, ordering: .releasing)
    }

    /// Makes the converter from the decoded format to the target (after either changed).
    private func rebuildConverter() {
        let target = outputTarget ?? (sampleRate, channels)
        outputRate = target.rate
        outputChannels = target.channels
        publishedChannels.store(outputChannels, ordering: .releasing)
        if target.rate == sampleRate && target.channels == channels {
            converter = nil
            return
        }
        do {
            converter = try ConversionNode(from: (sampleRate, channels), to: target, quality: converterQuality, registry: resamplers)
        } catch {
            converter = nil
            // Without a converter the frames leave as decoded (a sink reopens for them).
            outputRate = sampleRate
            outputChannels = channels
            publishedChannels.store(outputChannels, ordering: .releasing)
            nodeFailure = nodeFailure ?? error as? AudioQueueError ?? AudioQueueError(.codecNotFound, "cannot convert: \(error)")
        }
    }

    /// Takes a format change waiting at the very front (before any frame), so that a sink opens
    /// with the format of the first frames; only while no sink pulls.
    func adoptLeadingFormatChange() {
        applyDiscardIfNeeded()
        while let marker = markers.peek(), marker.epoch < epochSeen { markers.pop() }
        while let marker = markers.peek(), marker.kind == .formatChange, marker.epoch == epochSeen,
              marker.position <= ring.readPosition {
            channels = marker.channels
            sampleRate = marker.sampleRate
            markers.pop()
            formatChanged()
        }
        waitingForFormat.store(false, ordering: .releasing)
    }

    /// The format waiting at the front of the marker ring, if the render stopped at one.
    /// Safe from any thread: the render published it before setting ``waitingForFormat``.
    func pendingFormat() -> (channels: Int, sampleRate: Double)? {
        guard waitingForFormat.load(ordering: .acquiring) else { return nil }
        return (pendingChannels.load(ordering: .relaxed), Double(bitPattern: pendingRate.load(ordering: .relaxed)))
    }

    /// Runs `body` as the stage's only reader. The caller holds the queue's pipeline lock and the
    /// sink does not pull (it was never started, or `pause()` returned).
    func withExclusiveAccess<R>(_ body: () throws -> R) rethrows -> R {
        let claimed = reader.compareExchange(expected: Reader.none.rawValue, desired: Reader.exclusive.rawValue,
                                             ordering: .acquiringAndReleasing).exchanged
        precondition(claimed, "the sink rendered after pause() or close() returned: AudioSink contract broken (two readers of the render stage)")
        defer { reader.store(Reader.none.rawValue, ordering: .releasing) }
        return try body()
    }

    /// Like ``withExclusiveAccess(_:)`` but gives up (returns nil) when the sink holds the stage.
    func tryExclusiveAccess<R>(_ body: () throws -> R) rethrows -> R? {
        guard reader.compareExchange(expected: Reader.none.rawValue, desired: Reader.exclusive.rawValue,
                                     ordering: .acquiringAndReleasing).exchanged else { return nil }
        defer { reader.store(Reader.none.rawValue, ordering: .releasing) }
        return try body()
    }

    /// Restarts the timeline at zero (a start after a stop); only while no sink pulls.
    func resetTimeline() {
        timelineRestarts.add(1, ordering: .releasing)
        timelineFrames.store(0, ordering: .relaxed)
        outputFrames.store(0, ordering: .relaxed)
        converter?.reset()
        timeStretch?.reset()
        taps?.reset(siphons: true)
        reportedLag = 0
        silenceFramesSinceAudio.store(0, ordering: .relaxed)
        holdAfterEnd = false
        hadAudio = false
        renderedSinceDiscard = false
    }

    /// The sink's entry: renders as the sink reader; silence when another reader holds the stage.
    func render(into out: UnsafeMutablePointer<Float>, frames: Int, fillSilence: Bool) -> Int {
        guard reader.compareExchange(expected: Reader.none.rawValue, desired: Reader.sink.rawValue,
                                     ordering: .acquiringAndReleasing).exchanged else {
            if fillSilence { out.update(repeating: 0, count: frames * publishedChannels.load(ordering: .acquiring)) }
            return 0
        }
        defer { reader.store(Reader.none.rawValue, ordering: .releasing) }
        return renderAsReader(into: out, frames: frames, fillSilence: fillSilence)
    }

    /// What every render does first: takes a start, a discard and parameter changes. Returns
    /// whether the producer must be woken.
    private func beginRender() -> Bool {
        var signal = false
        let startGen = startGeneration.load(ordering: .acquiring)
        if startGen != startSeen {
            startSeen = startGen
            holdAfterEnd = false
            startedGeneration.store(startGen, ordering: .releasing)
            signal = true
        }
        if applyDiscardIfNeeded() { signal = true }  // freed ring space: the producer may go on
        pickUpParameterChanges()
        pickUpHold()
        return signal
    }

    /// Takes a change of the output's hold: a fade out from the level now (at once to silence when
    /// nothing was rendered since the last discard: there is nothing to fade), or a fade in.
    private func pickUpHold() {
        let generation = holdGeneration.load(ordering: .acquiring)
        guard generation != holdSeen else { return }
        holdSeen = generation
        let length = max(holdFadeFrames.load(ordering: .relaxed), 0)
        if generation & 1 == 1 {
            guard length > 0, renderedSinceDiscard, !outputHeld, fadeGain > 0 else {
                fadeGain = 0
                fadeLeft = 0
                outputHeld = true
                heldGeneration.store(generation, ordering: .releasing)
                return
            }
            startFade(to: 0, over: max(Int((fadeGain * Float(length)).rounded(.up)), 1))
        } else {
            outputHeld = false
            guard length > 0, fadeGain < 1 else { fadeGain = 1; fadeLeft = 0; return }
            startFade(to: 1, over: max(Int(((1 - fadeGain) * Float(length)).rounded(.up)), 1))
        }
    }

    private func startFade(to target: Float, over frames: Int) {
        fadeFrom = fadeGain
        fadeTo = target
        fadeLength = frames
        fadeLeft = frames
    }

    /// Whether a fade out is under way (a render then stops at its last frame).
    private var fadingOut: Bool { fadeLeft > 0 && fadeTo == 0 }

    /// Applies the hold's fade to `frames` rendered frames; the end of a fade out holds the output.
    private func applyHoldFade(_ samples: UnsafeMutablePointer<Float>, frames: Int, channels ch: Int) {
        guard fadeLeft > 0 || fadeGain != 1 else { return }
        var p = samples
        for _ in 0..<frames {
            if fadeLeft > 0 {
                fadeLeft -= 1
                let step = fadeLength - fadeLeft
                fadeGain = fadeLeft == 0 ? fadeTo : fadeFrom + (fadeTo - fadeFrom) * (Float(step) / Float(fadeLength))
            }
            for c in 0..<ch { p[c] *= fadeGain }
            p += ch
        }
        if fadeLeft == 0 && fadeGain == 0 && holdSeen & 1 == 1 && !outputHeld {
            outputHeld = true
            heldGeneration.store(holdSeen, ordering: .releasing)
        }
    }

    /// Whether an offline render may take frames past the ring (``renderStraight(into:frames:from:)``):
    /// nothing between the ring and the output but volume, pan, a siphon tap and the observer, and
    /// nothing holds the render.
    var takesFramesStraight: Bool {
        converter == nil && timeStretch == nil && taps?.processes != true
            && !holdAfterEnd && !waitingForFormat.load(ordering: .relaxed) && fadeGain == 1 && fadeLeft == 0 && !outputHeld
    }

    /// Renders frames that `produce` writes straight into `out` (an offline render whose producer
    /// converts linear PCM while the ring is empty): volume and pan, taps, observer, meters and
    /// the timeline apply to them as to frames read from the ring. `produce` gets the gains to
    /// apply as it writes (mono or stereo without a ramp), or nil when the stage applies them.
    /// The caller is the stage's reader and holds the pipeline lock. Returns the frames rendered.
    func renderStraight(into out: UnsafeMutablePointer<Float>, frames: Int,
                        from produce: (UnsafeMutablePointer<Float>, Int, (left: Float, right: Float)?) -> Int) -> Int {
        var signal = beginRender()
        guard takesFramesStraight, ring.readable == 0, markers.peek() == nil else {
            if signal { notify() }
            return 0
        }
        // Unity gains are left to `applyGain`, which skips them: the producer then copies plainly.
        var gains: (left: Float, right: Float)?
        if channels <= 2, let (left, right) = steadyGains(channels: channels), left != 1 || right != 1 { gains = (left, right) }
        let done = produce(out, frames, gains)
        if done > 0 && gains == nil { applyGain(out, frames: done, channels: channels) }
        finishRender(out, frames: done, done: done, consumed: done, fillSilence: false, blocked: false, signal: &signal)
        return done
    }

    /// Renders up to `frames` frames; the caller is the stage's reader.
    func renderAsReader(into out: UnsafeMutablePointer<Float>, frames asked: Int, fillSilence: Bool) -> Int {
        var signal = beginRender()
        let ch = outputChannels
        var done = 0
        var consumed = 0
        var blocked = holdAfterEnd || outputHeld || waitingForFormat.load(ordering: .relaxed)
        // A fade out ends exactly at its last frame: no frame past it is taken.
        let frames = fadingOut ? min(asked, fadeLeft) : asked
        // Once more after new nodes were swapped in at a format change.
        while !blocked && done < frames {
            nodesChanged = false
            if converter != nil || timeStretch != nil || taps?.processes == true {
                // In blocks: a volume or pan a buffer sets applies from the block its first frame reaches.
                while done < frames && !blocked {
                    let (n, end) = renderChain(into: out + done * ch, frames: min(frames - done, ConversionNode.blockFrames),
                                               consumed: &consumed, signal: &signal)
                    done += n
                    if end == .boundary {
                        converter?.passBoundary()
                        timeStretch?.passBoundary()
                        taps?.reset(siphons: false)
                        blocked = passBoundary(signal: &signal)
                    } else if end == .starved {
                        break
                    }
                }
            } else {
                let (n, end) = pullSource(into: out + done * ch, frames: frames - done, stopAtBoundaries: false, gain: true, signal: &signal)
                done += n
                consumed += n
                blocked = end == .boundary
            }
            guard nodesChanged else { break }
            blocked = false
        }
        if let converter {
            let short = converter.takeShortfall()
            if short > 0 { events.push(.shortfall(frames: short)); signal = true }
        }
        if done > 0 { applyHoldFade(out, frames: done, channels: ch) }
        // Past a fade out's end the rest is the hold's silence, not an underrun.
        if outputHeld { blocked = true }
        finishRender(out, frames: asked, done: done, consumed: consumed, fillSilence: fillSilence, blocked: blocked, signal: &signal)
        return done
    }

    /// What every render does last with the `done` frames it wrote to `out` (of `frames` asked
    /// for) from `consumed` source frames: taps and observer, the timeline, silence, underruns,
    /// meters, and waking the producer.
    private func finishRender(_ out: UnsafeMutablePointer<Float>, frames: Int, done: Int, consumed: Int, fillSilence: Bool,
                              blocked: Bool, signal: inout Bool) {
        let ch = outputChannels
        var consumed = consumed
        if timeStretch != nil || converter != nil {
            // The timeline follows what is heard: pulled input less what the stretch and the
            // converter hold (the converter's in the stretch's output frames: times the play rate).
            let lag = Int(((timeStretch?.lookahead ?? 0) + (converter?.lookahead ?? 0) * (timeStretch == nil ? 1 : playRate)).rounded())
            consumed -= lag - reportedLag
            reportedLag = lag
        }
        // Source frames per output frame, for the latency the sink reports in output frames.
        let scale = (timeStretch == nil ? 1 : playRate) * sampleRate / outputRate
        if scale != publishedScale {
            publishedScale = scale
            sourceFramesPerOutputFrame.store(scale.bitPattern, ordering: .relaxed)
        }
        if done > 0, let siphons = taps?.siphons { TapChain.siphon(from: siphons, out, frames: done) }
        if done > 0, let outputObserver { outputObserver(UnsafePointer(out), done) }
        if done > 0 || consumed > 0 {
            afterConsumeHook?()
            timelineFrames.add(consumed, ordering: .releasing)
            outputFrames.add(done, ordering: .releasing)
            hadAudio = true
            renderedSinceDiscard = true
            // Wake the producer once a quarter of the ring is free, not at every render call:
            // a few wake-ups per buffer, and three quarters of it left as slack.
            if ring.writable * 4 >= ring.capacity { signal = true }
        }
        if done < frames {
            if fillSilence {
                (out + done * ch).update(repeating: 0, count: (frames - done) * ch)
                let silent = frames - done
                if done > 0 { silenceFramesSinceAudio.store(silent, ordering: .relaxed) } else { silenceFramesSinceAudio.add(silent, ordering: .relaxed) }
            }
            if fillSilence && hadAudio && !blocked && playing.load(ordering: .relaxed) {
                hadAudio = false
                events.push(.underrun)
                discontinuities.add(1, ordering: .releasing)
                signal = true
            }
        } else {
            silenceFramesSinceAudio.store(0, ordering: .relaxed)
        }
        if meteringEnabled.load(ordering: .relaxed) {
            measure(out, frames: fillSilence ? frames : done, channels: ch)
        }
        if signal { notify() }
    }

    /// Pulls through the pre-effects tap, the time stretch, the converter, volume/pan and the
    /// post-effects tap (whichever are present).
    ///
    /// The steps are methods over ``chainConsumed`` and ``chainSignal`` rather than local
    /// functions, so that a tap's source can be a closure made once (``preTapSource``,
    /// ``postTapSource``): a tap keeps its source while the caller's callback runs, and turning a
    /// local function into a closure that may be kept allocates on every render.
    private func renderChain(into out: UnsafeMutablePointer<Float>, frames: Int, consumed: inout Int,
                             signal: inout Bool) -> (Int, PullEnd) {
        chainConsumed = consumed
        chainSignal = signal
        defer {
            consumed = chainConsumed
            signal = chainSignal
        }
        if let last = taps?.postEffects { return last.render(into: out, frames: frames) }
        return chainWithGain(out, frames)
    }

    private func chainSource(_ destination: UnsafeMutablePointer<Float>, _ wanted: Int) -> (Int, PullEnd) {
        stretchPullBase = timeStretch?.pullPosition ?? 0
        let pulled = pullSource(into: destination, frames: wanted, stopAtBoundaries: true, gain: false, signal: &chainSignal)
        chainConsumed += pulled.0
        return pulled
    }

    private func chainTapped(_ destination: UnsafeMutablePointer<Float>, _ wanted: Int) -> (Int, PullEnd) {
        guard let last = taps?.preEffects else { return chainSource(destination, wanted) }
        return last.render(into: destination, frames: wanted)
    }

    private func chainStretched(_ destination: UnsafeMutablePointer<Float>, _ wanted: Int) -> (Int, PullEnd) {
        guard let timeStretch else { return chainTapped(destination, wanted) }
        timeStretch.bypassed = timePitchBypass.load(ordering: .relaxed)
        return timeStretch.render(into: destination, frames: wanted) { self.chainTapped($0, $1) }
    }

    private func chainConverted(_ destination: UnsafeMutablePointer<Float>, _ wanted: Int) -> (Int, PullEnd) {
        guard let converter else { return chainStretched(destination, wanted) }
        return converter.render(into: destination, frames: wanted) { self.chainStretched($0, $1) }
    }

    private func chainWithGain(_ destination: UnsafeMutablePointer<Float>, _ wanted: Int) -> (Int, PullEnd) {
        let (n, end) = chainConverted(destination, wanted)
        // The item's gain was applied as the frames left the ring; volume and pan apply here.
        if n > 0 { applyGain(destination, frames: n, channels: outputChannels, withItemGain: false) }
        return (n, end)
    }

    /// Copies up to `frames` decoded frames from the ring, acting on the markers on the way.
    /// With `stopAtBoundaries` it stops in front of a flush, an end or a real format change
    /// (returning ``PullEnd/boundary``; the caller drains what it holds, then calls
    /// ``passBoundary(signal:)``); without, it acts on them at once.
    /// With `gain`, volume and pan apply as the frames are copied (exact to the frame).
    private func pullSource(into out: UnsafeMutablePointer<Float>, frames: Int, stopAtBoundaries: Bool, gain: Bool,
                            signal: inout Bool) -> (Int, PullEnd) {
        let ch = channels
        var done = 0
        while done < frames {
            if let marker = markers.peek() {
                if marker.epoch < epochSeen { markers.pop(); signal = true; continue }
                if marker.epoch > epochSeen { return (done, .starved) }  // a reset is being published; take it next call
                if marker.position <= ring.readPosition {
                    switch marker.kind {
                    case .bufferStart where (!marker.rate.isNaN || !marker.pitch.isNaN) && stopAtBoundaries
                                            && timeStretch != nil && done > 0:
                        // A buffer with its own rate or pitch: the stretch takes its frames from the
                        // next pull on, so that the change applies at its first frame.
                        return (done, .filled)
                    case .bufferStart:
                        if !marker.volume.isNaN { setVolumeGoal(marker.volume) }
                        if !marker.gain.isNaN { gainFactor = marker.gain }
                        if !marker.pan.isNaN { setPanGoal(marker.pan) }
                        if !marker.pitch.isNaN {
                            pitch = Double(marker.pitch)
                            timeStretch?.setPitch(pitch)
                        }
                        if !marker.rate.isNaN {
                            playRate = Double(marker.rate)
                            // The stretch applies it at this frame's input position.
                            if stopAtBoundaries, let timeStretch {
                                timeStretch.scheduleRate(playRate, at: stretchPullBase + done)
                                markers.pop()
                                signal = true
                                return (0, .filled)
                            }
                        }
                        markers.pop()
                        signal = true
                        continue
                    case .formatChange where marker.channels == channels && marker.sampleRate == sampleRate:
                        markers.pop()
                        signal = true
                        continue
                    case .flush where !stopAtBoundaries:
                        markers.pop()
                        continue
                    case .endOfStream, .formatChange, .flush:
                        if stopAtBoundaries { return (done, .boundary) }
                        if passBoundary(signal: &signal) { return (done, .boundary) }
                        continue
                    }
                }
            }
            var available = ring.readable
            if let marker = markers.peek(), marker.epoch == epochSeen {
                available = min(available, marker.position - ring.readPosition)
            }
            let count = min(frames - done, available / ch)
            if count <= 0 { return (done, .starved) }
            let destination = out + done * ch
            if gain, ch <= 2, let (left, right) = steadyGains(channels: ch), left != 1 || right != 1 {
                // One pass: the gain is applied while copying out. The run starts on a frame, but
                // the ring's wrap may fall inside one (after a stretch of an odd number of mono
                // samples): the second piece's channel follows from its offset in the run.
                ring.consume(count: count * ch) { source, offset, n in
                    let target = destination + offset
                    if ch == 1 {
                        for i in 0..<n { target[i] = source[i] * left }
                    } else {
                        var i = 0
                        if offset & 1 == 1, n > 0 {
                            target[0] = source[0] * right
                            i = 1
                        }
                        while i + 1 < n {
                            target[i] = source[i] * left
                            target[i + 1] = source[i + 1] * right
                            i += 2
                        }
                        if i < n { target[i] = source[i] * left }
                    }
                }
            } else {
                ring.consume(count: count * ch) { source, offset, n in (destination + offset).update(from: source, count: n) }
                if gain {
                    applyGain(destination, frames: count, channels: ch)
                } else if gainFactor != 1 {
                    // The item's gain belongs to its frames: applied here, at the frame its buffer
                    // set it, before every tap and node that follows (they see what is heard).
                    let factor = gainFactor
                    for i in 0..<(count * ch) { destination[i] *= factor }
                }
            }
            done += count
        }
        return (done, .filled)
    }

    /// Acts on the boundary marker at the front: an end holds the output, a format change waits
    /// for the control path, a flush is passed. Returns whether rendering must stop.
    private func passBoundary(signal: inout Bool) -> Bool {
        guard let marker = markers.peek(), marker.epoch == epochSeen, marker.position <= ring.readPosition else { return false }
        switch marker.kind {
        case .endOfStream:
            markers.pop()
            holdAfterEnd = true
            endsPassed &+= 1
            events.push(.endOfStream)
            signal = true
            return true
        case .formatChange:
            if marker.channels == channels && marker.sampleRate == sampleRate {
                markers.pop()
                signal = true
                return false
            }
            if convertsFormatChanges.load(ordering: .relaxed) && reader.load(ordering: .relaxed) == Reader.sink.rawValue {
                switch installPreparedNodes(for: marker) {
                case .installed:
                    // Converted to the sink's format without a gap: render on with the new nodes.
                    markers.pop()
                    signal = true
                    nodesChanged = true
                    return true
                case .busy:
                    return true   // stop here; the next render finds the list free
                case .none:
                    break
                }
            }
            pendingChannels.store(marker.channels, ordering: .relaxed)
            pendingRate.store(marker.sampleRate.bitPattern, ordering: .relaxed)
            waitingForFormat.store(true, ordering: .releasing)
            signal = true
            return true
        case .flush:
            markers.pop()
            return false
        case .bufferStart:
            return false
        }
    }

    /// Takes a discard published by a reset or stop: skips the discarded samples and clears ramps and
    /// meters. Called at the start of every render and by the control path while no sink pulls.
    @discardableResult
    func applyDiscardIfNeeded() -> Bool {
        let epoch = discardEpoch.load(ordering: .acquiring)
        guard epoch != epochSeen else { return false }
        epochSeen = epoch
        ring.skip(to: discardPosition.load(ordering: .acquiring))
        converter?.reset()
        timeStretch?.reset()
        taps?.reset(siphons: true)
        reportedLag = 0
        timelineFrames.store(discardTimeline.load(ordering: .acquiring), ordering: .releasing)
        silenceFramesSinceAudio.store(0, ordering: .relaxed)
        while let marker = markers.peek(), marker.epoch < epoch { markers.pop() }
        volume = volumeGoal; volumeRampLeft = 0
        pan = panGoal; panRampLeft = 0
        hadAudio = false
        renderedSinceDiscard = false
        waitingForFormat.store(false, ordering: .relaxed)
        discontinuities.add(1, ordering: .releasing)
        for c in 0..<RenderStage.maxChannels { meterPeak[c] = 0; meterAverage[c] = 0 }
        return true
    }

    private func pickUpParameterChanges() {
        let generation = parameters.generation
        guard generation != parametersSeen, let block = parameters.read(at: generation) else { return }
        parametersSeen = generation
        rampSeconds = block.rampSeconds
        if block.volumeSets != applied.volumeSets { setVolumeGoal(block.volume) }
        if block.panSets != applied.panSets { setPanGoal(block.pan) }
        if block.gainSets != applied.gainSets { gainFactor = block.gain }
        if block.playRateSets != applied.playRateSets {
            playRate = Double(block.playRate)
            timeStretch?.setRate(playRate)
        }
        if block.pitchSets != applied.pitchSets {
            pitch = Double(block.pitch)
            timeStretch?.setPitch(pitch)
        }
        applied = block
    }

    private var rampFrames: Int {
        rampSeconds > 0 ? Int((Double(rampSeconds) * outputRate).rounded()) : 0
    }

    private func setVolumeGoal(_ goal: Float) {
        volumeGoal = goal
        let n = rampFrames
        if n <= 0 || goal == volume || !renderedSinceDiscard { volume = goal; volumeRampLeft = 0 } else { volumeStep = (goal - volume) / Float(n); volumeRampLeft = n }
    }

    private func setPanGoal(_ goal: Float) {
        panGoal = goal
        let n = rampFrames
        if n <= 0 || goal == pan || !renderedSinceDiscard { pan = goal; panRampLeft = 0 } else { panStep = (goal - pan) / Float(n); panRampLeft = n }
    }

    /// The left and right gains when no volume or pan ramp is running (nil while one is).
    @inline(__always)
    private func steadyGains(channels ch: Int) -> (Float, Float)? {
        guard volumeRampLeft == 0 && panRampLeft == 0 else { return nil }
        let level = volume * gainFactor
        return (ch >= 2 ? level * Self.panGain(pan, channel: 0) : level, level * Self.panGain(pan, channel: 1))
    }

    /// Multiplies frames in place by volume and pan (balance on channels 0 and 1), and by the
    /// item's gain unless it was applied already (`withItemGain` false: the frames went through
    /// the render chain, which applies it as they leave the ring).
    private func applyGain(_ samples: UnsafeMutablePointer<Float>, frames: Int, channels ch: Int, withItemGain: Bool = true) {
        let itemGain = withItemGain ? gainFactor : 1
        if volumeRampLeft == 0 && panRampLeft == 0 {
            let level = volume * itemGain
            let left = ch >= 2 ? level * Self.panGain(pan, channel: 0) : level
            let right = level * Self.panGain(pan, channel: 1)
            if left == 1 && (ch == 1 || (right == 1 && level == 1)) { return }
            if ch == 1 {
                for i in 0..<frames { samples[i] *= left }
            } else if ch == 2 {
                for i in 0..<frames { samples[2 * i] *= left; samples[2 * i + 1] *= right }
            } else {
                for i in 0..<frames {
                    let frame = samples + i * ch
                    frame[0] *= left; frame[1] *= right
                    for c in 2..<ch { frame[c] *= level }
                }
            }
            return
        }
        for i in 0..<frames {
            if volumeRampLeft > 0 {
                volumeRampLeft -= 1
                volume = volumeRampLeft == 0 ? volumeGoal : volume + volumeStep
            }
            if panRampLeft > 0 {
                panRampLeft -= 1
                pan = panRampLeft == 0 ? panGoal : pan + panStep
            }
            let frame = samples + i * ch, level = volume * itemGain
            if ch == 1 { frame[0] *= level; continue }
            frame[0] *= level * Self.panGain(pan, channel: 0)
            frame[1] *= level * Self.panGain(pan, channel: 1)
            if ch > 2 { for c in 2..<ch { frame[c] *= level } }
        }
    }

    /// Balance: panning right attenuates the left channel linearly and vice versa.
    @inline(__always)
    static func panGain(_ pan: Float, channel: Int) -> Float {
        switch channel {
        case 0: return pan > 0 ? 1 - pan : 1
        case 1: return pan < 0 ? 1 + pan : 1
        default: return 1
        }
    }

    private func measure(_ samples: UnsafeMutablePointer<Float>, frames: Int, channels ch: Int) {
        guard frames > 0, ch <= RenderStage.maxChannels else { return }
        let peak = meterScratch, sum = meterScratch + RenderStage.maxChannels
        peak.update(repeating: 0, count: ch)
        sum.update(repeating: 0, count: ch)
        for i in 0..<frames {
            let frame = samples + i * ch
            for c in 0..<ch {
                let v = frame[c]
                peak[c] = max(peak[c], abs(v))
                sum[c] += v * v
            }
        }
        for c in 0..<ch {
            meterPeak[c] = peak[c]
            meterAverage[c] = (sum[c] / Float(frames)).squareRoot()
        }
        meterChannels.store(ch, ordering: .releasing)
    }
}
