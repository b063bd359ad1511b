import AudioFileStream
import BufferQueue
import Dispatch

/// Renders any ``PacketSource`` through an offline ``AudioQueue``, as interleaved float32: the
/// engine of ``AudioFileRenderer`` and of the crossfading player's items.
///
/// A ``PacketFeeder`` enqueues the source's packets with their trims into a few buffers that the
/// queue's output callback hands back on the rendering thread before each render call returns
/// (``AudioQueue/OfflineCallbackDelivery/beforeReturning``). Loops are new streams of the queue.
/// A source that waits for data (a stream still downloading) makes a render return 0 with
/// ``isWaiting`` set; render again when the source says more arrived.
final class PacketSourceRenderer {
    /// Where the render starts: a valid frame, or seconds at the source's rate (known once it is ready).
    enum Start {
        case frame(Int64)
        case seconds(Double)
    }

    let source: any PacketSource
    /// The file name or URL, for messages.
    let name: String
    let loops: Int
    /// The valid frame the render ends before (nil: the source's end).
    private let endFrame: Int64?
    let queue: AudioQueue
    /// The format of the frames handed out (float32; decided by the decoder's first output).
    private(set) var outputFormat: AudioStreamDescription
    let playRate: Double
    /// The last render returned 0 because the source waits for data (not at its end).
    private(set) var isWaiting = false
    /// Frames rendered so far.
    private(set) var framesRendered: Int64 = 0

    private var feeder: PacketFeeder
    private var loopsStarted = 1
    private var flushed = false
    private let pool: ReturnedBuffers
    private var free: [AudioQueueBuffer] = []
    private let bufferCount = 4
    /// The rate the decoder gives (before any conversion).
    private var decodedRate: Double = 0

    /// See ``AudioFileRenderer/init(file:loops:startFrame:endFrame:packetsPerBuffer:sampleRate:channels:playRate:timePitch:pitch:registry:resamplers:timePitchEngines:)``
    /// for the parameters; `source` must be ready (``PacketSource/isReady``).
    init(source: any PacketSource, name: String, maximumPacketSize: Int?, loops: Int = 1, start: Start = .frame(0),
         endFrame: Int64? = nil, packetsPerBuffer: Int = 32, sampleRate: Double? = nil, channels: Int? = nil,
         playRate: Double? = nil, timePitch: TimePitchAlgorithm = .timeDomain, pitch: Double? = nil,
         registry: AudioDecoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
         timePitchEngines: TimePitchEngineRegistry = .shared) throws {
        guard loops >= 1 else { throw AudioQueueError(.invalidParameter, "loops must be at least 1 (got \(loops))") }
        if case .frame(let startFrame) = start {
            guard startFrame >= 0 else { throw AudioQueueError(.invalidParameter, "cannot start at frame \(startFrame)") }
            if let endFrame, endFrame < startFrame {
                throw AudioQueueError(.invalidParameter, "cannot end at frame \(endFrame) before the start at \(startFrame)")
            }
        }
        if endFrame != nil, loops != 1 {
            throw AudioQueueError(.invalidParameter, "an end frame needs a single loop (got \(loops) loops)")
        }
        self.source = source
        self.name = name
        self.loops = loops
        self.endFrame = endFrame
        let format = source.format
        guard registry.factory(for: format.formatID) != nil else {
            throw registry.missingDecoder(for: format.formatID)
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
        if let cookie = source.magicCookie { try queue.setMagicCookie(cookie) }
        if let pitch, pitch != 0, timePitch != .spectral {
            throw AudioQueueError(.invalidParameter, "a pitch shift needs the spectral time-pitch algorithm")
        }
        if (playRate ?? 1) != 1 || (pitch ?? 0) != 0 {
            try queue.setTimePitch(timePitch)
            try queue.setParameters(.init(playRate: Float(playRate ?? 1), pitch: pitch.map(Float.init)))
        }
        self.playRate = playRate ?? 1
        switch start {
        case .frame(let frame): feeder = PacketFeeder(source: source, startFrame: frame, endFrame: endFrame, registry: registry)
        case .seconds(let seconds): feeder = PacketFeeder(source: source, startSeconds: seconds, registry: registry)
        }
        outputFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
        let perBuffer = format.bytesPerPacket > 0 ? max(4096 / max(format.framesPerPacket, 1), 1) * format.bytesPerPacket
            : (maximumPacketSize ?? 8192) * max(packetsPerBuffer, 1) + 16
        for _ in 0..<bufferCount {
            free.append(try queue.allocateBuffer(capacity: perBuffer, packetDescriptionCapacity: format.bytesPerPacket > 0 ? 0 : max(packetsPerBuffer, 1)))
        }
        _ = try refill()
        try queue.prime()
        decodedRate = queue.outputFormat.sampleRate
        outputFormat = .float32(sampleRate: sampleRate ?? queue.outputFormat.sampleRate,
                                channels: channels ?? queue.outputFormat.channelsPerFrame)
        try queue.setOfflineRenderFormat(outputFormat)
    }

    /// The first valid frame rendered (final once ``started``).
    var startFrame: Int64 { feeder.startFrame }
    /// The start was planned (the source was ready).
    var started: Bool { feeder.started }

    /// Whether the frames handed out are the source's frames as decoded: at the source format's
    /// rate and channel count, nothing converted, at play rate 1 (a queue decoding the source's
    /// packets gives the same frames).
    var passesThrough: Bool {
        let decoded = queue.outputFormat, declared = source.format
        return decodedRate == declared.sampleRate && outputFormat.sampleRate == declared.sampleRate && playRate == 1
            && decoded.channelsPerFrame == declared.channelsPerFrame && outputFormat.channelsPerFrame == declared.channelsPerFrame
    }

    /// The output frames `validFrames` decoded frames become (rate conversion and play rate).
    func outputFrames(forValidFrames frames: Int64) -> Int64 {
        guard decodedRate > 0, outputFormat.sampleRate != decodedRate || playRate != 1 else { return frames }
        return Int64((Double(frames) * outputFormat.sampleRate / decodedRate / playRate).rounded())
    }

    /// Output frames the whole render gives, when the source knows its valid frames exactly (nil
    /// otherwise): the render gives exactly these (the library's promise), so a caller can tell
    /// which frames are the last ones before rendering them.
    var expectedFrames: Int64? {
        guard started, decodedRate > 0, let duration = source.duration, !duration.isEstimated else { return nil }
        return expectedFrames(validFrames: duration.frames)
    }

    /// Output frames the whole render gives for a source of `validFrames` valid frames (nil:
    /// unknown, then only an end frame can say): every loop, up to the end frame, from the start.
    func expectedFrames(validFrames: Int64?) -> Int64? {
        let valid = validFrames.map { $0 * Int64(loops) }
        let end = endFrame.map { min($0, valid ?? .max) } ?? valid
        return end.map { outputFrames(forValidFrames: max($0 - startFrame, 0)) }
    }

    /// Enqueues into every free buffer; at the end of a pass the next one begins as a new stream,
    /// and after the last the queue is flushed. True when the source waits for data.
    private func refill() throws -> Bool {
        free += pool.take()
        while let buffer = free.last {
            switch try feeder.enqueueNext(buffer, on: queue) {
            case .enqueued:
                free.removeLast()
            case .waiting:
                return true
            case .finished:
                if loopsStarted < loops {
                    loopsStarted += 1
                    try queue.beginStream(format: source.format, magicCookie: source.magicCookie)
                    feeder = PacketFeeder(source: source, registry: feeder.registry)
                    try source.seek(toPacket: 0)
                } else {
                    if !flushed {
                        try queue.flush()
                        flushed = true
                    }
                    return false
                }
            }
        }
        return false
    }

    /// Renders up to `frames` frames into `destination` (interleaved float32 in ``outputFormat``).
    /// Returns 0 at the end, or while the source waits (``isWaiting``).
    func render(into destination: UnsafeMutableBufferPointer<Float>, frames: Int) throws -> Int {
        let channels = outputFormat.channelsPerFrame
        let wanted = min(frames, destination.count / channels)
        let raw = UnsafeMutableRawBufferPointer(start: destination.baseAddress, count: wanted * channels * 4)
        isWaiting = false
        while true {
            let waiting = try refill()
            let n = try queue.offlineRender(at: queue.offlineRenderPosition, into: raw, frames: wanted)
            if n > 0 { framesRendered += Int64(n); return n }
            if flushed && free.count == bufferCount {
                // Everything enqueued came back; one last pull takes what the flush left.
                let last = try queue.offlineRender(at: queue.offlineRenderPosition, into: raw, frames: wanted)
                framesRendered += Int64(last)
                return last
            }
            if waiting {
                // What was enqueued is rendered; the rest has not arrived.
                isWaiting = true
                return 0
            }
            // The render used up what was enqueued: wait for the output callback to hand buffers back.
            guard pool.waitForReturn(until: .now() + .seconds(30)) else {
                throw AudioQueueError(.timedOut, "the queue handed no buffer back for 30 s while rendering \(name)")
            }
        }
    }
}
