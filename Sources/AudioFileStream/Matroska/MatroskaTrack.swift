import BufferQueue

/// One `TrackEntry` of a Matroska `Tracks` element: what the parser needs to choose a track and
/// read its blocks.
struct MatroskaTrackEntry {
    var number: Int64 = 0
    var uid: UInt64 = 0
    /// 1 video, 2 audio, 17 subtitle …
    var type: Int = 0
    var codecID = ""
    var codecPrivate: [UInt8] = []
    /// Nanoseconds the codec's output is ahead of the timeline: its priming.
    var codecDelay: UInt64 = 0
    var seekPreRoll: UInt64 = 0
    var enabled = true
    var samplingFrequency: Double = 8000
    var outputSamplingFrequency: Double?
    var channels = 1
    var bitDepth: Int?
    /// Why the blocks cannot be read as they are (compressed or encrypted content), if so.
    var encoding: String?
    let offset: Int64

    init(_ bytes: [UInt8], _ body: Range<Int>, base: Int64) throws {
        offset = base + Int64(body.lowerBound)
        for child in try EBML.children(of: bytes, body, base: base) {
            switch child.id {
            case EBML.ID.trackNumber: number = Int64(clamping: EBML.uint(bytes, child.body))
            case EBML.ID.trackUID: uid = EBML.uint(bytes, child.body)
            case EBML.ID.trackType: type = Int(clamping: EBML.uint(bytes, child.body))
            case EBML.ID.codecID: codecID = EBML.string(bytes, child.body)
            case EBML.ID.codecPrivate: codecPrivate = Array(bytes[child.body])
            case EBML.ID.codecDelay: codecDelay = EBML.uint(bytes, child.body)
            case EBML.ID.seekPreRoll: seekPreRoll = EBML.uint(bytes, child.body)
            case EBML.ID.flagEnabled: enabled = EBML.uint(bytes, child.body) != 0
            case EBML.ID.audio:
                for field in try EBML.children(of: bytes, child.body, base: base) {
                    switch field.id {
                    case EBML.ID.samplingFrequency: samplingFrequency = EBML.float(bytes, field.body) ?? samplingFrequency
                    case EBML.ID.outputSamplingFrequency: outputSamplingFrequency = EBML.float(bytes, field.body)
                    case EBML.ID.channels: channels = Int(clamping: EBML.uint(bytes, field.body))
                    case EBML.ID.bitDepth: bitDepth = Int(clamping: EBML.uint(bytes, field.body))
                    default: break
                    }
                }
            case EBML.ID.contentEncodings:
                for encodingElement in try EBML.children(of: bytes, child.body, base: base) where encodingElement.id == EBML.ID.contentEncoding {
                    for part in try EBML.children(of: bytes, encodingElement.body, base: base) {
                        if part.id == EBML.ID.contentEncryption { encoding = "encrypted" }
                        if part.id == EBML.ID.contentCompression {
                            var algorithm: UInt64 = 0
                            for setting in try EBML.children(of: bytes, part.body, base: base) where setting.id == EBML.ID.contentCompAlgo {
                                algorithm = EBML.uint(bytes, setting.body)
                            }
                            let names: [UInt64: String] = [0: "zlib-compressed", 1: "bzlib-compressed", 2: "LZO-compressed", 3: "header-stripped"]
                            encoding = names[algorithm] ?? "compressed (algorithm \(algorithm))"
                        }
                    }
                }
            default: break
            }
        }
    }

    /// A name for messages: `track 2 (A_AC3)`.
    var label: String { "track \(number) (\(codecID.isEmpty ? "no codec ID" : codecID))" }
}

/// How a Matroska audio codec's blocks are read: its format, magic cookie, and each frame's
/// decoded length. The Xiph codecs share their header facts with Ogg (``OggMapping``).
struct MatroskaCodec {
    enum Kind {
        case opus(OggOpusMapping)
        case vorbis(OggVorbisMapping)
        case flac
        case aac(framesPerPacket: Int)
        case mpeg
        case pcm(bytesPerFrame: Int)
    }
    var kind: Kind
    var format: AudioStreamDescription
    var formatList: [AudioStreamDescription]
    var magicCookie: [UInt8]?
    var channelLayout: AudioChannelLayout
    var metadata = AudioFileMetadata()
    /// Frames the codec header says to drop at the start (Opus's pre-skip), beside `CodecDelay`.
    var headerPriming = 0
    let name: String

    /// Codec IDs this library does not decode, by prefix, with the name said when refusing them.
    static let refused: [(prefix: String, name: String)] = [
        ("A_AC3", "AC-3"), ("A_EAC3", "E-AC-3"), ("A_DTS", "DTS"), ("A_TRUEHD", "Dolby TrueHD"), ("A_MLP", "MLP"),
        ("A_ALAC", "ALAC"), ("A_TTA1", "TTA"), ("A_WAVPACK4", "WavPack"), ("A_REAL", "RealAudio"), ("A_MS/ACM", "an ACM codec (A_MS/ACM)"),
        ("A_QUICKTIME", "a QuickTime codec"), ("A_ATRAC", "ATRAC"),
    ]

    init(_ track: MatroskaTrackEntry) throws {
        do {
            try self.init(reading: track)
        } catch let error as AudioFileStreamError where error.container == .ogg {
            // The Xiph header facts are shared with Ogg; their errors are about this track.
            throw AudioFileStreamError(error.code, .matroska, track.offset, "\(track.label): \(error.message)")
        }
    }

    /// The rates and channel counts a track's own fields may state (for the codecs whose header
    /// does not: PCM, MPEG audio, AAC without CodecPrivate).
    static let rates: ClosedRange<Double> = 1...1_536_000
    static let channelCounts: ClosedRange<Int> = 1...64

    private init(reading track: MatroskaTrackEntry) throws {
        let id = track.codecID
        let rate = track.samplingFrequency, channels = max(track.channels, 1)
        let fieldsUsed = id.hasPrefix("A_PCM/") || id.hasPrefix("A_MPEG/") || (id.hasPrefix("A_AAC") && track.codecPrivate.isEmpty)
        if fieldsUsed {
            guard Self.rates.contains(rate) else {
                throw AudioFileStreamError(.invalidData, .matroska, track.offset, "\(track.label): a sampling frequency of \(rate) Hz")
            }
            guard Self.channelCounts.contains(track.channels) else {
                throw AudioFileStreamError(.invalidData, .matroska, track.offset, "\(track.label): \(track.channels) channels")
            }
        }
        func refuse(_ why: String) -> AudioFileStreamError {
            AudioFileStreamError(.unsupportedDataFormat, .matroska, track.offset, "\(track.label): \(why)")
        }
        func invalid(_ why: String) -> AudioFileStreamError {
            AudioFileStreamError(.invalidData, .matroska, track.offset, "\(track.label): \(why)")
        }
        switch id {
        case "A_OPUS":
            // CodecPrivate is the OpusHead packet.
            let mapping = try OggOpusMapping(track.codecPrivate, at: track.offset)
            self = Self(.opus(mapping), taking: mapping)
            return
        case "A_VORBIS":
            // CodecPrivate: the three header packets in Xiph lacing.
            guard let packets = VorbisHeaders.unlace(track.codecPrivate), packets.count == 3 else {
                throw invalid("CodecPrivate does not hold the three Vorbis headers in Xiph lacing")
            }
            var mapping = OggVorbisMapping(packets[0])
            _ = try mapping.takeHeader(packets[1], at: track.offset)
            guard try mapping.takeHeader(packets[2], at: track.offset) else { throw invalid("the Vorbis headers are incomplete") }
            self = Self(.vorbis(mapping), taking: mapping)
            return
        case "A_FLAC":
            // CodecPrivate: `fLaC` and the metadata blocks, STREAMINFO first.
            guard let info = FLACStreamInfo(magicCookie: track.codecPrivate) else {
                throw invalid("CodecPrivate holds no FLAC STREAMINFO block")
            }
            kind = .flac
            format = info.format
            magicCookie = info.magicCookie
            channelLayout = .wave(channels: info.channels)
            name = "FLAC"
        case _ where id == "A_AAC" || id.hasPrefix("A_AAC/"):
            var config: [UInt8]
            if !track.codecPrivate.isEmpty {
                config = track.codecPrivate
            } else if let made = Self.audioSpecificConfig(codecID: id, rate: rate, outputRate: track.outputSamplingFrequency, channels: channels) {
                config = made
            } else {
                throw invalid("an AAC track without CodecPrivate at \(rate) Hz has no AudioSpecificConfig to decode with")
            }
            guard let asc = AudioSpecificConfig(config) else { throw invalid("CodecPrivate is not an AudioSpecificConfig") }
            if config.count > 64 { config = Array(config.prefix(64)) }
            formatList = asc.formatList
            guard let lc = formatList.last else { throw invalid("the AudioSpecificConfig names no AAC reading") }
            kind = .aac(framesPerPacket: lc.framesPerPacket)
            format = lc
            magicCookie = config
            channelLayout = .default(channels: lc.channelsPerFrame)
            name = "AAC"
            return
        case "A_MPEG/L3", "A_MPEG/L2", "A_MPEG/L1":
            let layer = id.last.flatMap { Int(String($0)) } ?? 3
            let formatID: AudioFormatID = layer == 3 ? .mpegLayer3 : layer == 2 ? .mpegLayer2 : .mpegLayer1
            let perPacket = layer == 1 ? 384 : (layer == 3 && rate < 32000) ? 576 : 1152
            kind = .mpeg
            format = AudioStreamDescription(sampleRate: rate, formatID: formatID, bytesPerPacket: 0, framesPerPacket: perPacket,
                                            bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0)
            channelLayout = .default(channels: channels)
            name = "MPEG audio"
        case "A_PCM/INT/LIT", "A_PCM/INT/BIG", "A_PCM/FLOAT/IEEE":
            let bits = track.bitDepth ?? (id == "A_PCM/FLOAT/IEEE" ? 32 : 16)
            let float = id == "A_PCM/FLOAT/IEEE"
            guard float ? (bits == 32 || bits == 64) : (bits >= 8 && bits <= 32 && bits % 8 == 0) else {
                throw refuse("PCM of \(bits) bits is not read (8, 16, 24 and 32-bit integers, 32 and 64-bit floats are)")
            }
            // Matroska's 8-bit PCM is unsigned, as WAV's.
            format = .linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: bits, isFloat: float,
                                isBigEndian: id == "A_PCM/INT/BIG" && bits > 8)
            kind = .pcm(bytesPerFrame: format.bytesPerFrame)
            channelLayout = .wave(channels: channels)
            name = "PCM"
        default:
            if let known = Self.refused.first(where: { id.hasPrefix($0.prefix) }) {
                throw refuse("\(known.name) is not decoded by this library")
            }
            throw refuse("the codec \(id.isEmpty ? "(none named)" : id) is not decoded by this library")
        }
        formatList = [format]
    }

    /// A Xiph codec: the format, cookie, layout, comments and header priming its Ogg mapping read.
    private init(_ kind: Kind, taking mapping: some OggMapping) {
        self.kind = kind
        format = mapping.format
        formatList = [mapping.format]
        magicCookie = mapping.magicCookie
        channelLayout = mapping.channelLayout
        metadata = mapping.metadata
        headerPriming = mapping.headerPriming
        name = mapping.name
    }

    /// Frames a block's frame decodes to (nil: malformed). Vorbis follows the frames before it.
    mutating func frames(of packet: UnsafeRawBufferPointer) -> Int? {
        switch kind {
        case .opus: return OpusHeader.samples(inPacket: packet)
        case .vorbis(var mapping):
            defer { kind = .vorbis(mapping) }
            return mapping.frames(ofPacket: Array(packet))
        case .flac:
            guard packet.count >= 16 else { return nil }
            return FLACFrameHeader.parse(Array(packet.prefix(16)))?.blockSize
        case .aac(let perPacket): return perPacket
        case .mpeg:
            guard packet.count >= 4 else { return nil }
            return MPEGHeader(packet[0], packet[1], packet[2], packet[3])?.samplesPerFrame
        case .pcm(let bytesPerFrame): return packet.count % bytesPerFrame == 0 ? packet.count / bytesPerFrame : nil
        }
    }

    /// Forgets the previous frame (a decode that starts again after a seek).
    mutating func restart() {
        if case .vorbis(var mapping) = kind {
            mapping.restart()
            kind = .vorbis(mapping)
        }
    }

    /// The AudioSpecificConfig of the old codec IDs that name the profile instead of carrying one
    /// (`A_AAC/MPEG4/LC`, `A_AAC/MPEG2/LC/SBR`, …): the object type from the ID, the rates and
    /// channels from the track. SBR is signalled explicitly (hierarchically).
    static func audioSpecificConfig(codecID: String, rate: Double, outputRate: Double?, channels: Int) -> [UInt8]? {
        let parts = codecID.split(separator: "/").map(String.init)
        guard parts.count >= 3 else { return nil }
        let objectType: Int
        switch parts[2] {
        case "MAIN": objectType = 1
        case "LC": objectType = 2
        case "SSR": objectType = 3
        case "LTP": objectType = 4
        default: return nil
        }
        let sbr = parts.count >= 4 && parts[3] == "SBR"
        let rates = AudioSpecificConfig.sampleRates
        guard MatroskaCodec.rates.contains(rate), let core = rates.firstIndex(of: Int(rate)), channels <= 7 else { return nil }
        guard sbr else { return AACConfig.bytes(objectType: objectType, rateIndex: core, channels: channels) }
        let extended = outputRate.flatMap { MatroskaCodec.rates.contains($0) ? Int($0) : nil } ?? Int(rate) * 2
        guard let outIndex = rates.firstIndex(of: extended) else { return nil }
        // 5 bits object type 5 (SBR), 4 core rate, 4 channels, 4 extension rate, 5 object type, 3 zero bits.
        let bits = UInt32(5) << 27 | UInt32(core) << 23 | UInt32(channels) << 19 | UInt32(outIndex) << 15 | UInt32(objectType) << 10
        return [UInt8(bits >> 24), UInt8(truncatingIfNeeded: bits >> 16), UInt8(truncatingIfNeeded: bits >> 8), UInt8(truncatingIfNeeded: bits)]
    }
}
