import BufferQueue
import CSoxr

/// Sample-rate conversion on libsoxr, the resampler of SoX, mpd and ffmpeg's optional path
/// (Debian `libsoxr-dev`, LGPL-2.1+). Register it once, then ``BufferQueue/AudioConverter`` (and
/// everything built on it) converts rates:
///
/// ```swift
/// SoxrConverter.register()
/// let converter = try AudioConverter(from: .float32(sampleRate: 44100, channels: 2),
///                                    to: .float32(sampleRate: 48000, channels: 2))
/// ```
///
/// libsoxr aligns its output with its input (its filter delay is compensated) and, once told the
/// input has ended, emits the rest: N frames become `round(N × out / in)`.
public enum SoxrConverter {
    /// Registers libsoxr with `registry` (the shared one by default).
    public static func register(in registry: AudioResamplerRegistry = .shared) {
        registry.register(AudioResamplerFactory(name: "libsoxr", priority: 10) { input, output, channels, quality in
            try SoxrResampler(inputRate: input, outputRate: output, channels: channels, quality: quality)
        })
    }
}

/// One libsoxr stream resampler (interleaved float32 in and out).
public final class SoxrResampler: AudioResampler {
    private let handle: soxr_t
    private let channels: Int
    private let ratio: Double

    /// - Throws: ``BufferQueue/AudioQueueError/Code/invalidPropertyValue`` when libsoxr refuses the rates.
    public init(inputRate: Double, outputRate: Double, channels: Int, quality: AudioConverterQuality = .veryHigh) throws {
        let recipe: UInt
        switch quality {
        case .quick: recipe = UInt(SOXR_QQ)
        case .low: recipe = UInt(SOXR_LQ)
        case .medium: recipe = UInt(SOXR_MQ)
        case .high: recipe = UInt(SOXR_20_BITQ)
        case .veryHigh: recipe = UInt(SOXR_28_BITQ)
        }
        var qualitySpec = soxr_quality_spec(recipe, 0)
        var ioSpec = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var error: soxr_error_t?
        guard let made = soxr_create(inputRate, outputRate, UInt32(channels), &error, &ioSpec, &qualitySpec, nil), error == nil else {
            let reason = error.map { String(cString: $0) } ?? "unknown error"
            throw AudioQueueError(.invalidPropertyValue, "libsoxr cannot convert \(inputRate) Hz to \(outputRate) Hz for \(channels) channels: \(reason)")
        }
        handle = made
        self.channels = channels
        ratio = outputRate / inputRate
    }

    deinit { soxr_delete(handle) }

    public var leadingFrames: Int { 0 }

    public func process(_ input: UnsafePointer<Float>, frames: Int, into output: DecodedAudio) throws {
        var offset = 0
        while offset < frames {
            // Room for what this input can make, plus the filter's backlog.
            let room = Int((Double(frames - offset) * ratio).rounded(.up)) + 256
            let space = output.reserve(frames: room)
            var used = 0, made = 0
            let error = soxr_process(handle, input + offset * channels, frames - offset, &used,
                                     space.baseAddress, room, &made)
            output.commit(frames: made)
            if let error { throw AudioQueueError(.decoderError, "libsoxr failed: \(String(cString: error))") }
            if used == 0 && made == 0 { break }
            offset += used
        }
    }

    public func drain(into output: DecodedAudio) throws {
        while true {
            let room = 4096
            let space = output.reserve(frames: room)
            var made = 0
            let error = soxr_process(handle, nil, 0, nil, space.baseAddress, room, &made)
            output.commit(frames: made)
            if let error { throw AudioQueueError(.decoderError, "libsoxr failed while draining: \(String(cString: error))") }
            if made == 0 { return }
        }
    }

    public func reset() { _ = soxr_clear(handle) }
}
