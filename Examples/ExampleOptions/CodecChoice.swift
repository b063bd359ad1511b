// The codecs `aqrender` and `aqrecord` write, by name.
import ArgumentParser
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

    /// The usual codec of a container: AAC in M4A, Opus in Ogg, FLAC in FLAC, Apple Lossless in
    /// CAF when `cafLossless`, else linear PCM.
    public static func usual(for typeID: String, cafLossless: Bool) -> CodecChoice {
        switch typeID {
        case "m4af": return .aac
        case "OggS": return .opus
        case "flac": return .flac
        case "caff": return cafLossless ? .alac : .pcm
        default: return .pcm
        }
    }
}
