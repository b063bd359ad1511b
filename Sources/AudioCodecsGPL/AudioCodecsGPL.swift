import BufferQueue
import AudioCodecs
import FAADDecoder
import RubberBandTimePitch

/// ``/AudioCodecs/AudioCodecs`` and the GPL modules, registered by one call: libfaad2 (AAC and
/// HE-AAC) and Rubber Band (the spectral time-pitch engine).
///
/// **This module links GPL libraries (libfaad2: GPL-2.0+, Rubber Band: GPL-2.0+): a program that
/// links it is distributed under the GPL.** Without them, use `AudioCodecs`.
public enum AudioCodecsGPL {
    /// Which decoder decodes AAC when both are registered.
    public enum AACDecoder: String, Sendable, CaseIterable {
        /// libavcodec's (the library's default where it is linked; what `aqrender` and `aqplay` use).
        case libavcodec
        /// libfaad2's.
        case libfaad2
    }

    /// Registers everything ``/AudioCodecs/AudioCodecs/registerAll(decoders:encoders:resamplers:)``
    /// does, libfaad2's AAC decoder (decoding AAC only when `aac` is ``AACDecoder/libfaad2``) and
    /// Rubber Band. Safe to call again.
    public static func registerAll(aac: AACDecoder = .libavcodec, decoders: AudioDecoderRegistry = .shared,
                                   encoders: AudioEncoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared,
                                   timePitchEngines: TimePitchEngineRegistry = .shared) {
        FAADDecoder.register(in: decoders)
        AudioCodecs.registerAll(decoders: decoders, encoders: encoders, resamplers: resamplers, aacDecoder: aac == .libavcodec)
        RubberBandTimePitch.register(in: timePitchEngines)
    }
}
