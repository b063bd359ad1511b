import BufferQueue

/// Renders an ``AudioFile`` through an ``AudioQueue`` offline: the file's packets are enqueued with
/// the trims its packet table asks for (split across buffers where needed), decoded, and pulled
/// as interleaved float32 — exactly `validFrames × loops` frames for files that carry gapless
/// numbers, with loops joined sample-exactly.
///
/// It streams: a few buffers circulate, so memory does not grow with the file. Decoders come from
/// the registry (register `MPG123Decoder` / `FAADDecoder` first).
public final class AudioFileRenderer {
    public let file: AudioFile
    public let loops: Int
    /// The queue doing the work.
    public let queue: AudioQueue
    /// The format of the frames handed out (float32; decided by the decoder's first output).
    public private(set) var outputFormat: AudioStreamDescription

    private struct Chunk { let first: Int64; let count: Int; let trimStart: Int; let trimEnd: Int }
    private let plan: [Chunk]
    private var nextChunk = 0
    private var buffers: [AudioQueueBuffer] = []
    private var rendered: Int64 = 0
    private let skipped: Int64
    private let loopLength: Int

    /// - Parameters:
    ///   - startFrame: the first valid frame to render (a seek): decoding starts a few packets
    ///     earlier (pre-roll) and the frames before the target are trimmed, so it is frame-exact.
    ///     Applies to the first loop.
    ///   - packetsPerBuffer: packets in each enqueued buffer (PCM: frames are grouped by 4096).
    ///   - sampleRate: the rate to render at (nil: the decoded rate). Another rate is converted by
    ///     the queue with a resampler from `resamplers` (register `SoxrConverter`), with exact
    ///     lengths: ``expectedFrames`` becomes `round(validFrames × loops × sampleRate / decoded rate)`.
    ///   - channels: the channel count to render (nil: the decoded one); see ``AudioConverter``
    ///     for the matrix.
    ///   - playRate: play faster or slower (0.25...4); ``expectedFrames`` is then divided by it.
    ///   - timePitch: how: ``TimePitchAlgorithm/timeDomain`` keeps the pitch (length within one
    ///     15 ms hop), ``TimePitchAlgorithm/varispeed`` lets it follow the rate (length exact),
    ///     ``TimePitchAlgorithm/spectral`` keeps it or shifts it by `pitch` (length exact; needs an
    ///     engine in `timePitchEngines`: register `RubberBandTimePitch`).
    ///   - pitch: pitch shift in cents, -2400...2400 (spectral only).
    public init(file: AudioFile, loops: Int = 1, startFrame: Int64 = 0, packetsPerBuffer: Int = 32,
                sampleRate: Double? = nil, channels: Int? = nil, playRate: Double? = nil,
                timePitch: TimePitchAlgorithm = .timeDomain, pitch: Double? = nil,
                registry: AudioDecoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
                timePitchEngines: TimePitchEngineRegistry = .shared) throws {
        guard loops >= 1 else { throw AudioQueueError(.invalidParameter, "loops must be at least 1 (got \(loops))") }
        guard startFrame >= 0 else { throw AudioQueueError(.invalidParameter, "cannot start at frame \(startFrame)") }
        self.file = file
        self.loops = loops
        let format = file.formatList.first ?? file.dataFormat
        guard registry.factory(for: format.formatID) != nil else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not supported: no decoder is registered for it")
        }
        queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 65536, decoderRegistry: registry,
                                                                    resamplerRegistry: resamplers,
                                                                    timePitchRegistry: timePitchEngines))
        if let cookie = file.magicCookie { try queue.setMagicCookie(cookie) }
        if let pitch, pitch != 0, timePitch != .spectral {
            throw AudioQueueError(.invalidParameter, "a pitch shift needs the spectral time-pitch algorithm")
        }
        if (playRate ?? 1) != 1 || (pitch ?? 0) != 0 {
            try queue.setTimePitch(timePitch)
            try queue.setParameters(.init(playRate: Float(playRate ?? 1), pitch: pitch.map(Float.init)))
        }
        self.playRate = playRate ?? 1

        // Split the file into buffers and put the trims where they fall.
        let perBuffer = format.bytesPerPacket > 0 ? max(4096 / max(format.framesPerPacket, 1), 1) : max(packetsPerBuffer, 1)
        var chunks: [Chunk] = []
        var first: Int64 = 0
        while first < file.packetCount {
            let count = Int(min(Int64(perBuffer), file.packetCount - first))
            chunks.append(Chunk(first: first, count: count, trimStart: 0, trimEnd: 0))
            first += Int64(count)
        }
        if let table = file.packetTableInfo {
            var priming = table.primingFrames, remainder = table.remainderFrames
            for index in chunks.indices where priming > 0 {
                let frames = Self.frames(file, chunks[index])
                let trim = min(priming, frames)
                chunks[index] = Chunk(first: chunks[index].first, count: chunks[index].count, trimStart: trim, trimEnd: 0)
                priming -= trim
            }
            for index in chunks.indices.reversed() where remainder > 0 {
                let chunk = chunks[index]
                let trim = min(remainder, Self.frames(file, chunk) - chunk.trimStart)
                chunks[index] = Chunk(first: chunk.first, count: chunk.count, trimStart: chunk.trimStart, trimEnd: trim)
                remainder -= trim
            }
        }
        var firstLoop = chunks
        let skipped = startFrame
        if startFrame > 0 {
            // Seek: drop whole packets before the target (less a pre-roll the decoder needs to
            // rebuild its state), then trim the rest of the way to the exact frame.
            let preRoll = format.isLinearPCM ? 0 : (format.formatID == .mpegLayer3 ? 10 : 2)
            let priming = Int64(file.packetTableInfo?.primingFrames ?? 0)
            var target = priming + startFrame, packet: Int64 = 0, frameOfPacket: Int64 = 0
            while packet < file.packetCount && frameOfPacket + Int64(file.frames(ofPacket: packet)) <= target {
                frameOfPacket += Int64(file.frames(ofPacket: packet))
                packet += 1
            }
            let first = max(packet - Int64(preRoll), 0)
            for p in first..<packet { frameOfPacket -= Int64(file.frames(ofPacket: p)) }
            target -= frameOfPacket   // frames to trim from the first decoded packet on
            var rebuilt: [Chunk] = []
            var trimLeft = Int(target)
            for chunk in chunks where chunk.first + Int64(chunk.count) > first {
                let start = max(chunk.first, first)
                let count = chunk.count - Int(start - chunk.first)
                let piece = Chunk(first: start, count: count, trimStart: 0, trimEnd: chunk.trimEnd)
                let frames = Self.frames(file, piece) - piece.trimEnd
                let trim = min(trimLeft, max(frames, 0))
                trimLeft -= trim
                rebuilt.append(Chunk(first: start, count: count, trimStart: trim, trimEnd: chunk.trimEnd))
            }
            firstLoop = rebuilt
        }
        self.skipped = skipped
        plan = firstLoop + Array(repeatElement(chunks, count: loops - 1).joined())
        loopLength = chunks.count
        outputFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
        let capacity = (file.maximumPacketSize ?? 8192) * perBuffer + 16
        for _ in 0..<4 { buffers.append(try queue.allocateBuffer(capacity: capacity, packetDescriptionCapacity: perBuffer)) }
        try refill()
        try queue.prime()
        decodedRate = queue.outputFormat.sampleRate
        outputFormat = .float32(sampleRate: sampleRate ?? queue.outputFormat.sampleRate,
                                channels: channels ?? queue.outputFormat.channelsPerFrame)
        try queue.setOfflineRenderFormat(outputFormat)
    }

    /// The rate the decoder gives (before any conversion).
    private var decodedRate: Double = 0
    /// The play rate (1: as recorded).
    public let playRate: Double

    private static func frames(_ file: AudioFile, _ chunk: Chunk) -> Int {
        (0..<chunk.count).reduce(0) { $0 + file.frames(ofPacket: chunk.first + Int64($1)) }
    }

    /// Frames the whole render will produce when the file has gapless numbers (nil otherwise).
    public var expectedFrames: Int64? {
        file.packetTableInfo.map { table in
            let frames = table.validFrames * Int64(loops) - skipped
            guard decodedRate > 0, outputFormat.sampleRate != decodedRate || playRate != 1 else { return frames }
            return Int64((Double(frames) * outputFormat.sampleRate / decodedRate / playRate).rounded())
        }
    }
    /// Frames rendered so far.
    public var framesRendered: Int64 { rendered }

    private func refill() throws {
        for buffer in buffers where !buffer.isInQueue && nextChunk < plan.count {
            let chunk = plan[nextChunk]
            let packets = try file.readPackets(from: chunk.first, count: chunk.count)
            try buffer.setData(packets.data)
            try queue.enqueue(buffer, packetDescriptions: packets.descriptions, trimFramesAtStart: chunk.trimStart, trimFramesAtEnd: chunk.trimEnd)
            nextChunk += 1
            // Each pass through the file ends with a flush: the next loop decodes from a clean state,
            // so every loop is the same frames and the seam is exact.
            let firstLoopLength = plan.count - loopLength * (loops - 1)
            if nextChunk == firstLoopLength || (nextChunk > firstLoopLength && (nextChunk - firstLoopLength) % max(loopLength, 1) == 0) {
                try queue.flush()
            }
        }
    }

    /// Renders up to `frames` frames into `destination` (interleaved float32 in ``outputFormat``).
    /// Returns 0 at the end.
    /// A stream whose decoded rate or channel count changes mid-way is converted to
    /// ``outputFormat``.
    /// - Throws: ``AudioQueueError`` with ``AudioQueueError/Code/codecNotFound`` when the stream
    ///   changes to another rate and no resampler is registered (the frames before it have been
    ///   returned).
    public func render(into destination: UnsafeMutableBufferPointer<Float>, frames: Int) throws -> Int {
        let channels = outputFormat.channelsPerFrame
        let wanted = min(frames, destination.count / channels)
        while true {
            try refill()
            let n = try queue.offlineRender(at: queue.offlineRenderPosition,
                                            into: UnsafeMutableRawBufferPointer(start: destination.baseAddress, count: wanted * channels * 4), frames: wanted)
            if n > 0 { rendered += Int64(n); return n }
            if nextChunk >= plan.count && buffers.allSatisfy({ !$0.isInQueue }) {
                // Everything enqueued came back; one last pull takes what the flush left.
                let last = try queue.offlineRender(at: queue.offlineRenderPosition,
                                                   into: UnsafeMutableRawBufferPointer(start: destination.baseAddress, count: wanted * channels * 4), frames: wanted)
                rendered += Int64(last)
                return last
            }
            queue.waitForCallbacks()
        }
    }

    /// Problems the decoders reported (corrupt packets), if any.
    public var lastConverterError: AudioQueueError? { queue.lastConverterError }
}
