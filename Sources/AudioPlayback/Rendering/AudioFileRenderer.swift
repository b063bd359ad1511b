import AudioFileStream
import BufferQueue
import Dispatch

/// Renders an ``AudioFile`` through an ``AudioQueue`` offline: the file's packets are enqueued by a
/// ``PacketFeeder`` with the trims its packet table asks for, decoded, and pulled as interleaved
/// float32 — exactly `validFrames × loops` frames for files that carry gapless numbers, with
/// loops joined sample-exactly (each pass is a new stream of the queue: the decoder is drained
/// and starts clean, so every pass is the same frames).
///
/// It streams: a few buffers circulate, handed back by the queue's output callback on the
/// rendering thread before each render call returns
/// (``AudioQueue/OfflineCallbackDelivery/beforeReturning``), so memory does not grow with the file
/// and no other thread is woken to refill. Decoders come from the registry (register
/// `MPG123Decoder` / `FAADDecoder` first).

public final class AudioFileRenderer {
    public let file: AudioFile
    public let loops: Int
    /// The queue doing the work.
    public let queue: AudioQueue
    /// The format of the frames handed out (float32; decided by the decoder's first output).
    public private(set) var outputFormat: AudioStreamDescription
    /// The play rate (1: as recorded).
    public let playRate: Double

    private let source: FilePacketSource
    private var feeder: PacketFeeder
    private var loopsStarted = 1
    private var flushed = false
    private let pool: ReturnedBuffers
    private var free: [AudioQueueBuffer] = []
    private let bufferCount = 4
    private var rendered: Int64 = 0
    private let skipped: Int64
    private let endFrame: Int64?
    /// The rate the decoder gives (before any conversion).
    private var decodedRate: Double = 0

    /// - Parameters:
    ///   - startFrame: the first valid frame to render (a seek): decoding starts a few packets
    ///     earlier (pre-roll, see ``PacketFeeder/preRollPackets(for:rollDistance:registry:)``) and the
    ///     frames before the target are trimmed, so it is frame-exact. Applies to the first loop.
    ///   - endFrame: the first valid frame not to render (nil: to the end); with one loop only.
    ///     Packets after the one holding the frame before it are not read.
    ///   - packetsPerBuffer: packets in each enqueued buffer (PCM: about 4096 frames per buffer).
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
    public init(file: AudioFile, loops: Int = 1, startFrame: Int64 = 0, endFrame: Int64? = nil, packetsPerBuffer: Int = 32,
                sampleRate: Double? = nil, channels: Int? = nil, playRate: Double? = nil,
                timePitch: TimePitchAlgorithm = .timeDomain, pitch: Double? = nil,
                registry: AudioDecoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
                timePitchEngines: TimePitchEngineRegistry = .shared) throws {
        guard loops >= 1 else { throw AudioQueueError(.invalidParameter, "loops must be at least 1 (got \(loops))") }
        guard startFrame >= 0 else { throw AudioQueueError(.invalidParameter, "cannot start at frame \(startFrame)") }
        if let endFrame {
            guard loops == 1 else { throw AudioQueueError(.invalidParameter, "an end frame needs a single loop (got \(loops) loops)") }
            guard endFrame >= startFrame else {
                throw AudioQueueError(.invalidParameter, "cannot end at frame \(endFrame) before the start at \(startFrame)")
            }
        }
        self.endFrame = endFrame
        self.file = file
        self.loops = loops
        source = FilePacketSource(file: file)
        let format = source.format
        guard registry.factory(for: format.formatID) != nil else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not supported: no decoder is registered for it")
        }
        let pool = ReturnedBuffers()
        self.pool = pool
        // Offline the ring only bridges one render call's decoding to its copy-out (8192 frames at
        // a time in aqrender): 16384 frames is room enough, and a split render keeps one per job.
        queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 16384, decoderRegistry: registry,
                                                                    resamplerRegistry: resamplers,
                                                                    timePitchRegistry: timePitchEngines,
                                                                    offlineCallbacks: .beforeReturning)) { _, buffer in
            pool.returned(buffer)
        }
        if let cookie = file.magicCookie { try queue.setMagicCookie(cookie) }
        if let pitch, pitch != 0, timePitch != .spectral {
            throw AudioQueueError(.invalidParameter, "a pitch shift needs the spectral time-pitch algorithm")
        }
        if (playRate ?? 1) != 1 || (pitch ?? 0) != 0 {
            try queue.setTimePitch(timePitch)
            try queue.setParameters(.init(playRate: Float(playRate ?? 1), pitch: pitch.map(Float.init)))
        }
        self.playRate = playRate ?? 1
        feeder = PacketFeeder(source: source, startFrame: startFrame, endFrame: endFrame, registry: registry)
        skipped = startFrame
        outputFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
        let perBuffer = format.bytesPerPacket > 0 ? max(4096 / max(format.framesPerPacket, 1), 1) * format.bytesPerPacket
            : (file.maximumPacketSize ?? 8192) * max(packetsPerBuffer, 1) + 16
        for _ in 0..<bufferCount {
            free.append(try queue.allocateBuffer(capacity: perBuffer, packetDescriptionCapacity: format.bytesPerPacket > 0 ? 0 : max(packetsPerBuffer, 1)))
        }
        try refill()
        try queue.prime()
        decodedRate = queue.outputFormat.sampleRate
        outputFormat = .float32(sampleRate: sampleRate ?? queue.outputFormat.sampleRate,
                                channels: channels ?? queue.outputFormat.channelsPerFrame)
        try queue.setOfflineRenderFormat(outputFormat)
    }

    /// Frames the whole render will produce when the file has gapless numbers (nil otherwise).
    /// With an end frame, the frames up to it (clipped to the file's valid frames when known).
    public var expectedFrames: Int64? {
        let valid = file.packetTableInfo.map { $0.validFrames * Int64(loops) }
        let end = endFrame.map { min($0, valid ?? .max) } ?? valid
        return end.map { end in
            let frames = max(end - skipped, 0)
            guard decodedRate > 0, outputFormat.sampleRate != decodedRate || playRate != 1 else { return frames }
            return Int64((Double(frames) * outputFormat.sampleRate / decodedRate / playRate).rounded())
        }
    }
    /// Frames rendered so far.
    public var framesRendered: Int64 { rendered }

    /// Enqueues into every free buffer; at the end of a pass the next one begins as a new stream,
    /// and after the last the queue is flushed.
    private func refill() throws {
        free += pool.take()
        while let buffer = free.last {
            switch try feeder.enqueueNext(buffer, on: queue) {
            case .enqueued:
                free.removeLast()
            case .waiting:
                return   // a file never waits
            case .finished:
                if loopsStarted < loops {
                    loopsStarted += 1
                    try queue.beginStream(format: source.format, magicCookie: file.magicCookie)
                    feeder = PacketFeeder(source: source, registry: feeder.registry)
                    try source.seek(toPacket: 0)
                } else {
                    if !flushed {
                        try queue.flush()
                        flushed = true
                    }
                    return
                }
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
        let raw = UnsafeMutableRawBufferPointer(start: destination.baseAddress, count: wanted * channels * 4)
        while true {
            try refill()
            let n = try queue.offlineRender(at: queue.offlineRenderPosition, into: raw, frames: wanted)
            if n > 0 { rendered += Int64(n); return n }
            if flushed && free.count == bufferCount {
                // Everything enqueued came back; one last pull takes what the flush left.
                let last = try queue.offlineRender(at: queue.offlineRenderPosition, into: raw, frames: wanted)
                rendered += Int64(last)
                return last
            }
            // The render used up what was enqueued: wait for the output callback to hand buffers back.
            guard pool.waitForReturn(until: .now() + .seconds(30)) else {
                throw AudioQueueError(.timedOut, "the queue handed no buffer back for 30 s while rendering \(file.path)")
            }
        }
    }

    /// Problems the decoders reported (corrupt packets), if any.
    public var lastConverterError: AudioQueueError? { queue.lastConverterError }
}

/// Buffers the output callback handed back, and a wait for the next one (a condition, no polling).
final class ReturnedBuffers: @unchecked Sendable {
    private let lock = Lock([AudioQueueBuffer]())
    private let signal = DispatchSemaphore(value: 0)

    func returned(_ buffer: AudioQueueBuffer) {
        lock.withLock { $0.append(buffer) }
        signal.signal()
    }

    /// The buffers returned since the last call.
    func take() -> [AudioQueueBuffer] {
        lock.withLock { list in
            defer { list.removeAll() }
            return list
        }
    }

    /// Waits until a buffer was returned (true) or the deadline passed (false).
    func waitForReturn(until deadline: DispatchTime) -> Bool {
        if lock.withLock({ !$0.isEmpty }) { return true }
        return signal.wait(timeout: deadline) == .success
    }
}

/// A file renderer is a source of an offline ``BufferQueue/AudioGraph``: wrap it in an
/// ``BufferQueue/AudioPullSourceNode`` and connect it to a mixer, which converts it to its format.
extension AudioFileRenderer: AudioNodePullSource {}
