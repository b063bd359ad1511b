import AudioFileStream
import BufferQueue
import Dispatch

extension AudioPlayer {
    /// What is playing now.
    public struct Status: Sendable, Equatable {
        /// Index in the item list of the item heard; before its first frame is heard (at the
        /// start, after a seek) the item being fed; nil before any is opened.
        public var itemIndex: Int?
        /// The earlier name of ``itemIndex``.
        @available(*, deprecated, renamed: "itemIndex")
        public var fileIndex: Int? { itemIndex }
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

    /// Everything a player is made with but its items and its sink, each with a default: set
    /// what you need and leave the rest (``AudioPlayer/init(items:configuration:makeSink:)``).
    ///
    /// How the settings stack on an item's frames, in the order they apply: the item's gain
    /// (``AudioPlayerItem/gain`` times its ReplayGain or R128 tags', from its first frame), the
    /// crossfade's curve where items overlap, the ``effects`` at ``/BufferQueue/AudioQueueProcessingTapPosition/preEffects``,
    /// time-pitch and conversion to the output format, ``volume`` and ``pan``, the ``effects`` at
    /// ``/BufferQueue/AudioQueueProcessingTapPosition/postEffects``, the ``transitionFade``; then
    /// the siphons, ``record``, the loudness meter (``AudioPlayer/installLoudnessMeter()``) and the sink.
    public struct Configuration: Sendable {
        /// How many times the list plays (gaplessly from its end to its start; at least 1).
        public var loops: Int
        /// Where in the first item to start, in seconds (frame-exact).
        public var startSeconds: Double
        /// The player's volume (0...1), applied after each item's gain (``AudioPlayer/setVolume(_:)`` changes it).
        public var volume: Float
        /// The balance (-1 left ... 1 right; no effect on mono).
        public var pan: Float
        /// How much each item keeps enqueued ahead.
        public var buffering: Buffering
        /// The format the sink plays (see ``OutputFormat``).
        public var outputFormat: OutputFormat
        /// Items join with a crossfade (see ``AudioPlayerCrossfade``); nil or 0 seconds: gaplessly.
        /// It needs one output format (not ``OutputFormat/itemFormat``).
        public var crossfade: AudioPlayerCrossfade?
        /// Seconds of a fade out at ``AudioPlayer/pause()``, ``AudioPlayer/stop()``,
        /// ``AudioPlayer/seek(to:)`` and ``AudioPlayer/skip()``, and of a fade in after them, so the
        /// sound does not stop or start with a click (5–20 ms does that; at most 0.1). What is faded
        /// out is played, and the next frame after it is the first one played again: a pause loses
        /// no frame. 0, the default: no fade, the output exactly the items' frames.
        public var transitionFade: Double
        /// Applies each item's ReplayGain (or Opus R128) tags as its gain, decided once its source
        /// is ready (a stream's tags come with its header), before its first frame; nil or
        /// ``ReplayGainSettings/Mode/off``: none. It multiplies ``AudioPlayerItem/gain``.
        public var replayGain: ReplayGainSettings?
        /// Processing taps on the render path, any number: at each position they run in this
        /// order, each pre- and post-effects tap taking what the one before it gave, and each sees
        /// what will be heard at its place (the items' gains and the crossfades included). A tap's
        /// ``/BufferQueue/AudioQueueProcessingTap/processingFormat`` is the output format, or for
        /// `.preEffects` the first item's decoded format (with items of other formats, use
        /// `.postEffects` or `.siphon`, which see one format).
        public var effects: [ProcessingTap]
        /// An item that cannot be opened or read is skipped (the default: the rest of the list
        /// plays) or ends playback.
        public var onItemFailure: AudioPlayerItemFailurePolicy
        /// Turns play rate (and, for ``/BufferQueue/TimePitchAlgorithm/spectral``, pitch) on: see
        /// ``AudioPlayer/setPlayRate(_:pitch:)``; nil: off.
        public var timePitch: TimePitchAlgorithm?
        /// The play rate to start with (0.25...4).
        public var playRate: Float
        /// The pitch shift in cents to start with (-2400...2400, spectral only).
        public var pitch: Float
        /// Receives exactly the frames handed to the sink, in order, after volume and play rate, on
        /// a thread of its own (the render thread only copies them into a ring); all of them before
        /// ``AudioPlayer/play()`` returns. Needs one output format (not ``OutputFormat/itemFormat``).
        public var record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)?
        /// Called with every ``AudioPlayerEvent``, on the player's queue, in order (also available
        /// from ``AudioPlayer/events()``).
        public var onEvent: (@Sendable (AudioPlayerEvent) -> Void)?
        /// Where the queue finds each item's decoder.
        public var decoders: AudioDecoderRegistry
        /// Where the converter finds its resampler for items of other rates (register `SoxrConverter`).
        public var resamplers: AudioResamplerRegistry
        /// Where the spectral algorithm finds its engine (register `RubberBandTimePitch`).
        public var timePitchEngines: TimePitchEngineRegistry

        /// A configuration with these settings; every one has its default.
        public init(loops: Int = 1, startSeconds: Double = 0, volume: Float = 1, pan: Float = 0, buffering: Buffering = Buffering(),
                    outputFormat: OutputFormat = .firstItem, crossfade: AudioPlayerCrossfade? = nil, transitionFade: Double = 0,
                    replayGain: ReplayGainSettings? = nil, effects: [ProcessingTap] = [], onItemFailure: AudioPlayerItemFailurePolicy = .skip,
                    timePitch: TimePitchAlgorithm? = nil, playRate: Float = 1, pitch: Float = 0,
                    record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil,
                    onEvent: (@Sendable (AudioPlayerEvent) -> Void)? = nil, decoders: AudioDecoderRegistry = .shared,
                    resamplers: AudioResamplerRegistry = .shared, timePitchEngines: TimePitchEngineRegistry = .shared) {
            self.loops = loops
            self.startSeconds = startSeconds
            self.volume = volume
            self.pan = pan
            self.buffering = buffering
            self.outputFormat = outputFormat
            self.crossfade = crossfade
            self.transitionFade = transitionFade
            self.replayGain = replayGain
            self.effects = effects
            self.onItemFailure = onItemFailure
            self.timePitch = timePitch
            self.playRate = playRate
            self.pitch = pitch
            self.record = record
            self.onEvent = onEvent
            self.decoders = decoders
            self.resamplers = resamplers
            self.timePitchEngines = timePitchEngines
        }
    }

    /// What a playback did: ``play()`` returns it when anything played, whether or not some items
    /// were skipped (``AudioPlayerItemFailurePolicy/skip``); it throws only when nothing could play.
    public struct Report: Sendable, Equatable {
        /// Frames handed to the sink (after volume and play rate), exactly.
        public var framesPlayed: Int64
        /// Items whose first frame was heard, counting each pass of a loop (an item the list plays
        /// twice counts twice).
        public var itemsPlayed: Int
        /// The items that failed and were skipped, in the order they failed, each with its error
        /// (``AudioPlayerError/itemIndex`` and ``AudioPlayerError/itemName`` say which).
        public var skipped: [AudioPlayerError]
        /// Problems that did not stop an item (a cut end, a length its header claims and its
        /// packets do not hold), as ``AudioPlayerEvent/itemWarning(index:id:_:)`` reported them.
        public var warnings: [Warning]

        /// One warning: the item's place in the list when reported, and what is wrong, in words.
        public struct Warning: Sendable, Equatable {
            /// The item's place in the list when the warning was reported.
            public var itemIndex: Int
            /// What is wrong, in words (the file and where, when known).
            public var message: String
        }

        /// Whether every item played: nothing was skipped.
        public var isComplete: Bool { skipped.isEmpty }
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
        /// Seconds enqueued before playback starts, before it restarts after an underrun, and at most.
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

    /// A processing tap for the player (one of ``Configuration/effects``): the caller's code on the
    /// render path, as with ``/BufferQueue/AudioQueue/installProcessingTap(_:callback:)`` — an
    /// equaliser (``/BufferQueue/AudioEqualizer/processingTapCallback``), a filter, a meter. The
    /// player's own frame count, recording and loudness meter do not take its place.
    public struct ProcessingTap: Sendable {
        /// Where it sits: before time-pitch, conversion and volume/pan, after them, or a siphon.
        public var position: AudioQueueProcessingTapPosition
        /// Called on the render path for every block; the tap it gets tells the processing
        /// format: the output format, or for `.preEffects` the first item's decoded format (with
        /// items of other formats, use `.postEffects` or `.siphon`, which see one format).
        public var callback: AudioQueueProcessingTapCallback
        /// A tap at `position` that calls `callback` on the render path.
        public init(position: AudioQueueProcessingTapPosition, callback: @escaping AudioQueueProcessingTapCallback) {
            self.position = position
            self.callback = callback
        }
    }
}
