import BufferQueue

/// An MPEG-4 AudioSpecificConfig: the AAC magic cookie.
public struct AudioSpecificConfig: Hashable, Sendable {
    /// The sampling frequencies an AudioSpecificConfig's 4-bit index names, in index order.
    public static let sampleRates = AACConfig.sampleRates

    /// Audio object type of the core (2 = AAC-LC).
    public var objectType: Int
    /// The core sample rate.
    public var sampleRate: Int
    /// Channel configuration (1 = mono, 2 = stereo...; 0 = defined in-band).
    public var channelConfiguration: Int
    /// SBR signalled explicitly: true/false, or nil when the config leaves it open (implicit).
    public var sbrPresent: Bool?
    /// PS signalled explicitly: true/false, or nil when open.
    public var psPresent: Bool?
    /// The output rate with SBR, when signalled.
    public var extensionSampleRate: Int?
    /// How SBR/PS are signalled: "explicit hierarchical", "explicit backward-compatible" or "implicit".
    public var signalling: String

    /// Parses the config bytes.
    public init?(_ bytes: [UInt8]) {
        var r = BitReader(bytes)
        func objectTypeField() -> Int? {
            guard let aot = r.read(5) else { return nil }
            if aot == 31 { return r.read(6).map { 32 + Int($0) } }
            return Int(aot)
        }
        func rateField() -> Int? {
            guard let index = r.read(4) else { return nil }
            if index == 15 { return r.read(24).map(Int.init) }
            return Int(index) < Self.sampleRates.count ? Self.sampleRates[Int(index)] : nil
        }
        guard var aot = objectTypeField(), let rate = rateField(), let channels = r.read(4) else { return nil }
        sampleRate = rate
        channelConfiguration = Int(channels)
        sbrPresent = nil
        psPresent = nil
        extensionSampleRate = nil
        signalling = "implicit"
        if aot == 5 || aot == 29 {
            sbrPresent = true
            psPresent = aot == 29
            signalling = "explicit hierarchical"
            guard let ext = rateField(), let core = objectTypeField() else { return nil }
            extensionSampleRate = ext
            aot = core
        }
        objectType = aot
        // GASpecificConfig for AAC, then a backward-compatible sync extension if bits remain.
        guard [1, 2, 3, 4, 6, 7].contains(aot), channelConfiguration != 0 else { return }
        guard let _ = r.read(1), let dependsOnCore = r.read(1) else { return }
        if dependsOnCore == 1 { guard r.read(14) != nil else { return } }
        guard let _ = r.read(1) else { return }
        if sbrPresent == nil, r.bitsLeft >= 16, r.read(11) == 0x2B7, let extAOT = objectTypeField(), extAOT == 5,
           let sbr = r.read(1) {
            sbrPresent = sbr == 1
            signalling = "explicit backward-compatible"
            if sbr == 1 {
                extensionSampleRate = rateField()
                if r.bitsLeft >= 12, r.read(11) == 0x548, let ps = r.read(1) { psPresent = ps == 1 }
            }
        }
    }

    /// A two-byte config for AAC with a sampling-frequency index and channel configuration (from ADTS).
    static func bytes(objectType: Int, rateIndex: Int, channels: Int) -> [UInt8] {
        AACConfig.bytes(objectType: objectType, rateIndex: rateIndex, channels: channels)
    }

    /// The readings of this stream, best first: HE-AAC v2, HE-AAC, AAC-LC, as far as signalled.
    /// With implicit signalling only the LC reading is certain; the decoder finds SBR/PS in-band.
    public var formatList: [AudioStreamDescription] {
        let channels = channelConfiguration == 7 ? 8 : max(channelConfiguration, 1)
        let lc = AudioStreamDescription(sampleRate: Double(sampleRate), formatID: .aacLC, bytesPerPacket: 0, framesPerPacket: 1024,
                                        bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0)
        guard sbrPresent == true else { return [lc] }
        let outRate = Double(extensionSampleRate ?? sampleRate * 2)
        let he = AudioStreamDescription(sampleRate: outRate, formatID: .heAAC, bytesPerPacket: 0, framesPerPacket: 2048,
                                        bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0)
        guard psPresent == true, channels == 1 else { return [he, lc] }
        let v2 = AudioStreamDescription(sampleRate: outRate, formatID: .heAACv2, bytesPerPacket: 0, framesPerPacket: 2048,
                                        bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0)
        return [v2, he, lc]
    }

    /// A name for the best reading, as afinfo prints it.
    public var profileName: String {
        if sbrPresent == true { return psPresent == true ? "HE-AAC v2" : "HE-AAC" }
        return objectType == 2 ? "AAC-LC" : "AAC (object type \(objectType))"
    }
}

/// Finds the AudioSpecificConfig in an MPEG-4 ES descriptor (the body of `esds`, or a CAF `kuki`);
/// for MPEG-1/2 audio (object types 0x6B, 0x69), which has none, an empty config.
func audioSpecificConfig(fromESDescriptor bytes: [UInt8]) -> (objectTypeIndication: Int, config: [UInt8])? {
    var index = 0
    func length() -> Int? {
        var value = 0
        for _ in 0..<4 {
            guard index < bytes.count else { return nil }
            let byte = bytes[index]; index += 1
            value = value << 7 | Int(byte & 0x7F)
            if byte & 0x80 == 0 { return value }
        }
        return value
    }
    var objectType = 0
    while index < bytes.count {
        let tag = bytes[index]; index += 1
        guard let size = length(), size >= 0 else { return nil }
        switch tag {
        case 0x03:   // ES_Descriptor: id, flags, optional fields
            guard index + 3 <= bytes.count else { return nil }
            let flags = bytes[index + 2]; index += 3
            if flags & 0x80 != 0 { index += 2 }
            if flags & 0x40 != 0, index < bytes.count { index += 1 + Int(bytes[index]) }
            if flags & 0x20 != 0 { index += 2 }
        case 0x04:   // DecoderConfigDescriptor
            guard index + 13 <= bytes.count else { return nil }
            objectType = Int(bytes[index]); index += 13
            // MPEG-1/2 audio (MP3) carries no DecoderSpecificInfo: the object type is all there is.
            if objectType == 0x69 || objectType == 0x6B { return (objectType, []) }
        case 0x05:   // DecoderSpecificInfo
            guard index + size <= bytes.count else { return nil }
            return (objectType, Array(bytes[index..<(index + size)]))
        default:
            index += size
        }
    }
    return nil
}
