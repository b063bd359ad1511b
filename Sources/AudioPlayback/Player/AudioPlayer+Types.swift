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
            public var itemIndex: Int
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

    /// A processing tap for the player's queue: the caller's code on the render path, as with
    /// ``/BufferQueue/AudioQueue/installProcessingTap(_:callback:)``. The player's own frame count
    /// and recording do not take its place.
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
