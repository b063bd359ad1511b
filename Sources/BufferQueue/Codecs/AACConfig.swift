/// The shortest MPEG-4 AudioSpecificConfig (ISO/IEC 14496-3, 1.6.2.1): an object type, a
/// sampling-frequency index and a channel configuration in two bytes. The container parsers
/// read and write the full config (AudioFileStream's `AudioSpecificConfig`); this is the part a
/// decoder needs when it gets no cookie at all.
public enum AACConfig {
    /// The sampling frequencies of indexes 0...12.
    public static let sampleRates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

    /// The two bytes: object type (1...30), frequency index (0...12), channel configuration (0...7).
    public static func bytes(objectType: Int, rateIndex: Int, channels: Int) -> [UInt8] {
        let bits = UInt16(objectType & 0x1F) << 11 | UInt16(rateIndex & 0xF) << 7 | UInt16(channels & 0xF) << 3
        return [UInt8(bits >> 8), UInt8(bits & 0xFF)]
    }

    /// The config a stream description alone implies, as Core Audio's AAC decoder takes it when a
    /// queue is given no magic cookie: the object type from `mFormatFlags` (a `kMPEG4Object_…`
    /// value; 0 means AAC LC), the core rate (half the rate of HE-AAC, whose SBR doubles it; the
    /// decoder finds SBR and PS in-band), and the channel count's configuration (1...6, and 8 as
    /// configuration 7). Nil for another format, or a rate or channel count no config can say.
    public static func implied(by format: AudioStreamDescription) -> [UInt8]? {
        guard [.aacLC, .heAAC, .heAACv2].contains(format.formatID) else { return nil }
        let flagged = Int(format.formatFlags.rawValue)
        let objectType = (1...4).contains(flagged) ? flagged : 2
        let core = format.formatID == .aacLC ? format.sampleRate : format.sampleRate / 2
        guard let rateIndex = sampleRates.firstIndex(where: { Double($0) == core }) else { return nil }
        let channels: Int
        switch format.channelsPerFrame {
        case 1...6: channels = format.channelsPerFrame
        case 8: channels = 7
        default: return nil
        }
        return bytes(objectType: objectType, rateIndex: rateIndex, channels: channels)
    }
}
