import BufferQueue
import CFLAC

/// An ``/BufferQueue/AudioEncoder`` for FLAC on libFLAC (BSD-3-Clause): 4- to 32-bit integer samples, 1–8
/// channels, each frame a packet.
///
/// Samples go in as 16-bit integers for a 16-bit stream, otherwise as full-scale 32-bit integers
/// reduced to the stream's bit depth by rounding (the encoding converter passes integer sources
/// through untouched), so a source of that depth is coded exactly. `settings.quality` is libFLAC's compression level (0–8, `flac -5` by
/// default), `settings.framesPerPacket` its block size (the level's own by default: 4 096 from
/// level 3 up).
///
/// The cookie is `fLaC` and the STREAMINFO block. libFLAC fills in the total, the frame sizes
/// and the MD5 of the samples at the end: ``magicCookie`` has them after ``finish(into:)``, for
/// the writer to put back at the start of the file.
/// Channels go in WAVE's order (FLAC's own).
public final class FLACEncoder: AudioEncoder {
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    public var primingFrames: Int { 0 }
    public let maximumPacketSize: Int
    public var channelLayout: AudioChannelLayout? { .wave(channels: channels) }
    private let channels: Int
    private let bits: Int
    private let level: Int
    private let blockSize: Int?
    private var encoder: UnsafeMutablePointer<FLAC__StreamEncoder>?
    private var started = false
    private var info: FLACStreamInfo
    private var samples: [Int32] = []
    // During a call into libFLAC: where frames go.
    private var output: EncodedPackets?
    private var frameBytes: [UInt8] = []
    private var frameSamples = 0
    private var frameNumber: UInt32?
    private var failure: AudioQueueError?

    /// - Parameters:
    ///   - format: the rate (1–655 350 Hz), 1–8 channels, and `bitsPerChannel` 4–32 (0 means 16).
    ///   - settings: `quality` 0–8 is the compression level (5 by default, as `flac`'s).
    public init(format: AudioStreamDescription, settings: AudioEncoderSettings = .init()) throws {
        guard format.formatID == .flac else { throw AudioQueueError(.codecNotFound, "\(format.formatID) is not FLAC") }
        let bits = format.bitsPerChannel == 0 ? 16 : format.bitsPerChannel
        let channels = format.channelsPerFrame
        guard (4...32).contains(bits), (1...8).contains(channels), format.sampleRate >= 1, format.sampleRate <= 655_350,
              format.sampleRate == format.sampleRate.rounded() else {
            throw AudioQueueError(.invalidPropertyValue,
                "FLAC codes 4–32 bits, 1–8 channels at a whole rate up to 655 350 Hz; asked for \(bits) bits, \(channels) channels at \(format.sampleRate) Hz")
        }
        if let size = settings.framesPerPacket, !(16...65535).contains(size) {
            throw AudioQueueError(.invalidPropertyValue, "FLAC blocks hold 16–65 535 frames, not \(size)")
        }
        self.channels = channels
        self.bits = bits
        level = min(max(settings.quality ?? 5, 0), 8)
        blockSize = settings.framesPerPacket
        let frames = blockSize ?? (level <= 2 ? 1152 : 4096)
        // 16-bit samples come as 16-bit integers; other depths as full-scale 32-bit integers.
        inputFormat = bits == 16 ? .int16(sampleRate: format.sampleRate, channels: channels) : .int32(sampleRate: format.sampleRate, channels: channels)
        outputFormat = AudioStreamDescription(sampleRate: format.sampleRate, formatID: .flac, bytesPerPacket: 0, framesPerPacket: frames,
                                              bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: bits)
        // A verbatim frame and its header and footer.
        maximumPacketSize = frames * channels * bits / 8 + 64
        var block = [UInt8](repeating: 0, count: 34)
        block[0] = UInt8(frames >> 8); block[1] = UInt8(frames & 0xFF); block[2] = block[0]; block[3] = block[1]
        let rate = Int(format.sampleRate)
        block[10] = UInt8(rate >> 12); block[11] = UInt8(rate >> 4 & 0xFF)
        block[12] = UInt8((rate & 0xF) << 4 | (channels - 1) << 1 | (bits - 1) >> 4)
        block[13] = UInt8(((bits - 1) & 0xF) << 4)
        guard let initial = FLACStreamInfo(block) else {
            throw AudioQueueError(.invalidPropertyValue, "FLAC cannot describe \(channels) channels of \(bits) bits at \(rate) Hz")
        }
        info = initial
    }

    deinit { if let encoder { aq_FLAC__stream_encoder_delete(encoder) } }

    /// Frames are coded on their own, but libFLAC numbers them and sums the stream's MD5 from its
    /// first frame: pieces encoded apart would not join into one stream's bytes.
    public static let factory = AudioEncoderFactory(name: "libFLAC", formats: [.flac], priority: 10, traits: .dependent) { format, settings in
        try FLACEncoder(format: format, settings: settings)
    }

    /// Registers ``factory`` with a registry (the shared one by default).
    public static func register(in registry: AudioEncoderRegistry = .shared) { registry.register(factory) }

    /// `fLaC` and STREAMINFO: before the end, without the total, frame sizes and MD5.
    public var magicCookie: [UInt8]? { info.magicCookie }

    private func start() throws {
        if encoder == nil {
            try AudioQueueError.requireLibrary(aq_flac_load(), reason: aq_flac_error)
            guard let made = aq_FLAC__stream_encoder_new() else { throw AudioQueueError(.codecNotFound, "libFLAC could not make an encoder") }
            encoder = made
        }
        guard let encoder else { return }
        aq_FLAC__stream_encoder_set_channels(encoder, UInt32(channels))
        aq_FLAC__stream_encoder_set_bits_per_sample(encoder, UInt32(bits))
        aq_FLAC__stream_encoder_set_sample_rate(encoder, UInt32(outputFormat.sampleRate))
        aq_FLAC__stream_encoder_set_compression_level(encoder, UInt32(level))
        if let blockSize { aq_FLAC__stream_encoder_set_blocksize(encoder, UInt32(blockSize)) }
        // Rates and depths outside the streamable subset are still FLAC.
        aq_FLAC__stream_encoder_set_streamable_subset(encoder, 0)
        let status = aq_FLAC__stream_encoder_init_stream(encoder, { _, buffer, bytes, samples, frame, client in
            guard let client, let buffer else { return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR }
            Unmanaged<FLACEncoder>.fromOpaque(client).takeUnretainedValue().written(buffer, bytes, samples: Int(samples), frame: frame)
            return FLAC__STREAM_ENCODER_WRITE_STATUS_OK
        }, nil, nil, { _, metadata, client in
            guard let client, let metadata, metadata.pointee.type == FLAC__METADATA_TYPE_STREAMINFO else { return }
            Unmanaged<FLACEncoder>.fromOpaque(client).takeUnretainedValue().finalInfo(metadata.pointee.data.stream_info)
        }, Unmanaged.passUnretained(self).toOpaque())
        guard status == FLAC__STREAM_ENCODER_INIT_STATUS_OK else {
            throw AudioQueueError(.invalidPropertyValue, "libFLAC refused the stream (init status \(status.rawValue))")
        }
        started = true
    }

    /// libFLAC's output: the stream header (ignored; the cookie is made here) and then frames.
    private func written(_ buffer: UnsafePointer<UInt8>, _ bytes: Int, samples: Int, frame: UInt32) {
        if samples > 0 && frameNumber != frame {
            commitFrame()
            frameNumber = frame
            frameSamples = samples
        } else if samples == 0 && frameNumber == nil {
            return   // `fLaC` and the metadata blocks
        }
        frameBytes.append(contentsOf: UnsafeBufferPointer(start: buffer, count: bytes))
    }

    private func commitFrame() {
        guard !frameBytes.isEmpty, let output else { return }
        frameBytes.withUnsafeBytes { output.append($0, frames: frameSamples) }
        frameBytes.removeAll(keepingCapacity: true)
    }

    private func finalInfo(_ streamInfo: FLAC__StreamMetadata_StreamInfo) {
        var block = info.bytes
        func put(_ value: Int, at offset: Int, bytes: Int) {
            for index in 0..<bytes { block[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * (bytes - 1 - index))) }
        }
        put(Int(streamInfo.min_blocksize), at: 0, bytes: 2)
        put(Int(streamInfo.max_blocksize), at: 2, bytes: 2)
        put(Int(streamInfo.min_framesize), at: 4, bytes: 3)
        put(Int(streamInfo.max_framesize), at: 7, bytes: 3)
        let total = Int64(streamInfo.total_samples)
        block[13] = block[13] & 0xF0 | UInt8(truncatingIfNeeded: total >> 32 & 0xF)
        put(Int(total & 0xFFFF_FFFF), at: 14, bytes: 4)
        withUnsafeBytes(of: streamInfo.md5sum) { for index in 0..<16 { block[18 + index] = $0[index] } }
        if let updated = FLACStreamInfo(block) { info = updated }
    }

    public func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        let narrow = bits == 16
        let count = frames.count / ((narrow ? 2 : 4) * channels)
        guard count > 0 else { return }
        if !started { try start() }
        guard let encoder else { return }
        let shift = 32 - bits
        if samples.count < count * channels { samples = [Int32](repeating: 0, count: count * channels) }
        samples.withUnsafeMutableBufferPointer { samples in
            if narrow {
                for index in 0..<(count * channels) {
                    samples[index] = Int32(Int16(littleEndian: frames.loadUnaligned(fromByteOffset: 2 * index, as: Int16.self)))
                }
                return
            }
            for index in 0..<(count * channels) {
                let sample = Int32(littleEndian: frames.loadUnaligned(fromByteOffset: 4 * index, as: Int32.self))
                samples[index] = shift == 0 ? sample : Int32(min((Int64(sample) + Int64(1) << (shift - 1)) >> shift, Int64(Int32.max) >> shift))
            }
        }
        self.output = output
        defer { commitFrame(); self.output = nil }
        let ok = samples.withUnsafeBufferPointer { aq_FLAC__stream_encoder_process_interleaved(encoder, $0.baseAddress, UInt32(count)) }
        guard ok != 0 else {
            throw AudioQueueError(.decoderError, "libFLAC failed to encode (state \(aq_FLAC__stream_encoder_get_state(encoder).rawValue))")
        }
    }

    public func finish(into output: EncodedPackets) throws {
        guard started, let encoder else { return }
        self.output = output
        defer { commitFrame(); self.output = nil; frameNumber = nil; started = false }
        guard aq_FLAC__stream_encoder_finish(encoder) != 0 else {
            throw AudioQueueError(.decoderError, "libFLAC failed to finish the stream")
        }
    }
}
