import BufferQueue
import COpenCoreAMR

/// Decodes AMR narrowband (`'samr'`, 8 kHz) and wideband (`'sawb'`, 16 kHz) speech with
/// opencore-amr (Apache-2.0).
///
/// A packet holds one or more frames in the storage format of RFC 4867 §5 (what `.amr`/`.awb`
/// files, CAF and 3GP/MP4 carry): a table-of-contents byte whose frame type gives the payload's
/// size, then the payload. Every frame is 20 ms: 160 samples (NB) or 320 (WB), mono. A frame of
/// type NO_DATA, or one marked bad, still decodes to its 20 ms (the decoder conceals it), so the
/// timeline stays exact.
public final class AMRDecoder: AudioDecoder {
    public let outputFormat: AudioStreamDescription
    private let wideband: Bool
    private var state: UnsafeMutableRawPointer?
    private var pcm = [Int16](repeating: 0, count: 320)
    /// One frame, zero-padded: the decoders read a little past short frames.
    private var frame = [UInt8](repeating: 0, count: 64)

    /// Registers the decoder with a registry (the shared one by default) for `'samr'` and `'sawb'`.
    public static func register(in registry: AudioDecoderRegistry = .shared) {
        registry.register(factory)
    }

    /// The registry entry.
    /// 10 packets (200 ms) of pre-roll for the predictors to settle; not split for parallel
    /// decoding: from another start they settle towards the continuous decode's values, not
    /// known to reach them exactly.
    public static let traits = AudioDecoderTraits(preRollPackets: { _ in 10 }, parallelRefusal: { _ in
        "AMR: its predictors settle towards the continuous decode's values from another start, not known to reach them exactly"
    })

    /// The factory ``register(in:)`` adds: AMR-NB and AMR-WB.
    public static let factory = AudioDecoderFactory(name: "opencore-amr", formats: [.amr, .amrWideband], traits: traits) { format, _ in
        try AMRDecoder(format: format)
    }

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/codecNotFound`` for another format;
    ///   ``/BufferQueue/AudioQueueError/Code/invalidPropertyValue`` for a rate or channel count AMR does not have.
    public init(format: AudioStreamDescription) throws {
        guard format.formatID == .amr || format.formatID == .amrWideband else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not AMR")
        }
        wideband = format.formatID == .amrWideband
        let rate = wideband ? 16000.0 : 8000.0
        guard format.channelsPerFrame <= 1, format.sampleRate == 0 || format.sampleRate == rate else {
            throw AudioQueueError(.invalidPropertyValue,
                "AMR-\(wideband ? "WB" : "NB") is mono at \(Int(rate)) Hz; the stream says \(format.channelsPerFrame) channels at \(format.sampleRate) Hz")
        }
        outputFormat = .float32(sampleRate: rate, channels: 1)
        if wideband {
            try AudioQueueError.requireLibrary(aq_amrwb_load(), reason: aq_amrwb_error)
        } else {
            try AudioQueueError.requireLibrary(aq_amrnb_load(), reason: aq_amrnb_error)
        }
        state = wideband ? aq_D_IF_init() : aq_Decoder_Interface_init()
        guard state != nil else { throw AudioQueueError(.decoderError, "opencore-amr could not make a decoder") }
    }

    deinit { close() }

    private func close() {
        guard let state else { return }
        if wideband { aq_D_IF_exit(state) } else { aq_Decoder_Interface_exit(state) }
        self.state = nil
    }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        guard state != nil else { return }
        let bytes = packet.bindMemory(to: UInt8.self)
        guard let base = bytes.baseAddress else { return }
        let perFrame = AMRFrame.frames(wideband: wideband)
        var offset = 0, decoded = 0
        while offset < bytes.count {
            let type = AMRFrame.type(ofTableOfContents: bytes[offset])
            guard let size = AMRFrame.storageBytes(type: type, wideband: wideband), offset + size <= bytes.count else {
                output.reportError(AudioQueueError(.decoderError,
                    "an AMR packet has a frame of type \(type) at byte \(offset) that \(AMRFrame.storageBytes(type: type, wideband: wideband) == nil ? "is reserved" : "runs past the packet's \(bytes.count) bytes"); the rest of the packet is concealed"))
                break
            }
            frame.withUnsafeMutableBufferPointer { copy in
                copy.update(repeating: 0)
                _ = copy.initialize(from: UnsafeBufferPointer(start: base + offset, count: size))
            }
            // The library reads the ToC byte itself, its Q bit (frame damaged) included.
            decodeFrame(into: output, perFrame: perFrame)
            decoded += perFrame
            offset += size
        }
        // Frames the container promised but the packet did not hold: concealed, not dropped.
        let missing = max(frames - decoded, 0) / perFrame
        for _ in 0..<missing {
            frame.withUnsafeMutableBufferPointer { $0.update(repeating: 0); $0[0] = UInt8(15 << 3 | 0x04) }   // NO_DATA
            decodeFrame(into: output, perFrame: perFrame)
        }
    }

    private func decodeFrame(into output: DecodedAudio, perFrame: Int) {
        frame.withUnsafeBufferPointer { input in
            pcm.withUnsafeMutableBufferPointer { samples in
                if wideband {
                    aq_D_IF_decode(state, input.baseAddress, samples.baseAddress, 0)
                } else {
                    aq_Decoder_Interface_Decode(state, input.baseAddress, samples.baseAddress, 0)
                }
            }
        }
        let space = output.reserve(frames: perFrame)
        for i in 0..<perFrame { space[i] = Float(pcm[i]) / 32768 }
        output.commit(frames: perFrame)
    }

    public func finish(into output: DecodedAudio) throws { reset() }

    public func reset() {
        close()
        state = wideband ? aq_D_IF_init() : aq_Decoder_Interface_init()
    }
}
