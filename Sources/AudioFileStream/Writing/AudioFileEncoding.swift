import BufferQueue

/// The codec a file is written with, by name: the format id, the sample depth where one is
/// chosen, and the encoder's settings — so that no stream description of mostly zeros has to be
/// filled in by hand. `AudioFileWriter(path:encoding:clientFormat:)` and `AudioFileRecorder`
/// (AudioPlayback) take one.
///
/// ```swift
/// let writer = try AudioFileWriter(path: "take.flac", encoding: .flac(level: 8, bits: 24),
///                                  clientFormat: .float32(sampleRate: 48_000, channels: 2))
/// ```
///
/// Nothing here knows a codec: whether a depth, level or bit rate is taken is the encoder's to
/// say, when the writer makes it (an ``/BufferQueue/AudioQueueError`` naming the value).
public struct AudioFileEncoding: Sendable, Hashable {
    /// The codec; nil: the container's usual one (``AudioFileType/usualEncoding``).
    public var formatID: AudioFormatID?
    /// Bits per sample of PCM and of the lossless codecs (0: the codec decides).
    public var bitsPerChannel: Int
    /// PCM as 32-bit float.
    public var isFloat: Bool
    /// Bit rate, compression level or complexity for the encoder.
    public var settings: AudioEncoderSettings

    /// An encoding of `formatID` (nil: the container's usual codec), with a bit depth (0: the codec's default), float or integer PCM, and the encoder's settings.
    public init(formatID: AudioFormatID?, bitsPerChannel: Int = 0, isFloat: Bool = false, settings: AudioEncoderSettings = .init()) {
        self.formatID = formatID
        self.bitsPerChannel = bitsPerChannel
        self.isFloat = isFloat
        self.settings = settings
    }

    /// Linear PCM: integers of `bits`, or 32-bit float (big-endian where the container stores it so).
    public static func pcm(bits: Int = 16, float: Bool = false) -> AudioFileEncoding {
        AudioFileEncoding(formatID: .linearPCM, bitsPerChannel: float ? 32 : bits, isFloat: float)
    }
    /// AAC-LC at `bitRate` bits per second.
    public static func aac(bitRate: Int = 128_000) -> AudioFileEncoding {
        AudioFileEncoding(formatID: .aacLC, settings: AudioEncoderSettings(bitRate: bitRate))
    }
    /// Apple Lossless at `bits` per sample.
    public static func alac(bits: Int = 16) -> AudioFileEncoding {
        AudioFileEncoding(formatID: .appleLossless, bitsPerChannel: bits)
    }
    /// FLAC at compression `level` (the encoder's scale: libFLAC's 0…8) and `bits` per sample.
    public static func flac(level: Int = 5, bits: Int = 16) -> AudioFileEncoding {
        AudioFileEncoding(formatID: .flac, bitsPerChannel: bits, settings: AudioEncoderSettings(quality: level))
    }
    /// Opus at `bitRate` bits per second.
    public static func opus(bitRate: Int = 96_000) -> AudioFileEncoding {
        AudioFileEncoding(formatID: .opus, settings: AudioEncoderSettings(bitRate: bitRate))
    }
    /// The container's usual codec (``AudioFileType/usualEncoding``).
    public static let fromExtension = AudioFileEncoding(formatID: nil)

    /// The encoding in a container of `type`: itself, or the container's usual one.
    public func resolved(for type: AudioFileType) -> AudioFileEncoding {
        formatID == nil ? type.usualEncoding : self
    }

    /// The file's data format at `sampleRate` with `channels`, in a container of `type`.
    /// - Throws: ``AudioFileWriterError`` for PCM the container does not store (float in AIFF).
    public func dataFormat(for type: AudioFileType, sampleRate: Double, channels: Int) throws -> AudioStreamDescription {
        let encoding = resolved(for: type)
        let formatID = encoding.formatID ?? .linearPCM
        if formatID == .linearPCM {
            return try type.linearPCM(sampleRate: sampleRate, channels: channels, bits: encoding.bitsPerChannel == 0 ? 16 : encoding.bitsPerChannel,
                                      float: encoding.isFloat)
        }
        return AudioStreamDescription(sampleRate: sampleRate, formatID: formatID, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0,
                                      channelsPerFrame: channels, bitsPerChannel: encoding.bitsPerChannel)
    }
}

extension AudioFileType {
    /// What a file of this type holds when no codec is named: AAC in MP4, Opus in Ogg, 16-bit FLAC
    /// in FLAC, 16-bit Apple Lossless in CAF, 16-bit PCM in WAV and AIFF.
    public var usualEncoding: AudioFileEncoding {
        switch self {
        case .mp4: return .aac()
        case .ogg: return .opus()
        case .flac: return .flac()
        case .caf: return .alac()
        default: return .pcm()
        }
    }

    /// Linear PCM as this container stores it: big-endian in AIFF and AIFC, little-endian elsewhere.
    /// - Throws: ``AudioFileWriterError`` for float in AIFF, which holds integers only.
    public func linearPCM(sampleRate: Double, channels: Int, bits: Int, float: Bool) throws -> AudioStreamDescription {
        if float && self == .aiff {
            throw AudioFileWriterError(.unsupportedFormat, path: "", "AIFF holds integer PCM: write float to AIFC, WAV or CAF")
        }
        let bigEndian = self == .aiff || self == .aifc
        return .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: float ? 32 : bits, isFloat: float, isBigEndian: bigEndian)
    }
}
