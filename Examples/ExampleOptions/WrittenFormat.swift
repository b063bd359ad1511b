// The data format a written file gets from its container and the options (aqrender, aqmix).
import ArgumentParser
import AudioFileStream
import BufferQueue

/// `--format`: the sample format of PCM output, or the bit depth of a lossless one.
public enum SampleFormat: String, ExpressibleByArgument, CaseIterable, Sendable { case f32, s16, s24 }

/// The file's data format for a container, codec and sample format: the container's usual codec
/// when none is named (see ``CodecChoice/usual(for:cafLossless:)``); FLAC and ALAC at `format`'s
/// depth, else the source's (`sourceBits`), else 16; PCM as float unless s16/s24 is asked for
/// (AIFF holds integers only), big-endian in AIFF.
public func writtenFormat(type: AudioFileType, codec: CodecChoice?, format: SampleFormat?, rate: Double, channels: Int,
                          sourceBits: Int?) -> AudioStreamDescription {
    let codec = codec ?? CodecChoice.usual(for: type, cafLossless: true)
    guard codec == .pcm else {
        var lossless = format == .s24 ? 24 : format == .s16 ? 16 : sourceBits ?? 16
        if codec == .alac && ![16, 20, 24, 32].contains(lossless) { lossless = lossless <= 16 ? 16 : 24 }
        return AudioStreamDescription(sampleRate: rate, formatID: codec.formatID, bytesPerPacket: 0, framesPerPacket: 0,
                                      bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: codec == .alac || codec == .flac ? lossless : 0)
    }
    let bigEndian = type == .aiff || type == .aifc
    if (format ?? .f32) == .f32 && type != .aiff { return .linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: 32, isFloat: true, isBigEndian: bigEndian) }
    return .linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: format == .s24 ? 24 : 16, isBigEndian: bigEndian)
}
