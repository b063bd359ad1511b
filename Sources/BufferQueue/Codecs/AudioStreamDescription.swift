/// A four-character code naming an audio data format, like Core Audio's `AudioFormatID`.
///
/// The queue picks a decoder for a format from ``AudioDecoderRegistry`` by this value.
public struct AudioFormatID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Builds a format id from four ASCII characters, e.g. `"lpcm"`.
    public init(_ code: StaticString) {
        precondition(code.utf8CodeUnitCount == 4, "a format id has four characters")
        var value: UInt32 = 0
        code.withUTF8Buffer { for byte in $0 { value = value << 8 | UInt32(byte) } }
        rawValue = value
    }

    /// Linear PCM (`'lpcm'`).
    public static let linearPCM = AudioFormatID("lpcm")
    /// MPEG-1/2/2.5 Layer III (`'.mp3'`).
    public static let mpegLayer3 = AudioFormatID(".mp3")
    /// MPEG-1/2 Layer II (`'.mp2'`).
    public static let mpegLayer2 = AudioFormatID(".mp2")
    /// MPEG-1/2 Layer I (`'.mp1'`).
    public static let mpegLayer1 = AudioFormatID(".mp1")
    /// AAC Low Complexity (`'aac '`).
    public static let aacLC = AudioFormatID("aac ")
    /// High-Efficiency AAC: AAC-LC core plus spectral band replication (`'aach'`).
    public static let heAAC = AudioFormatID("aach")
    /// High-Efficiency AAC v2: SBR plus parametric stereo (`'aacp'`).
    public static let heAACv2 = AudioFormatID("aacp")
    /// ITU-T G.711 µ-law, one byte per sample (`'ulaw'`).
    public static let uLaw = AudioFormatID("ulaw")
    /// ITU-T G.711 A-law, one byte per sample (`'alaw'`).
    public static let aLaw = AudioFormatID("alaw")
    /// Apple IMA ADPCM: 34-byte packets of 64 frames per channel (`'ima4'`).
    public static let appleIMA4 = AudioFormatID("ima4")
    /// Microsoft/DVI IMA ADPCM as WAV stores it (format tag 0x11): blocks with a header per
    /// channel (Core Audio's `kAudioFormatDVIIntelIMA`, `'ms\0\u{11}'`).
    public static let dviIntelIMA = AudioFormatID(rawValue: 0x6D73_0011)
    /// Apple Lossless (`'alac'`).
    public static let appleLossless = AudioFormatID("alac")
    /// AMR narrowband speech, 8 kHz (`'samr'`).
    public static let amr = AudioFormatID("samr")
    /// AMR wideband speech, 16 kHz (`'sawb'`).
    public static let amrWideband = AudioFormatID("sawb")
    /// Opus (RFC 6716, `'opus'`): always decoded at 48 kHz. The magic cookie is the `OpusHead`
    /// identification header of RFC 7845 §5.1 (an MP4 `dOps` or CAF cookie is turned into one),
    /// so it carries the pre-skip, the output gain and the channel mapping.
    public static let opus = AudioFormatID("opus")
    /// FLAC (`'flac'`). The magic cookie is the start of a native FLAC stream: `fLaC` and the
    /// STREAMINFO metadata block with its 4-byte header (42 bytes); other blocks may follow.
    public static let flac = AudioFormatID("flac")
    /// Vorbis (`'vorb'`; Core Audio has no constant for it). The magic cookie is the three header
    /// packets (identification, comment, setup) in Xiph lacing, as Matroska's CodecPrivate holds
    /// them: the packet count minus one, the sizes of all but the last packet (each as bytes of
    /// 255 ended by one below 255), then the packets.
    public static let vorbis = AudioFormatID("vorb")

    /// Each known format's name as Core Audio gives it (`kAudioFormatProperty_FormatName`) and a
    /// short token for tools (aqinfo's `format`): one table, read by ``name`` and ``shortName``.
    private static let names: [AudioFormatID: (name: String, short: String)] = [
        .linearPCM: ("Linear PCM", "lpcm"),
        .aacLC: ("AAC", "aac-lc"),
        .heAAC: ("HE-AAC", "he-aac"),
        .heAACv2: ("HE-AAC v2", "he-aac-v2"),
        .mpegLayer3: ("MPEG Layer 3", "mp3"),
        .mpegLayer2: ("MPEG Layer 2", "mp2"),
        .mpegLayer1: ("MPEG Layer 1", "mp1"),
        .appleLossless: ("Apple Lossless", "alac"),
        .appleIMA4: ("IMA 4:1", "ima4"),
        .uLaw: ("µLaw 2:1", "ulaw"),
        .aLaw: ("aLaw 2:1", "alaw"),
        .flac: ("FLAC", "flac"),
        .opus: ("Opus", "opus"),
        .vorbis: ("Vorbis", "vorbis"),
        .amr: ("AMR Narrowband", "samr"),
        .amrWideband: ("AMR Wideband", "sawb"),
    ]

    /// The format's name, as Core Audio gives it ("MPEG Layer 3", "Apple Lossless"); the four
    /// characters for a format without one.
    public var name: String { Self.names[self]?.name ?? description }

    /// A short lowercase token ("mp3", "aac-lc", "lpcm"); the four characters without quotes for
    /// a format without one.
    public var shortName: String { Self.names[self]?.short ?? String(description.filter { $0 != "'" }) }

    /// The four characters, e.g. `'lpcm'`.
    public var description: String {
        var chars = ""
        for shift in stride(from: 24, through: 0, by: -8) {
            let byte = UInt8(truncatingIfNeeded: rawValue >> UInt32(shift))
            chars.append((32...126).contains(byte) ? Character(Unicode.Scalar(byte)) : "?")
        }
        return "'\(chars)'"
    }
}

/// Flags describing the layout of linear PCM samples (Core Audio's `AudioFormatFlags`).
public struct AudioFormatFlags: OptionSet, Hashable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Samples are IEEE floating point (`kAudioFormatFlagIsFloat`).
    public static let isFloat = AudioFormatFlags(rawValue: 1 << 0)
    /// Samples are big endian (`kAudioFormatFlagIsBigEndian`).
    public static let isBigEndian = AudioFormatFlags(rawValue: 1 << 1)
    /// Integer samples are signed (`kAudioFormatFlagIsSignedInteger`).
    public static let isSignedInteger = AudioFormatFlags(rawValue: 1 << 2)
    /// Sample bits fill their bytes (`kAudioFormatFlagIsPacked`).
    public static let isPacked = AudioFormatFlags(rawValue: 1 << 3)
    /// When not packed, the sample bits sit in the high bits of the container (`kAudioFormatFlagIsAlignedHigh`).
    public static let isAlignedHigh = AudioFormatFlags(rawValue: 1 << 4)
    /// Channels are in separate buffers (`kAudioFormatFlagIsNonInterleaved`). The queue does not accept this.
    public static let isNonInterleaved = AudioFormatFlags(rawValue: 1 << 5)
}

/// The format of a stream of audio data: Core Audio's `AudioStreamBasicDescription`.
///
/// For linear PCM every field is set; compressed formats have `bytesPerPacket == 0` (packets vary in
/// size and need ``AudioPacketDescription``s), `bytesPerFrame == 0` and `bitsPerChannel == 0`.
public struct AudioStreamDescription: Hashable, Sendable, CustomStringConvertible {
    /// Frames per second of the data as it is stored (for HE-AAC, the rate the header states).
    public var sampleRate: Double
    /// The data format (Core Audio's `mFormatID`).
    public var formatID: AudioFormatID
    /// The format's flags (Core Audio's `mFormatFlags`): float, signed, big-endian, packed, non-interleaved.
    public var formatFlags: AudioFormatFlags
    /// Bytes in a packet; 0 when packets vary in size.
    public var bytesPerPacket: Int
    /// Frames in a packet; 0 when packets vary in their frame count.
    public var framesPerPacket: Int
    /// Bytes in one frame (all channels); 0 for compressed data.
    public var bytesPerFrame: Int
    /// Channels in a frame.
    public var channelsPerFrame: Int
    /// Bits in one sample of one channel; 0 for compressed data.
    public var bitsPerChannel: Int

    /// A description with Core Audio's fields (`AudioStreamBasicDescription`); 0 where a field varies or is not known.
    public init(sampleRate: Double, formatID: AudioFormatID, formatFlags: AudioFormatFlags = [],
                bytesPerPacket: Int, framesPerPacket: Int, bytesPerFrame: Int,
                channelsPerFrame: Int, bitsPerChannel: Int) {
        self.sampleRate = sampleRate
        self.formatID = formatID
        self.formatFlags = formatFlags
        self.bytesPerPacket = bytesPerPacket
        self.framesPerPacket = framesPerPacket
        self.bytesPerFrame = bytesPerFrame
        self.channelsPerFrame = channelsPerFrame
        self.bitsPerChannel = bitsPerChannel
    }

    /// Interleaved linear PCM with one frame per packet.
    ///
    /// - Parameters:
    ///   - sampleRate: frames per second.
    ///   - channels: samples per frame.
    ///   - bitsPerChannel: 8 (unsigned unless `isSigned8`), 16, 24 or 32 (signed integers), or 32/64 with `isFloat`.
    ///   - isFloat: IEEE floating-point samples.
    ///   - isBigEndian: the bytes of each sample most significant first.
    ///   - bytesPerSample: the container size; defaults to the smallest that holds the bits
    ///     (pass 4 for 24-bit samples in 32-bit words).
    ///   - isSigned8: 8-bit samples are signed (as in AIFF) rather than unsigned (as in WAVE).
    public static func linearPCM(sampleRate: Double, channels: Int, bitsPerChannel: Int,
                                 isFloat: Bool = false, isBigEndian: Bool = false,
                                 bytesPerSample: Int? = nil, isSigned8: Bool = false) -> AudioStreamDescription {
        let container = bytesPerSample ?? (bitsPerChannel + 7) / 8
        var flags: AudioFormatFlags = []
        if isFloat { flags.insert(.isFloat) } else if bitsPerChannel > 8 || isSigned8 { flags.insert(.isSignedInteger) }
        if isBigEndian { flags.insert(.isBigEndian) }
        if container * 8 == bitsPerChannel { flags.insert(.isPacked) }
        return AudioStreamDescription(
            sampleRate: sampleRate, formatID: .linearPCM, formatFlags: flags,
            bytesPerPacket: container * channels, framesPerPacket: 1,
            bytesPerFrame: container * channels, channelsPerFrame: channels, bitsPerChannel: bitsPerChannel)
    }

    /// Native-endian interleaved 32-bit float PCM: the format every decoder produces.
    public static func float32(sampleRate: Double, channels: Int) -> AudioStreamDescription {
        linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 32, isFloat: true)
    }

    /// Whether this is linear PCM.
    public var isLinearPCM: Bool { formatID == .linearPCM }
    /// Whether this is native-endian interleaved 32-bit float PCM.
    public var isFloat32Interleaved: Bool {
        isLinearPCM && formatFlags.contains(.isFloat) && bitsPerChannel == 32
            && !formatFlags.contains(.isNonInterleaved) && !formatFlags.contains(.isBigEndian)
            && bytesPerFrame == 4 * channelsPerFrame
    }

    public var description: String {
        var text = "\(channelsPerFrame) ch, \(Self.formatRate(sampleRate)) Hz, \(formatID)"
        if isLinearPCM {
            let kind = formatFlags.contains(.isFloat) ? "float"
                : formatFlags.contains(.isSignedInteger) ? "signed integer" : "unsigned integer"
            let endian = formatFlags.contains(.isBigEndian) ? "big-endian" : "little-endian"
            let layout = formatFlags.contains(.isNonInterleaved) ? "deinterleaved" : "interleaved"
            text += " (\(bitsPerChannel)-bit \(endian) \(kind), \(layout))"
        } else if framesPerPacket > 0 {
            text += ", \(framesPerPacket) frames/packet"
        }
        return text
    }

    static func formatRate(_ rate: Double) -> String {
        rate == rate.rounded() && abs(rate) < 1e12 ? String(Int64(rate)) : String(rate)
    }
}

/// Where one packet sits in a buffer: Core Audio's `AudioStreamPacketDescription`.
public struct AudioPacketDescription: Hashable, Sendable {
    /// Byte offset of the packet from the start of the buffer's data.
    public var startOffset: Int
    /// Frames the packet decodes to when the format's `framesPerPacket` is 0; otherwise 0.
    public var variableFramesInPacket: Int
    /// Size of the packet in bytes.
    public var dataByteSize: Int

    /// A packet of `dataByteSize` bytes at `startOffset` in the buffer's data, holding `variableFramesInPacket` frames (0: the format's constant count).
    public init(startOffset: Int, variableFramesInPacket: Int = 0, dataByteSize: Int) {
        self.startOffset = startOffset
        self.variableFramesInPacket = variableFramesInPacket
        self.dataByteSize = dataByteSize
    }
}

/// How channels map to speakers. The queue stores it, checks it against the channel count and
/// hands it to the sink.
public struct AudioChannelLayout: Hashable, Sendable {
    /// A speaker position.
    public enum Label: UInt32, Hashable, Sendable {
        /// A channel whose speaker is not known.
        case unknown = 0xFFFF_FFFF
        /// A channel that is not used.
        case unused = 0
        /// Front left.
        case left = 1
        /// Front right.
        case right = 2
        /// Front centre.
        case center = 3
        /// The low-frequency effects channel.
        case lfeScreen = 4
        /// Surround left (back left in Core Audio's 5.1 naming).
        case leftSurround = 5
        /// Surround right (back right in Core Audio's 5.1 naming).
        case rightSurround = 6
        /// Back centre.
        case centerSurround = 9
        /// Side left.
        case leftSurroundDirect = 10
        /// Side right.
        case rightSurroundDirect = 11
        /// The one channel of a mono stream.
        case mono = 42
    }
    /// One label per channel, in channel order.
    public var channelLabels: [Label]

    /// A layout of these speakers, one per channel, in order.
    public init(channelLabels: [Label]) { self.channelLabels = channelLabels }

    /// The number of channels.
    public var channelCount: Int { channelLabels.count }
    /// One channel.
    public static let mono = AudioChannelLayout(channelLabels: [.mono])
    /// Left and right.
    public static let stereo = AudioChannelLayout(channelLabels: [.left, .right])

    /// The speaker bit of a label in a WAVE_FORMAT_EXTENSIBLE channel mask (0 when it has none):
    /// surround is the mask's back pair, as in WAVE's 5.1 (0x3F); the direct (side) pair, side.
    public static func waveMaskBit(_ label: Label) -> UInt32 {
        switch label {
        case .left: return 0x1
        case .right: return 0x2
        case .center: return 0x4
        case .lfeScreen: return 0x8
        case .leftSurround: return 0x10
        case .rightSurround: return 0x20
        case .centerSurround: return 0x100
        case .leftSurroundDirect: return 0x200
        case .rightSurroundDirect: return 0x400
        case .mono: return 0x4
        case .unknown, .unused: return 0
        }
    }

    /// The layout a WAVE_FORMAT_EXTENSIBLE channel mask describes (channels in the order of the
    /// mask's bits, as WAVE stores them); nil when the mask does not name `channels` speakers this
    /// library has labels for.
    public init?(waveChannelMask mask: UInt32, channels: Int) {
        let known: [(UInt32, Label)] = [(0x1, .left), (0x2, .right), (0x4, .center), (0x8, .lfeScreen), (0x10, .leftSurround),
                                        (0x20, .rightSurround), (0x100, .centerSurround), (0x200, .leftSurroundDirect), (0x400, .rightSurroundDirect)]
        guard mask & ~known.reduce(0, { $0 | $1.0 }) == 0 else { return nil }
        let labels = known.filter { mask & $0.0 != 0 }.map(\.1)
        guard labels.count == channels else { return nil }
        self.init(channelLabels: channels == 1 ? [.mono] : labels)
    }

    /// The order WAVE files without a channel mask use for `channels` (what WAVE_FORMAT_EXTENSIBLE's
    /// default masks say: 3 = L R C, 4 = L R Ls Rs, 5 = L R C Ls Rs, 6 = L R C LFE Ls Rs, 7 adds a
    /// back centre after LFE, 8 = L R C LFE Ls Rs and the side pair).
    public static func wave(channels: Int) -> AudioChannelLayout {
        let masks: [Int: UInt32] = [1: 0x4, 2: 0x3, 3: 0x7, 4: 0x33, 5: 0x37, 6: 0x3F, 7: 0x13F, 8: 0x63F]
        return masks[channels].flatMap { AudioChannelLayout(waveChannelMask: $0, channels: channels) } ?? .default(channels: channels)
    }

    /// The WAVE_FORMAT_EXTENSIBLE mask of this layout, and for each channel of a file in WAVE's
    /// order (by mask bit) the channel of this layout it comes from; nil when a label has no bit
    /// or two channels share one.
    public var waveOrder: (mask: UInt32, source: [Int])? {
        let bits = channelLabels.map(Self.waveMaskBit)
        guard !bits.contains(0), Set(bits).count == bits.count else { return nil }
        let source = bits.indices.sorted { bits[$0] < bits[$1] }
        return (bits.reduce(0, |), source)
    }

    /// The order Vorbis decodes `channels` in (Vorbis I §4.3.9), which Opus's channel mapping
    /// family 1 (RFC 7845 §5.1.1.2) uses too (FLAC uses WAVE's order). 3 = L C R, 4 = L R Ls Rs,
    /// 5 = L C R Ls Rs, 6 = L C R Ls Rs LFE, 7 = L C R side-L side-R back-C LFE, 8 = L C R side-L
    /// side-R Ls Rs LFE.
    public static func vorbis(channels: Int) -> AudioChannelLayout {
        switch channels {
        case 1: return .mono
        case 2: return .stereo
        case 3: return AudioChannelLayout(channelLabels: [.left, .center, .right])
        case 4: return AudioChannelLayout(channelLabels: [.left, .right, .leftSurround, .rightSurround])
        case 5: return AudioChannelLayout(channelLabels: [.left, .center, .right, .leftSurround, .rightSurround])
        case 6: return AudioChannelLayout(channelLabels: [.left, .center, .right, .leftSurround, .rightSurround, .lfeScreen])
        case 7: return AudioChannelLayout(channelLabels: [.left, .center, .right, .leftSurroundDirect, .rightSurroundDirect, .centerSurround, .lfeScreen])
        case 8: return AudioChannelLayout(channelLabels: [.left, .center, .right, .leftSurroundDirect, .rightSurroundDirect,
                                                          .leftSurround, .rightSurround, .lfeScreen])
        default: return AudioChannelLayout(channelLabels: Array(repeating: .unknown, count: max(channels, 0)))
        }
    }

    /// The usual layout for a channel count (the AAC/MPEG default order).
    public static func `default`(channels: Int) -> AudioChannelLayout {
        switch channels {
        case 1: return .mono
        case 2: return .stereo
        case 3: return AudioChannelLayout(channelLabels: [.center, .left, .right])
        case 4: return AudioChannelLayout(channelLabels: [.center, .left, .right, .centerSurround])
        case 5: return AudioChannelLayout(channelLabels: [.center, .left, .right, .leftSurround, .rightSurround])
        case 6: return AudioChannelLayout(channelLabels: [.center, .left, .right, .leftSurround, .rightSurround, .lfeScreen])
        default: return AudioChannelLayout(channelLabels: Array(repeating: .unknown, count: max(channels, 0)))
        }
    }
}
