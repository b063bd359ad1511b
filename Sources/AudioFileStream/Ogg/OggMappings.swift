import BufferQueue

/// How one codec lives in Ogg: its header packets, what they say, and each audio packet's frames
/// (Ogg's granule positions count them, so the container must).
protocol OggMapping {
    /// Whether header packets follow the first (false for an Ogg FLAC stream whose STREAMINFO is
    /// its only header).
    var awaitsHeaders: Bool { get }
    /// Takes the next header packet; true once the last header has been read.
    mutating func takeHeader(_ packet: [UInt8], at offset: Int64) throws -> Bool
    var format: AudioStreamDescription { get }
    var magicCookie: [UInt8] { get }
    var channelLayout: AudioChannelLayout { get }
    var metadata: AudioFileMetadata { get }
    /// Frames to drop at the start that the codec header states (Opus's pre-skip).
    var headerPriming: Int { get }
    var bitRate: Int? { get }
    /// Frames an audio packet decodes to, following the packets before it (nil: malformed).
    mutating func frames(ofPacket packet: [UInt8]) -> Int?
    /// Forgets the previous packet (a decode that starts again).
    mutating func restart()
    /// The name for messages.
    var name: String { get }
}

extension OggMapping {
    var awaitsHeaders: Bool { true }
    var bitRate: Int? { nil }
    mutating func restart() {}
}

/// The mapping a stream's first packet names; nil for streams this library does not play
/// (Skeleton, Theora, Speex …), with the name found.
func oggMapping(forFirstPacket packet: [UInt8], at offset: Int64) throws -> (any OggMapping)? {
    if packet.starts(with: Array("OpusHead".utf8)) { return try OggOpusMapping(packet, at: offset) }
    if packet.count >= 7, packet[0] == 1, packet[1...6].elementsEqual("vorbis".utf8) { return OggVorbisMapping(packet) }
    if packet.count >= 5, packet[0] == 0x7F, packet[1...4].elementsEqual("FLAC".utf8) { return try OggFLACMapping(packet, at: offset) }
    return nil
}

/// A name for a stream's first packet, for messages about streams that are not played.
func oggStreamName(firstPacket packet: [UInt8]) -> String {
    let known: [(String, String)] = [("fishead", "Skeleton"), ("\u{80}theora", "Theora"), ("Speex   ", "Speex"), ("OpusHead", "Opus"),
                                     ("\u{7F}FLAC", "FLAC"), ("\u{01}vorbis", "Vorbis"), ("BBCD", "Dirac"), ("OVP80", "VP8"), ("CELT    ", "CELT")]
    for (magic, name) in known where packet.starts(with: Array(magic.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) })) {
        return name
    }
    return "an unknown codec"
}

/// Ogg Opus (RFC 7845): `OpusHead`, `OpusTags`; packets' frames from their TOC byte.
struct OggOpusMapping: OggMapping {
    let header: OpusHeader
    private var tags: [UInt8]?
    var metadata = AudioFileMetadata()
    let name = "Opus"

    init(_ packet: [UInt8], at offset: Int64) throws {
        var why = ""
        guard let header = OpusHeader(packet, why: &why) else {
            throw AudioFileStreamError(.invalidData, .ogg, offset, why)
        }
        guard header.mappingFamily == 0 || (header.mappingFamily == 1 && header.channels <= 8) else {
            throw AudioFileStreamError(.unsupportedDataFormat, .ogg, offset,
                "Opus channel mapping family \(header.mappingFamily) (\(header.channels) channels) is not played: only families 0 and 1 (up to 8 channels) have a defined speaker order")
        }
        self.header = header
    }

    mutating func takeHeader(_ packet: [UInt8], at offset: Int64) throws -> Bool {
        guard packet.starts(with: Array("OpusTags".utf8)) else {
            throw AudioFileStreamError(.invalidData, .ogg, offset, "the second packet of an Opus stream is not OpusTags")
        }
        tags = packet
        if let fields = VorbisComment.fields(packet, from: 8) { metadata = VorbisComment.metadata(fields) }
        return true
    }

    var format: AudioStreamDescription {
        AudioStreamDescription(sampleRate: Double(OpusHeader.decodingRate), formatID: .opus, bytesPerPacket: 0, framesPerPacket: 0,
                               bytesPerFrame: 0, channelsPerFrame: header.channels, bitsPerChannel: 0)
    }
    var magicCookie: [UInt8] { header.bytes }
    var channelLayout: AudioChannelLayout { .vorbis(channels: header.channels) }
    var headerPriming: Int { header.preSkip }
    func frames(ofPacket packet: [UInt8]) -> Int? { OpusHeader.samples(inPacket: packet) }
}

/// Ogg Vorbis (Vorbis I §A): three header packets; a packet's frames are the overlap of its
/// block with the previous one's.
struct OggVorbisMapping: OggMapping {
    private var packets: [[UInt8]]
    private(set) var headers: VorbisHeaders?
    private var previousBlock: Int?
    var metadata = AudioFileMetadata()
    let name = "Vorbis"

    init(_ identification: [UInt8]) { packets = [identification] }

    mutating func takeHeader(_ packet: [UInt8], at offset: Int64) throws -> Bool {
        packets.append(packet)
        if packets.count == 2, let fields = VorbisComment.fields(packet, from: 7) { metadata = VorbisComment.metadata(fields) }
        guard packets.count == 3 else { return false }
        var why = ""
        guard let headers = VorbisHeaders(packets: packets, why: &why) else {
            throw AudioFileStreamError(.invalidData, .ogg, offset, why)
        }
        self.headers = headers
        return true
    }

    var format: AudioStreamDescription {
        AudioStreamDescription(sampleRate: Double(headers?.sampleRate ?? 0), formatID: .vorbis, bytesPerPacket: 0, framesPerPacket: 0,
                               bytesPerFrame: 0, channelsPerFrame: headers?.channels ?? 0, bitsPerChannel: 0)
    }
    var magicCookie: [UInt8] { headers?.magicCookie ?? [] }
    var channelLayout: AudioChannelLayout { .vorbis(channels: headers?.channels ?? 0) }
    var headerPriming: Int { 0 }
    var bitRate: Int? { (headers?.nominalBitRate).flatMap { $0 > 0 ? $0 : nil } }

    mutating func frames(ofPacket packet: [UInt8]) -> Int? {
        guard let headers, let block = packet.withUnsafeBytes({ headers.blockSize(ofPacket: $0) }) else { return nil }
        defer { previousBlock = block }
        return VorbisHeaders.frames(previousBlock: previousBlock, currentBlock: block)
    }

    mutating func restart() { previousBlock = nil }
}

/// FLAC in Ogg: a first packet `\x7FFLAC`, version, header count, `fLaC` and STREAMINFO, then the
/// other metadata blocks one per packet; then one frame per packet.
struct OggFLACMapping: OggMapping {
    let info: FLACStreamInfo
    private var headersLeft: Int?
    var metadata = AudioFileMetadata()
    let name = "FLAC"

    init(_ packet: [UInt8], at offset: Int64) throws {
        guard packet.count >= 51, packet[5] == 1, packet[9...12].elementsEqual("fLaC".utf8), packet[13] & 0x7F == 0,
              let info = FLACStreamInfo(Array(packet[17..<51])) else {
            throw AudioFileStreamError(.invalidData, .ogg, offset, "the first packet of an Ogg FLAC stream is not a version 1 header with STREAMINFO")
        }
        self.info = info
        let count = Int(packet[7]) << 8 | Int(packet[8])
        // 0 is "unknown": the blocks' last-block flag ends them (none when STREAMINFO is the last).
        headersLeft = packet[13] & 0x80 != 0 ? 0 : count == 0 ? nil : count
    }

    var awaitsHeaders: Bool { headersLeft != 0 }

    mutating func takeHeader(_ packet: [UInt8], at offset: Int64) throws -> Bool {
        if let first = packet.first, first & 0x7F == FLACMetadataType.vorbisComment.rawValue, packet.count >= 4,
           let fields = VorbisComment.fields(packet, from: 4) {
            let pictures = metadata.pictures
            metadata = VorbisComment.metadata(fields)
            metadata.pictures = pictures + metadata.pictures
        }
        if let first = packet.first, first & 0x7F == FLACMetadataType.picture.rawValue, packet.count >= 4,
           let picture = FLACPicture.parse(Array(packet[4...])) {
            metadata.pictures.append(picture)
        }
        if let left = headersLeft {
            headersLeft = left - 1
            return left <= 1
        }
        // An unknown count: the block header's last-block flag ends them.
        return (packet.first ?? 0) & 0x80 != 0
    }

    var format: AudioStreamDescription { info.format }
    var magicCookie: [UInt8] { info.magicCookie }
    var channelLayout: AudioChannelLayout { .wave(channels: info.channels) }
    var headerPriming: Int { 0 }
    func frames(ofPacket packet: [UInt8]) -> Int? { FLACFrameHeader.parse(packet)?.blockSize }
}
