import BufferQueue

/// The containers the stream reads (Core Audio's `AudioFileTypeID`).
public enum AudioFileType: String, Hashable, Sendable, CaseIterable {
    /// MPEG audio (MP3, MP2, MP1), with or without ID3 tags and a LAME/Xing header.
    case mp3 = "MPG3"
    /// AAC in ADTS frames (`.aac`).
    case adts = "adts"
    /// MP4, M4A, QuickTime and 3GP (fragmented too).
    case mp4 = "m4af"
    /// Core Audio Format.
    case caf = "caff"
    /// RIFF WAVE (WAVE_FORMAT_EXTENSIBLE too).
    case wave = "WAVE"
    /// AIFF: big-endian PCM.
    case aiff = "AIFF"
    /// AIFC: AIFF with a compression type (PCM either endianness, IMA4, µ-law, A-law).
    case aifc = "AIFC"
    /// Raw AMR or AMR-WB (`#!AMR` storage files).
    case amr = "amrf"
    /// Ogg (RFC 3533) carrying Opus, Vorbis or FLAC (Core Audio has no constant for Ogg).
    case ogg = "OggS"
    /// Native FLAC (`fLaC`; Core Audio's `kAudioFileFLACType`).
    case flac = "flac"
    /// An MPEG-2 transport stream (`.ts`, HLS segments) carrying ADTS AAC or MPEG audio; packet
    /// byte offsets are positions in the elementary stream.
    case mpegTransportStream = "MP2T"
    /// Matroska or WebM (EBML) carrying Opus, Vorbis, FLAC, AAC, MPEG audio or PCM (Core Audio
    /// has no constant for it).
    case matroska = "mkva"

    /// Whether packets' bytes are interleaved with the container's own (transport packet headers,
    /// Ogg page headers), so a packet cannot be read again from its file offset alone.
    public var interleavesPacketBytes: Bool { self == .mpegTransportStream || self == .ogg }

    /// Whether, where packets' bytes are interleaved, the parser still says where each packet's
    /// pieces lie in the file (Ogg pages), so an index need not keep the bytes (a transport
    /// stream's packets are positions in its elementary stream: their bytes are kept).
    var locatesPacketPieces: Bool { self == .ogg }

    /// The four-character type id, e.g. `MPG3`.
    public var typeID: String { rawValue }

    /// A name for messages.
    public var displayName: String {
        switch self {
        case .mp3: return "MPEG audio"
        case .adts: return "ADTS"
        case .mp4: return "MP4"
        case .caf: return "CAF"
        case .wave: return "WAV"
        case .aiff: return "AIFF"
        case .aifc: return "AIFC"
        case .amr: return "AMR"
        case .mpegTransportStream: return "MPEG transport stream"
        case .ogg: return "Ogg"
        case .flac: return "FLAC"
        case .matroska: return "Matroska"
        }
    }
}

/// Properties a stream announces (Core Audio's `AudioFileStreamPropertyID`), each once known and
/// again if it changes. Their values are read from the ``AudioFileStream``.
public enum AudioFileStreamProperty: String, Hashable, Sendable, CaseIterable {
    /// The container (``AudioFileStream/fileType``).
    case fileFormat
    /// The format of the audio (``AudioFileStream/dataFormat``).
    case dataFormat
    /// Every reading of the format, best first (``AudioFileStream/formatList``).
    case formatList
    /// What the decoder needs besides the packets (``AudioFileStream/magicCookie``).
    case magicCookie
    /// Where the audio data starts (``AudioFileStream/dataOffset``).
    case dataOffset
    /// How many bytes of audio data there are (``AudioFileStream/audioDataByteCount``).
    case audioDataByteCount
    /// How many packets there are (``AudioFileStream/audioDataPacketCount``).
    case audioDataPacketCount
    /// The bit rate (``AudioFileStream/bitRate``).
    case bitRate
    /// The largest packet (``AudioFileStream/maximumPacketSize``).
    case maximumPacketSize
    /// The speakers of the channels (``AudioFileStream/channelLayout``).
    case channelLayout
    /// The valid frames, priming and remainder (``AudioFileStream/packetTableInfo``).
    case packetTableInfo
    /// Tags, pictures and cue sheet (``AudioFileStream/metadata``).
    case metadata
    /// Everything needed to decode is known; packets follow.
    case readyToProducePackets
}

/// How many frames of a stream are real audio: Core Audio's `AudioFilePacketTableInfo`, counted in
/// the decoder's output frames.
public struct AudioFilePacketTableInfo: Hashable, Sendable, CustomStringConvertible {
    /// Frames that are real audio, after the priming and before the remainder.
    public var validFrames: Int64
    /// Frames to drop at the start (encoder delay, plus decoder delay where the convention adds it).
    public var primingFrames: Int
    /// Frames to drop at the end (padding).
    public var remainderFrames: Int
    /// Where the numbers come from.
    public var source: Source
    /// How they were converted, when the container counts in other units (e.g. an AAC core rate
    /// while SBR doubles the output rate).
    public var note: String?

    /// Where the gapless numbers were read (the container's convention).
    public enum Source: String, Hashable, Sendable {
        /// An MP3's LAME/Xing/Info header: the encoder's delay and padding.
        case lameTag = "LAME/Info tag"
        /// iTunes' `iTunSMPB` comment (MP3, MP4).
        case iTunSMPB = "iTunSMPB"
        /// An MP4 edit list.
        case editList = "edit list"
        /// A CAF `pakt` chunk.
        case pakt = "pakt chunk"
        /// MP4 sample durations (the last sample shortened).
        case sampleDurations = "sample durations"
        /// A container's frame count (WAV `fact`, AIFF `COMM`, FLAC STREAMINFO).
        case containerFrameCount = "container frame count"
        /// Ogg granule positions (with Opus's pre-skip).
        case granulePosition = "granule position"
        /// A stretch of a longer item (a cue sheet's track): its frames, and the item's around them.
        case frameRange = "frame range"
        /// Matroska's `CodecDelay` (the priming) and the last block's `DiscardPadding` (the end trim).
        case codecDelay = "CodecDelay/DiscardPadding"
    }

    /// Numbers read from `source` (with a `note` on how they were found, where that helps).
    public init(validFrames: Int64, primingFrames: Int, remainderFrames: Int, source: Source, note: String? = nil) {
        self.validFrames = validFrames
        self.primingFrames = primingFrames
        self.remainderFrames = remainderFrames
        self.source = source
        self.note = note
    }

    public var description: String {
        "\(validFrames) valid frames + \(primingFrames) priming + \(remainderFrames) remainder (\(source.rawValue))"
    }
}

/// Title, artist and album from ID3, MP4 tags or Vorbis comments, and the other tags a format
/// names in text.
public struct AudioFileMetadata: Hashable, Sendable {
    /// The title tag.
    public var title: String?
    /// The artist tag.
    public var artist: String?
    /// The album tag.
    public var album: String?
    /// Other tags by name as the format spells them — Vorbis comments' field names upper-cased
    /// (`TRACKNUMBER`, `DATE`, `REPLAYGAIN_TRACK_GAIN`, `R128_TRACK_GAIN` …); several values of
    /// one name joined by `"; "`.
    public var tags: [String: String]
    /// Embedded pictures (FLAC PICTURE blocks, Ogg comments' `METADATA_BLOCK_PICTURE`, ID3v2
    /// `APIC` frames, MP4 `covr` items).
    public var pictures: [AudioFilePicture]
    /// An embedded cue sheet: a FLAC `CUESHEET` block, else a `CUESHEET` Vorbis comment (its
    /// tracks' files are this file: ``CueSheet/Track/file`` is nil or ignored).
    public var cueSheet: CueSheet?
    /// Whether nothing at all was read.
    public var isEmpty: Bool { title == nil && artist == nil && album == nil && tags.isEmpty && pictures.isEmpty && cueSheet == nil }

    /// What tells an album apart, for ReplayGain's `auto` mode: the album's title with its album
    /// artist where tagged (`ALBUMARTIST`, `ALBUM ARTIST`, ID3's `TPE2`); nil without an album.
    public var albumKey: String? {
        guard let album, !album.isEmpty else { return nil }
        let artist = tags["ALBUMARTIST"] ?? tags["ALBUM ARTIST"] ?? tags["TPE2"] ?? tags["aART"]
        return album + "\u{1F}" + (artist ?? "")
    }
    /// Metadata of these values.
    public init(title: String? = nil, artist: String? = nil, album: String? = nil, tags: [String: String] = [:],
                pictures: [AudioFilePicture] = [], cueSheet: CueSheet? = nil) {
        self.title = title
        self.artist = artist
        self.album = album
        self.tags = tags
        self.pictures = pictures
        self.cueSheet = cueSheet
    }
}

/// A picture embedded in a file: FLAC's PICTURE block (which Ogg streams carry base64-encoded in
/// a `METADATA_BLOCK_PICTURE` comment), an ID3v2 `APIC` frame or an MP4 `covr` item.
public struct AudioFilePicture: Hashable, Sendable {
    /// The ID3v2 APIC picture type: 3 is the front cover, 4 the back, 0 other (see ``typeName``).
    public var type: Int
    /// The image's MIME type (`image/jpeg`, `image/png`).
    public var mimeType: String
    /// The picture's description, as tagged.
    public var description: String
    /// The width in pixels, when tagged (0 otherwise).
    public var width: Int
    /// The height in pixels, when tagged (0 otherwise).
    public var height: Int
    /// The image file's bytes (or, with the MIME type `-->`, a URL to it).
    public var data: [UInt8]

    /// A picture of these values.
    public init(type: Int, mimeType: String, description: String, width: Int, height: Int, data: [UInt8]) {
        self.type = type
        self.mimeType = mimeType
        self.description = description
        self.width = width
        self.height = height
        self.data = data
    }

    /// The picture type's name, e.g. "front cover".
    public var typeName: String {
        let names = ["other", "file icon", "other file icon", "front cover", "back cover", "leaflet page", "media", "lead artist",
                     "artist", "conductor", "band", "composer", "lyricist", "recording location", "during recording",
                     "during performance", "video capture", "a bright coloured fish", "illustration", "band logo", "publisher logo"]
        return names.indices.contains(type) ? names[type] : "type \(type)"
    }
}

/// Packets parsed from the stream, contiguous in `data`.
///
/// Formats with packets of varying size (MP3, AAC) come with one description per packet. Formats
/// with constant-size packets (PCM, IMA4) come without descriptions: `data` holds `packetCount`
/// packets of the format's `bytesPerPacket`, which is how the queue takes them.
public struct AudioFilePackets: Sendable {
    /// The packets' bytes, back to back.
    public var data: [UInt8]
    /// Where each packet lies in `data`, with its frame count when it varies; empty for constant-size packets.
    public var descriptions: [AudioPacketDescription]
    /// Absolute byte offset in the stream of each packet (of the first one, for constant-size packets).
    public var fileOffsets: [Int64]
    /// Index of the first packet in the stream (counting audio packets only).
    public var firstPacketIndex: Int64
    /// How many packets `data` holds.
    public var packetCount: Int
}

/// What a call to ``AudioFileStream/parse(_:discontinuity:)-(UnsafeRawBufferPointer,_)`` produced, in order.
public enum AudioFileStreamEvent: Sendable {
    /// A property is known (or changed): read its value from the stream.
    case property(AudioFileStreamProperty)
    /// Packets, with their descriptions, in order.
    case packets(AudioFilePackets)
    /// The container keeps what comes next elsewhere (an MP4 index after its media data): push
    /// bytes from this absolute offset on. Only when the stream was created with `sourceIsSeekable`.
    case seekRequired(byteOffset: Int64)
    /// Segmented mode: the first presentation time stated in a segment begun with
    /// ``AudioFileStream/beginSegment(initializationSection:)``, before the segment's packets.
    case segmentTimestamp(AudioStreamTimestamp)
    /// Segmented mode: timed metadata — an ID3 tag at a segment's head or a PES of a transport
    /// stream's ID3 metadata stream (`0x15`).
    case timedMetadata(AudioFileMetadata)
    /// What is known of one link of a chained stream (Ogg: a new logical stream after an end of
    /// stream, as Icecast sends at every track change): when a link begins — the first right after
    /// ``AudioFileStreamProperty/readyToProducePackets`` — and again when its length becomes known,
    /// before the packets it ends with. The packets after a link's first event are its packets,
    /// to be decoded by a new decoder for its format and cookie, with its own trims.
    case link(AudioStreamLink)
}

extension Array where Element == AudioStreamLink {
    /// Where valid frame `frame` of a chain lies (its links played one after another, each
    /// trimmed): the link, and the frame's decoded position in the whole stream (every link's
    /// priming and remainder counted). A link whose length is not known yet reaches to the end.
    /// nil for a frame past the last link's end.
    public func locate(validFrame frame: Int64) -> (link: AudioStreamLink, decodedFrame: Int64)? {
        var before: Int64 = 0
        for link in self {
            let valid = link.validFrames ?? .max
            if frame - before < valid {
                return (link, link.firstFrame + Int64(link.primingFrames) + Swift.max(frame - before, 0))
            }
            before += valid
        }
        return nil
    }

    /// The link holding packet `packet` (the last whose first packet is at or before it).
    public func link(holdingPacket packet: Int64) -> AudioStreamLink? {
        last { $0.firstPacket <= packet } ?? first
    }
}

/// One link of a chained stream: another encode, with its own format, cookie, gapless numbers
/// and tags, whose packets follow the previous link's in the stream's packet numbering.
public struct AudioStreamLink: Hashable, Sendable {
    /// 0 for the first link.
    public var index: Int
    /// The stream's index of the link's first audio packet.
    public var firstPacket: Int64
    /// Decoded frames of the links before it (their priming and remainder included).
    public var firstFrame: Int64
    /// The link's format.
    public var format: AudioStreamDescription
    /// What the link's decoder needs besides its packets.
    public var magicCookie: [UInt8]?
    /// The speakers of the link's channels, when known.
    public var channelLayout: AudioChannelLayout?
    /// The link's tags.
    public var metadata: AudioFileMetadata
    /// Frames to drop at the link's start (Opus pre-skip, a stream that starts before granule 0).
    public var primingFrames: Int
    /// The link's playable frames and the frames to drop at its end, once its last page has been
    /// read (nil before).
    public var validFrames: Int64?
    /// Frames to drop at the link's end, once its last page has been read (nil before).
    public var remainderFrames: Int?

    /// A link of these values.
    public init(index: Int, firstPacket: Int64, firstFrame: Int64, format: AudioStreamDescription, magicCookie: [UInt8]?,
                channelLayout: AudioChannelLayout?, metadata: AudioFileMetadata, primingFrames: Int,
                validFrames: Int64? = nil, remainderFrames: Int? = nil) {
        self.index = index
        self.firstPacket = firstPacket
        self.firstFrame = firstFrame
        self.format = format
        self.magicCookie = magicCookie
        self.channelLayout = channelLayout
        self.metadata = metadata
        self.primingFrames = primingFrames
        self.validFrames = validFrames
        self.remainderFrames = remainderFrames
    }
}

/// A presentation time as a container states it: `ticks` at `perSecond` ticks a second.
public struct AudioStreamTimestamp: Hashable, Sendable {
    /// Where the time was read.
    public enum Source: String, Hashable, Sendable {
        /// A transport stream's PES header (90 kHz, unwrapped past 2^33).
        case pesPTS = "PES PTS"
        /// The ID3 PRIV frame `com.apple.streaming.transportStreamTimestamp` of packed audio (90 kHz).
        case id3 = "ID3 transportStreamTimestamp"
        /// A movie fragment's `tfdt` base media decode time, in the track's media timescale.
        case tfdt = "tfdt"
    }
    /// The time in units of `perSecond`.
    public var ticks: Int64
    /// Units per second (90 000 for MPEG-TS, the track's timescale for `tfdt`).
    public var perSecond: Int64
    /// Where the time was read.
    public var source: Source
    /// The time in seconds.
    public var seconds: Double { Double(ticks) / Double(perSecond) }

    /// A time of `ticks` units of `perSecond` each, read from `source`.
    public init(ticks: Int64, perSecond: Int64, source: Source) {
        self.ticks = ticks
        self.perSecond = perSecond
        self.source = source
    }
}

/// Where a packet starts, and whether that is known or estimated.
public struct AudioFileStreamSeekResult: Hashable, Sendable {
    /// The byte offset to read from.
    public var byteOffset: Int64
    /// True when derived from a bit rate or a coarse table rather than an exact packet index.
    public var isEstimated: Bool
}
