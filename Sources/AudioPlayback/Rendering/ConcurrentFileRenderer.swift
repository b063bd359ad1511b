import AudioFileStream
import BufferQueue
import Dispatch

/// Renders a whole ``/AudioFileStream/AudioFile`` offline on several threads, with output bit-identical to
/// ``AudioFileRenderer``'s: the file's valid frames are split into chunks at packet boundaries,
/// each chunk is decoded by its own ``AudioFileRenderer`` (its own queue and decoder handle)
/// starting a few packets early — the pre-roll of ``PacketFeeder/preRollPackets(for:rollDistance:registry:)``,
/// enough for the MP3 bit reservoir and synthesis overlap or the AAC overlap to converge — and the
/// frames are handed out with their position, so a seekable destination joins them by writing
/// each piece where it belongs.
///
/// Only formats whose decoder says its pieces join bit-exactly (``/BufferQueue/AudioDecoderTraits/parallelRefusal``)
/// are split; any other file renders on the calling thread (``sequentialReason`` says why), so
/// one code path serves every file. With the codec modules registered that is MP3 (libmpg123),
/// AAC-LC (libfaad2), ALAC,
/// µ-law and A-law; the decoder's own module documents why the others are not. Where the decoder
/// chooses its start (``/BufferQueue/AudioDecoderTraits/decodeStart``), every chunk starts there. A file the
/// decoder finds to have another rate or channel count than declared (HE-AAC signalled only in
/// band), and a file shorter than two chunks, render on one thread too.
///
/// Each join is checked: a chunk decodes a quarter of a second past its end, and the next chunk's
/// first frames must equal those. A chunk that cannot be joined exactly — the check fails (AAC
/// whose encoder used perceptual noise substitution: libfaad2 draws its noise from a generator
/// that runs from the start of the stream), the decoded format differs from the first chunk's,
/// the stream changes rate inside it, a packet fails to decode, or it yields another number of
/// frames than its range — makes the whole render start over sequentially from frame 0
/// (``sequentialReason`` then says what was found); pieces already delivered are delivered again.
///
/// ```swift
/// let renderer = try ConcurrentFileRenderer(file: file, jobs: 2)
/// let writer = try WAVFileWriter(path: "out.wav", sampleRate: Int(renderer.outputFormat.sampleRate),
///                                channels: renderer.outputFormat.channelsPerFrame)
/// let frames = try renderer.render { frame, samples in try writer.write(samples, atFrame: frame) }
/// writer.truncate(toFrames: frames)
/// writer.close()
/// ```
public final class ConcurrentFileRenderer: Sendable {
    /// The file rendered.
    public let file: AudioFile
    /// Threads the render uses (1 when the file is not split).
    public let jobs: Int
    /// The chunks, as ranges of valid frames (the last one open-ended: it runs to the end of the
    /// file whatever its length); one chunk when the file is not split.
    public let chunks: [Range<Int64>]
    /// Interleaved float32 at the decoded rate and channel count, as ``AudioFileRenderer`` gives.
    public let outputFormat: AudioStreamDescription
    /// Frames the render will produce when the file has gapless numbers (nil otherwise).
    public let expectedFrames: Int64?
    private let registry: AudioDecoderRegistry
    private let decodedFormat: AudioStreamDescription
    /// Frames each join is checked over: 16 packets, at least 0.25 s.
    private let overlapFrames: Int64
    private let state: Lock<State>

    private struct State {
        var first: AudioFileRenderer?
        var sequentialReason: String?
        var rendered: Int64 = 0
        var rendering = false
        var converterError: AudioQueueError?
    }

    /// Frames in a chunk when none is asked for: an eighth of each job's share, at least
    /// 10 s, so the pre-roll costs under 1 % and a slow chunk holds no other thread up for long.
    public static let minimumChunkSeconds = 10.0

    /// Why `file` cannot be split, or nil when it can (before decoding: the decoder's output can
    /// still reveal HE-AAC signalled implicitly). The decoder `registry` would choose answers for
    /// its format.
    public static func splitRefusal(for file: AudioFile, registry: AudioDecoderRegistry = .shared) -> String? {
        let format = file.formatList.first ?? file.dataFormat
        if let refusal = registry.traits(for: format).parallelRefusal(format) { return refusal }
        if file.links.count > 1 { return "the stream is a chain of \(file.links.count) links, each trimmed on its own" }
        return file.packetCount >= 2 ? nil : "the file has fewer than two packets"
    }

    /// - Parameters:
    ///   - file: the file to render.
    ///   - jobs: threads to decode on (at least 1; more than the chunks are not used).
    ///   - chunkFrames: frames per chunk, in valid frames of the file's format (nil: the file's
    ///     valid frames divided into eight chunks per job, each at least
    ///     ``minimumChunkSeconds`` long). Chunks end at packet boundaries.
    ///   - registry: where decoders come from (register `MPG123Decoder` / `FAADDecoder` first).
    /// - Throws: what ``AudioFileRenderer`` throws for the file (no decoder registered, …).
    public init(file: AudioFile, jobs: Int, chunkFrames: Int64? = nil, registry: AudioDecoderRegistry = .shared) throws {
        self.file = file
        self.registry = registry
        var refusal = Self.splitRefusal(for: file, registry: registry)
        let source = FilePacketSource(file: file)
        let format = source.format
        let priming = Int64(file.packetTableInfo?.primingFrames ?? 0)
        let valid = source.duration?.frames ?? 0
        // Chunk boundaries on packet starts.
        var bounds: [Int64] = [0]
        if refusal == nil {
            let wanted = chunkFrames ?? max(valid / Int64(max(jobs, 1) * 8), Int64(Self.minimumChunkSeconds * format.sampleRate))
            var target = Int64(max(wanted, 1))
            while target < valid {
                if let packet = source.packet(forFrame: priming + target), let start = source.frame(forPacket: packet) {
                    let boundary = start - priming
                    if boundary > bounds[bounds.count - 1] && boundary < valid { bounds.append(boundary) }
                }
                target = max(target, bounds[bounds.count - 1]) + max(wanted, 1)
            }
            if bounds.count < 2 { refusal = "the file is shorter than two chunks" }
            // Where the decoder chooses its start, every chunk must have one.
            let preRoll = PacketFeeder.preRollPackets(for: format, rollDistance: source.rollDistance, registry: registry)
            if let unmatched = bounds.dropFirst().first(where: { boundary in
                source.packet(forFrame: priming + boundary).map {
                    PacketFeeder.decodeStart(before: $0, preRoll: preRoll, source: source, registry: registry) == nil
                } ?? true
            }) {
                refusal = "the decoder finds no packet to start an exact decode of valid frame \(unmatched) from (a damaged stream?)"
            }
        }
        var chunks: [Range<Int64>] = []
        for (index, start) in bounds.enumerated() {
            chunks.append(start..<(index + 1 < bounds.count ? bounds[index + 1] : Int64.max))
        }
        let overlap = Int64(max(16 * max(format.framesPerPacket, 1), Int(format.sampleRate / 4)))
        let first = try AudioFileRenderer(file: file, endFrame: refusal == nil ? chunks[0].upperBound + overlap : nil, registry: registry)
        decodedFormat = first.queue.outputFormat
        outputFormat = first.outputFormat
        if refusal == nil, decodedFormat.sampleRate != format.sampleRate || decodedFormat.channelsPerFrame != format.channelsPerFrame {
            refusal = "the decoder gives \(decodedFormat.sampleRate) Hz, \(decodedFormat.channelsPerFrame) channels where the stream declares "
                + "\(format.sampleRate) Hz, \(format.channelsPerFrame) (HE-AAC signalled implicitly, whose SBR and PS do not converge bit-exactly, "
                + "or a stream that changes format)"
        }
        if refusal != nil {
            state = Lock(State(first: try AudioFileRenderer(file: file, registry: registry), sequentialReason: refusal))
            self.chunks = [0..<Int64.max]
            self.jobs = 1
        } else {
            state = Lock(State(first: first))
            self.chunks = chunks
            self.jobs = max(1, min(jobs, chunks.count))
        }
        expectedFrames = file.packetTableInfo?.validFrames
        overlapFrames = overlap
    }

    /// Why the render runs on one thread (the file cannot be split, or a chunk could not be joined
    /// exactly and the render started over); nil while it is split.
    public var sequentialReason: String? { state.withLock { $0.sequentialReason } }
    /// Problems the decoder reported (corrupt packets) in a render on one thread, if any; a split
    /// render has none (a chunk with one starts the render over on one thread).
    public var lastConverterError: AudioQueueError? { state.withLock { $0.converterError } }
    /// Frames delivered so far (a restart counts again from 0).
    public var framesRendered: Int64 { state.withLock { $0.rendered } }

    /// Renders every frame once and returns how many there are. `deliver(frame, samples)` gets
    /// interleaved float32 in ``outputFormat`` for the frames from `frame` on: in order within a
    /// chunk, concurrently across chunks (from threads of its own), in pieces of at most 8192
    /// frames. After a restart (see ``sequentialReason``) it gets every frame again, from frame 0,
    /// on the calling thread; the last delivery of a frame is the one to keep, and frames at or past
    /// the returned count are not part of the file (a destination that saw more truncates).
    ///
    /// Blocks the calling thread until every thread is done: call it from a thread of your own,
    /// not from a task of Swift's cooperative pool. It can run once.
    /// - Throws: what `deliver` throws (the other threads stop at their next piece); what the
    ///   sequential render throws for a damaged file, after delivering the frames before it;
    ///   ``/BufferQueue/AudioQueueError/Code/invalidRunState`` on a second call.
    public func render(_ deliver: @escaping @Sendable (_ frame: Int64, _ samples: UnsafeBufferPointer<Float>) throws -> Void) throws -> Int64 {
        let starts = state.withLock { state in
            defer { state.rendering = true }
            return !state.rendering
        }
        guard starts else { throw AudioQueueError(.invalidRunState, "a ConcurrentFileRenderer renders once") }
        if chunks.count == 1, let first = takeFirst() { return try renderSequentially(first, deliver) }
        let work = Lock(Work())
        let group = DispatchGroup()
        for _ in 0..<jobs {
            group.enter()
            OwnThread.start(name: "ConcurrentFileRenderer") { [self] in
                defer { group.leave() }
                while let index = work.withLock({ $0.take(of: chunks.count) }) {
                    do {
                        let (end, head, tail) = try renderChunk(index, index == 0 ? takeFirst() : nil, deliver, stopped: { work.withLock { $0.stopped } })
                        work.withLock {
                            if index == chunks.count - 1 { $0.frames = end }
                            $0.heads[index] = head
                            $0.tails[index] = tail
                            // A join found not to converge stops the other threads at once.
                            for join in [index, index + 1] where join > 0 && join < chunks.count {
                                if let reason = $0.joinProblem(at: join) { $0.fail(chunk: join, reason: reason) }
                            }
                        }
                    } catch let problem as ChunkProblem {
                        work.withLock { $0.fail(chunk: index, reason: problem.reason) }
                    } catch {
                        work.withLock { $0.fail(delivering: error) }
                    }
                }
            }
        }
        group.wait()
        var outcome = work.withLock { $0 }
        if let error = outcome.deliveryError { throw error }
        if outcome.problem == nil, !outcome.stopped {
            for join in 1..<chunks.count {
                if let reason = outcome.joinProblem(at: join) {
                    outcome.problem = (join, reason)
                    break
                }
            }
        }
        if let (chunk, reason) = outcome.problem {
            let start = chunks[chunk].lowerBound
            state.withLock {
                $0.sequentialReason = "the chunk from valid frame \(start) could not be joined exactly (\(reason)); rendered again on one thread"
                $0.rendered = 0
            }
            return try renderSequentially(AudioFileRenderer(file: file, registry: registry), deliver)
        }
        return outcome.frames
    }

    /// The renderer made by `init` for the first chunk (or the whole file), once.
    private func takeFirst() -> AudioFileRenderer? {
        state.withLock { state in
            defer { state.first = nil }
            return state.first
        }
    }

    private func renderSequentially(_ renderer: AudioFileRenderer,
                                    _ deliver: (Int64, UnsafeBufferPointer<Float>) throws -> Void) throws -> Int64 {
        let channels = outputFormat.channelsPerFrame
        var scratch = [Float](repeating: 0, count: Self.piece * channels)
        var position: Int64 = 0
        defer { state.withLock { $0.converterError = renderer.lastConverterError } }
        while true {
            let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: Self.piece) }
            if n == 0 { return position }
            try scratch.withUnsafeBufferPointer { try deliver(position, UnsafeBufferPointer(rebasing: $0[0..<(n * channels)])) }
            position += Int64(n)
            state.withLock { $0.rendered += Int64(n) }
        }
    }

    private static let piece = 8192

    /// Why a chunk cannot be joined exactly (the render starts over on one thread).
    private struct ChunkProblem: Error { let reason: String }

    /// Renders chunk `index` and delivers it; returns the valid frame after its last one when it
    /// is done or the render stopped. A chunk that is not the last decodes ``overlapFrames`` more
    /// (not delivered: they are `tail`), and a chunk that is not the first keeps its first
    /// ``overlapFrames`` (`head`): the next chunk's head must equal this one's tail.
    private func renderChunk(_ index: Int, _ given: AudioFileRenderer?, _ deliver: (Int64, UnsafeBufferPointer<Float>) throws -> Void,
                             stopped: () -> Bool) throws -> (end: Int64, head: [Float], tail: [Float]) {
        let range = chunks[index]
        let isLast = index == chunks.count - 1
        let renderer: AudioFileRenderer
        let decodeEnd = isLast ? Int64.max : range.upperBound + overlapFrames
        do {
            renderer = try given ?? AudioFileRenderer(file: file, startFrame: range.lowerBound, endFrame: isLast ? nil : decodeEnd,
                                                      registry: registry, resamplers: AudioResamplerRegistry())
        } catch {
            throw ChunkProblem(reason: "\(error)")
        }
        guard renderer.queue.outputFormat == decodedFormat else {
            throw ChunkProblem(reason: "it decodes to \(renderer.queue.outputFormat), the first chunk to \(decodedFormat)")
        }
        let channels = outputFormat.channelsPerFrame
        var scratch = [Float](repeating: 0, count: Self.piece * channels)
        var position = range.lowerBound
        var head: [Float] = [], tail: [Float] = []
        while !stopped() {
            let wanted = isLast ? Self.piece : Int(min(Int64(Self.piece), decodeEnd - position))
            let n: Int
            do {
                // A full chunk asks once more, to see it ends where planned.
                n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: max(wanted, 1)) }
            } catch {
                throw ChunkProblem(reason: "\(error)")
            }
            if let error = renderer.lastConverterError { throw ChunkProblem(reason: "\(error)") }
            if wanted == 0 {
                if n > 0 { throw ChunkProblem(reason: "it renders more than its \(range.count) frames and their overlap") }
                break
            }
            if n == 0 {
                // The file may end inside the overlap (the next chunk is then its short last one).
                if isLast || position >= range.upperBound { break }
                throw ChunkProblem(reason: "it ends after \(position - range.lowerBound) of its \(range.count) frames")
            }
            let delivered = isLast ? n : Int(max(min(Int64(n), range.upperBound - position), 0))
            if delivered > 0 {
                try scratch.withUnsafeBufferPointer { try deliver(position, UnsafeBufferPointer(rebasing: $0[0..<(delivered * channels)])) }
                if index > 0, position - range.lowerBound < overlapFrames {
                    let keep = Int(min(Int64(delivered), overlapFrames - (position - range.lowerBound)))
                    head += scratch[0..<(keep * channels)]
                }
                state.withLock { $0.rendered += Int64(delivered) }
            }
            if delivered < n { tail += scratch[(delivered * channels)..<(n * channels)] }
            position += Int64(n)
        }
        return (min(position, isLast ? position : range.upperBound), head, tail)
    }
}

/// The shared progress of a concurrent render: the next chunk, the first failure.
private struct Work {
    var next = 0
    var stopped = false
    var deliveryError: (any Error)?
    var problem: (chunk: Int, reason: String)?
    var frames: Int64 = 0
    /// Each chunk's first frames, and the frames it decoded past its end, for the join check.
    var heads: [Int: [Float]] = [:]
    var tails: [Int: [Float]] = [:]

    mutating func take(of count: Int) -> Int? {
        guard !stopped, next < count else { return nil }
        defer { next += 1 }
        return next
    }

    /// Why chunk `join` does not join its predecessor exactly, once both are rendered: its first
    /// frames against the previous chunk's decode continued past the join. They differ where the
    /// decoder's state does not converge within the pre-roll (libfaad2's perceptual noise
    /// substitution draws from a generator that runs from the start of the stream).
    func joinProblem(at join: Int) -> String? {
        guard let tail = tails[join - 1], let head = heads[join] else { return nil }
        let common = min(tail.count, head.count)
        if common == 0 { return "there is nothing to compare its start with" }
        if tail[0..<common] != head[0..<common] {
            return "its first frames differ from the previous chunk's decode continued past the join (the decoder's state does not converge, as in AAC with perceptual noise substitution)"
        }
        return nil
    }

    /// A chunk cannot be joined: stop, and remember the earliest such chunk.
    mutating func fail(chunk: Int, reason: String) {
        stopped = true
        if problem.map({ chunk < $0.chunk }) ?? true { problem = (chunk, reason) }
    }

    /// The destination failed: stop; this error is the render's.
    mutating func fail(delivering error: any Error) {
        stopped = true
        if deliveryError == nil { deliveryError = error }
    }
}
