import BufferQueue
import MPG123Decoder
import AVCodecAAC
import OpenCoreAMRDecoder
import OpusDecoder
import OpusEncoder
import VorbisDecoder
import FLACDecoder
import FLACEncoder
import SoxrConverter

/// Every codec and resampler module of the package that links no GPL library, registered by one
/// call: what a program that plays, renders, transcodes or records needs before it opens a file.
///
/// ```swift
/// import AudioCodecs
///
/// AudioCodecs.registerAll()
/// let renderer = try AudioFileRenderer(file: try AudioFile(path: "song.m4a"))
/// ```
///
/// Licences: libmpg123 and libavcodec are LGPL-2.1+, opencore-amr Apache-2.0, libopus, libvorbis
/// and libFLAC BSD-style, libsoxr LGPL-2.1+: a program that links this module stays free of the
/// GPL. For libfaad2 and Rubber Band (GPL) as well, use `AudioCodecsGPL`.
public enum AudioCodecs {
    /// Registers libmpg123 (MP3), libavcodec's AAC decoder and encoder, opencore-amr (AMR-NB/WB),
    /// libopus (decoding and encoding), libvorbis, libFLAC (decoding and encoding) and libsoxr
    /// (rate conversion). Registering again replaces what was registered under the same names:
    /// it is safe to call from several places.
    public static func registerAll(decoders: AudioDecoderRegistry = .shared, encoders: AudioEncoderRegistry = .shared,
                                   resamplers: AudioResamplerRegistry = .shared) {
        registerAll(decoders: decoders, encoders: encoders, resamplers: resamplers, aacDecoder: true)
    }

    /// As ``registerAll(decoders:encoders:resamplers:)``; `aacDecoder` false leaves libavcodec's
    /// AAC decoder out (another one decodes AAC), its encoder in.
    public static func registerAll(decoders: AudioDecoderRegistry = .shared, encoders: AudioEncoderRegistry = .shared,
                                   resamplers: AudioResamplerRegistry = .shared, aacDecoder: Bool) {
        MPG123Decoder.register(in: decoders)
        AVCodecAAC.register(decoders: aacDecoder ? decoders : AudioDecoderRegistry(), encoders: encoders)
        AMRDecoder.register(in: decoders)
        OpusDecoder.register(in: decoders)
        OpusEncoder.register(in: encoders)
        VorbisDecoder.register(in: decoders)
        FLACDecoder.register(in: decoders)
        FLACEncoder.register(in: encoders)
        SoxrConverter.register(in: resamplers)
    }
}
