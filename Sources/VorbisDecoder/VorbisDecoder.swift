import BufferQueue
import CVorbis

/// An ``/BufferQueue/AudioDecoder`` for Vorbis on libvorbis (BSD-3-Clause).
///
/// Configured from the magic cookie, the three header packets (``/BufferQueue/VorbisHeaders``). Output is
/// float32 at the stream's rate in Vorbis channel order (``/BufferQueue/AudioChannelLayout/vorbis(channels:)``),
/// libvorbis's own samples with nothing rounded (`oggdec` rounds them to 16 bits).
///
/// A Vorbis packet's frames overlap the previous packet's, so the first packet of a decode adds
/// none. At the start of a stream the container counts it so (0 frames); after a reset (a seek)
/// the first packet decoded is a pre-roll packet the container counts in full: this decoder then
/// gives that count of silence, which the queue trims, so the timeline stays exact. A packet
/// libvorbis cannot decode becomes silence of the container's count and a converter error.
public final class VorbisDecoder: AudioDecoder {
    public let outputFormat: AudioStreamDescription
    /// The three Vorbis headers the decoder was made from (its magic cookie).
    public let headers: VorbisHeaders
    private let info: UnsafeMutablePointer<vorbis_info>
    private let comment: UnsafeMutablePointer<vorbis_comment>
    private let dsp: UnsafeMutablePointer<vorbis_dsp_state>
    private let block: UnsafeMutablePointer<vorbis_block>
    private var packetNumber: Int64 = 3
    private var firstSinceReset = true

    /// Vorbis's needs. Pre-roll: 1 packet — a packet's output is the overlap of its window with
    /// the previous packet's, and nothing older — so pieces decoded apart join bit-exactly.
    /// Packets decode to what the container counts for them (their overlap), not a fixed frame.
    public static let traits = AudioDecoderTraits(preRollPackets: { _ in 1 }, parallelRefusal: { _ in nil })

    /// The factory ``register(in:)`` adds: Vorbis.
    public static let factory = AudioDecoderFactory(name: "libvorbis", formats: [.vorbis], priority: 10, traits: traits) { format, cookie in
        try VorbisDecoder(format: format, magicCookie: cookie)
    }

    /// Registers ``factory`` with a registry (the shared one by default).
    public static func register(in registry: AudioDecoderRegistry = .shared) { registry.register(factory) }

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/codecNotFound`` without three valid header packets.
    public init(format: AudioStreamDescription, magicCookie: [UInt8]?) throws {
        try AudioQueueError.requireLibrary(aq_vorbis_load(), reason: aq_vorbis_error)
        var why = ""
        guard let cookie = magicCookie, let headers = VorbisHeaders(magicCookie: cookie, why: &why) else {
            throw AudioQueueError(.codecNotFound, "Vorbis needs its three header packets as the magic cookie: \(magicCookie == nil ? "none was given" : why)")
        }
        self.headers = headers
        info = .allocate(capacity: 1)
        comment = .allocate(capacity: 1)
        dsp = .allocate(capacity: 1)
        block = .allocate(capacity: 1)
        let (info, comment, dsp, block) = (info, comment, dsp, block)
        aq_vorbis_info_init(info)
        aq_vorbis_comment_init(comment)
        for (number, packet) in headers.packets.enumerated() {
            var bytes = packet
            let status = bytes.withUnsafeMutableBufferPointer { buffer in
                var op = ogg_packet(packet: buffer.baseAddress, bytes: buffer.count, b_o_s: number == 0 ? 1 : 0, e_o_s: 0,
                                    granulepos: number == 2 ? 0 : -1, packetno: Int64(number))
                return aq_vorbis_synthesis_headerin(info, comment, &op)
            }
            guard status == 0 else {
                aq_vorbis_comment_clear(comment)
                aq_vorbis_info_clear(info)
                Self.free(info, comment, dsp, block)
                throw AudioQueueError(.codecNotFound, "libvorbis refused Vorbis header packet \(number + 1) (error \(status))")
            }
        }
        guard aq_vorbis_synthesis_init(dsp, info) == 0 else {
            aq_vorbis_comment_clear(comment)
            aq_vorbis_info_clear(info)
            Self.free(info, comment, dsp, block)
            throw AudioQueueError(.codecNotFound, "libvorbis could not start a decoder for \(headers.channels) channels at \(headers.sampleRate) Hz")
        }
        aq_vorbis_block_init(dsp, block)
        outputFormat = .float32(sampleRate: Double(headers.sampleRate), channels: headers.channels)
    }

    deinit {
        aq_vorbis_block_clear(block)
        aq_vorbis_dsp_clear(dsp)
        aq_vorbis_comment_clear(comment)
        aq_vorbis_info_clear(info)
        Self.free(info, comment, dsp, block)
    }

    private static func free(_ info: UnsafeMutablePointer<vorbis_info>, _ comment: UnsafeMutablePointer<vorbis_comment>,
                             _ dsp: UnsafeMutablePointer<vorbis_dsp_state>, _ block: UnsafeMutablePointer<vorbis_block>) {
        info.deallocate()
        comment.deallocate()
        dsp.deallocate()
        block.deallocate()
    }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        let first = firstSinceReset
        firstSinceReset = false
        guard let base = packet.baseAddress, !packet.isEmpty else {
            conceal(frames: frames, into: output, why: "an empty packet")
            return
        }
        var op = ogg_packet(packet: UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self)), bytes: packet.count,
                            b_o_s: 0, e_o_s: 0, granulepos: -1, packetno: packetNumber)
        packetNumber += 1
        let status = aq_vorbis_synthesis(block, &op)
        guard status == 0, aq_vorbis_synthesis_blockin(dsp, block) == 0 else {
            conceal(frames: frames, into: output, why: status == OV_ENOTAUDIO ? "not an audio packet" : "error \(status)")
            return
        }
        let channels = headers.channels
        var produced = 0
        var pcm: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>?
        while true {
            let available = Int(aq_vorbis_synthesis_pcmout(dsp, &pcm))
            guard available > 0, let pcm else { break }
            let space = output.reserve(frames: available)
            for channel in 0..<channels {
                guard let samples = pcm[channel] else { continue }
                var index = channel
                for frame in 0..<available {
                    space[index] = samples[frame]
                    index += channels
                }
            }
            output.commit(frames: available)
            produced += available
            aq_vorbis_synthesis_read(dsp, Int32(available))
        }
        // The first packet after a reset only fills the overlap; the container counted its frames.
        if first, produced == 0, frames > 0 { output.appendSilence(frames: frames) }
    }

    private func conceal(frames: Int, into output: DecodedAudio, why: String) {
        output.appendSilence(frames: frames)
        output.reportError(AudioQueueError(.decoderError, "libvorbis could not decode a packet (\(why)); \(frames) frames of silence in its place"))
    }

    public func finish(into output: DecodedAudio) throws { reset() }

    public func reset() {
        aq_vorbis_synthesis_restart(dsp)
        firstSinceReset = true
    }
}
