// The codecs `aqrender` and `aqrecord` write, by name.
import ArgumentParser
import AudioFileStream
import BufferQueue

/// What a written file holds: `--codec`.
public enum CodecChoice: String, ExpressibleByArgument, CaseIterable, Sendable {
    case pcm, aac, alac, flac, opus, ima4, imaadpcm = "ima-adpcm", ulaw, alaw

    /// The format id the encoders are registered for.
    public var formatID: AudioFormatID {
        switch self {
        case .pcm: return .linearPCM
        case .aac: return .aacLC
        case .alac: return .appleLossless
        case .flac: return .flac
        case .opus: return .opus
        case .ima4: return .appleIMA4
        case .imaadpcm: return .dviIntelIMA
        case .ulaw: return .uLaw
        case .alaw: return .aLaw
        }
    }

    /// The usual codec of a container (``AudioFileStream/AudioFileType/usualEncoding``), or
    /// linear PCM in CAF unless `cafLossless`.
    public static func usual(for type: AudioFileType, cafLossless: Bool) -> CodecChoice {
        if type == .caf && !cafLossless { return .pcm }
        let id = type.usualEncoding.formatID ?? .linearPCM
        return allCases.first { $0.formatID == id } ?? .pcm
    }
}
