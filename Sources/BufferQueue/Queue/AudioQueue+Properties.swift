import Synchronization

/// An observer of a queue's timeline with its own discontinuity flag (Core Audio's
/// `AudioQueueCreateTimeline`): each timeline is told about every underrun or reset once,
/// whoever else asks.
public final class AudioQueueTimeline: Sendable {
    let queueID: ObjectIdentifier
    let seen: Atomic<Int>

    init(queueID: ObjectIdentifier, seen: Int) {
        self.queueID = queueID
        self.seen = Atomic(seen)
    }
}

// Time, parameters and properties.
extension AudioQueue {
    // MARK: time

    /// Makes a timeline: an observer with its own discontinuity flag (Core Audio's
    /// `AudioQueueCreateTimeline`). It reports discontinuities from its creation on.
    public func makeTimeline() throws -> AudioQueueTimeline {
        try checkNotDisposed()
        return AudioQueueTimeline(queueID: ObjectIdentifier(self), seen: stage.discontinuities.load(ordering: .acquiring))
    }

    /// The timeline frame being heard now, corrected for the sink's latency (Core Audio's
    /// `AudioQueueGetCurrentTime`).
    ///
    /// It counts scheduled audio and scheduled gaps; it stands still while paused or starved.
    /// After a stop it reports where the run ended, until the next start (or a reset, or offline
    /// rendering) begins a new run from 0.
    ///
    /// - Parameter timeline: a timeline from ``makeTimeline()``; with one, `discontinuity` says
    ///   whether an underrun or a reset happened since that timeline last asked. Without one it is
    ///   always false (as with Apple's `NULL` timeline). A timeline of another queue is a
    ///   programming error and stops the program.
    public func currentTime(in timeline: AudioQueueTimeline? = nil) -> AudioQueueTime {
        var discontinuity = false
        if let timeline {
            precondition(timeline.queueID == ObjectIdentifier(self), "the timeline was made by another queue")
            let now = stage.discontinuities.load(ordering: .acquiring)
            discontinuity = timeline.seen.exchange(now, ordering: .acquiringAndReleasing) != now
        }
        let (lastRunEnd, audible) = control.withLock { c in
            (c.lifecycle.lastRunEnd, !c.lifecycle.offline && c.lifecycle.sink != .closed)
        }
        if let lastRunEnd { return AudioQueueTime(sampleTime: lastRunEnd, discontinuity: discontinuity) }
        let rendered = stage.timelineFrames.load(ordering: .acquiring)
        let silence = stage.silenceFramesSinceAudio.load(ordering: .relaxed)
        let latency = audible ? sink.latencyFrames : 0
        // The sink counts output frames; the timeline counts source frames.
        let scale = Double(bitPattern: stage.sourceFramesPerOutputFrame.load(ordering: .relaxed))
        let behind = max(latency - silence, 0)
        let heard = max(rendered - (scale == 1 ? behind : Int((Double(behind) * scale).rounded())), 0)
        return AudioQueueTime(sampleTime: Int64(heard), discontinuity: discontinuity)
    }

    // MARK: parameters

    /// Sets volume, pan, play rate and/or pitch now. Volume and pan glide over
    /// ``volumeRampTime`` once audio has been rendered; before the first frame (or after a reset
    /// or stop) they apply at once, so a fade-in from silence starts silent.
    public func setParameters(_ parameters: AudioQueueParameters) throws {
        let valid = try parameters.validated()
        // One block, one generation: the render path picks up every value set since it looked.
        stage.parameters.update { block in
            if let volume = valid.volume { block.volume = volume; block.volumeSets += 1 }
            if let pan = valid.pan { block.pan = pan; block.panSets += 1 }
            if let rate = valid.playRate { block.playRate = rate; block.playRateSets += 1 }
            if let pitch = valid.pitch { block.pitch = pitch; block.pitchSets += 1 }
            if let gain = valid.gain { block.gain = gain; block.gainSets += 1 }
        }
    }

    /// The play rate last set with ``setParameters(_:)``.
    public var playRate: Float { stage.parameters.values.playRate }

    /// The pitch shift in cents last set with ``setParameters(_:)``.
    public var pitch: Float { stage.parameters.values.pitch }

    // MARK: time-pitch

    /// The time-pitch algorithm in use, nil while time-pitch is off (Core Audio's
    /// `kAudioQueueProperty_EnableTimePitch` and `kAudioQueueProperty_TimePitchAlgorithm`).
    public var timePitchAlgorithm: TimePitchAlgorithm? { control.withLock { $0.timePitch } }

    /// Turns time-pitch on with `algorithm`, or off with nil. With it on, the ``AudioQueueParameters/playRate``
    /// parameter (set now with ``setParameters(_:)`` or per buffer with `enqueue(…parameters:)`)
    /// changes the speed: with ``TimePitchAlgorithm/timeDomain`` the pitch stays (changes take
    /// effect within one 15 ms hop and join without a click), with
    /// ``TimePitchAlgorithm/varispeed`` it follows the rate (changes take effect at the next
    /// frame), with ``TimePitchAlgorithm/spectral`` rate and ``AudioQueueParameters/pitch`` are
    /// independent (changes take effect from the next block of at most 1024 frames).
    /// ``currentTime(in:)`` then counts frames of the source heard so far, and
    /// ``offlineRenderPosition`` frames of output.
    ///
    /// Like Apple's, set it while the queue is not running (before the first start, or while
    /// paused or stopped).
    /// - Throws: ``AudioQueueError/Code/invalidRunState`` while the sink is rendering;
    ///   ``AudioQueueError/Code/codecNotFound`` for ``TimePitchAlgorithm/spectral`` with no engine registered.
    public func setTimePitch(_ algorithm: TimePitchAlgorithm?) throws {
        try checkNotDisposed()
        let active = control.withLock { $0.lifecycle.sink == .active }
        let done: Result<Void, any Error>? = active ? nil : pipeline.withLock { _ in
            stage.tryExclusiveAccess { () -> Result<Void, any Error> in
                Result { try stage.setTimePitch(algorithm) }
            }
        }
        guard done != nil else {
            throw AudioQueueError(.invalidRunState, "time-pitch can be turned on or off only while the queue is not running (pause or stop it first)")
        }
        try done?.get()
        control.withLock { $0.timePitch = algorithm }
    }

    /// Whether time-pitch passes audio through untouched whatever the play rate (Core Audio's
    /// `kAudioQueueProperty_TimePitchBypass`); it can change at any time. Bypassed, or at rate 1,
    /// the output is bit for bit the input.
    public var isTimePitchBypassed: Bool {
        get { stage.timePitchBypass.load(ordering: .relaxed) }
        set { stage.timePitchBypass.store(newValue, ordering: .relaxed) }
    }

    /// The volume last set with ``setParameters(_:)`` (per-buffer values are not reflected).
    public var volume: Float { stage.parameters.values.volume }
    /// The pan last set with ``setParameters(_:)``.
    public var pan: Float { stage.parameters.values.pan }

    /// Seconds over which volume and pan changes glide (Core Audio's `kAudioQueueParam_VolumeRampTime`).
    public var volumeRampTime: Double { Double(stage.parameters.values.rampSeconds) }

    /// Sets ``volumeRampTime``; 0 applies changes at once.
    public func setVolumeRampTime(_ seconds: Double) throws {
        guard seconds >= 0, seconds <= 60 else {
            throw AudioQueueError(.invalidParameter, "volume ramp time \(seconds) s is outside 0...60")
        }
        stage.parameters.update { $0.rampSeconds = Float(seconds) }
    }

    // MARK: properties

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

    /// The speaker position of each channel (Core Audio's `kAudioQueueProperty_ChannelLayout`).
    /// The sink receives it through ``AudioSink/open(format:channelLayout:source:)`` when it is
    /// opened (at the first start, and after a stop); a change while the sink is open applies at
    /// its next opening. When the decoded channel count differs from the layout's, the sink gets
    /// the default layout for that count.
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

    /// The format the sink was opened with — what it plays, after any conversion — or nil while it
    /// is closed (before the first start, after a stop). It differs from ``outputFormat`` (what is
    /// being decoded ahead) while the sink keeps its format and another one is decoded.
    public var sinkStreamFormat: AudioStreamDescription? { control.withLock { $0.sinkStreamFormat } }

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
}

// MARK: the output's hold (a player's pause, seek and stop without a click)
extension AudioQueue {
    /// Holds the output (`true`): the render fades out over `fadeFrames` output frames from the
    /// next one it renders, then gives silence without taking frames, so the frame after the
    /// fade is the next one played when the hold is let go (`false`: a fade in over `fadeFrames`).
    /// Nothing is lost or repeated; the timeline stands still while the output is held. With 0
    /// frames, or before anything was rendered since the last reset, the hold is at once.
    package func setOutputHold(_ hold: Bool, fadeFrames: Int) {
        stage.holdFadeFrames.store(max(fadeFrames, 0), ordering: .relaxed)
        let generation = stage.holdGeneration.load(ordering: .relaxed)
        guard (generation & 1 == 1) != hold else { return }
        stage.holdGeneration.store(generation + 1, ordering: .releasing)
    }

    /// Whether the sink is started and not paused: it pulls, so a hold asked for now is rendered.
    package var isSinkPulling: Bool { stage.playing.load(ordering: .acquiring) }

    /// Whether the output is held (asked for by ``setOutputHold(_:fadeFrames:)``).
    package var isOutputHoldRequested: Bool { stage.holdGeneration.load(ordering: .acquiring) & 1 == 1 }

    /// Output frames until the hold's fade out is heard: nil while the render has not finished
    /// it (or the output is not held), 0 once every frame before the silence has been played.
    package func outputFramesUntilHoldIsHeard() -> Int? {
        let generation = stage.holdGeneration.load(ordering: .acquiring)
        guard generation & 1 == 1, stage.heldGeneration.load(ordering: .acquiring) == generation else { return nil }
        let audible = control.withLock { !$0.lifecycle.offline && $0.lifecycle.sink != .closed }
        let latency = audible ? sink.latencyFrames : 0
        return max(latency - stage.silenceFramesSinceAudio.load(ordering: .relaxed), 0)
    }
}
