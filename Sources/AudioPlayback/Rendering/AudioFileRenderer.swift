import AudioFileStream
import BufferQueue
import Dispatch

/// Renders an ``/AudioFileStream/AudioFile`` through an ``/BufferQueue/AudioQueue`` offline: the file's packets are enqueued by a
/// ``PacketFeeder`` with the trims its packet table asks for, decoded, and pulled as interleaved
/// float32 — exactly `validFrames × loops` frames for files that carry gapless numbers, with
/// loops joined sample-exactly (each pass is a new stream of the queue: the decoder is drained
/// and starts clean, so every pass is the same frames).
///
/// It streams: a few buffers circulate, handed back by the queue's output callback on the
/// rendering thread before each render call returns
/// (``/BufferQueue/AudioQueue/OfflineCallbackDelivery/beforeReturning``), so memory does not grow with the file
/// and no other thread is woken to refill. Decoders come from the registry (register
/// `MPG123Decoder` / `FAADDecoder` first).

public final class AudioFileRenderer {
    /// The file rendered.
    public let file: AudioFile
    /// How many times the file plays.
    public let loops: Int
    /// The queue doing the work.
    public var queue: AudioQueue { core.queue }
    /// The format of the frames handed out (float32; decided by the decoder's first output).
    public var outputFormat: AudioStreamDescription { core.outputFormat }
    /// The play rate (1: as recorded).
    public var playRate: Double { core.playRate }

    private let core: PacketSourceRenderer
    private let endFrame: Int64?

    /// - Parameters:
    ///   - file: the file to render.
    ///   - loops: how many times the file plays, each loop joined to the next without a gap.
    ///   - startFrame: the first valid frame to render (a seek): decoding starts a few packets
    ///     earlier (pre-roll, see ``PacketFeeder/preRollPackets(for:rollDistance:registry:)``) and the
    ///     frames before the target are trimmed, so it is frame-exact. Applies to the first loop.
    ///   - endFrame: the first valid frame not to render (nil: to the end); with one loop only.
    ///     Packets after the one holding the frame before it are not read.
    ///   - packetsPerBuffer: packets in each enqueued buffer (PCM: about 4096 frames per buffer).
    ///   - sampleRate: the rate to render at (nil: the decoded rate). Another rate is converted by
    ///     the queue with a resampler from `resamplers` (register `SoxrConverter`), with exact
    ///     lengths: ``expectedFrames`` becomes `round(validFrames × loops × sampleRate / decoded rate)`.
    ///   - channels: the channel count to render (nil: the decoded one); see ``/BufferQueue/AudioConverter``
    ///     for the matrix.
    ///   - playRate: play faster or slower (0.25...4); ``expectedFrames`` is then divided by it.
    ///   - timePitch: how: ``/BufferQueue/TimePitchAlgorithm/timeDomain`` keeps the pitch (length within one
    ///     15 ms hop), ``/BufferQueue/TimePitchAlgorithm/varispeed`` lets it follow the rate (length exact),
    ///     ``/BufferQueue/TimePitchAlgorithm/spectral`` keeps it or shifts it by `pitch` (length exact; needs an
    ///     engine in `timePitchEngines`: register `RubberBandTimePitch`).
    ///   - pitch: pitch shift in cents, -2400...2400 (spectral only).
    ///   - registry: where the file's decoder is found.
    ///   - resamplers: where a resampler is found for `sampleRate`.
    ///   - timePitchEngines: where the spectral algorithm's engine is found.
    public init(file: AudioFile, loops: Int = 1, startFrame: Int64 = 0, endFrame: Int64? = nil, packetsPerBuffer: Int = 32,
                sampleRate: Double? = nil, channels: Int? = nil, playRate: Double? = nil,
                timePitch: TimePitchAlgorithm = .timeDomain, pitch: Double? = nil,
                registry: AudioDecoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
                timePitchEngines: TimePitchEngineRegistry = .shared) throws {
        self.file = file
        self.loops = loops
        self.endFrame = endFrame
        core = try PacketSourceRenderer(source: FilePacketSource(file: file), name: file.path, maximumPacketSize: file.maximumPacketSize,
                                        loops: loops, start: .frame(startFrame), endFrame: endFrame, packetsPerBuffer: packetsPerBuffer,
                                        sampleRate: sampleRate, channels: channels, playRate: playRate, timePitch: timePitch,
                                        pitch: pitch, registry: registry, resamplers: resamplers, timePitchEngines: timePitchEngines)
    }

    /// Frames the whole render will produce when the file has gapless numbers (nil otherwise).
    /// With an end frame, the frames up to it (clipped to the file's valid frames when known).
    public var expectedFrames: Int64? { core.expectedFrames(validFrames: file.packetTableInfo?.validFrames) }
    /// Frames rendered so far.
    public var framesRendered: Int64 { core.framesRendered }

    /// Renders up to `frames` frames into `destination` (interleaved float32 in ``outputFormat``).
    /// Returns 0 at the end.
    /// A stream whose decoded rate or channel count changes mid-way is converted to
    /// ``outputFormat``.
    /// - Throws: ``/BufferQueue/AudioQueueError`` with ``/BufferQueue/AudioQueueError/Code/codecNotFound`` when the stream
    ///   changes to another rate and no resampler is registered (the frames before it have been
    ///   returned).
    public func render(into destination: UnsafeMutableBufferPointer<Float>, frames: Int) throws -> Int {
        try core.render(into: destination, frames: frames)
    }

    /// Problems the decoders reported (corrupt packets), if any.
    public var lastConverterError: AudioQueueError? { core.queue.lastConverterError }
}

/// Buffers the output callback handed back, and a wait for the next one (a condition, no polling).
final class ReturnedBuffers: Sendable {
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

/// A file renderer is a source of an offline ``/BufferQueue/AudioGraph``: wrap it in an
/// ``/BufferQueue/AudioPullSourceNode`` and connect it to a mixer, which converts it to its format.
extension AudioFileRenderer: AudioNodePullSource {}
