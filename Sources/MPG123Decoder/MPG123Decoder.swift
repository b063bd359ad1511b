import BufferQueue
import CMPG123

/// An ``/BufferQueue/AudioDecoder`` for MPEG audio (Layer I/II/III) on libmpg123's feed API.
///
/// Frames come out as native-rate float32 (mpg123's resampler is disabled, so a 48 kHz file stays
/// 48 kHz). mpg123's own gapless trimming is switched off: trimming happens once, in the queue,
/// from the parser's numbers. A sample-rate change in the stream is announced as a format change
/// before frames of the new rate. A frame mpg123 cannot decode becomes silence of its length and a
/// converter error, so time stays exact.
public final class MPG123Decoder: AudioDecoder {
    public private(set) var outputFormat: AudioStreamDescription
    private let handle: OpaquePointer
    private var output: [UInt8]
    private var errorCount = 0
    /// The next packet is the first since the feed was opened: look whether it is free format.
    private var firstPacket = true

    /// The registry entry: MPEG Layer I, II and III.
    /// libmpg123's needs. Pre-roll: 10 packets for Layer III (the bit reservoir reaches back up
    /// to 511 bytes, and the synthesis overlaps a frame), 2 for Layers I and II. A Layer III
    /// decode that must give the bits of a decode from the first packet begins where
    /// ``MP3SynthesisPhase`` says; Layer III pieces decoded from such starts join bit-exactly.
    public static let traits = AudioDecoderTraits(
        preRollPackets: { format in format.formatID == .mpegLayer3 ? 10 : 2 },
        decodeStart: { format, packet, preRoll, read in
            guard format.formatID == .mpegLayer3 else { return max(packet - Int64(preRoll), 0) }
            return withoutActuallyEscaping(read) { read in
                MP3SynthesisPhase(framesPerPacket: format.framesPerPacket, read: read).decodeStart(before: packet, preRoll: preRoll)
            }
        },
        parallelRefusal: { format in
            format.formatID == .mpegLayer3 ? nil : "\(format.formatID) is not known to converge bit-exactly from another start"
        },
        // Every MPEG audio frame decodes to its layer's whole frame (1152 or 576, 384).
        decodesWholeFrames: true)

    /// The factory ``register(in:)`` adds: MPEG audio layers I–III.
    public static let factory = AudioDecoderFactory(name: "libmpg123", formats: [.mpegLayer3, .mpegLayer2, .mpegLayer1], priority: 10,
                                                    traits: traits) { format, _ in
        try MPG123Decoder(format: format)
    }

    /// Registers ``factory`` with a registry (the shared one by default).
    public static func register(in registry: AudioDecoderRegistry = .shared) { registry.register(factory) }

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/codecNotFound`` when libmpg123 cannot make a handle.
    public init(format: AudioStreamDescription) throws {
        guard [.mpegLayer3, .mpegLayer2, .mpegLayer1].contains(format.formatID) else {
            throw AudioQueueError(.codecNotFound, "libmpg123 decodes MPEG audio, not \(format.formatID)")
        }
        var error: Int32 = 0
        try AudioQueueError.requireLibrary(aq_mpg123_load(), reason: aq_mpg123_error)
        guard let handle = aq_mpg123_new(nil, &error) else {
            throw AudioQueueError(.codecNotFound, "libmpg123 could not make a decoder (error \(error))")
        }
        self.handle = handle
        outputFormat = .float32(sampleRate: format.sampleRate, channels: max(format.channelsPerFrame, 1))
        output = [UInt8](repeating: 0, count: 1152 * 2 * 4 * 2)
        // mpg123_param is a macro for mpg123_param2 (plain ints), which is what Swift sees.
        aq_mpg123_param2(handle, Int32(MPG123_REMOVE_FLAGS.rawValue), Int(MPG123_GAPLESS.rawValue | MPG123_AUTO_RESAMPLE.rawValue), 0)
        // Whole frames are fed, so mpg123 need not read ahead to the next header before decoding
        // the first (without this, a one-frame stream decodes to nothing).
        aq_mpg123_param2(handle, Int32(MPG123_ADD_FLAGS.rawValue), Int(MPG123_QUIET.rawValue | MPG123_NO_READAHEAD.rawValue), 0)
        aq_mpg123_format_none(handle)
        // Rate 0: every native rate, float output, mono or stereo as coded.
        aq_mpg123_format2(handle, 0, Int32(MPG123_MONO.rawValue | MPG123_STEREO.rawValue), Int32(MPG123_ENC_FLOAT_32.rawValue))
        guard aq_mpg123_open_feed(handle) == MPG123_OK.rawValue else {
            let message = String(cString: aq_mpg123_strerror(handle))
            aq_mpg123_delete(handle)
            throw AudioQueueError(.codecNotFound, "libmpg123 could not open a feed: \(message)")
        }
    }

    deinit {
        aq_mpg123_close(handle)
        aq_mpg123_delete(handle)
    }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into out: DecodedAudio) throws {
        if let fixed = FreeFormatLayerII.rewritten(packet) {
            // Free-format Layer II under a fixed-rate header of the right allocation table.
            firstPacket = false
            try fixed.withUnsafeBytes { try decode(packet: $0, frames: frames, into: out) }
            return
        }
        guard let base = packet.baseAddress, !packet.isEmpty else { return }
        if firstPacket {
            firstPacket = false
            // Without read-ahead, mpg123 must be told a free-format stream's frame size (header
            // and padding slot excluded) before the feed opens.
            if packet.count > 4, packet[0] == 0xFF, packet[1] & 0xE0 == 0xE0, packet[2] >> 4 == 0 {
                aq_mpg123_param2(handle, Int32(MPG123_FREEFORMAT_SIZE.rawValue), packet.count - 4 - Int(packet[2] >> 1 & 1), 0)
                reset()
                firstPacket = false
            }
        }
        let before = out.frameCount
        var input: UnsafePointer<UInt8>? = base.assumingMemoryBound(to: UInt8.self)
        var inputSize = packet.count
        var failed: String?
        while true {
            var done = 0
            let result = output.withUnsafeMutableBytes { buffer in
                aq_mpg123_decode(handle, input, inputSize, buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), buffer.count, &done)
            }
            input = nil
            inputSize = 0
            // Bytes that come with NEW_FORMAT are still in the old format: take them first.
            if done > 0 { append(bytes: done, to: out) }
            if result == MPG123_NEW_FORMAT.rawValue {
                var rate = 0, channels: Int32 = 0, encoding: Int32 = 0
                aq_mpg123_getformat(handle, &rate, &channels, &encoding)
                let format = AudioStreamDescription.float32(sampleRate: Double(rate), channels: Int(channels))
                if format != outputFormat {
                    outputFormat = format
                    out.changeFormat(format)
                }
                continue
            }
            if result == MPG123_NEED_MORE.rawValue { break }
            if result == MPG123_OK.rawValue { continue }
            failed = String(cString: aq_mpg123_strerror(handle))
            break
        }
        let produced = out.frameCount - before
        if let failed, produced < frames {
            out.appendSilence(frames: frames - produced)
            out.reportError(AudioQueueError(.decoderError, "libmpg123 could not decode a \(packet.count)-byte frame (\(failed)); \(frames - produced) frames of silence in its place"))
        }
    }

    private func append(bytes: Int, to out: DecodedAudio) {
        output.withUnsafeBytes { raw in
            out.append(UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: Float.self), count: bytes / 4))
        }
    }

    public func finish(into out: DecodedAudio) throws {
        reset()
    }

    public func reset() {
        aq_mpg123_close(handle)
        aq_mpg123_open_feed(handle)
        firstPacket = true
    }
}
