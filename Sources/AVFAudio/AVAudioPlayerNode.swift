import Foundation
import Synchronization
internal import BufferQueue
internal import AudioFileStream
internal import AudioPlayback

/// How a scheduled buffer plays.
public struct AVAudioPlayerNodeBufferOptions: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// The buffer plays again and again until another interrupts it or the player stops.
    public static let loops = AVAudioPlayerNodeBufferOptions(rawValue: 1 << 0)
    /// The buffer plays at once, cutting what plays short (its completion is called).
    public static let interrupts = AVAudioPlayerNodeBufferOptions(rawValue: 1 << 1)
    /// The buffer plays once the looping buffer playing now finishes its loop.
    public static let interruptsAtLoop = AVAudioPlayerNodeBufferOptions(rawValue: 1 << 2)
}

/// When a completion handler is called.
public enum AVAudioPlayerNodeCompletionCallbackType: Int, Sendable {
    /// The player has taken the data's last frame.
    case dataConsumed = 0
    /// The data's last frame has been rendered.
    case dataRendered = 1
    /// The data's last frame has been played by the device (rendered, in manual rendering).
    case dataPlayedBack = 2
}

/// A completion handler (the player is done with the data, or it was stopped).
public typealias AVAudioNodeCompletionHandler = () -> Void
/// A completion handler told which moment it is called at.
public typealias AVAudioPlayerNodeCompletionHandler = (AVAudioPlayerNodeCompletionCallbackType) -> Void

/// Plays buffers and file segments, scheduled ahead, at sample times (Apple's `AVAudioPlayerNode`).
///
/// A source node of the engine's graph. Its sample time (``playerTime(forNodeTime:)``) counts the
/// frames it has played since ``play()``, gaps included, and stands still while paused. What is
/// scheduled plays in order, each at its time when it has one (silence until then) or right after
/// the one before: gapless, frame for frame. Files play their valid frames (priming and padding
/// left out) at the player's format, converted where the file's rate or channels differ; a
/// buffer must have the player's channel count. Completion handlers are called once, in the order
/// scheduled, on a queue of the player's — also for what a ``stop()`` drops.
///
/// In a live engine, files are decoded ahead on a queue of the player's (half a second, the next
/// segment too, from the moment the player's format is known) and the render thread only copies;
/// a render that finds nothing decoded yet plays silence for what is missing and goes on. In
/// manual rendering they are decoded on the rendering thread, as they play: exactly, whatever
/// the pace.
open class AVAudioPlayerNode: AVAudioNode, AVAudioMixing {
    let shared = PlayerShared()

    public override init() {
        super.init()
    }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        shared.configure(format: format, context: context)
        return try AudioProcessorSourceNode(name: "player", sampleRate: format.sampleRate, channels: format.channels,
                                            processor: PlayerProcessor(shared: shared, clock: context.clock, channels: format.channels,
                                                                       ratio: format.sampleRate / context.outputRate, offline: context.offline))
    }

    // MARK: scheduling buffers

    /// Plays `buffer` after what is scheduled.
    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, completionHandler: AVAudioNodeCompletionHandler? = nil) {
        scheduleBuffer(buffer, at: nil, options: [], completionHandler: completionHandler)
    }

    /// Plays `buffer` at player time `when` (nil: after what is scheduled), as `options` say.
    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, at when: AVAudioTime?, options: AVAudioPlayerNodeBufferOptions = [],
                             completionHandler: AVAudioNodeCompletionHandler? = nil) {
        schedule(.buffer(buffer), frames: Int64(buffer.frameLength), at: when, options: options, completion: completionHandler.map { .plain($0) })
    }

    /// Plays `buffer` after what is scheduled; the handler is called at `callbackType`'s moment.
    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType,
                             completionHandler: AVAudioPlayerNodeCompletionHandler? = nil) {
        scheduleBuffer(buffer, at: nil, options: [], completionCallbackType: callbackType, completionHandler: completionHandler)
    }

    /// Plays `buffer` at `when` as `options` say; the handler is called at `callbackType`'s moment.
    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, at when: AVAudioTime?, options: AVAudioPlayerNodeBufferOptions = [],
                             completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType,
                             completionHandler: AVAudioPlayerNodeCompletionHandler? = nil) {
        schedule(.buffer(buffer), frames: Int64(buffer.frameLength), at: when, options: options,
                 completion: completionHandler.map { .typed(callbackType, $0) })
    }

    // MARK: scheduling files

    /// Plays the whole file at `when` (nil: after what is scheduled).
    open func scheduleFile(_ file: AVAudioFile, at when: AVAudioTime?, completionHandler: AVAudioNodeCompletionHandler? = nil) {
        scheduleSegment(file, startingFrame: 0, frameCount: AVAudioFrameCount(clamping: file.length), at: when, completionHandler: completionHandler)
    }

    /// Plays the whole file; the handler is called at `callbackType`'s moment.
    open func scheduleFile(_ file: AVAudioFile, at when: AVAudioTime?, completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType,
                           completionHandler: AVAudioPlayerNodeCompletionHandler? = nil) {
        scheduleSegment(file, startingFrame: 0, frameCount: AVAudioFrameCount(clamping: file.length), at: when,
                        completionCallbackType: callbackType, completionHandler: completionHandler)
    }

    /// Plays `frameCount` frames of the file from `startFrame` (exactly: a seek decodes from a
    /// packet before and trims) at `when`.
    open func scheduleSegment(_ file: AVAudioFile, startingFrame startFrame: AVAudioFramePosition, frameCount numberFrames: AVAudioFrameCount,
                              at when: AVAudioTime?, completionHandler: AVAudioNodeCompletionHandler? = nil) {
        scheduleSegment(file, startFrame: startFrame, frames: numberFrames, at: when, completion: completionHandler.map { .plain($0) })
    }

    /// As ``scheduleSegment(_:startingFrame:frameCount:at:completionHandler:)``; the handler is
    /// called at `callbackType`'s moment.
    open func scheduleSegment(_ file: AVAudioFile, startingFrame startFrame: AVAudioFramePosition, frameCount numberFrames: AVAudioFrameCount,
                              at when: AVAudioTime?, completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType,
                              completionHandler: AVAudioPlayerNodeCompletionHandler? = nil) {
        scheduleSegment(file, startFrame: startFrame, frames: numberFrames, at: when, completion: completionHandler.map { .typed(callbackType, $0) })
    }

    private func scheduleSegment(_ file: AVAudioFile, startFrame: AVAudioFramePosition, frames: AVAudioFrameCount, at when: AVAudioTime?,
                                 completion: PlayerCompletion?) {
        let start = max(0, min(startFrame, file.length))
        let count = min(Int64(frames), file.length - start)
        // A file ends where its renderer does (its frames at the player's rate are counted there).
        schedule(.file(file.url.path, start: start, count: count), frames: count > 0 ? .max : 0, at: when, options: [], completion: completion)
    }

    private func schedule(_ source: SegmentSource, frames: Int64, at when: AVAudioTime?, options: AVAudioPlayerNodeBufferOptions,
                          completion: PlayerCompletion?) {
        if case .buffer(let buffer) = source, let format = coreFormat ?? attachedEngine?.format(of: self),
           Int(buffer.format.channelCount) != format.channels {
            FileHandle.standardError.write(Data("AVAudioPlayerNode: a buffer of \(buffer.format.channelCount) channels cannot play on a player of \(format.channels); it is skipped\n".utf8))
            shared.schedule(.buffer(buffer), frames: 0, at: nil, options: [], completion: completion)
            return
        }
        let at = when.flatMap { $0.isSampleTimeValid ? $0.sampleTime : nil }
        shared.schedule(source, frames: max(frames, 0), at: at, options: options, completion: completion)
    }

    // MARK: async scheduling

    /// Schedules `buffer` and returns when the player is done with it (or was stopped).
    open func scheduleBuffer(_ buffer: AVAudioPCMBuffer, at when: AVAudioTime? = nil, options: AVAudioPlayerNodeBufferOptions = []) async {
        let done = PlayerWaiter()
        scheduleBuffer(buffer, at: when, options: options) { done.finish(.dataConsumed) }
        _ = await done.wait()
    }

    /// Schedules the file and returns at `callbackType`'s moment.
    open func scheduleFile(_ file: AVAudioFile, at when: AVAudioTime?,
                           completionCallbackType callbackType: AVAudioPlayerNodeCompletionCallbackType) async -> AVAudioPlayerNodeCompletionCallbackType {
        let done = PlayerWaiter()
        scheduleFile(file, at: when, completionCallbackType: callbackType) { done.finish($0) }
        return await done.wait()
    }

    // MARK: playing

    /// Starts (or resumes) playing from the next render.
    open func play() {
        shared.play(atNodeTime: nil)
    }

    /// Starts playing at `when`: a sample time of the engine's output (``AVAudioNode/lastRenderTime``
    /// plus frames), or a host time; nil: from the next render.
    open func play(at when: AVAudioTime?) {
        guard let when else { return play() }
        if when.isSampleTimeValid {
            let rate = when.sampleRate > 0 ? when.sampleRate : attachedEngine?.renderClock?.rate ?? 0
            let outputRate = attachedEngine?.renderClock?.rate ?? rate
            let sample = rate > 0 && outputRate > 0 ? Int64((Double(when.sampleTime) * outputRate / rate).rounded()) : when.sampleTime
            shared.play(atNodeTime: sample)
        } else if when.isHostTimeValid, let (clock, rate) = attachedEngine?.renderClock, clock.rendered.load(ordering: .acquiring) {
            let lastHost = clock.hostTime.load(ordering: .relaxed)
            let lastSample = clock.renderStart.load(ordering: .relaxed)
            let delta = (Double(when.hostTime) - Double(lastHost)) / 1e9 * rate
            shared.play(atNodeTime: lastSample + Int64(delta.rounded()))
        } else {
            play()
        }
    }

    /// Stops playing and keeps the place (and what is scheduled).
    open func pause() {
        shared.pause()
    }

    /// Stops, drops what is scheduled (their completion handlers are called) and sets the sample time back to 0.
    open func stop() {
        shared.stop()
    }

    /// Stops and drops what is scheduled.
    open override func reset() {
        shared.stop()
    }

    /// Whether the player plays (or waits for its start time).
    open var isPlaying: Bool { shared.isPlaying }

    /// Decodes nothing ahead: files are decoded as they play. Kept for source compatibility.
    open func prepare(withFrameCount frameCount: AVAudioFrameCount) {}

    /// The player's sample time at engine time `nodeTime` (nil when not playing).
    open func playerTime(forNodeTime nodeTime: AVAudioTime) -> AVAudioTime? {
        guard nodeTime.isSampleTimeValid, let (player, rate) = shared.playerTime(forNodeTime: nodeTime.sampleTime, nodeRate: nodeTime.sampleRate) else { return nil }
        return AVAudioTime(sampleTime: player, atRate: rate)
    }

    /// The engine time of player sample time `playerTime` (nil when not playing).
    open func nodeTime(forPlayerTime playerTime: AVAudioTime) -> AVAudioTime? {
        guard playerTime.isSampleTimeValid, let (node, rate) = shared.nodeTime(forPlayerTime: playerTime.sampleTime) else { return nil }
        return AVAudioTime(sampleTime: node, atRate: rate)
    }

}

/// Waits for one completion (the async scheduling calls).
private final class PlayerWaiter: Sendable {
    private let state = Lock<(result: AVAudioPlayerNodeCompletionCallbackType?, waiter: CheckedContinuation<AVAudioPlayerNodeCompletionCallbackType, Never>?)>((nil, nil))

    func finish(_ type: AVAudioPlayerNodeCompletionCallbackType) {
        let waiter = state.withLock { s -> CheckedContinuation<AVAudioPlayerNodeCompletionCallbackType, Never>? in
            s.result = type
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: type)
    }

    func wait() async -> AVAudioPlayerNodeCompletionCallbackType {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s -> AVAudioPlayerNodeCompletionCallbackType? in
                if s.result == nil { s.waiter = continuation }
                return s.result
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// What a segment plays: a buffer, or frames of a file (opened when it starts playing).
enum SegmentSource {
    case buffer(AVAudioPCMBuffer)
    case file(String, start: Int64, count: Int64)
}

/// A completion handler as scheduled.
enum PlayerCompletion {
    case plain(AVAudioNodeCompletionHandler)
    case typed(AVAudioPlayerNodeCompletionCallbackType, AVAudioPlayerNodeCompletionHandler)
}

/// The player's state: its schedule, whether it plays, its timeline, and the completions to
/// call. The render side takes it under the lock (waiting for it only in an offline render; a
/// live render that finds it held plays silence this once).
struct PlayerState {
    struct Segment {
        let source: SegmentSource
        let frames: Int64
        let at: Int64?
        let options: AVAudioPlayerNodeBufferOptions
        let completion: PlayerCompletion?
        var position: Int64 = 0
        /// Offline: the file's renderer, on the rendering thread.
        var renderer: AudioFileRenderer?
        /// Live: the file decoded ahead on the player's queue.
        var ahead: FileAhead?
    }

    var segments: [Segment] = []
    var playing = false
    /// Where play starts, in output frames (nil: the next render).
    var startNodeTime: Int64?
    /// While playing: a node time (in player frames) and the player time it maps to.
    var anchor: (node: Int64, player: Int64)?
    /// Frames played since play().
    var playerTime: Int64 = 0
    /// Completions to call (the render side or stop() put them here).
    var finished: [PlayerCompletion] = []
    /// Segments the render finished: released on the player's queue, never on the render thread
    /// (a buffer's last reference may be the schedule's). Both lists have room reserved for every
    /// scheduled segment when it is scheduled, so the render side's appends do not allocate.
    var retired: [Segment] = []
    var format = NodeFormat.standard
    var outputRate = 44_100.0
    var offline = false
    /// The player renders in a live engine (its format known): files are decoded ahead.
    var live = false
    /// The graph the player renders in (nil before its first), for the device's latency.
    weak var graph: AudioGraph?
    /// The frames of the render that finished the last completion (it is heard by their end).
    var lastRenderFrames = 0
}

/// What the player and its render side share.
final class PlayerShared: Sendable {
    let state = Lock<PlayerState>(PlayerState())
    private let queue = DispatchQueue(label: "AVAudioPlayerNode completions")
    private let wake: WakeSignal
    /// Where files are decoded ahead of a live render, and its wake-up (the render signals it as it consumes).
    private let worker = DispatchQueue(label: "AVAudioPlayerNode decoding")
    let decodeAhead: WakeSignal
    /// The file segments to decode ahead, in the order scheduled: the decoding queue's list, under
    /// a lock of its own (the render never takes it, so decoding never keeps the render from the
    /// schedule). Made on the control side; a segment the render finished or a stop dropped is
    /// marked and leaves the list at the next fill.
    private let aheads = Lock<[FileAhead]>([])

    init() {
        wake = WakeSignal(queue: queue)
        decodeAhead = WakeSignal(queue: worker)
        wake.setHandler { [weak self] in self?.deliver() }
        decodeAhead.setHandler { [weak self] in self?.fillAhead() }
    }

    deinit {
        wake.cancel()
        decodeAhead.cancel()
    }

    /// On the decoding queue: the first two file segments not finished (the one playing and the
    /// next, for a gapless join) are filled.
    private func fillAhead() {
        let next = aheads.withLock { list -> [FileAhead] in
            list.removeAll { $0.dropped.load(ordering: .acquiring) }
            return Array(list.prefix(2))
        }
        for ahead in next { ahead.fill() }
    }

    /// Control side, under the state lock: a live player's file segment gets its decoder ahead.
    private func prepareAhead(_ segment: inout PlayerState.Segment, _ s: PlayerState) {
        guard s.live, segment.ahead == nil, case .file(let path, let start, let count) = segment.source else { return }
        let ahead = FileAhead(path: path, start: start, count: count, format: s.format, on: worker)
        segment.ahead = ahead
        aheads.withLock { $0.append(ahead) }
    }

    /// Control side: segments leave (a stop, an interruption, a new format).
    private func drop(_ segments: [PlayerState.Segment]) {
        for segment in segments { segment.ahead?.dropped.store(true, ordering: .releasing) }
    }

    func configure(format: NodeFormat, context: NodeContext) {
        state.withLock {
            $0.format = format
            $0.outputRate = context.outputRate
            $0.offline = context.offline
            $0.live = !context.offline
            $0.graph = context.graph
            drop($0.segments)
            for index in $0.segments.indices {
                $0.segments[index].renderer = nil
                $0.segments[index].ahead = nil
            }
            if let first = $0.segments.first, first.position > 0 {
                // A new format: the file segment playing reopens at its place.
                $0.segments[0] = PlayerState.Segment(source: Self.advanced(first.source, by: first.position),
                                                     frames: first.frames == .max ? .max : first.frames - first.position,
                                                     at: nil, options: first.options, completion: first.completion)
            }
            let s = $0
            for index in $0.segments.indices { prepareAhead(&$0.segments[index], s) }
            $0.anchor = nil
        }
        decodeAhead.signal()
    }

    private static func advanced(_ source: SegmentSource, by frames: Int64) -> SegmentSource {
        switch source {
        case .buffer: return source
        case .file(let path, let start, let count):
            let consumed = min(frames, count)
            return .file(path, start: start + consumed, count: count - consumed)
        }
    }

    func schedule(_ source: SegmentSource, frames: Int64, at: Int64?, options: AVAudioPlayerNodeBufferOptions, completion: PlayerCompletion?) {
        let ready = state.withLock { s -> Bool in
            var segment = PlayerState.Segment(source: source, frames: frames, at: at, options: options, completion: completion)
            if frames == 0 {
                if let completion { s.finished.append(completion) }
                return true
            }
            if options.contains(.interrupts), !s.segments.isEmpty {
                // What plays now is cut short; what waited behind it is dropped.
                for dropped in s.segments { if let c = dropped.completion { s.finished.append(c) } }
                drop(s.segments)
                s.segments.removeAll()
            }
            prepareAhead(&segment, s)
            s.segments.append(segment)
            s.finished.reserveCapacity(s.finished.count + s.segments.count)
            s.retired.reserveCapacity(s.retired.count + s.segments.count)
            return !s.finished.isEmpty
        }
        if ready { wake.signal() }
        decodeAhead.signal()
    }

    func play(atNodeTime node: Int64?) {
        state.withLock { s in
            guard !s.playing else { return }
            s.playing = true
            s.startNodeTime = node
            s.anchor = nil
        }
    }

    func pause() {
        state.withLock { s in
            s.playing = false
            s.anchor = nil
            s.startNodeTime = nil
        }
    }

    func stop() {
        state.withLock { s in
            for segment in s.segments { if let c = segment.completion { s.finished.append(c) } }
            drop(s.segments)
            s.segments.removeAll()
            s.playing = false
            s.anchor = nil
            s.startNodeTime = nil
            s.playerTime = 0
        }
        wake.signal()
    }

    var isPlaying: Bool { state.withLock { $0.playing } }

    func playerTime(forNodeTime node: Int64, nodeRate: Double) -> (Int64, Double)? {
        state.withLock { s in
            guard s.playing, let anchor = s.anchor else { return nil }
            let rate = nodeRate > 0 ? nodeRate : s.outputRate
            let nodeInPlayer = Int64((Double(node) * s.format.sampleRate / rate).rounded())
            return (anchor.player + nodeInPlayer - anchor.node, s.format.sampleRate)
        }
    }

    func nodeTime(forPlayerTime player: Int64) -> (Int64, Double)? {
        state.withLock { s in
            guard s.playing, let anchor = s.anchor else { return nil }
            let nodeInPlayer = anchor.node + player - anchor.player
            return (Int64((Double(nodeInPlayer) * s.outputRate / s.format.sampleRate).rounded()), s.outputRate)
        }
    }

    /// The render side finished something.
    func signal() { wake.signal() }

    /// On the player's queue: calls the completions in order.
    private func deliver() {
        let (done, latency, offline, retired) = state.withLock { s -> ([PlayerCompletion], Double, Bool, [PlayerState.Segment]) in
            defer {
                s.finished.removeAll(keepingCapacity: true)
                s.retired.removeAll(keepingCapacity: true)
            }
            // Played back: what the device holds (its sink's latency) and the render's own frames.
            let frames = (s.graph?.outputLatencyFrames ?? 0) + s.lastRenderFrames
            return (s.finished, Double(frames) / s.outputRate, s.offline, s.retired)
        }
        defer { withExtendedLifetime(retired) {} }
        for completion in done {
            switch completion {
            case .plain(let handler): handler()
            case .typed(let type, let handler):
                if type == .dataPlayedBack && !offline && latency > 0 {
                    let box = Lock<AVAudioPlayerNodeCompletionHandler?>(handler)
                    queue.asyncAfter(deadline: .now() + latency) { box.withLock { $0 }?(type) }
                } else {
                    handler(type)
                }
            }
        }
    }
}

/// The player's render side.
final class PlayerProcessor: AudioNodeProcessor {
    private let shared: PlayerShared
    private let clock: EngineClock
    private let channels: Int
    private let ratio: Double
    private let offline: Bool

    init(shared: PlayerShared, clock: EngineClock, channels: Int, ratio: Double, offline: Bool) {
        self.shared = shared
        self.clock = clock
        self.channels = channels
        self.ratio = ratio
        self.offline = offline
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let nodeTime = Int64((Double(clock.renderStart.load(ordering: .relaxed)) * ratio).rounded())
        let body = { (s: inout PlayerState) -> Bool in self.render(&s, into: out, frames: frames, nodeTime: nodeTime) }
        let finished = offline ? shared.state.withLock(body) : shared.state.withLockIfAvailable(body)
        switch finished {
        case nil: out.update(repeating: 0, count: frames * channels)
        case true?: shared.signal()
        case false?: break
        }
        return (frames, .filled)
    }

    /// Fills `frames` frames; true when a completion is ready or a segment retired (for the player's queue).
    private func render(_ s: inout PlayerState, into out: UnsafeMutablePointer<Float>, frames: Int, nodeTime: Int64) -> Bool {
        guard s.playing else {
            out.update(repeating: 0, count: frames * channels)
            return false
        }
        var done = 0
        if s.anchor == nil {
            var lead = 0
            if let start = s.startNodeTime {
                let startHere = Int64((Double(start) * ratio).rounded())
                lead = Int(max(0, min(startHere - nodeTime, Int64(frames))))
            }
            if lead == frames {
                out.update(repeating: 0, count: frames * channels)
                return false
            }
            out.update(repeating: 0, count: lead * channels)
            done = lead
            s.anchor = (nodeTime + Int64(lead), s.playerTime)
            s.startNodeTime = nil
        }
        let before = s.finished.count + s.retired.count
        s.lastRenderFrames = frames
        rendering: while done < frames {
            guard var segment = s.segments.first else {
                (out + done * channels).update(repeating: 0, count: (frames - done) * channels)
                s.playerTime += Int64(frames - done)
                done = frames
                break
            }
            if let at = segment.at, at > s.playerTime {
                let gap = Int(min(at - s.playerTime, Int64(frames - done)))
                (out + done * channels).update(repeating: 0, count: gap * channels)
                s.playerTime += Int64(gap)
                done += gap
                continue
            }
            let want = Int(min(Int64(frames - done), segment.frames - segment.position))
            var n = 0
            switch segment.source {
            case .buffer(let buffer):
                buffer.interleavedFloats(into: out + done * channels, from: Int(segment.position), count: want)
                n = want
            case .file(let path, let start, let count):
                if offline {
                    n = renderFile(&segment, path: path, start: start, count: count, format: s.format, into: out + done * channels, frames: want)
                } else {
                    let (copied, finished) = copyAhead(segment.ahead, starting: segment.position == 0, into: out + done * channels, frames: want)
                    if !finished && copied < want {
                        // Not decoded yet: what is missing is silence, and the file goes on at the next render.
                        segment.position += Int64(copied)
                        s.segments[0] = segment
                        (out + (done + copied) * channels).update(repeating: 0, count: (frames - done - copied) * channels)
                        s.playerTime += Int64(frames - done)
                        done = frames
                        break rendering
                    }
                    n = copied
                }
            }
            segment.position += Int64(n)
            s.playerTime += Int64(n)
            done += n
            if segment.position >= segment.frames || n < want {
                let cut = s.segments.count > 1 && !s.segments[1].options.isDisjoint(with: [.interrupts, .interruptsAtLoop])
                if segment.options.contains(.loops) && !cut && n > 0 {
                    segment.position = 0
                    s.segments[0] = segment
                } else {
                    if let c = segment.completion { s.finished.append(c) }
                    segment.ahead?.dropped.store(true, ordering: .releasing)
                    s.segments.removeFirst()
                    s.retired.append(segment)
                }
            } else {
                s.segments[0] = segment
            }
        }
        return s.finished.count + s.retired.count > before
    }

    /// Live: copies up to `frames` frames decoded ahead; `finished` once the file's last frame is
    /// out. A segment `starting` waits (gives nothing) until a whole render's frames are decoded,
    /// so that it does not begin with a gap.
    private func copyAhead(_ ahead: FileAhead?, starting: Bool, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, finished: Bool) {
        defer { shared.decodeAhead.signal() }
        guard let ahead else { return (0, false) }
        let ended = ahead.ended.load(ordering: .acquiring)
        let available = ahead.ring.readable / channels
        if starting && !ended && available < frames { return (0, false) }
        let n = min(available, frames)
        var offset = 0
        if n > 0 {
            ahead.ring.consume(count: n * channels) { pointer, _, count in
                (out + offset).update(from: pointer, count: count)
                offset += count
            }
        }
        return (n, ended && n == available)
    }

    /// Decodes up to `frames` frames of a file segment (opening it at its first); fewer at the
    /// file's end or where it is damaged (said once, on standard error).
    private func renderFile(_ segment: inout PlayerState.Segment, path: String, start: Int64, count: Int64, format: NodeFormat,
                            into out: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        do {
            let renderer: AudioFileRenderer
            if let open = segment.renderer {
                renderer = open
            } else {
                let file = try AudioFile(path: path)
                renderer = try AudioFileRenderer(file: file, startFrame: start, endFrame: start + count, sampleRate: format.sampleRate,
                                                 channels: format.channels)
                segment.renderer = renderer
            }
            var done = 0
            while done < frames {
                let n = try renderer.render(into: UnsafeMutableBufferPointer(start: out + done * channels, count: (frames - done) * channels),
                                            frames: frames - done)
                if n == 0 { break }
                done += n
            }
            if done < frames { (out + done * channels).update(repeating: 0, count: (frames - done) * channels) }
            return done
        } catch {
            FileHandle.standardError.write(Data("AVAudioPlayerNode: \(path): \(error); the segment ends at frame \(start + segment.position)\n".utf8))
            out.update(repeating: 0, count: frames * channels)
            return 0
        }
    }
}

/// A file segment decoded ahead of a live render: the ring the decoding queue fills and the
/// render side empties, and whether the file's last frame is in it.
final class FileAhead: Sendable {
    static let chunk = 4096
    let ring: SampleRing
    let ended = Atomic<Bool>(false)
    /// The segment finished playing or was dropped: nothing more to decode.
    let dropped = Atomic<Bool>(false)
    private let decoder: QueueBound<AheadDecoder>

    init(path: String, start: Int64, count: Int64, format: NodeFormat, on queue: DispatchQueue) {
        ring = SampleRing(minimumCapacity: max(Int(format.sampleRate / 2), 2 * Self.chunk) * format.channels)
        decoder = QueueBound(AheadDecoder(path: path, start: start, count: count, format: format), on: queue)
    }

    /// On the decoding queue: decodes until the ring is full or the file has ended.
    func fill() {
        guard !ended.load(ordering: .relaxed), !dropped.load(ordering: .acquiring) else { return }
        let channels = decoder.value.format.channels
        while ring.writable >= Self.chunk * channels {
            let n = decoder.value.decode(frames: Self.chunk)
            if n == 0 {
                ended.store(true, ordering: .releasing)
                return
            }
            decoder.value.scratch.withUnsafeBufferPointer { ring.write($0.baseAddress!, count: n * channels) }
        }
    }
}

/// The decoding queue's part of a file decoded ahead: the file's renderer (opened at the first
/// fill) and its scratch memory.
final class AheadDecoder {
    let path: String
    let start: Int64
    let count: Int64
    let format: NodeFormat
    var scratch: [Float]
    private var renderer: AudioFileRenderer?
    private var failed = false

    init(path: String, start: Int64, count: Int64, format: NodeFormat) {
        self.path = path
        self.start = start
        self.count = count
        self.format = format
        scratch = [Float](repeating: 0, count: FileAhead.chunk * format.channels)
    }

    /// Up to `frames` frames into ``scratch``; 0 at the end, or where the file is damaged (said
    /// once, on standard error).
    func decode(frames: Int) -> Int {
        guard !failed else { return 0 }
        do {
            if renderer == nil {
                renderer = try AudioFileRenderer(file: AudioFile(path: path), startFrame: start, endFrame: start + count,
                                                 sampleRate: format.sampleRate, channels: format.channels)
            }
            guard let renderer else { return 0 }
            return try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: frames) }
        } catch {
            failed = true
            FileHandle.standardError.write(Data("AVAudioPlayerNode: \(path): \(error); the segment ends there\n".utf8))
            return 0
        }
    }
}
