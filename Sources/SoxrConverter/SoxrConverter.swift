import BufferQueue
import CSoxr

/// Sample-rate conversion on libsoxr, the resampler of SoX, mpd and ffmpeg's optional path
/// (Debian `libsoxr-dev`, LGPL-2.1+). Register it once, then ``/BufferQueue/AudioConverter`` (and
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

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/invalidPropertyValue`` when libsoxr refuses the rates.
    public init(inputRate: Double, outputRate: Double, channels: Int, quality: AudioConverterQuality = .veryHigh) throws {
        let recipe: UInt
        switch quality {
        case .quick: recipe = UInt(SOXR_QQ)
        case .low: recipe = UInt(SOXR_LQ)
        case .medium: recipe = UInt(SOXR_MQ)
        case .high: recipe = UInt(SOXR_20_BITQ)
        case .veryHigh: recipe = UInt(SOXR_28_BITQ)
        }
        try AudioQueueError.requireLibrary(aq_soxr_load(), reason: aq_soxr_error)
        var qualitySpec = aq_soxr_quality_spec(recipe, 0)
        var ioSpec = aq_soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var error: soxr_error_t?
        guard let made = aq_soxr_create(inputRate, outputRate, UInt32(channels), &error, &ioSpec, &qualitySpec, nil), error == nil else {
            let reason = error.map { String(cString: $0) } ?? "unknown error"
            throw AudioQueueError(.invalidPropertyValue, "libsoxr cannot convert \(inputRate) Hz to \(outputRate) Hz for \(channels) channels: \(reason)")
        }
        handle = made
        self.channels = channels
    }

    deinit { aq_soxr_delete(handle) }

    public var leadingFrames: Int { 0 }

    public func process(_ input: UnsafePointer<Float>, frames: Int, into output: UnsafeMutablePointer<Float>,
                        capacity: Int) throws -> (consumed: Int, produced: Int) {
        var used = 0, made = 0
        if let error = aq_soxr_process(handle, input, frames, &used, output, capacity, &made) {
            throw AudioQueueError(.decoderError, "libsoxr failed: \(String(cString: error))")
        }
        return (used, made)
    }

    public func drain(into output: UnsafeMutablePointer<Float>, capacity: Int) throws -> Int {
        var made = 0
        if let error = aq_soxr_process(handle, nil, 0, nil, output, capacity, &made) {
            throw AudioQueueError(.decoderError, "libsoxr failed while draining: \(String(cString: error))")
        }
        return made
    }

    public func reset() { _ = aq_soxr_clear(handle) }
}
