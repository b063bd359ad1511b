import AudioFileStream
import BufferQueue

/// The codec a file is written with, by name: what ``AudioFileWriter/init(path:encoding:clientFormat:clientLayout:recording:expectedFrames:jobs:encoders:resamplers:)``
/// and ``AudioFileRecorder`` turn into the file's data format and the encoder's settings, so that
/// no stream description of mostly zeros has to be filled in by hand.
///
/// ```swift
/// let writer = try AudioFileWriter(path: "take.flac", encoding: .flac(level: 8, bits: 24),
///                                  clientFormat: .float32(sampleRate: 48_000, channels: 2))
/// ```
public enum AudioFileEncoding: Sendable, Hashable {
    /// Linear PCM: integers of `bits` (16, 24 or 32) or, with `float`, 32-bit float (not in AIFF,
    /// which holds integers). Big-endian in AIFF and AIFC, little-endian elsewhere.
    case pcm(bits: Int = 16, float: Bool = false)
    /// AAC-LC at `bitRate` bits per second (M4A, CAF).
    case aac(bitRate: Int = 128_000)
    /// Apple Lossless at `bits` (16, 20, 24 or 32) per sample (M4A, CAF).
    case alac(bits: Int = 16)
    /// FLAC at compression `level` (0 fastest … 8 smallest) and `bits` (16 or 24) per sample
    /// (FLAC, Ogg, M4A, CAF).
    case flac(level: Int = 5, bits: Int = 16)
    /// Opus at `bitRate` bits per second, 6 000 … 510 000 (Ogg, M4A, CAF).
    case opus(bitRate: Int = 96_000)
    /// G.711 µ-law (WAV, AIFC, CAF).
    case ulaw
    /// G.711 A-law (WAV, AIFC, CAF).
    case alaw
    /// IMA ADPCM: Apple's IMA4 in CAF and AIFC, the DVI/Intel form in WAV.
    case imaADPCM
    /// The container's usual codec, from the file type (or the path's extension): AAC in M4A,
    /// Opus in Ogg, FLAC in FLAC, Apple Lossless in CAF, 16-bit PCM in WAV and AIFF.
    case fromExtension

    /// The encoding `fromExtension` stands for in a container of `type`; any other, itself.
    public func resolved(for type: AudioFileType) -> AudioFileEncoding {
        guard self == .fromExtension else { return self }
        switch type {
        case .mp4: return .aac()
        case .ogg: return .opus()
        case .flac: return .flac()
        case .caf: return .alac()
        default: return .pcm()
        }
    }

    /// The file's data format at `sampleRate` with `channels`, in a container of `type`.
    /// - Throws: ``BufferQueue/AudioQueueError/Code/invalidParameter`` for a bit depth, level or
    ///   bit rate the codec does not take.
    public func dataFormat(for type: AudioFileType, sampleRate: Double, channels: Int) throws -> AudioStreamDescription {
        func coded(_ id: AudioFormatID, bits: Int = 0) -> AudioStreamDescription {
            AudioStreamDescription(sampleRate: sampleRate, formatID: id, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0,
                                   channelsPerFrame: channels, bitsPerChannel: bits)
        }
        let bigEndian = type == .aiff || type == .aifc
        switch resolved(for: type) {
        case .pcm(let bits, let float):
            if float {
                guard type != .aiff else { throw AudioQueueError(.invalidParameter, "AIFF holds integer PCM: use .pcm(bits:) or AIFC") }
                return .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 32, isFloat: true, isBigEndian: bigEndian)
            }
            guard [16, 24, 32].contains(bits) else { throw AudioQueueError(.invalidParameter, "PCM is written with 16, 24 or 32 bits, not \(bits)") }
            return .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: bits, isBigEndian: bigEndian)
        case .aac(let bitRate):
            guard bitRate > 0 else { throw AudioQueueError(.invalidParameter, "an AAC bit rate must be positive (got \(bitRate))") }
            return coded(.aacLC)
        case .alac(let bits):
            guard [16, 20, 24, 32].contains(bits) else { throw AudioQueueError(.invalidParameter, "Apple Lossless takes 16, 20, 24 or 32 bits, not \(bits)") }
            return coded(.appleLossless, bits: bits)
        case .flac(let level, let bits):
            guard (0...8).contains(level) else { throw AudioQueueError(.invalidParameter, "a FLAC level is 0...8 (got \(level))") }
            guard [16, 24].contains(bits) else { throw AudioQueueError(.invalidParameter, "FLAC is written with 16 or 24 bits, not \(bits)") }
            return coded(.flac, bits: bits)
        case .opus(let bitRate):
            guard (6_000...510_000).contains(bitRate) else { throw AudioQueueError(.invalidParameter, "an Opus bit rate is 6000...510000 (got \(bitRate))") }
            return coded(.opus)
        case .ulaw: return coded(.uLaw)
        case .alaw: return coded(.aLaw)
        case .imaADPCM: return coded(type == .wave ? .dviIntelIMA : .appleIMA4)
        case .fromExtension: return coded(.linearPCM)   // resolved above: not reached
        }
    }

    /// The encoder's settings: the bit rate or the compression level.
    public var settings: AudioEncoderSettings {
        switch self {
        case .aac(let bitRate), .opus(let bitRate): return AudioEncoderSettings(bitRate: bitRate)
        case .flac(let level, _): return AudioEncoderSettings(quality: level)
        default: return AudioEncoderSettings()
        }
    }
}

extension AudioFileWriter {
    /// A writer of PCM encoded with `encoding` (see ``AudioFileEncoding``): the file type from the
    /// path's extension, the data format at the client's rate and channel count.
    /// - Throws: ``AudioFileWriterError`` for an extension this writer does not write, or a codec
    ///   the container does not hold; ``BufferQueue/AudioQueueError`` for a setting out of range.
    public convenience init(path: String, encoding: AudioFileEncoding = .fromExtension, clientFormat: AudioStreamDescription,
                            clientLayout: AudioChannelLayout? = nil, recording: Bool = false, expectedFrames: Int64? = nil,
                            jobs: Int = 1, encoders: AudioEncoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared) throws {
        guard let type = Self.fileType(forPath: path) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the extension names no file type this writer writes (.caf, .wav, .aif, .aiff, .aifc, .flac, .opus, .m4a)")
        }
        let format = try encoding.dataFormat(for: type, sampleRate: clientFormat.sampleRate, channels: clientFormat.channelsPerFrame)
        try self.init(path: path, fileType: type, format: format, clientFormat: clientFormat, clientLayout: clientLayout,
                      settings: encoding.settings, recording: recording, expectedFrames: expectedFrames, jobs: jobs,
                      encoders: encoders, resamplers: resamplers)
    }
}
