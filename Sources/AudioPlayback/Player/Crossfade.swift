import AudioFileStream
import BufferQueue

/// How the player joins one item to the next: a crossfade of a duration and a curve.
///
/// For the i-th of D = round(seconds × output rate) frames, the outgoing item's frame is scaled
/// by the curve's fade-out gain and the incoming one's by its fade-in gain
/// (``/BufferQueue/AudioFadeCurve/gain(_:frame:of:)``: linear 1 − i/D and i/D, equal-power
/// cos(π/2 · i/D) and sin(π/2 · i/D)), and the two are summed. What plays is the outgoing item up
/// to its last D frames, the D mixed frames, then the rest of the incoming item: lenA + lenB − D
/// frames. It applies where an item ends and on ``AudioPlayer/skip()`` (the item heard fades out
/// from where it is); items of other rates or channel counts are converted to the output format
/// first. When an item is shorter than D (or, on the incoming side, than what is left of the
/// outgoing one), the crossfade is shortened to it and
/// ``AudioPlayerEvent/crossfadeShortened(index:id:frames:requested:)`` says so.
public struct AudioPlayerCrossfade: Sendable, Equatable {
    /// The duration in seconds (0: the gapless join, bit for bit).
    public var seconds: Double
    /// The gains' shape.
    public var curve: AudioFadeCurve

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/invalidParameter`` for a negative or non-finite duration.
    public init(seconds: Double, curve: AudioFadeCurve = .equalPower) throws {
        guard seconds.isFinite, seconds >= 0 else {
            throw AudioQueueError(.invalidParameter, "a crossfade lasts 0 seconds or more (got \(seconds))")
        }
        self.seconds = seconds
        self.curve = curve
    }

    /// D: the crossfade's frames at `sampleRate`.
    public func frames(at sampleRate: Double) -> Int { Int((seconds * sampleRate).rounded()) }
}

/// What the player needs of whatever feeds an item into its queue: the packet feeder (the gapless
/// player), or a crossfading item feeder.
protocol ItemFeeding: AnyObject {
    var source: any PacketSource { get }
    /// The start was planned (the source was ready): ``startFrame`` is final.
    var started: Bool { get }
    /// The first valid frame of the item played, in its source's frames.
    var startFrame: Int64 { get }
    /// Frames enqueued on the queue's timeline.
    var framesKept: Int64 { get }
    /// Frames enqueued before the item's own first frame (the end of the previous item).
    var leadFrames: Int64 { get }
    /// The rate of the queue's timeline for this item's frames.
    var timelineRate: Double { get }
    /// Only the previous item's held frames, after the last item: no item of its own.
    var isTail: Bool { get }
    /// The linear gain applied to the item's frames (1 until decided, once its source is ready).
    var gain: Float { get }
    func enqueueNext(_ buffer: AudioQueueBuffer, on queue: AudioQueue) throws -> PacketFeeder.Progress
}

extension PacketFeeder: ItemFeeding {
    var leadFrames: Int64 { 0 }
    /// The queue counts each stream's frames at its own rate.
    var timelineRate: Double { source.format.sampleRate }
    var isTail: Bool { false }
    var gain: Float { parametersChosenAtStart?.gain ?? 1 }
}

/// The crossfading player's join, owned by its work queue: the frames decoded and not yet
/// enqueued, of which the last D are held back until the next item's first D are mixed into them
/// (or it is known that none follows).
final class CrossfadeJoin {
    let crossfade: AudioPlayerCrossfade
    /// The output format (interleaved float32), decided by the first item (or fixed).
    private(set) var format: AudioStreamDescription?
    /// D at the output rate.
    private(set) var frames = 0
    private(set) var channels = 1
    /// The frames held: samples `[start, end)` of `storage` (interleaved), which grows only when
    /// more must be held than ever before; what is left moves to the front when the end is reached.
    private var storage: UnsafeMutablePointer<Float>
    private var capacity: Int
    private var start = 0
    private var end = 0
    /// Frames at the end that are the current item's alone (not mixed with the previous one).
    private(set) var pureFrames = 0
    /// The curve's gains for a join of D frames (fade-out, fade-in, interleaved), computed by the
    /// first join and used by every later one: the same numbers, without a sine and a cosine
    /// per frame each time.
    private var gains: [Float] = []
    /// The gains of the last shortened join (D' < D frames).
    private var shortGains: [Float] = []
    /// A small block the incoming item's first frames are rendered into, step by step, when
    /// they are mixed into the held ones as they come (``mixIn(_:at:frames:of:)``).
    private var block: UnsafeMutablePointer<Float>?
    /// An item rendered straight into the queue's buffers ended before the frames it was known to
    /// have: nothing of it was held, so the next item's join is a crossfade of 0 frames (said).
    var endedEarly = false
    /// The queue's current stream takes this PCM (false after an item's packets went in as a
    /// stream of their own, and after a reset: the next PCM begins a stream of its format).
    private var streamIsPCM = true
    /// An item's packets went in with its gain: the queue applies it until a buffer sets another.
    private var gainInForce = false
    /// The source of the item whose frames the join holds last: what plays them after the last
    /// item, when the item after them could not be opened.
    var heldSource: (any PacketSource)?
    /// The incoming item's frames rendered at a time when they are mixed into the held ones as
    /// they come (``mixIn(_:at:frames:of:)``).
    static let blockFrames = 8192

    init(crossfade: AudioPlayerCrossfade) {
        self.crossfade = crossfade
        capacity = 1 << 16
        storage = .allocate(capacity: capacity)
    }

    deinit {
        storage.deallocate()
        block?.deallocate()
    }

    /// Frames decoded and not enqueued yet.
    var heldFrames: Int { (end - start) / channels }

    func adopt(_ format: AudioStreamDescription) {
        guard self.format == nil else { return }
        self.format = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
        channels = max(format.channelsPerFrame, 1)
        frames = crossfade.frames(at: format.sampleRate)
        // What a join of an item of known length holds at most: its last D frames and one step
        // of rendering; twice that, so that it neither grows nor moves.
        let needed = 2 * (frames + 16_384) * channels
        if needed > capacity {
            storage.deallocate()
            capacity = needed
            storage = .allocate(capacity: capacity)
        }
    }

    /// Drops everything held (a seek, a jump, a new run).
    func reset() {
        start = 0
        end = 0
        heldSource = nil
        pureFrames = 0
        endedEarly = false
        streamIsPCM = false
    }

    /// An item's packets begin a stream of their own format on `queue`. Returns what their first
    /// frame must carry: the item's `gain` (nil when 1), which the PCM after them sets back.
    func beginPackets(of source: any PacketSource, gain: Float, on queue: AudioQueue) throws -> AudioQueueParameters? {
        try queue.beginStream(format: source.format, magicCookie: source.magicCookie)
        streamIsPCM = false
        guard gain != 1 else { return nil }
        gainInForce = true
        return AudioQueueParameters(gain: gain)
    }

    /// Enqueues `frames` frames of this PCM in `buffer`: in a stream of its format, at gain 1
    /// (the frames carry their item's gain already).
    func enqueuePCM(_ buffer: AudioQueueBuffer, frames: Int, on queue: AudioQueue) throws {
        if !streamIsPCM, let format {
            try queue.beginStream(format: format)
            streamIsPCM = true
        }
        try buffer.setByteSize(frames * channels * 4)
        if gainInForce {
            try queue.enqueue(buffer, parameters: AudioQueueParameters(gain: 1))
            gainInForce = false
        } else {
            try queue.enqueue(buffer)
        }
    }

    /// Room for `samples` more at the end: what is held moves to the front, or into more memory.
    private func makeRoom(_ samples: Int) {
        guard end + samples > capacity else { return }
        let held = end - start
        if held + samples <= capacity / 2 {
            // Moved when the end is reached. Memory grows to four times what is held, so in
            // steady state a move copies about a third of what passed since the last one
            // (memmove: the two regions may overlap). Moving only below a quarter made a join
            // holding what it held at the last growth grow again and again, each time into
            // fresh pages.
            UnsafeMutableRawPointer(storage).copyMemory(from: storage + start, byteCount: held * 4)
        } else {
            capacity = 4 * (held + samples)
            let larger = UnsafeMutablePointer<Float>.allocate(capacity: capacity)
            larger.update(from: storage + start, count: held)
            storage.deallocate()
            storage = larger
        }
        start = 0
        end = held
    }

    /// Appends up to `frames` of the current item's frames, written by `render` straight into the
    /// held frames' storage (it returns how many it wrote).
    func append(upTo frames: Int, _ render: (UnsafeMutableBufferPointer<Float>) throws -> Int) rethrows -> Int {
        makeRoom(frames * channels)
        let written = try render(UnsafeMutableBufferPointer(start: storage + end, count: frames * channels))
        end += written * channels
        pureFrames += written
        return written
    }

    /// Makes room for the incoming item's first `frames` frames right after the held ones, where
    /// its feeder gathers them (``headSpace(from:frames:)``) before ``mix(headFrames:)``; nothing
    /// else may change the join in between.
    func reserveHead(_ frames: Int) { makeRoom(frames * channels) }

    /// Where the incoming item's head frames `offset ..< offset + frames` go (after the held ones).
    func headSpace(from offset: Int, frames: Int) -> UnsafeMutableBufferPointer<Float> {
        UnsafeMutableBufferPointer(start: storage + end + offset * channels, count: frames * channels)
    }

    /// The curve's gains for a join of `length` frames (fade-out, fade-in, interleaved): a
    /// shortened join has its own curve of D' frames; a full one reuses the first's.
    private func gainTable(_ length: Int) -> [Float] {
        if length == frames {
            if gains.count != 2 * length { gains = crossfade.curve.gainTable(length) }
            return gains
        }
        if shortGains.count != 2 * length { shortGains = crossfade.curve.gainTable(length) }
        return shortGains
    }

    /// Mixes `count` frames of the incoming item at `source` into the held frames of a join of
    /// `length` frames (the last `length` held ones), from its frame `offset` on.
    func mixIn(_ source: UnsafePointer<Float>, at offset: Int, frames count: Int, of length: Int) {
        let channels = self.channels
        let held = storage + end - (length - offset) * channels
        gainTable(length).withUnsafeBufferPointer { table in
            guard let gains = table.baseAddress.map({ $0 + 2 * offset }) else { return }
            if channels == 2 {
                for i in 0..<count {
                    let out = gains[2 * i], gain = gains[2 * i + 1]
                    held[2 * i] = held[2 * i] * out + source[2 * i] * gain
                    held[2 * i + 1] = held[2 * i + 1] * out + source[2 * i + 1] * gain
                }
            } else {
                for i in 0..<count {
                    let out = gains[2 * i], gain = gains[2 * i + 1]
                    let frame = held + i * channels
                    for c in 0..<channels { frame[c] = frame[c] * out + source[i * channels + c] * gain }
                }
            }
        }
    }

    /// Room in the block for `frames` frames (at most ``blockFrames``); where they go.
    func blockSpace(frames: Int) -> UnsafeMutableBufferPointer<Float> {
        if block == nil { block = .allocate(capacity: Self.blockFrames * channels) }
        return UnsafeMutableBufferPointer(start: block, count: min(frames, Self.blockFrames) * channels)
    }

    /// Ends a join of `length` frames mixed block by block, to which the incoming item gave
    /// `given` frames: all of them, or fewer when it had fewer than it was known to have (a
    /// damaged file), and then the held frames after them fade out alone, as the curve says. No
    /// frame of the incoming item's own is held.
    func endBlockMix(given: Int, of length: Int) {
        pureFrames = 0
        guard given < length else { return }
        let channels = self.channels
        let held = storage + end - length * channels
        gainTable(length).withUnsafeBufferPointer { gains in
            for i in given..<length {
                for c in 0..<channels { held[i * channels + c] *= gains[2 * i] }
            }
        }
    }

    /// Mixes the incoming item's first `headFrames` frames, gathered after the held ones (at most
    /// D and the pure held frames: all its frames when it is that short), into the last held ones,
    /// over a curve of their own length D'. No frame of the incoming item's own is held.
    func mix(headFrames: Int) {
        mixIn(storage + end, at: 0, frames: headFrames, of: headFrames)
        pureFrames = 0
    }

    /// Moves up to `maxFrames` of the frames before the last `keeping` into `destination`; returns how many.
    func take(upTo maxFrames: Int, keeping: Int, into destination: UnsafeMutableRawBufferPointer) -> Int {
        let count = max(min(maxFrames, heldFrames - keeping, destination.count / (channels * 4)), 0)
        guard count > 0, let base = destination.baseAddress else { return 0 }
        base.copyMemory(from: storage + start, byteCount: count * channels * 4)
        start += count * channels
        if start == end {
            // Empty: the next frames go to the front again, into pages already touched.
            start = 0
            end = 0
        }
        pureFrames = min(pureFrames, heldFrames)
        return count
    }
}

/// Feeds one item of a crossfading player: renders its edges (decoded and converted to the output
/// format, on the player's work queue), mixes its first frames into the previous item's held ones
/// and holds its last D in the join, enqueuing PCM of the output format; its middle goes to the
/// queue as packets when the queue's decode of them gives the same frames (else it is rendered too).
final class CrossfadeItemFeeder: ItemFeeding {
    let source: any PacketSource
    private let join: CrossfadeJoin
    /// Makes a renderer of the item: from where the item starts (nil), or from a valid frame.
    private let makeRenderer: ((any PacketSource, Int64?) throws -> PacketSourceRenderer)?
    private var renderer: PacketSourceRenderer?
    /// Where the item's decoders come from (their traits say whether pieces join exactly).
    private let registry: AudioDecoderRegistry
    /// The first valid frame played, once the renderer of the item's last frames replaced the first.
    private var firstFrame: Int64?

    /// The item's middle — after its frames mixed with the item before, before its last D —
    /// when it goes to the queue as packets, decoded there once as the gapless player's items
    /// are, instead of rendered here and enqueued as PCM.
    private enum Middle {
        case undecided
        /// Rendered here with the rest (a converted item, a decoder whose pieces do not join
        /// exactly, an unknown length, the outgoing side of a skip).
        case rendered
        /// The packets of valid frames `start ..< end`, once what the join holds is enqueued.
        case packets(start: Int64, end: Int64)
        case feeding(PacketFeeder, end: Int64)
        /// Enqueued: the item's last frames are rendered from the end of the packets.
        case done
    }
    private var middle = Middle.undecided
    /// The item's gain (``AudioPlayerItem/gain`` times its tags'), applied to its frames before
    /// the mix: decided by `gainOf` once the source is ready (a stream's tags come with its header).
    private(set) var gain: Float = 1
    private let gainOf: ((any PacketSource) -> Float)?
    /// Output frames to render at most (the outgoing side of a skip); nil: to the end.
    private let limit: Int64?
    /// Whether another item follows this one (asked when this one's frames are all rendered).
    private let hasNext: () -> Bool
    /// Called with D' when the mix into the previous item was shorter than D.
    private let shortened: (Int) -> Void
    private var mixPending: Bool
    private var headFrames = 0
    /// Whether the join mixes this item's first frames block by block as they come (decided
    /// when the mix begins).
    private var mixesInBlocks: Bool?
    private var renderDone: Bool
    private var followed: Bool?
    private(set) var framesKept: Int64 = 0
    private(set) var leadFrames: Int64 = 0
    let isTail: Bool

    init(source: any PacketSource, join: CrossfadeJoin, gain: ((any PacketSource) -> Float)? = nil, limit: Int64? = nil,
         registry: AudioDecoderRegistry, hasNext: @escaping () -> Bool, shortened: @escaping (Int) -> Void,
         makeRenderer: @escaping (any PacketSource, Int64?) throws -> PacketSourceRenderer) {
        self.source = source
        self.join = join
        self.registry = registry
        gainOf = gain
        self.limit = limit
        self.hasNext = hasNext
        self.shortened = shortened
        self.makeRenderer = makeRenderer
        // Anything held is the end of the item before: this one is mixed into it (over 0 frames
        // when nothing of that item is left unmixed).
        mixPending = join.heldFrames > 0 || join.endedEarly
        join.endedEarly = false
        renderDone = false
        isTail = false
        // The source of the frames the join holds from now on (their tail plays after a last
        // item that cannot be opened: that one makes no feeder).
        join.heldSource = source
    }

    /// What the join still holds after the last item: enqueued, nothing mixed into it.
    init(tailOf source: any PacketSource, join: CrossfadeJoin) {
        self.source = source
        self.join = join
        registry = .shared
        gainOf = nil
        limit = nil
        hasNext = { false }
        shortened = { _ in }
        makeRenderer = nil
        mixPending = false
        renderDone = true
        isTail = true
    }

    var started: Bool { renderer?.started ?? isTail }
    var startFrame: Int64 { firstFrame ?? renderer?.startFrame ?? 0 }
    var timelineRate: Double { join.format?.sampleRate ?? source.format.sampleRate }
    /// The output format, once the first item's renderer decided it.
    var outputFormat: AudioStreamDescription? { join.format }

    /// Makes the renderer once the source is ready (the first one decides the output format).
    func prepare() throws {
        guard renderer == nil, !isTail, let makeRenderer, source.isReady else { return }
        let made = try makeRenderer(source, nil)
        join.adopt(made.outputFormat)
        gain = gainOf?(source) ?? 1
        renderer = made
    }

    /// Renders up to `frames` frames into `destination`; 0 at the end or while waiting.
    private func render(_ frames: Int, into destination: UnsafeMutableBufferPointer<Float>) throws -> Int {
        guard let renderer, !renderDone else { return 0 }
        var wanted = frames
        if let limit { wanted = Int(min(Int64(wanted), max(limit - renderer.framesRendered, 0))) }
        guard wanted > 0 else {
            renderDone = true
            return 0
        }
        let n = try renderer.render(into: destination, frames: wanted)
        if n == 0 && !renderer.isWaiting { renderDone = true }
        if gain != 1 {
            for i in 0..<(n * join.channels) { destination[i] *= gain }
        }
        return n
    }

    func enqueueNext(_ buffer: AudioQueueBuffer, on queue: AudioQueue) throws -> PacketFeeder.Progress {
        guard source.isReady else { return .waiting }
        try prepare()
        let channels = join.channels
        if mixPending, let renderer {
            let wanted = min(join.frames, join.pureFrames)
            if mixesInBlocks == nil {
                // Mixed block by block as the frames come when the item is known to have them
                // all (the curve over `wanted` frames is then certain); gathered first otherwise,
                // as a shorter item shortens the curve.
                mixesInBlocks = (knownEnd(of: renderer) ?? 0) >= Int64(wanted)
                if mixesInBlocks == false { join.reserveHead(wanted) }
            }
            let held = join.heldFrames, mixed: Int
            if mixesInBlocks == true {
                while headFrames < wanted {
                    let space = join.blockSpace(frames: wanted - headFrames)
                    let n = try renderMixing(space.count / channels, into: space, wanted: wanted)
                    if n == 0 {
                        if renderDone { break }
                        return .waiting
                    }
                    if let base = space.baseAddress { join.mixIn(base, at: headFrames, frames: n, of: wanted) }
                    headFrames += n
                }
                join.endBlockMix(given: headFrames, of: wanted)
                mixed = wanted
            } else {
                while headFrames < wanted {
                    let n = try renderMixing(wanted - headFrames, into: join.headSpace(from: headFrames, frames: wanted - headFrames), wanted: wanted)
                    headFrames += n
                    if n == 0 {
                        if renderDone { break }
                        return .waiting
                    }
                }
                join.mix(headFrames: headFrames)
                mixed = headFrames
            }
            leadFrames = Int64(held - mixed)
            if mixed < join.frames { shortened(mixed) }
            headFrames = 0
            mixesInBlocks = nil
            mixPending = false
        }
        let capacity = buffer.capacity / (channels * 4)
        if let progress = try enqueueMiddle(buffer, on: queue, capacity: capacity) { return progress }
        if !renderDone, let renderer, let end = knownEnd(of: renderer) {
            // The frames before the item's last D, when its length is known, go straight into
            // the queue's buffer, not through the join's storage. What the join holds then (the
            // mix with the item before) all comes before them: it goes first, and the join is
            // empty from then on until the item's last D.
            let before = end - Int64(join.frames) - renderer.framesRendered
            if before > 0 {
                let n = try buffer.withUnsafeMutableBytes { raw -> Int in
                    var filled = join.take(upTo: capacity, keeping: 0, into: raw)
                    let wanted = filled + Int(min(Int64(capacity - filled), before))
                    let samples = raw.bindMemory(to: Float.self)
                    while filled < wanted {
                        let step = wanted - filled
                        let got = try render(step, into: UnsafeMutableBufferPointer(rebasing: samples[(filled * channels)..<((filled + step) * channels)]))
                        if got == 0 { break }
                        filled += got
                    }
                    return filled
                }
                if renderDone {
                    // Fewer frames than the source said, and nothing of them held: the next
                    // item's crossfade has nothing to mix into, and says so.
                    join.endedEarly = true
                }
                if n > 0 { return try enqueuePCM(buffer, frames: n, on: queue) }
                if !renderDone { return .waiting }
            }
        }
        var waiting = false
        while !renderDone && join.heldFrames - join.frames < capacity {
            // Rendered straight into the held frames: no copy on the way.
            let n = try join.append(upTo: CrossfadeJoin.blockFrames) { try render(CrossfadeJoin.blockFrames, into: $0) }
            if n == 0 {
                waiting = !renderDone
                if waiting { break } else { continue }
            }
        }
        if case .done = middle, renderDone, renderer?.framesRendered == 0 {
            // The packets ended the item (it had fewer frames than it said): nothing is held
            // for the next item's crossfade, which says so.
            join.endedEarly = true
        }
        if renderDone && followed == nil { followed = hasNext() }
        let keep = renderDone && followed == false ? 0 : join.frames
        let n = try buffer.withUnsafeMutableBytes { join.take(upTo: capacity, keeping: keep, into: $0) }
        if n > 0 { return try enqueuePCM(buffer, frames: n, on: queue) }
        return renderDone ? .finished : .waiting
    }

    /// ``render(_:into:)`` for the incoming item's frames mixed into the held ones. When the item
    /// fails there having given frames, the mix ends with them before the error is passed on: the
    /// outgoing item plays to its end, fading out after them as the curve says (as for an item
    /// shorter than it claimed), and the next item joins it gaplessly. When it gave none, the
    /// join is left as it was: the next item crossfades into the outgoing one.
    private func renderMixing(_ frames: Int, into destination: UnsafeMutableBufferPointer<Float>, wanted: Int) throws -> Int {
        do {
            return try render(frames, into: destination)
        } catch {
            // Nothing given: the join stays as it was, and the next item crossfades into the
            // outgoing one as if this one were not in the list (as when an item cannot be opened).
            if headFrames > 0 {
                if mixesInBlocks == true { join.endBlockMix(given: headFrames, of: wanted) } else { join.mix(headFrames: headFrames) }
            }
            headFrames = 0
            mixesInBlocks = nil
            mixPending = false
            throw error
        }
    }

    /// Enqueues `frames` frames of PCM in `buffer` (through the join: its stream and gain) and counts them.
    private func enqueuePCM(_ buffer: AudioQueueBuffer, frames: Int, on queue: AudioQueue) throws -> PacketFeeder.Progress {
        try join.enqueuePCM(buffer, frames: frames, on: queue)
        framesKept += Int64(frames)
        return .enqueued
    }

    /// The output frames `renderer` gives in all (at most the limit), when the item's length is known.
    private func knownEnd(of renderer: PacketSourceRenderer) -> Int64? {
        renderer.expectedFrames.map { expected in limit.map { min($0, expected) } ?? expected }
    }

    /// Whether the item's middle goes to the queue as packets: an item played as decoded (no
    /// conversion), of known length, from a source that reads out of order (a file, not a
    /// stream: the middle and the last frames are reached by seeks), whose decoder's pieces join
    /// into the bits of one decode (``/BufferQueue/AudioDecoderTraits/parallelRefusal``; linear
    /// PCM trivially). Its valid frames from where the render stands to its last D.
    private func decideMiddle(_ renderer: PacketSourceRenderer) -> Middle {
        let format = source.format
        guard limit == nil, !renderDone, source.isSeekable, source.peekPackets(from: 0, count: 0) != nil,
              renderer.passesThrough, let expected = renderer.expectedFrames,
              format.isLinearPCM || registry.traits(for: format).parallelRefusal(format) == nil else { return .rendered }
        let start = renderer.startFrame + renderer.framesRendered
        let end = renderer.startFrame + expected - Int64(join.frames)
        return end > start ? .packets(start: start, end: end) : .rendered
    }

    /// The item's middle as packets: what the join holds first (as PCM), then the packets in a
    /// stream of their own (with the item's gain), then a renderer of the item's last D frames
    /// from where they end. nil when the feeding goes on below (the middle is rendered here, or
    /// done).
    private func enqueueMiddle(_ buffer: AudioQueueBuffer, on queue: AudioQueue, capacity: Int) throws -> PacketFeeder.Progress? {
        if case .undecided = middle, let renderer { middle = decideMiddle(renderer) }
        if case .packets(let start, let end) = middle {
            if join.heldFrames > 0 {
                let n = try buffer.withUnsafeMutableBytes { join.take(upTo: capacity, keeping: 0, into: $0) }
                return try enqueuePCM(buffer, frames: n, on: queue)
            }
            let parameters = try join.beginPackets(of: source, gain: gain, on: queue)
            // The renderer has read ahead: from the first packet (a later one, the feeder seeks there itself).
            if start == 0 { try source.seek(toPacket: 0) }
            let feeder = PacketFeeder(source: source, startFrame: start, endFrame: end, registry: registry)
            feeder.firstFrameParameters = parameters
            middle = .feeding(feeder, end: end)
        }
        guard case .feeding(let feeder, let end) = middle else { return nil }
        let before = feeder.framesKept
        let progress = try feeder.enqueueNext(buffer, on: queue)
        framesKept += feeder.framesKept - before
        guard progress == .finished else { return progress }
        // The item's last D frames, rendered from where the packets end (mixed with the next
        // item's first, or enqueued as they are after the last).
        guard let makeRenderer else { return nil }
        firstFrame = startFrame
        renderer = try makeRenderer(source, end)
        middle = .done
        return nil
    }
}
