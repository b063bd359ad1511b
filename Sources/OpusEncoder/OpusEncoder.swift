import BufferQueue
import COpus

/// An ``/BufferQueue/AudioEncoder`` for Opus on libopus (BSD-3-Clause): 1–8 channels, always at 48 kHz (the
/// encoding converter resamples other rates; the client's rate goes in `OpusHead` as the input
/// rate, for information, as opusenc does).
///
/// - Packets of 20 ms (960 frames) by default; `settings.framesPerPacket` takes 120, 240, 480,
///   960, 1 920 or 2 880.
/// - `settings.bitRate` in bits per second (opusenc's default otherwise: 64 kbit/s per stream
///   plus 32 kbit/s per coupled pair, so 96 kbit/s for stereo); unconstrained variable bit rate,
///   as opusenc and ffmpeg use it.
/// - `settings.quality` is libopus's complexity (0–10; 10 by default).
/// - One or two channels use mapping family 0; 3–8 channels family 1 (Vorbis order, which
///   ``channelLayout`` gives), with libopus's surround stream layout but without its surround
///   masking (each channel coded for itself, as ffmpeg's libopus wrapper does).
///
/// The priming is libopus's lookahead (312 frames with the default settings), which becomes
/// `OpusHead`'s pre-skip. At the end the last packets are filled with silence until the valid
/// frames, shifted by the pre-skip, are all encoded; the writer's end granule trims the rest.
public final class OpusEncoder: AudioEncoder {
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    public let primingFrames: Int
    public let maximumPacketSize: Int
    public var channelLayout: AudioChannelLayout? { channels > 2 ? .vorbis(channels: channels) : nil }
    /// The `OpusHead` the packets need (pre-skip, channels, mapping), which the magic cookie holds.
    public let header: OpusHeader
    private let encoder: OpaquePointer
    private let channels: Int
    private let frameSize: Int
    /// Frames waiting for a whole packet, and every frame taken since the stream began.
    private let blocks: FrameBlocks
    private var framesTaken: Int64 = 0
    private var packet: [UInt8]

    /// - Parameters:
    ///   - format: 1–8 channels; the rate is the client's, recorded as the input rate.
    ///   - settings: the bit rate, complexity and packet size (see the type's notes).
    public init(format: AudioStreamDescription, settings: AudioEncoderSettings = .init()) throws {
        guard format.formatID == .opus else { throw AudioQueueError(.codecNotFound, "\(format.formatID) is not Opus") }
        let channels = format.channelsPerFrame
        guard (1...8).contains(channels) else {
            throw AudioQueueError(.invalidPropertyValue, "Opus is encoded here for 1–8 channels, not \(channels)")
        }
        let frameSize = settings.framesPerPacket ?? 960
        guard [120, 240, 480, 960, 1920, 2880].contains(frameSize) else {
            throw AudioQueueError(.invalidPropertyValue, "Opus packets hold 2.5, 5, 10, 20, 40 or 60 ms (120…2 880 frames at 48 kHz), not \(frameSize) frames")
        }
        var streams: Int32 = 0, coupled: Int32 = 0, error: Int32 = 0
        var mapping = [UInt8](repeating: 0, count: channels)
        let family: Int32 = channels > 2 ? 1 : 0
        // libopus's stream layout for the family, then a plain multistream encoder on it: the
        // surround encoder's masking analysis starves the surround and LFE channels of what a
        // plain encode keeps (ffmpeg's libopus wrapper makes the same choice).
        try AudioQueueError.requireLibrary(aq_opus_load(), reason: aq_opus_error)
        guard let surround = aq_opus_multistream_surround_encoder_create(48000, Int32(channels), family, &streams, &coupled, &mapping,
                                                                      OPUS_APPLICATION_AUDIO, &error), error == OPUS_OK else {
            throw AudioQueueError(.invalidPropertyValue, "libopus cannot encode \(channels) channels (error \(error))")
        }
        aq_opus_multistream_encoder_destroy(surround)
        guard let made = aq_opus_multistream_encoder_create(48000, Int32(channels), streams, coupled, mapping, OPUS_APPLICATION_AUDIO, &error),
              error == OPUS_OK else {
            throw AudioQueueError(.invalidPropertyValue, "libopus cannot encode \(channels) channels in \(streams) streams (error \(error))")
        }
        encoder = made
        let bitRate = settings.bitRate ?? (64000 * Int(streams) + 32000 * Int(coupled))
        guard (500...512_000 * channels).contains(bitRate), copus_encoder_set_bitrate(made, Int32(bitRate)) == OPUS_OK else {
            aq_opus_multistream_encoder_destroy(made)
            throw AudioQueueError(.invalidPropertyValue, "libopus refuses a bit rate of \(bitRate) bits per second")
        }
        _ = copus_encoder_set_complexity(made, Int32(min(max(settings.quality ?? 10, 0), 10)))
        // Unconstrained VBR, the default of opusenc and of ffmpeg's wrapper (libopus's own is constrained).
        _ = copus_encoder_set_vbr_constraint(made, 0)
        let lookahead = copus_encoder_lookahead(made)
        guard lookahead >= 0 else {
            aq_opus_multistream_encoder_destroy(made)
            throw AudioQueueError(.invalidPropertyValue, "libopus does not give its lookahead")
        }
        self.channels = channels
        self.frameSize = frameSize
        primingFrames = Int(lookahead)
        let inputRate = format.sampleRate > 0 && format.sampleRate <= Double(UInt32.max) ? Int(format.sampleRate) : 48000
        header = OpusHeader(channels: channels, preSkip: Int(lookahead), inputSampleRate: inputRate, outputGain: 0,
                            mappingFamily: Int(family), streamCount: Int(streams), coupledCount: Int(coupled), mapping: mapping)
        inputFormat = .float32(sampleRate: 48000, channels: channels)
        outputFormat = AudioStreamDescription(sampleRate: 48000, formatID: .opus, bytesPerPacket: 0, framesPerPacket: frameSize,
                                              bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0)
        maximumPacketSize = 1277 * 3 * Int(streams)
        blocks = FrameBlocks(framesPerBlock: frameSize, bytesPerFrame: 4 * channels)
        packet = [UInt8](repeating: 0, count: maximumPacketSize)
    }

    deinit { aq_opus_multistream_encoder_destroy(encoder) }

    /// Packets overlap (an MDCT and a lookahead): pieces encoded apart do not join.
    public static let factory = AudioEncoderFactory(name: "libopus", formats: [.opus], priority: 10, traits: .dependent) { format, settings in
        try OpusEncoder(format: format, settings: settings)
    }

    /// Registers ``factory`` with a registry (the shared one by default).
    public static func register(in registry: AudioEncoderRegistry = .shared) { registry.register(factory) }

    /// The `OpusHead` packet.
    public var magicCookie: [UInt8]? { header.bytes }

    public func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        framesTaken += Int64(frames.count / blocks.bytesPerFrame)
        try blocks.add(frames) { try encodePacket($0, into: output) }
    }

    /// Silence until every taken frame, delayed by the pre-skip, is in a packet; then a new stream.
    public func finish(into output: EncodedPackets) throws {
        let needed = framesTaken + Int64(primingFrames)
        var encoded = framesTaken - Int64(blocks.frames)
        if let rest = blocks.takeRest(padded: true) {
            try encodePacket(rest, into: output)
            encoded += Int64(frameSize)
        }
        while encoded < needed {
            try encodePacket(blocks.silence(), into: output)
            encoded += Int64(frameSize)
        }
        framesTaken = 0
        _ = copus_encoder_reset(encoder)
    }

    /// Encodes one block of `frameSize` float frames.
    private func encodePacket(_ block: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        let samples = block.bindMemory(to: Float.self)
        let size = packet.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let input = samples.baseAddress, let bytes = out.baseAddress else { return -1 }
            return aq_opus_multistream_encode_float(encoder, input, Int32(frameSize), bytes, Int32(out.count))
        }
        guard size > 0 else { throw AudioQueueError(.decoderError, "libopus failed to encode a packet (error \(size))") }
        packet.withUnsafeBytes { output.append(UnsafeRawBufferPointer(rebasing: $0[0..<Int(size)]), frames: frameSize) }
    }
}
