import BufferQueue
import COpus

/// An ``/BufferQueue/AudioDecoder`` for Opus on libopus (BSD-3-Clause), with the multistream decoder so that
/// channel mapping families 0 and 1 (mono, stereo and Vorbis-order surround up to 8 channels)
/// decode alike.
///
/// Configured from the magic cookie, an `OpusHead` (``/BufferQueue/OpusHeader``). Output is float32 at 48 kHz,
/// whatever rate the encoder's input had (the header's input rate is information only, as in
/// every Opus player). The header's output gain is applied by libopus (`OPUS_SET_GAIN`), as
/// `opusdec` does, so the samples are the bits of `opusdec --float --rate 48000`. The pre-skip is
/// not dropped here: the container layer states it as priming and the queue trims it, so a seek
/// and a loop trim the same way.
///
/// Mapping family 255 and other families are refused: their channel order is undefined. A packet
/// libopus cannot decode becomes silence of the packet's length and a converter error.
public final class OpusDecoder: AudioDecoder {
    /// The decoded format: float32 at 48 kHz, the header's channels.
    public let outputFormat: AudioStreamDescription
    /// The `OpusHead` the decoder was made from (its magic cookie).
    public let header: OpusHeader
    private let decoder: OpaquePointer
    private var samples: [Float]

    /// Opus's needs. Pre-roll: 64 packets (1.28 s of the usual 20 ms packets). RFC 7845 asks a
    /// seek for at least 80 ms, enough to sound right; but CELT predicts each frame's band
    /// energies from the previous frame's, and from another start that state converges to the
    /// same bits only slowly: on tones, 4 packets of pre-roll leave errors of 0.1, 16 leave 4e-4,
    /// 32 leave 3e-7, and 64 gave the linear decode's bits in every test. Decoding 1.28 s more
    /// costs a few milliseconds a seek. Parallel pieces start the same way; the parallel renderer
    /// checks every join and renders on one thread if one differs.
    public static let traits = AudioDecoderTraits(preRollPackets: { _ in 64 }, parallelRefusal: { _ in nil })

    /// The factory ``register(in:)`` adds: Opus.
    public static let factory = AudioDecoderFactory(name: "libopus", formats: [.opus], priority: 10, traits: traits) { format, cookie in
        try OpusDecoder(format: format, magicCookie: cookie)
    }

    /// Registers ``factory`` with a registry (the shared one by default).
    public static func register(in registry: AudioDecoderRegistry = .shared) { registry.register(factory) }

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/codecNotFound`` without a valid `OpusHead` cookie or for a
    ///   mapping family other than 0 and 1.
    public init(format: AudioStreamDescription, magicCookie: [UInt8]?) throws {
        var why = ""
        guard let cookie = magicCookie, let header = OpusHeader(cookie, why: &why) else {
            throw AudioQueueError(.codecNotFound, "Opus needs its OpusHead as the magic cookie: \(magicCookie == nil ? "none was given" : why)")
        }
        guard header.mappingFamily == 0 || (header.mappingFamily == 1 && header.channels <= 8) else {
            throw AudioQueueError(.codecNotFound,
                "Opus channel mapping family \(header.mappingFamily) with \(header.channels) channels is not played: only families 0 and 1 (up to 8 channels) have a defined speaker order")
        }
        self.header = header
        var error: Int32 = 0
        var mapping = header.mapping
        try AudioQueueError.requireLibrary(aq_opus_load(), reason: aq_opus_error)
        let made = aq_opus_multistream_decoder_create(Int32(OpusHeader.decodingRate), Int32(header.channels), Int32(header.streamCount),
                                                   Int32(header.coupledCount), &mapping, &error)
        guard let made, error == OPUS_OK else {
            throw AudioQueueError(.codecNotFound, "libopus could not make a decoder for \(header.channels) channels: \(Self.describe(error))")
        }
        decoder = made
        if header.outputGain != 0 {
            let status = copus_set_gain(made, Int32(header.outputGain))
            guard status == OPUS_OK else {
                aq_opus_multistream_decoder_destroy(made)
                throw AudioQueueError(.codecNotFound, "libopus refused the output gain \(header.outputGain)/256 dB: \(Self.describe(status))")
            }
        }
        outputFormat = .float32(sampleRate: Double(OpusHeader.decodingRate), channels: header.channels)
        samples = [Float](repeating: 0, count: 5_760 * header.channels)
    }

    deinit { aq_opus_multistream_decoder_destroy(decoder) }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        let channels = header.channels
        guard let base = packet.baseAddress?.assumingMemoryBound(to: UInt8.self), !packet.isEmpty, packet.count <= Int(Int32.max) else {
            conceal(frames: frames, into: output, why: "an empty packet")
            return
        }
        let decoded = aq_opus_multistream_decode_float(decoder, base, Int32(packet.count), &samples, 5_760, 0)
        guard decoded >= 0 else {
            conceal(frames: frames, into: output, why: Self.describe(decoded))
            return
        }
        samples.withUnsafeBufferPointer { output.append(UnsafeBufferPointer(rebasing: $0[0..<(Int(decoded) * channels)])) }
    }

    /// Silence of the packet's length (its table-of-contents count when the container gave none).
    private func conceal(frames: Int, into output: DecodedAudio, why: String) {
        output.appendSilence(frames: frames)
        output.reportError(AudioQueueError(.decoderError, "libopus could not decode a packet (\(why)); \(frames) frames of silence in its place"))
    }

    public func finish(into output: DecodedAudio) throws { reset() }

    public func reset() { _ = copus_reset(decoder) }

    static func describe(_ code: Int32) -> String {
        guard let text = aq_opus_strerror(code) else { return "error \(code)" }
        return "\(String(cString: text)) (\(code))"
    }
}
