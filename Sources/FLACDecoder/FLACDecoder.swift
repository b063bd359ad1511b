import BufferQueue
import CFLAC

/// An ``/BufferQueue/AudioDecoder`` for FLAC on libFLAC (BSD-3-Clause), native or from Ogg, MP4 and CAF alike:
/// every container hands over whole frames.
///
/// Configured from the magic cookie: `fLaC` and the STREAMINFO block (what a native file begins
/// with; ``/BufferQueue/AudioFormatID/flac``), or from the stream description alone when there is none. Output is float32, each integer sample divided by 2^(bits − 1),
/// so 8-, 16- and 24-bit sources are exact in it.
///
/// The STREAMINFO MD5 of the unencoded samples is checked by libFLAC when a decode ran from the
/// first frame to the last without a reset: a mismatch is reported at the end, by ``finish(into:)``,
/// as a converter error (the queue publishes it as an event). A frame libFLAC cannot decode
/// becomes silence of the container's count and a converter error.
public final class FLACDecoder: AudioDecoder {
    public private(set) var outputFormat: AudioStreamDescription
    private let decoder: UnsafeMutablePointer<FLAC__StreamDecoder>
    /// The stream header libFLAC reads first: `fLaC` and STREAMINFO as the last metadata block.
    private let streamHeader: [UInt8]
    /// Samples per channel the stream holds (STREAMINFO; 0 when unknown) and whether it has an MD5.
    private let totalSamples: Int64
    private let hasMD5: Bool

    // What the callbacks use during one call.
    private var pending: UnsafeRawBufferPointer?
    private var pendingOffset = 0
    private var output: DecodedAudio?
    private var written = 0
    private var lastError: FLAC__StreamDecoderErrorStatus?
    /// Samples decoded since the decoder last started; nil after a concealed frame, when the MD5
    /// can no longer be checked.
    private var decodedFromStart: Int64? = 0

    /// FLAC's needs: frames decode on their own (no pre-roll), so pieces join bit-exactly.
    public static let traits = AudioDecoderTraits.independentPackets

    /// The factory ``register(in:)`` adds: FLAC.
    public static let factory = AudioDecoderFactory(name: "libFLAC", formats: [.flac], priority: 10, traits: traits) { format, cookie in
        try FLACDecoder(format: format, magicCookie: cookie)
    }

    /// Registers ``factory`` with a registry (the shared one by default).
    public static func register(in registry: AudioDecoderRegistry = .shared) { registry.register(factory) }

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/codecNotFound`` without a STREAMINFO in the cookie.
    public init(format: AudioStreamDescription, magicCookie: [UInt8]?) throws {
        if let cookie = magicCookie {
            guard let info = FLACStreamInfo(magicCookie: cookie) else {
                throw AudioQueueError(.codecNotFound, "a FLAC magic cookie must be `fLaC` and the STREAMINFO block (got \(cookie.count) bytes)")
            }
            streamHeader = info.magicCookie
            totalSamples = info.totalSamples
            hasMD5 = info.md5.contains { $0 != 0 }
            outputFormat = .float32(sampleRate: Double(info.sampleRate), channels: info.channels)
        } else {
            // No STREAMINFO (a CAF ffmpeg wrote): frames decode alone when their headers give the
            // rate and sample size; there is no MD5 to check.
            streamHeader = []
            totalSamples = 0
            hasMD5 = false
            outputFormat = .float32(sampleRate: format.sampleRate, channels: max(format.channelsPerFrame, 1))
        }
        try AudioQueueError.requireLibrary(aq_flac_load(), reason: aq_flac_error)
        guard let made = aq_FLAC__stream_decoder_new() else {
            throw AudioQueueError(.codecNotFound, "libFLAC could not make a decoder")
        }
        decoder = made
        try start()
    }

    deinit {
        aq_FLAC__stream_decoder_finish(decoder)
        aq_FLAC__stream_decoder_delete(decoder)
    }

    /// Initialises libFLAC and has it read the stream header.
    private func start() throws {
        aq_FLAC__stream_decoder_set_md5_checking(decoder, 1)
        let client = Unmanaged.passUnretained(self).toOpaque()
        let status = aq_FLAC__stream_decoder_init_stream(decoder, { _, buffer, bytes, client in
            guard let client, let buffer, let bytes else { return FLAC__STREAM_DECODER_READ_STATUS_ABORT }
            return Unmanaged<FLACDecoder>.fromOpaque(client).takeUnretainedValue().read(into: buffer, count: bytes)
        }, nil, nil, nil, nil, { _, frame, buffer, client in
            guard let client, let frame, let buffer else { return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT }
            return Unmanaged<FLACDecoder>.fromOpaque(client).takeUnretainedValue().write(frame.pointee.header, buffer)
        }, nil, { _, status, client in
            guard let client else { return }
            Unmanaged<FLACDecoder>.fromOpaque(client).takeUnretainedValue().lastError = status
        }, client)
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else {
            throw AudioQueueError(.codecNotFound, "libFLAC could not start a decoder (init status \(status.rawValue))")
        }
        let ok = streamHeader.isEmpty ? 1 : streamHeader.withUnsafeBytes { header in
            feeding(header) { aq_FLAC__stream_decoder_process_until_end_of_metadata(decoder) }
        }
        guard ok != 0 else {
            throw AudioQueueError(.codecNotFound, "libFLAC refused the STREAMINFO of the magic cookie")
        }
        decodedFromStart = 0
    }

    /// Runs `body` with `bytes` as what the read callback hands out.
    private func feeding<R>(_ bytes: UnsafeRawBufferPointer, _ body: () -> R) -> R {
        pending = bytes
        pendingOffset = 0
        defer { pending = nil }
        return body()
    }

    private func read(into buffer: UnsafeMutablePointer<FLAC__byte>, count: UnsafeMutablePointer<Int>) -> FLAC__StreamDecoderReadStatus {
        guard let pending, pendingOffset < pending.count else {
            count.pointee = 0
            return FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM
        }
        let n = min(count.pointee, pending.count - pendingOffset)
        UnsafeMutableRawPointer(buffer).copyMemory(from: pending.baseAddress! + pendingOffset, byteCount: n)
        pendingOffset += n
        count.pointee = n
        return FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
    }

    private func write(_ header: FLAC__FrameHeader, _ buffer: UnsafePointer<UnsafePointer<FLAC__int32>?>) -> FLAC__StreamDecoderWriteStatus {
        guard let output else { return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE }
        let channels = Int(header.channels), frames = Int(header.blocksize), bits = Int(header.bits_per_sample)
        guard channels > 0, bits > 0 else { return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT }
        if channels != outputFormat.channelsPerFrame || Double(header.sample_rate) != outputFormat.sampleRate, header.sample_rate > 0 {
            outputFormat = .float32(sampleRate: Double(header.sample_rate), channels: channels)
            output.changeFormat(outputFormat)
        }
        let scale = 1 / Float(Int64(1) << (bits - 1))
        let space = output.reserve(frames: frames)
        for channel in 0..<channels {
            guard let samples = buffer[channel] else { continue }
            var index = channel
            for frame in 0..<frames {
                space[index] = Float(samples[frame]) * scale
                index += channels
            }
        }
        output.commit(frames: frames)
        written += frames
        return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE
    }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        self.output = output
        written = 0
        lastError = nil
        defer { self.output = nil }
        let ok = feeding(packet) { aq_FLAC__stream_decoder_process_single(decoder) }
        if ok == 0 || written == 0 || lastError != nil {
            let state = aq_FLAC__stream_decoder_get_state(decoder)
            let why = lastError.map(Self.describe) ?? "decoder state \(state.rawValue)"
            // Start the next frame clean.
            aq_FLAC__stream_decoder_flush(decoder)
            decodedFromStart = nil
            if written == 0 {
                output.appendSilence(frames: frames)
                output.reportError(AudioQueueError(.decoderError, "libFLAC could not decode a frame (\(why)); \(frames) frames of silence in its place"))
            } else {
                output.reportError(AudioQueueError(.decoderError, "libFLAC reported \(why) while decoding a frame"))
            }
            return
        }
        if let decoded = decodedFromStart { decodedFromStart = decoded + Int64(written) }
    }

    static func describe(_ status: FLAC__StreamDecoderErrorStatus) -> String {
        switch status {
        case FLAC__STREAM_DECODER_ERROR_STATUS_LOST_SYNC: return "lost sync"
        case FLAC__STREAM_DECODER_ERROR_STATUS_BAD_HEADER: return "a bad frame header"
        case FLAC__STREAM_DECODER_ERROR_STATUS_FRAME_CRC_MISMATCH: return "a frame CRC-16 mismatch"
        case FLAC__STREAM_DECODER_ERROR_STATUS_UNPARSEABLE_STREAM: return "reserved fields in use"
        default: return "error status \(status.rawValue)"
        }
    }

    /// Ends a run: when it was a whole decode from the first frame, libFLAC compares the MD5 of
    /// the samples with STREAMINFO's and a mismatch is reported.
    public func finish(into output: DecodedAudio) throws {
        let complete = hasMD5 && totalSamples > 0 && decodedFromStart == totalSamples
        let matches = aq_FLAC__stream_decoder_finish(decoder) != 0
        if complete && !matches {
            output.reportError(AudioQueueError(.decoderError,
                "the decoded samples do not match the MD5 signature in STREAMINFO: the FLAC stream is damaged"))
        }
        try start()
    }

    /// Starts libFLAC afresh: a decode from the first frame after this is checked against the MD5
    /// again (one from elsewhere never reaches STREAMINFO's count from its start, so is not).
    public func reset() {
        aq_FLAC__stream_decoder_finish(decoder)
        do { try start() } catch { decodedFromStart = nil }
    }
}
