import BufferQueue
import CAVCodec

/// AAC on libavcodec (LGPL-2.1-or-later): ``AVCodecAACDecoder`` (AAC-LC, HE-AAC, HE-AAC v2) and
/// ``AVCodecAACEncoder`` (AAC-LC, ffmpeg's native encoder). A program that links this module and
/// not `FAADDecoder` plays and writes AAC without the GPL.
public enum AVCodecAAC {
    /// Registers the decoder (ahead of libfaad2 when both are registered) and the encoder.
    ///
    /// libavcodec itself is opened when the first decoder or encoder is made (the module does not
    /// link it), so registering costs nothing at start-up and a program that never meets AAC never
    /// loads it.
    public static func register(decoders: AudioDecoderRegistry = .shared, encoders: AudioEncoderRegistry = .shared) {
        decoders.register(AVCodecAACDecoder.factory)
        encoders.register(AVCodecAACEncoder.factory)
    }

    /// Opens libavcodec if it is not open yet (its log turned off: errors reach the caller as
    /// ``AudioQueueError``s instead).
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` naming why it cannot be opened.
    static func load() throws {
        try AudioQueueError.requireLibrary(aq_libavcodec_load(), reason: aq_libavcodec_error)
    }

    /// Frees a codec context and the frame and packet used with it.
    static func free(_ context: UnsafeMutablePointer<AVCodecContext>, _ frame: UnsafeMutablePointer<AVFrame>, _ packet: UnsafeMutablePointer<AVPacket>) {
        var context: UnsafeMutablePointer<AVCodecContext>? = context
        aq_avcodec_free_context(&context)
        var frame: UnsafeMutablePointer<AVFrame>? = frame
        aq_av_frame_free(&frame)
        var packet: UnsafeMutablePointer<AVPacket>? = packet
        aq_av_packet_free(&packet)
    }

    /// libavcodec's message for an error code.
    static func message(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        aq_av_strerror(code, &buffer, buffer.count)
        return String(nulTerminated: buffer)
    }

    /// The speaker of a libavcodec channel, as this library labels it.
    static func label(_ channel: AVChannel) -> AudioChannelLayout.Label {
        switch channel {
        case AV_CHAN_FRONT_LEFT: return .left
        case AV_CHAN_FRONT_RIGHT: return .right
        case AV_CHAN_FRONT_CENTER: return .center
        case AV_CHAN_LOW_FREQUENCY: return .lfeScreen
        case AV_CHAN_BACK_LEFT, AV_CHAN_SIDE_LEFT: return .leftSurround
        case AV_CHAN_BACK_RIGHT, AV_CHAN_SIDE_RIGHT: return .rightSurround
        case AV_CHAN_BACK_CENTER: return .centerSurround
        default: return .unknown
        }
    }
}

/// An ``/BufferQueue/AudioDecoder`` for AAC-LC, HE-AAC and HE-AAC v2 on libavcodec's native AAC decoder: the
/// LGPL alternative to `FAADDecoder`, with the same output: float32 at the real output rate
/// (SBR doubles it, announced as a format change before its first frame), each packet its whole
/// frame (1 024, or 2 048 with SBR) from the first packet on, channels in AAC's order (centre
/// first, as the container's layout says; libavcodec's own order is reordered).
///
/// Configured from the AudioSpecificConfig (the magic cookie). A packet libavcodec cannot decode
/// becomes silence of its length and a converter error.
public final class AVCodecAACDecoder: AudioDecoder {
    public private(set) var outputFormat: AudioStreamDescription
    private let context: UnsafeMutablePointer<AVCodecContext>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    private var buffer: UnsafeMutablePointer<UInt8>
    private var bufferSize: Int
    private let declaredRate: Double
    /// For each output channel, the decoded channel it takes (nil: as decoded).
    private var order: [Int]?
    private var orderFor: Int = 0
    /// Whether the configuration says mono: libavcodec makes SBR streams stereo in case
    /// parametric stereo shows up; without it, mono stays mono (as with libfaad2).
    private let coreIsMono: Bool

    /// libavcodec's needs, as libfaad2's: pre-roll 2 packets for AAC-LC, 16 with SBR; AAC-LC pieces
    /// join exactly (but for noise substitution, whose generator runs on; the join check finds it).
    public static let traits = AudioDecoderTraits(
        preRollPackets: { format in format.formatID == .aacLC ? 2 : 16 },
        parallelRefusal: { format in
            format.formatID == .aacLC ? nil
                : "\(format.formatID): libavcodec's SBR and parametric-stereo state does not converge to the same bits from another start"
        },
        decodesWholeFrames: true)

    /// Priority 20: ahead of libfaad2 (10) when both are registered.
    public static let factory = AudioDecoderFactory(name: "libavcodec AAC", formats: [.aacLC, .heAAC, .heAACv2], priority: 20, traits: traits) { format, cookie in
        try AVCodecAACDecoder(format: format, magicCookie: cookie)
    }

    /// Without a cookie, the config the stream description implies (``/BufferQueue/AACConfig/implied(by:)``),
    /// as Core Audio decodes AAC from its description alone.
    /// - Throws: ``/BufferQueue/AudioQueueError/Code/codecNotFound`` without a usable AudioSpecificConfig.
    public init(format: AudioStreamDescription, magicCookie: [UInt8]?) throws {
        let given = magicCookie?.isEmpty == false ? magicCookie : AACConfig.implied(by: format)
        guard let cookie = given, cookie.count >= 2, cookie.count <= 64 else {
            throw AudioQueueError(.codecNotFound, "AAC needs its AudioSpecificConfig as the magic cookie (got \(magicCookie?.count ?? 0) bytes), "
                + "or a stream description that implies one (this one: \(format.sampleRate) Hz, \(format.channelsPerFrame) channels)")
        }
        try AVCodecAAC.load()
        guard let codec = aq_avcodec_find_decoder(AV_CODEC_ID_AAC), let context = aq_avcodec_alloc_context3(codec) else {
            throw AudioQueueError(.codecNotFound, "libavcodec has no AAC decoder")
        }
        let padding = Int(cavcodec_padding())
        guard let extradata = aq_av_mallocz(cookie.count + padding)?.assumingMemoryBound(to: UInt8.self) else {
            var doomed: UnsafeMutablePointer<AVCodecContext>? = context
            aq_avcodec_free_context(&doomed)
            throw AudioQueueError(.codecNotFound, "libavcodec could not allocate")
        }
        extradata.update(from: cookie, count: cookie.count)
        context.pointee.extradata = extradata
        context.pointee.extradata_size = Int32(cookie.count)
        // The container's gapless numbers decide what is trimmed: libavcodec is not to drop the
        // first frame of a stream it takes for libfaac's.
        context.pointee.flags2 |= cavcodec_flag2_skip_manual()
        let opened = aq_avcodec_open2(context, codec, nil)
        guard opened >= 0, let frame = aq_av_frame_alloc(), let packet = aq_av_packet_alloc() else {
            var doomed: UnsafeMutablePointer<AVCodecContext>? = context
            aq_avcodec_free_context(&doomed)
            throw AudioQueueError(.codecNotFound, "libavcodec rejected the AudioSpecificConfig \(cookie.map { String($0, radix: 16) }.joined(separator: " ")): \(AVCodecAAC.message(opened))")
        }
        self.context = context
        self.frame = frame
        self.packet = packet
        declaredRate = format.sampleRate
        bufferSize = 8192
        buffer = .allocate(capacity: bufferSize + padding)
        let channels = context.pointee.ch_layout.nb_channels > 0 ? Int(context.pointee.ch_layout.nb_channels) : max(format.channelsPerFrame, 1)
        coreIsMono = channels == 1
        let rate = context.pointee.sample_rate > 0 ? Double(context.pointee.sample_rate) : format.sampleRate
        outputFormat = .float32(sampleRate: rate > 0 ? rate : format.sampleRate, channels: channels)
    }

    deinit {
        AVCodecAAC.free(context, frame, packet)
        buffer.deallocate()
    }

    public func decode(packet bytes: UnsafeRawBufferPointer, frames: Int, into out: DecodedAudio) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty, bytes.count <= 6144 * 8 else {
            silence(frames, out, "an AAC packet of \(bytes.count) bytes is outside 1...\(6144 * 8)")
            return
        }
        let padding = Int(cavcodec_padding())
        if bytes.count > bufferSize {
            buffer.deallocate()
            bufferSize = bytes.count
            buffer = .allocate(capacity: bufferSize + padding)
        }
        buffer.update(from: base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        (buffer + bytes.count).update(repeating: 0, count: padding)
        packet.pointee.data = buffer
        packet.pointee.size = Int32(bytes.count)
        let sent = aq_avcodec_send_packet(context, packet)
        guard sent >= 0 else {
            silence(frames, out, "libavcodec could not decode a \(bytes.count)-byte packet (\(AVCodecAAC.message(sent)))")
            return
        }
        var produced = false
        while true {
            let received = aq_avcodec_receive_frame(context, frame)
            if received == cavcodec_error_again() || received == cavcodec_error_eof() { break }
            guard received >= 0 else {
                silence(frames, out, "libavcodec could not decode a \(bytes.count)-byte packet (\(AVCodecAAC.message(received)))")
                return
            }
            produced = true
            append(frame, into: out)
            aq_av_frame_unref(frame)
        }
        if !produced { silence(frames, out, "libavcodec gave no samples for a \(bytes.count)-byte packet") }
    }

    /// Interleaves a planar float frame into `out`, in AAC's channel order.
    private func append(_ frame: UnsafeMutablePointer<AVFrame>, into out: DecodedAudio) {
        let decoded = Int(frame.pointee.ch_layout.nb_channels)
        let channels = coreIsMono && decoded == 2 && context.pointee.profile != cavcodec_profile_he_v2() ? 1 : decoded
        let count = Int(frame.pointee.nb_samples)
        guard channels > 0, count > 0 else { return }
        let format = AudioStreamDescription.float32(sampleRate: Double(frame.pointee.sample_rate), channels: channels)
        if format != outputFormat {
            outputFormat = format
            out.changeFormat(format)
        }
        if orderFor != channels {
            orderFor = channels
            var layout = frame.pointee.ch_layout
            let labels = (0..<channels).map { AVCodecAAC.label(aq_av_channel_layout_channel_from_index(&layout, UInt32($0))) }
            let wanted = AudioChannelLayout.default(channels: channels).channelLabels
            let sources = wanted.map { labels.firstIndex(of: $0) }
            let found = sources.compactMap { $0 }
            order = channels > 2 && found.count == channels && Set(found).count == channels && found != Array(0..<channels) ? found : nil
        }
        let space = out.reserve(frames: count)
        let planar = frame.pointee.format == AV_SAMPLE_FMT_FLTP.rawValue
        guard let planes = frame.pointee.extended_data else { return }
        for channel in 0..<channels {
            let source = order?[channel] ?? channel
            let stride = decoded
            if planar {
                guard let plane = planes[source] else { continue }
                let samples = UnsafeRawPointer(plane).assumingMemoryBound(to: Float.self)
                for index in 0..<count { space[index * channels + channel] = samples[index] }
            } else if let plane = planes[0] {
                let samples = UnsafeRawPointer(plane).assumingMemoryBound(to: Float.self)
                for index in 0..<count { space[index * channels + channel] = samples[index * stride + source] }
            }
        }
        out.commit(frames: count)
    }

    private func silence(_ frames: Int, _ out: DecodedAudio, _ message: String) {
        let scale = max(Int((outputFormat.sampleRate / max(declaredRate, 1)).rounded()), 1)
        out.appendSilence(frames: frames * scale)
        out.reportError(AudioQueueError(.decoderError, message + "; \(frames * scale) frames of silence in its place"))
    }

    public func finish(into out: DecodedAudio) throws { reset() }

    public func reset() { aq_avcodec_flush_buffers(context) }
}

/// An ``/BufferQueue/AudioEncoder`` for AAC-LC on libavcodec's native AAC encoder (ffmpeg's `-c:a aac`),
/// LGPL-2.1-or-later: the AAC encoder Debian ships that is maintained with ffmpeg (fdk-aac is not
/// in Debian's main archive; faac is not maintained and not Debian's default).
///
/// - Packets of 1 024 frames; the priming is the encoder's 1 024 (ffmpeg's `initial_padding`),
///   written by the containers as their gapless numbers.
/// - `settings.bitRate` in bits per second (64 kbit/s per channel, at most 320 kbit/s, by default);
///   `settings.quality` 0–10 asks for variable bit rate instead (ffmpeg's `-q:a` 0.1–2).
/// - Channels go in WAVE's order (ffmpeg's), which ``channelLayout`` gives; the encoder maps them
///   to AAC's. The cookie is the AudioSpecificConfig.
public final class AVCodecAACEncoder: AudioEncoder {
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    public let primingFrames: Int
    public let maximumPacketSize: Int
    public let magicCookie: [UInt8]?
    public var channelLayout: AudioChannelLayout? { channels > 2 ? .wave(channels: channels) : nil }
    private var context: UnsafeMutablePointer<AVCodecContext>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let channels: Int
    private let frameSize: Int
    private let blocks: FrameBlocks
    private let rate: Int
    private let settings: AudioEncoderSettings

    /// - Parameters:
    ///   - format: the rate (8–96 kHz) and 1–8 channels.
    ///   - settings: the bit rate or quality (see the type's notes).
    public init(format: AudioStreamDescription, settings: AudioEncoderSettings = .init()) throws {
        guard format.formatID == .aacLC else { throw AudioQueueError(.codecNotFound, "\(format.formatID) is not AAC-LC") }
        let channels = format.channelsPerFrame
        let rate = Int(format.sampleRate)
        guard (1...8).contains(channels), [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000].contains(rate) else {
            throw AudioQueueError(.invalidPropertyValue, "AAC is encoded here for 1–8 channels at an AAC rate (8–96 kHz), not \(channels) channels at \(format.sampleRate) Hz")
        }
        try AVCodecAAC.load()
        let context = try Self.openContext(rate: rate, channels: channels, settings: settings)
        guard let frame = aq_av_frame_alloc(), let packet = aq_av_packet_alloc() else {
            var doomed: UnsafeMutablePointer<AVCodecContext>? = context
            aq_avcodec_free_context(&doomed)
            throw AudioQueueError(.invalidPropertyValue, "libavcodec could not allocate a frame")
        }
        self.rate = rate
        self.settings = settings
        self.context = context
        self.frame = frame
        self.packet = packet
        self.channels = channels
        frameSize = Int(context.pointee.frame_size > 0 ? context.pointee.frame_size : 1024)
        primingFrames = Int(context.pointee.initial_padding)
        magicCookie = context.pointee.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(context.pointee.extradata_size))) }
        maximumPacketSize = 6144 / 8 * channels
        inputFormat = .float32(sampleRate: Double(rate), channels: channels)
        outputFormat = AudioStreamDescription(sampleRate: Double(rate), formatID: .aacLC, bytesPerPacket: 0, framesPerPacket: frameSize,
                                              bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0)
        blocks = FrameBlocks(framesPerBlock: frameSize, bytesPerFrame: 4 * channels)
    }

    deinit { AVCodecAAC.free(context, frame, packet) }

    /// Packets overlap (an MDCT): pieces encoded apart do not join.
    public static let factory = AudioEncoderFactory(name: "libavcodec AAC", formats: [.aacLC], priority: 10, traits: .dependent) { format, settings in
        try AVCodecAACEncoder(format: format, settings: settings)
    }

    /// A context configured and opened for the stream.
    private static func openContext(rate: Int, channels: Int, settings: AudioEncoderSettings) throws -> UnsafeMutablePointer<AVCodecContext> {
        guard let codec = aq_avcodec_find_encoder(AV_CODEC_ID_AAC), let context = aq_avcodec_alloc_context3(codec) else {
            throw AudioQueueError(.codecNotFound, "libavcodec has no AAC encoder")
        }
        context.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
        context.pointee.sample_rate = Int32(rate)
        aq_av_channel_layout_default(&context.pointee.ch_layout, Int32(channels))
        if let quality = settings.quality {
            context.pointee.flags |= Int32(AV_CODEC_FLAG_QSCALE)
            context.pointee.global_quality = Int32(Double(FF_QP2LAMBDA) * (0.1 + 0.19 * Double(min(max(quality, 0), 10))))
        } else {
            context.pointee.bit_rate = Int64(settings.bitRate ?? min(64000 * channels, 320_000))
        }
        context.pointee.flags |= cavcodec_flag_global_header()
        let opened = aq_avcodec_open2(context, codec, nil)
        guard opened >= 0 else {
            var doomed: UnsafeMutablePointer<AVCodecContext>? = context
            aq_avcodec_free_context(&doomed)
            throw AudioQueueError(.invalidPropertyValue, "libavcodec's AAC encoder refused \(channels) channels at \(rate) Hz: \(AVCodecAAC.message(opened))")
        }
        return context
    }

    public func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        try blocks.add(frames) { try send($0, into: output) }
    }

    /// Sends the last frames, drains the encoder, then opens a new one for the next stream
    /// (libavcodec's encoder takes nothing after its end).
    public func finish(into output: EncodedPackets) throws {
        if let rest = blocks.takeRest(padded: false) { try send(rest, into: output) }
        let sent = aq_avcodec_send_frame(context, nil)
        guard sent >= 0 || sent == cavcodec_error_eof() else { throw AudioQueueError(.decoderError, "libavcodec's AAC encoder: \(AVCodecAAC.message(sent))") }
        try receive(into: output)
        let fresh = try Self.openContext(rate: rate, channels: channels, settings: settings)
        var ended: UnsafeMutablePointer<AVCodecContext>? = context
        aq_avcodec_free_context(&ended)
        context = fresh
    }

    /// Hands interleaved float frames (at most a packet's) to the encoder, planar, and collects
    /// what it gives.
    private func send(_ block: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        let count = block.count / (4 * channels)
        frame.pointee.nb_samples = Int32(count)
        frame.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
        frame.pointee.sample_rate = context.pointee.sample_rate
        aq_av_channel_layout_copy(&frame.pointee.ch_layout, &context.pointee.ch_layout)
        let allocated = aq_av_frame_get_buffer(frame, 0)
        guard allocated >= 0, let planes = frame.pointee.extended_data else {
            throw AudioQueueError(.decoderError, "libavcodec could not allocate a frame: \(AVCodecAAC.message(allocated))")
        }
        let interleaved = block.bindMemory(to: Float.self)
        for channel in 0..<channels {
            guard let plane = planes[channel] else { continue }
            let samples = UnsafeMutableRawPointer(plane).assumingMemoryBound(to: Float.self)
            for index in 0..<count { samples[index] = interleaved[index * channels + channel] }
        }
        let sent = aq_avcodec_send_frame(context, frame)
        aq_av_frame_unref(frame)
        guard sent >= 0 else { throw AudioQueueError(.decoderError, "libavcodec's AAC encoder: \(AVCodecAAC.message(sent))") }
        try receive(into: output)
    }

    private func receive(into output: EncodedPackets) throws {
        while true {
            let received = aq_avcodec_receive_packet(context, packet)
            if received == cavcodec_error_again() || received == cavcodec_error_eof() { return }
            guard received >= 0 else { throw AudioQueueError(.decoderError, "libavcodec's AAC encoder: \(AVCodecAAC.message(received))") }
            if let data = packet.pointee.data {
                output.append(UnsafeRawBufferPointer(start: data, count: Int(packet.pointee.size)), frames: frameSize)
            }
            aq_av_packet_unref(packet)
        }
    }
}
