/// Where a processing tap sits on the render path (Core Audio's `kAudioQueueProcessingTap_…` flags).
public enum AudioQueueProcessingTapPosition: Sendable, Hashable {
    /// Before time-pitch, conversion and volume/pan: it sees and changes the decoded audio.
    case preEffects
    /// After them: it sees and changes what goes out.
    case postEffects
    /// A read-only copy of what goes out (a visualiser, a level meter, a recorder of the output):
    /// every output frame once, in order.
    case siphon
}

/// Flags a tap's callback and ``AudioQueueProcessingTap/getSourceAudio(frames:into:)`` report.
public struct AudioQueueProcessingTapFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// The first call of a stream (after installation, a reset, a stop, or the end of a segment at
    /// a flush): filters should start from a clean state. It comes once, even when that call
    /// finds no audio yet.
    public static let startOfStream = AudioQueueProcessingTapFlags(rawValue: 1 << 8)
    /// The source has ended (a flush or the end of an asynchronous stop): what the tap still holds
    /// (a filter's tail) should come out now.
    public static let endOfStream = AudioQueueProcessingTapFlags(rawValue: 1 << 9)
}

/// A tap's callback: asked for up to `frames` frames into `output` (interleaved float32 in the
/// tap's ``AudioQueueProcessingTap/processingFormat``), it pulls source audio itself with
/// ``AudioQueueProcessingTap/getSourceAudio(frames:into:)`` — as many frames as it likes, in as
/// many calls as it likes — and returns how many frames it wrote. `flags` carries
/// ``AudioQueueProcessingTapFlags/startOfStream`` in.
///
/// A siphon's callback gets the output frames in `output` (read them; changes are ignored) and its
/// return value is ignored.
///
/// It runs on the render path (the sink's real-time thread, or the caller of an offline render):
/// do not allocate, lock, block or call the queue in it. Apple's `AudioQueueProcessingTapCallback`.
public typealias AudioQueueProcessingTapCallback = @Sendable (
    _ tap: AudioQueueProcessingTap, _ frames: Int, _ output: UnsafeMutablePointer<Float>, _ flags: AudioQueueProcessingTapFlags
) -> Int

/// A processing tap installed on a queue (Apple's `AudioQueueProcessingTapRef`). Sendable by
/// construction: what it was made with is immutable, and its render-path state is claimed by the
/// stage's reader for each step (`ClaimedState`) — never while the callback runs, so that the
/// callback can pull (``getSourceAudio(frames:into:)``).
public final class AudioQueueProcessingTap: Sendable {
    /// Where it sits.
    public let position: AudioQueueProcessingTapPosition
    /// The most frames a callback is asked for (and may pull per ``getSourceAudio(frames:into:)``).
    public let maximumFrames: Int
    /// Interleaved float32 at the rate and channel count of its place on the path, when installed
    /// (a later change of the decoded format changes it; ``AudioQueueEvent/formatChanged(_:)`` says so).
    public let processingFormat: AudioStreamDescription

    let callback: AudioQueueProcessingTapCallback
    /// Render-path state: only the stage's reader claims it.
    private let renderSide: ClaimedState<TapRenderState>

    init(position: AudioQueueProcessingTapPosition, maximumFrames: Int, processingFormat: AudioStreamDescription,
         callback: @escaping AudioQueueProcessingTapCallback) {
        self.position = position
        self.maximumFrames = maximumFrames
        self.processingFormat = processingFormat
        self.callback = callback
        renderSide = ClaimedState(TapRenderState(siphonSamples: position == .siphon ? maximumFrames * processingFormat.channelsPerFrame : 0))
    }

    /// Pulls up to `frames` frames of source audio (at most ``maximumFrames``) into `destination`.
    /// Only from inside the callback. Returns the frames given (fewer when the source has no more
    /// yet, or has ended: then `flags` holds ``AudioQueueProcessingTapFlags/endOfStream``), and
    /// the sample time of the first one (frames this tap pulled since the stream began). A
    /// siphon has no source: it gets no frames.
    public func getSourceAudio(frames: Int, into destination: UnsafeMutablePointer<Float>)
        -> (frames: Int, flags: AudioQueueProcessingTapFlags, sampleTime: Int64) {
        let wanted = max(min(frames, maximumFrames), 0)
        let channels = processingFormat.channelsPerFrame
        return renderSide.withClaim { state in
            let time = state.pulled
            guard let source = state.source, !state.sourceEnded else { return (0, state.sourceEnded ? .endOfStream : [], time) }
            var done = 0
            while done < wanted {
                let (n, end) = source(destination + done * channels, wanted - done)
                done += n
                if end == .boundary { state.sourceEnded = true; break }
                if end == .starved { break }
            }
            state.pulled += Int64(done)
            return (done, state.sourceEnded ? .endOfStream : [], time)
        } ?? (0, [], 0)
    }

    /// Runs the callback for up to `frames` frames with `source` behind it.
    /// `source` is kept while the callback runs: a closure made once (a closure made for the call
    /// and kept would be allocated on every render).
    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: @escaping PullSource) -> (Int, PullEnd) {
        let flags = renderSide.withClaim { state -> AudioQueueProcessingTapFlags in
            defer { state.startPending = false }
            state.source = source
            return state.startPending ? .startOfStream : []
        } ?? []
        let produced = max(min(callback(self, min(frames, maximumFrames), out, flags), frames), 0)
        let sourceEnded = renderSide.withClaim { state in
            state.source = nil
            return state.sourceEnded
        } ?? false
        // After the end, the callback may still give a tail; once it gives nothing, the segment is over.
        if produced > 0 { return (produced, produced == frames || sourceEnded ? .filled : .starved) }
        return (0, sourceEnded ? .boundary : .starved)
    }

    /// A segment ended (or a discard): the next audio starts a new stream.
    func reset() {
        _ = renderSide.withClaim { state in
            state.sourceEnded = false
            state.startPending = true
            state.pulled = 0
        }
    }

    /// A siphon: shows the callback `frames` output frames — a copy, in blocks of at most
    /// ``maximumFrames``, so that what it writes never reaches the output.
    func siphon(_ out: UnsafePointer<Float>, frames: Int) {
        let channels = processingFormat.channelsPerFrame
        _ = renderSide.withClaim { state in
            guard let copy = state.siphonCopy else { return }
            var offset = 0
            while offset < frames {
                let n = min(frames - offset, maximumFrames)
                copy.update(from: out + offset * channels, count: n * channels)
                let flags: AudioQueueProcessingTapFlags = state.startPending ? .startOfStream : []
                state.startPending = false
                _ = callback(self, n, copy, flags)
                state.pulled += Int64(n)
                offset += n
            }
        }
    }
}

/// A tap's render-path state.
final class TapRenderState {
    /// A siphon's copy of the output (allocated at installation, not on the render path).
    let siphonCopy: UnsafeMutablePointer<Float>?
    var source: PullSource?
    var sourceEnded = false
    var startPending = true
    var pulled: Int64 = 0

    init(siphonSamples: Int) {
        siphonCopy = siphonSamples > 0 ? .allocate(capacity: siphonSamples) : nil
    }

    deinit { siphonCopy?.deallocate() }
}

/// The processing taps a render stage runs, in the order installed at each position: the
/// pre-effects taps as a chain (each pulls the one installed before it, the first pulls the
/// ring), the post-effects taps likewise after volume and pan, then the siphons, each shown what
/// goes out. Made on the control side while no render runs; the render side only follows links
/// and calls closures made here (it iterates no collection: unspecialised, that would allocate).
final class TapChain {
    /// A tap and what it pulls: the tap before it in the chain, or the stage.
    final class Link {
        let tap: AudioQueueProcessingTap
        let source: PullSource
        let previous: Link?
        init(tap: AudioQueueProcessingTap, source: @escaping PullSource, previous: Link?) {
            self.tap = tap
            self.source = source
            self.previous = previous
        }

        /// Render side: the tap's output, pulling its source.
        @inline(__always)
        func render(into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
            tap.render(into: out, frames: frames, from: source)
        }
    }

    /// A siphon and the next one.
    final class Siphon {
        let tap: AudioQueueProcessingTap
        let next: Siphon?
        init(tap: AudioQueueProcessingTap, next: Siphon?) {
            self.tap = tap
            self.next = next
        }
    }

    /// Every tap, in the order installed (control side).
    let taps: [AudioQueueProcessingTap]
    /// The last pre-effects and post-effects taps (nil: none there).
    let preEffects: Link?
    let postEffects: Link?
    let siphons: Siphon?

    /// The chain of `taps`; the first pre-effects tap pulls `ring`, the first post-effects tap
    /// pulls `processed` (everything before it).
    init(taps: [AudioQueueProcessingTap], ring: @escaping PullSource, processed: @escaping PullSource) {
        self.taps = taps
        func chain(_ position: AudioQueueProcessingTapPosition, from first: @escaping PullSource) -> Link? {
            var last: Link?
            for tap in taps where tap.position == position {
                let source: PullSource
                if let before = last {
                    source = { out, frames in before.render(into: out, frames: frames) }
                } else {
                    source = first
                }
                last = Link(tap: tap, source: source, previous: last)
            }
            return last
        }
        preEffects = chain(.preEffects, from: ring)
        postEffects = chain(.postEffects, from: processed)
        var siphons: Siphon?
        for tap in taps.reversed() where tap.position == .siphon { siphons = Siphon(tap: tap, next: siphons) }
        self.siphons = siphons
    }

    /// Whether a tap changes frames on the path (pre- or post-effects): the render goes through the chain.
    var processes: Bool { preEffects != nil || postEffects != nil }

    /// Render side: a new stream begins for the processing taps (a segment's end, a format
    /// change), and for the siphons too with `siphons`.
    func reset(siphons resetSiphons: Bool) {
        var link = preEffects
        while let current = link { current.tap.reset(); link = current.previous }
        link = postEffects
        while let current = link { current.tap.reset(); link = current.previous }
        guard resetSiphons else { return }
        var siphon = siphons
        while let current = siphon { current.tap.reset(); siphon = current.next }
    }

    /// Render side: shows every siphon from `first` on `frames` output frames, in the order installed.
    static func siphon(from first: Siphon, _ out: UnsafePointer<Float>, frames: Int) {
        var siphon: Siphon? = first
        while let current = siphon { current.tap.siphon(out, frames: frames); siphon = current.next }
    }
}
