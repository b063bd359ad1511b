/// Core Audio's form of a channel layout — a layout tag, a channel bitmap and one channel
/// description per channel — as CAF's `chan` chunk stores it (big-endian) and Apple's C
/// `AudioChannelLayout` holds it in memory. The one place that reads and writes it: CAF's parser
/// and writer and AudioToolbox's properties go through here.
public struct CoreAudioChannelLayout: Hashable, Sendable {
    /// `kAudioChannelLayoutTag_…`: channel descriptions (0), a bitmap (1 << 16), or a named layout
    /// (its channel count in the low 16 bits).
    public var tag: UInt32
    /// `kAudioChannelBit_…` (WAVE's speaker bits) when the tag says so.
    public var bitmap: UInt32
    /// The label of each channel description (their coordinates are not kept).
    public var labels: [UInt32]

    /// `kAudioChannelLayoutTag_UseChannelDescriptions`: the labels say the speakers.
    public static let useChannelDescriptions: UInt32 = 0
    /// `kAudioChannelLayoutTag_UseChannelBitmap`: the bitmap says the speakers.
    public static let useChannelBitmap: UInt32 = 1 << 16
    /// `kAudioChannelLayoutTag_Mono`.
    public static let mono: UInt32 = 100 << 16 | 1
    /// `kAudioChannelLayoutTag_Stereo`.
    public static let stereo: UInt32 = 101 << 16 | 2
    /// `kAudioChannelLayoutTag_StereoHeadphones`.
    public static let stereoHeadphones: UInt32 = 102 << 16 | 2
    /// `kAudioChannelLayoutTag_MPEG_5_1_A`: L R C LFE Ls Rs.
    public static let mpeg5_1_A: UInt32 = 121 << 16 | 6
    /// `kAudioChannelLayoutTag_MPEG_5_1_D`: C L R Ls Rs LFE.
    public static let mpeg5_1_D: UInt32 = 124 << 16 | 6
    /// Bytes of one channel description: a label, flags and three coordinates.
    public static let descriptionSize = 20
    /// Bytes before the descriptions: tag, bitmap, count.
    public static let headerSize = 12

    /// A layout of `tag`, with a channel bitmap and channel labels where the tag says to use them.
    public init(tag: UInt32, bitmap: UInt32 = 0, labels: [UInt32] = []) {
        self.tag = tag
        self.bitmap = bitmap
        self.labels = labels
    }

    /// The form of `layout`: a named tag for mono and stereo when `namedTags`, descriptions otherwise.
    public init(_ layout: AudioChannelLayout, namedTags: Bool) {
        let labels = layout.channelLabels
        if namedTags && labels == [.mono] {
            self.init(tag: Self.mono)
        } else if namedTags && labels == [.left, .right] {
            self.init(tag: Self.stereo)
        } else {
            self.init(tag: Self.useChannelDescriptions, labels: labels.map(\.rawValue))
        }
    }

    /// The layout it describes; `channels` is the stream's count, which a bitmap and the tags
    /// without labels of their own need. nil when the bitmap or tag names nothing this library has
    /// labels for. The caller checks the count against its stream.
    public func layout(channels: Int) -> AudioChannelLayout? {
        switch tag {
        case Self.useChannelDescriptions:
            return AudioChannelLayout(channelLabels: labels.map { AudioChannelLayout.Label(rawValue: $0) ?? .unknown })
        case Self.useChannelBitmap:
            return AudioChannelLayout(waveChannelMask: bitmap, channels: channels)
        case Self.mono: return .mono
        case Self.stereo, Self.stereoHeadphones: return .stereo
        case Self.mpeg5_1_A:
            return AudioChannelLayout(channelLabels: [.left, .right, .center, .lfeScreen, .leftSurround, .rightSurround])
        case Self.mpeg5_1_D:
            return AudioChannelLayout(channelLabels: [.center, .left, .right, .leftSurround, .rightSurround, .lfeScreen])
        default:
            // Other named tags carry their channel count in the low 16 bits.
            return Int(tag & 0xFFFF) == channels ? .default(channels: channels) : nil
        }
    }

    /// The channels it describes: the descriptions', the bitmap's bits, or the tag's low 16 bits.
    public var channelCount: Int {
        switch tag {
        case Self.useChannelDescriptions: return labels.count
        case Self.useChannelBitmap: return bitmap.nonzeroBitCount
        default: return Int(tag & 0xFFFF)
        }
    }

    /// Reads it from `bytes` (in `bigEndian` byte order: CAF's; else the machine's, as C holds it);
    /// nil when the bytes are too few for the descriptions they count.
    public init?(bytes: UnsafeRawBufferPointer, bigEndian: Bool) {
        func word(_ offset: Int) -> UInt32 {
            let raw = bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
            return bigEndian ? UInt32(bigEndian: raw) : raw
        }
        guard bytes.count >= Self.headerSize else { return nil }
        let count = Int(word(8))
        guard count <= 1 << 16, bytes.count >= Self.headerSize + count * Self.descriptionSize else { return nil }
        self.init(tag: word(0), bitmap: word(4), labels: (0..<count).map { word(Self.headerSize + $0 * Self.descriptionSize) })
    }

    /// Its bytes (in `bigEndian` byte order, else the machine's): header, then a description per
    /// label with zero flags and coordinates.
    public func bytes(bigEndian: Bool) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.headerSize + labels.count * Self.descriptionSize)
        out.withUnsafeMutableBytes { raw in
            func put(_ value: UInt32, _ offset: Int) { raw.storeBytes(of: bigEndian ? value.bigEndian : value, toByteOffset: offset, as: UInt32.self) }
            put(tag, 0)
            put(bitmap, 4)
            put(UInt32(labels.count), 8)
            for (index, label) in labels.enumerated() { put(label, Self.headerSize + index * Self.descriptionSize) }
        }
        return out
    }
}
