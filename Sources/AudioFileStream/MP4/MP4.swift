import BufferQueue

/// ISO base media / MP4 / M4A: the first audio track, its samples listed in `moov`, in movie
/// fragments (`moof`/`traf`/`tfhd`/`trun` after a `moov` with `mvex`), or both.
final class MP4Parser: ContainerParser, PacketLocating {
    /// Largest `moov` read into memory.
    static let moovCap = 64 << 20
    /// Largest audio sample accepted.
    static let sampleCap = 1 << 20
    /// Most samples a track may claim.
    static let sampleCountCap = 50_000_000
    /// Largest `moof` read into memory.
    static let moofCap = 16 << 20
    /// Largest `emsg` read (larger ones are skipped).
    static let emsgCap = 1 << 20
    /// `emsg` schemes whose message is an ID3 tag.
    static let id3Schemes: Set<String> = ["https://aomedia.org/emsg/ID3", "https://developer.apple.com/streaming/emsg-id3"]

    private let seekable: Bool
    private enum State {
        case boxHeader
        case collectingMoov(size: Int, start: Int64)
        case collectingMoof(size: Int, start: Int64)
        case collectingEmsg(size: Int, start: Int64)
        case samples(end: Int64?)
        case done
    }
    private var state = State.boxHeader
    private var track: Track?
    /// An `mdat` met before `moov`: where it starts and ends.
    private var earlyMdat: (start: Int64, end: Int64)?
    private var nextSample = 0
    private var lastBox: (type: String, start: Int64)?
    /// Every `mdat` met after the index, for a seek into a fragment to know where its media ends.
    private var mdatRanges: [(start: Int64, end: Int64?)] = []
    /// Movie fragments read (a fragment's samples are appended to the track's tables).
    private var fragmentsSeen = 0
    /// AAC whose config leaves SBR and PS open: the `moov` body, kept until the first packets
    /// have been scanned for them (``AACExtensionScan``); readiness is announced after that.
    private var pendingScan: (body: [UInt8], start: Int64)?

    struct Track {
        var format: AudioStreamDescription
        var formatList: [AudioStreamDescription]
        var cookie: [UInt8]?
        var samples: MP4SampleTable
        /// (sample count, duration in media timescale) runs from `stts`.
        var durations: [(count: Int, delta: Int)]
        var mediaTimescale: Int
        /// Media timescale units to output frames.
        var frameScale: Double
        /// Decoded output frames of every packet (the best reading's frames per packet).
        var framesPerPacket: Int
        /// The track's id (`tkhd`), which fragments name.
        var trackID = 0
        /// Whether the movie has fragments (`mvex`), and the track's defaults from its `trex`.
        var fragmented = false
        var defaultSampleSize = 0
        var defaultSampleDuration = 0
        /// The edit list's media time (the priming, in media timescale units), 0 when none.
        var editMediaTime: Int64 = 0
        /// Fragment samples whose `trun` duration is shorter than a packet's frames: their index,
        /// and the output frames they present (the end of a presentation).
        var shortSamples: [Int: Int] = [:]
        /// Opus's pre-skip from `dOps`: the priming when no edit list says otherwise.
        var opusPreSkip: Int?
    }
    /// Frames of the packets emitted so far, as the codec counts them (Opus, FLAC).
    private var emittedFrames: Int64 = 0
    /// Segmented mode: the decoded frame of each fragment's first sample (from `tfdt`), by sample
    /// index, and the decoded frame of the next packet.
    private var fragmentStarts: [Int: Int64] = [:]
    private var decodedPosition: Int64 = 0

    init(seekable: Bool) { self.seekable = seekable }

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        while true {
            if input.skipPending > 0 { return }   // the next decision needs the bytes after the skip
            switch state {
            case .done:
                input.skip(Int64(input.available))
                return
            case .collectingMoof(let size, let start):
                guard input.available >= size else { return }
                let body = input.bytes(0, size)
                input.consume(size)
                state = .boxHeader
                try readMoof(body, at: start, boxStart: start - 8, out)
            case .collectingEmsg(let size, let start):
                guard input.available >= size else { return }
                let body = input.bytes(0, size)
                input.consume(size)
                state = .boxHeader
                readEmsg(body, at: start, out)
            case .collectingMoov(let size, let start):
                guard input.available >= size else { return }
                let body = input.bytes(0, size)
                input.consume(size)
                state = .boxHeader
                try readMoov(body, at: start, out)
                if let mdat = earlyMdat, let track {
                    // The index came after the media: go back to the first sample, once.
                    earlyMdat = nil
                    let first = track.samples.firstOffset ?? mdat.start
                    input.reset(to: first)
                    out.requestSeek(to: first)
                    state = .samples(end: nil)
                    return
                }
            case .samples(let end):
                guard let track else { state = .boxHeader; continue }
                if pendingScan != nil {
                    guard let packets = packetsToScan(input, track, end: end) else { return }
                    try finishScan(packets, out)
                    continue
                }
                while nextSample < track.samples.count {
                    let (offset, size) = track.samples[nextSample]
                    if let end, offset + Int64(size) > end { break }   // in a later mdat
                    if offset < input.position {
                        throw AudioFileStreamError(.invalidData, .mp4, offset,
                            "sample \(nextSample) lies at byte \(offset), before the current position \(input.position); samples out of order are not supported")
                    }
                    if offset > input.position {
                        input.skip(offset - input.position)
                        if input.position < offset { return }
                    }
                    guard input.available >= size else { return }
                    var frames = frames(ofSample: nextSample, track)
                    // In segments (HLS), a shortened AAC or MP3 sample is not an end trim: ffmpeg's
                    // muxer shortens the last one to its segment durations' total (the `EXTINF`s,
                    // taken from the source's edit list in milliseconds), an estimate that can end
                    // before the audio does. Every decoded frame plays, as ffmpeg plays it. (A file's
                    // trims come from its packet table; segmented Opus's end is its link's, below.)
                    // Packets of varying frames keep every duration until here: taken as read.
                    let stated = track.framesPerPacket == 0 ? self.track?.shortSamples.removeValue(forKey: nextSample) : track.shortSamples[nextSample]
                    switch track.format.formatID {
                    case .appleLossless: frames = input.alacPacketFrames(size: size, full: frames)
                    case .amr, .amrWideband: frames = input.amrPacketFrames(size: size, wideband: track.format.formatID == .amrWideband, fallback: frames)
                    case .opus: frames = input.withBytes(size) { OpusHeader.samples(inPacket: $0) } ?? frames
                    case .flac: frames = input.withBytes(min(size, 16)) { bytes in FLACFrameHeader.parse({ bytes[$0] }, available: bytes.count) }.blockSize ?? frames
                    default: break
                    }
                    // Segmented Opus: a shortened sample presents the end of the stream: its link's
                    // length, announced before the packet.
                    if let start = fragmentStarts.removeValue(forKey: nextSample) { decodedPosition = start }
                    if out.segmented, track.format.formatID == .opus, let presented = stated, presented < frames, var link = out.links.first {
                        let end = decodedPosition + Int64(presented)
                        link.validFrames = max(end - Int64(link.primingFrames), 0)
                        link.remainderFrames = frames - presented
                        out.links = [link]
                        out.link(link)
                    }
                    out.emitPacket(from: input, size: size, frames: frames)
                    emittedFrames += Int64(frames)
                    decodedPosition += Int64(frames)
                    nextSample += 1
                }
                if nextSample >= track.samples.count && !track.fragmented {
                    state = .done
                    continue
                }
                guard let end else {
                    if track.fragmented { state = .boxHeader; continue }   // the next fragment's boxes follow
                    return
                }
                if input.position < end { input.skip(end - input.position); if input.position < end { return } }
                state = .boxHeader
            case .boxHeader:
                guard input.available >= 8 else { return }
                var size = Int64(input.u32be(0))
                let type = input.tag(4)
                let start = input.position
                var headerLength = 8
                if size == 1 {
                    guard input.available >= 16 else { return }
                    size = Int64(bitPattern: input.u64be(8))
                    headerLength = 16
                }
                let toEnd = size == 0
                if !toEnd && size < Int64(headerLength) {
                    throw AudioFileStreamError(.invalidData, .mp4, start, "box '\(type)' has size \(size), smaller than its header")
                }
                lastBox = (type, start)
                input.consume(headerLength)
                let bodySize = toEnd ? nil : size - Int64(headerLength)
                switch type {
                case "moov" where track != nil:
                    // Already read (the index came after the media and we went back for it).
                    if let bodySize { input.skip(bodySize) } else { state = .done }
                case "moov":
                    guard let bodySize else {
                        throw AudioFileStreamError(.invalidData, .mp4, start, "the moov box has size 0 (to the end of the file); cannot read it")
                    }
                    guard bodySize <= Int64(Self.moovCap) else {
                        throw AudioFileStreamError(.tooLarge, .mp4, start, "the moov box claims \(size) bytes; at most \(Self.moovCap) are read")
                    }
                    state = .collectingMoov(size: Int(bodySize), start: start + Int64(headerLength))
                case "emsg" where out.segmented && (bodySize ?? Int64.max) <= Int64(Self.emsgCap):
                    // An event message (CMAF timed metadata): read in segmented mode, skipped otherwise.
                    state = .collectingEmsg(size: Int(bodySize ?? 0), start: input.position)
                case "moof" where track?.fragmented == true:
                    guard let bodySize, bodySize <= Int64(Self.moofCap) else {
                        throw AudioFileStreamError(.tooLarge, .mp4, start, "the moof box claims \(size) bytes; at most \(Self.moofCap) are read")
                    }
                    guard headerLength == 8 else {
                        throw AudioFileStreamError(.unsupportedDataFormat, .mp4, start, "a moof box with a 64-bit size is not supported")
                    }
                    state = .collectingMoof(size: Int(bodySize), start: start + 8)
                case "mdat":
                    let end = bodySize.map { input.position + $0 }
                    if track != nil {
                        mdatRanges.append((input.position, end))
                        state = .samples(end: end)
                    } else if seekable, let end {
                        earlyMdat = (input.position, end)
                        input.reset(to: end)
                        out.requestSeek(to: end)
                        return
                    } else {
                        throw AudioFileStreamError(.indexAfterMediaData, .mp4, start, seekable
                            ? "the mdat box extends to the end of the file and no moov came before it"
                            : "the index (moov) follows the media data (mdat at byte \(start)); the source cannot seek, so the file cannot be read as it arrives. Read it from a seekable source, or move moov to the front (ffmpeg -movflags +faststart)")
                    }
                default:
                    if let bodySize { input.skip(bodySize) } else { state = .done }
                }
            }
        }
    }

    /// The first packets for the SBR/PS scan, from the bytes at hand: nil while more must come.
    /// Samples far ahead (another track's data between) are not waited for.
    private func packetsToScan(_ input: ByteInput, _ track: Track, end: Int64?) -> [[UInt8]]? {
        var packets: [[UInt8]] = []
        for index in nextSample..<min(nextSample + AACExtensionScan.packetsToScan, track.samples.count) {
            let (offset, size) = track.samples[index]
            let ahead = offset - input.position
            if let end, offset + Int64(size) > end { break }
            guard ahead >= 0, ahead + Int64(size) <= 256 * 1024 else { break }
            guard ahead + Int64(size) <= Int64(input.available) else {
                if input.atEnd { break }
                return nil
            }
            packets.append(input.bytes(Int(ahead), size))
        }
        return packets
    }

    /// Reads the index again with what the scan found (formats, frame counts and gapless
    /// numbers at the SBR output rate, as for explicit signalling), then announces readiness.
    private func finishScan(_ packets: [[UInt8]], _ out: StreamOutput) throws {
        guard let (body, start) = pendingScan, let old = track else { return }
        pendingScan = nil
        let finding = AACExtensionScan.scan(packets, monoCore: old.format.channelsPerFrame == 1)
        if finding.sbr {
            let state = self.state, warnings = out.warnings.count
            try readMoov(body, at: start, out, inBand: finding)
            self.state = state
            out.warnings.removeSubrange(warnings...)   // the same index: its warnings were given
            // Samples that fragments added stay.
            track?.samples = old.samples
            track?.durations = old.durations
        }
        out.announceReady()
    }

    /// Every AAC or MP3 packet decodes to the codec's frame size, whatever duration `stts` gives
    /// it (a shortened last sample is padding the trims remove, not fewer decoded frames).
    private func frames(ofSample index: Int, _ track: Track) -> Int { track.framesPerPacket }

    // MARK: moov

    private struct Box { let type: String; let body: Range<Int>; let start: Int64 }

    /// The boxes in `bytes[range]`.
    private func boxes(_ bytes: [UInt8], _ range: Range<Int>, base: Int64) throws -> [Box] {
        var result: [Box] = []
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            var r = FieldReader(bytes, from: offset, to: range.upperBound, base: base, container: .mp4)
            var size = Int64(try r.u32be("a box size"))
            let type = latin1(try r.u32be("a box type"))
            if size == 1 { size = Int64(bitPattern: try r.u64be("a 64-bit box size")) }
            if size == 0 { size = Int64(range.upperBound - offset) }
            let header = r.offset - offset
            guard size >= Int64(header), size <= Int64(range.upperBound - offset) else {
                throw AudioFileStreamError(.invalidData, .mp4, base + Int64(offset), "box '\(type)' claims \(size) bytes but its parent has \(range.upperBound - offset) left")
            }
            result.append(Box(type: type, body: (offset + header)..<(offset + Int(size)), start: base + Int64(offset)))
            offset += Int(size)
        }
        return result
    }

    private func readMoov(_ body: [UInt8], at start: Int64, _ out: StreamOutput, inBand: AACExtensionScan.Finding? = nil) throws {
        let base = start  // absolute offset of body[0]
        let children = try boxes(body, 0..<body.count, base: base)
        var movieTimescale = 0
        var iTunSMPB: String?
        for box in children {
            switch box.type {
            case "mvhd":
                var r = FieldReader(body, from: box.body.lowerBound, to: box.body.upperBound, base: base, container: .mp4)
                let version = try r.u8(); try r.skip(3)
                try r.skip(version == 1 ? 16 : 8)
                movieTimescale = Int(try r.u32be("the movie timescale"))
            case "udta":
                try readUdta(body, box, base: base, out, iTunSMPB: &iTunSMPB)
            default: break
            }
        }
        for box in children where box.type == "trak" {
            if let found = try readTrak(body, box, base: base, movieTimescale: movieTimescale, iTunSMPB: iTunSMPB, inBand: inBand, out) {
                track = found
                break
            }
        }
        guard var track else {
            throw AudioFileStreamError(.noAudio, .mp4, start, "the moov box has no audio track this library reads (AAC, MP3, ALAC or AMR)")
        }
        if let mvex = children.first(where: { $0.type == "mvex" }) {
            track.fragmented = true
            for trex in try boxes(body, mvex.body, base: base) where trex.type == "trex" {
                var r = FieldReader(body, from: trex.body.lowerBound + 4, to: trex.body.upperBound, base: base, container: .mp4)
                guard Int(try r.u32be("the trex track id")) == track.trackID else { continue }
                _ = try r.u32be()
                track.defaultSampleDuration = Int(try r.u32be())
                track.defaultSampleSize = Int(try r.u32be())
            }
            self.track = track
        }
        out.dataFormat = track.format
        out.formatList = track.formatList
        out.magicCookie = track.cookie
        switch track.format.formatID {
        case .opus: out.channelLayout = .vorbis(channels: track.format.channelsPerFrame)
        case .flac: out.channelLayout = .wave(channels: track.format.channelsPerFrame)
        default: out.channelLayout = .default(channels: track.format.channelsPerFrame)
        }
        out.dataOffset = track.samples.firstOffset
        if !track.fragmented { out.audioDataPacketCount = Int64(track.samples.count) }
        let bytes = track.samples.totalBytes
        out.audioDataByteCount = bytes
        out.maximumPacketSize = Int(track.samples.maximumSize)
        if track.fragmented {
            // Samples to come in fragments: the codec's own bound (AAC: 6 144 bits per channel).
            let bound: Int
            switch track.format.formatID {
            case .aacLC, .heAAC, .heAACv2: bound = 768 * max(track.format.channelsPerFrame, 1)
            case .mpegLayer3: bound = 2881
            case .appleLossless: bound = ALACSpecificConfig(cookie: track.cookie ?? []).map { $0.maxFrameBytes > 0 ? $0.maxFrameBytes : $0.frameLength * $0.channels * 4 + 64 } ?? Self.sampleCap
            case .amr, .amrWideband: bound = 61 * max(track.format.framesPerPacket / 160, 1)
            default: bound = Self.sampleCap
            }
            out.maximumPacketSize = max(out.maximumPacketSize ?? 0, bound)
        }
        let totalUnits = track.durations.reduce(0) { $0 + $1.count * $1.delta }
        if totalUnits > 0, track.mediaTimescale > 0 {
            out.bitRate = Int(Double(bytes) * 8 * Double(track.mediaTimescale) / Double(totalUnits))
        }
        if inBand == nil, track.format.formatID == .aacLC, let cookie = track.cookie,
           AudioSpecificConfig(cookie)?.withInBand(AACExtensionScan.Finding(sbr: true, ps: false)) != nil {
            pendingScan = (body, start)   // ready once the first packets have been looked into
        } else if inBand == nil {
            out.announceReady()
            announceSegmentedLink(track, out)
        }
        if earlyMdat == nil { state = .boxHeader }
    }

    /// Segmented mode (HLS), Opus: its priming (the edit list's media time, or the dOps pre-skip)
    /// is reported as the stream's one link, whose length a shortened last sample gives later
    /// (``emitPacket``); HLS has no other gapless numbers, and Opus's pre-skip must not be heard.
    private func announceSegmentedLink(_ track: Track, _ out: StreamOutput) {
        guard out.segmented, track.fragmented, track.format.formatID == .opus else { return }
        let priming = track.editMediaTime > 0 ? Int(clampedInt64(Double(track.editMediaTime) * track.frameScale)) : track.opusPreSkip ?? 0
        let link = AudioStreamLink(index: 0, firstPacket: 0, firstFrame: 0, format: track.format, magicCookie: track.cookie,
                                   channelLayout: out.channelLayout, metadata: out.metadata, primingFrames: priming)
        out.links = [link]
        out.link(link)
    }

    private func readUdta(_ body: [UInt8], _ udta: Box, base: Int64, _ out: StreamOutput, iTunSMPB: inout String?) throws {
        for meta in try boxes(body, udta.body, base: base) where meta.type == "meta" {
            // ISO meta has version/flags; QuickTime's does not.
            var range = meta.body
            if range.count >= 8, String(decoding: body[(range.lowerBound + 4)..<(range.lowerBound + 8)], as: UTF8.self) != "hdlr" {
                range = (range.lowerBound + 4)..<range.upperBound
            }
            for ilst in try boxes(body, range, base: base) where ilst.type == "ilst" {
                for item in try boxes(body, ilst.body, base: base) {
                    var name = item.type
                    var freeform = false
                    var value: String?
                    for field in try boxes(body, item.body, base: base) {
                        if item.type == "covr", field.type == "data", field.body.count >= 8 {
                            // Cover art: the data type code says JPEG, PNG or BMP; no picture type.
                            let code = body[field.body.lowerBound + 3]
                            let image = Array(body[(field.body.lowerBound + 8)..<field.body.upperBound])
                            let facts = AudioFilePicture.imageFacts(image)
                            let mime = MP4TagWriter.coverTypes.first { $0.code == code }?.mimeType ?? facts?.mimeType ?? "image/"
                            out.metadata.pictures.append(AudioFilePicture(type: 3, mimeType: mime, description: "", width: facts?.width ?? 0,
                                                                          height: facts?.height ?? 0, data: image))
                            continue
                        }
                        if field.type == "name", field.body.count >= 4 {
                            name = String(decoding: body[(field.body.lowerBound + 4)..<field.body.upperBound], as: UTF8.self)
                            freeform = true
                        }
                        if field.type == "data", field.body.count >= 8 {
                            value = String(decoding: body[(field.body.lowerBound + 8)..<field.body.upperBound], as: UTF8.self)
                        }
                    }
                    guard let value else { continue }
                    switch name {
                    case "\u{A9}nam": out.metadata.title = value
                    case "\u{A9}ART": out.metadata.artist = value
                    case "\u{A9}alb": out.metadata.album = value
                    case "iTunSMPB": iTunSMPB = value
                    default:
                        // iTunes freeform (`----`) items by their name (replaygain_track_gain, …).
                        if freeform, !name.isEmpty { out.metadata.tags[name] = value }
                    }
                }
            }
        }
    }

    private func readTrak(_ body: [UInt8], _ trak: Box, base: Int64, movieTimescale: Int, iTunSMPB: String?,
                          inBand: AACExtensionScan.Finding?, _ out: StreamOutput) throws -> Track? {
        func child(_ parent: Box, _ type: String) throws -> Box? { try boxes(body, parent.body, base: base).first { $0.type == type } }
        var trackID = 0
        if let tkhd = try child(trak, "tkhd") {
            var r = FieldReader(body, from: tkhd.body.lowerBound, to: tkhd.body.upperBound, base: base, container: .mp4)
            let version = try r.u8(); try r.skip(3)
            try r.skip(version == 1 ? 16 : 8)
            trackID = Int(try r.u32be("the track id"))
        }
        guard let mdia = try child(trak, "mdia"), let hdlr = try child(mdia, "hdlr"), hdlr.body.count >= 12,
              String(decoding: body[(hdlr.body.lowerBound + 8)..<(hdlr.body.lowerBound + 12)], as: UTF8.self) == "soun",
              let mdhd = try child(mdia, "mdhd"), let minf = try child(mdia, "minf"), let stbl = try child(minf, "stbl"),
              let stsd = try child(stbl, "stsd") else { return nil }
        var r = FieldReader(body, from: mdhd.body.lowerBound, to: mdhd.body.upperBound, base: base, container: .mp4)
        let version = try r.u8(); try r.skip(3)
        try r.skip(version == 1 ? 16 : 8)
        let timescale = Int(try r.u32be("the media timescale"))
        let mediaDuration = version == 1 ? Int64(bitPattern: try r.u64be()) : Int64(try r.u32be())
        guard timescale > 0 else { throw AudioFileStreamError(.invalidData, .mp4, mdhd.start, "the media timescale is 0") }

        // Sample durations (stts), as runs.
        var durations: [(count: Int, delta: Int)] = []
        if let stts = try child(stbl, "stts") {
            var r = FieldReader(body, from: stts.body.lowerBound + 4, to: stts.body.upperBound, base: base, container: .mp4)
            let entries = Int(try r.u32be("the stts entry count"))
            guard entries <= r.remaining / 8 else { throw AudioFileStreamError(.invalidData, .mp4, stts.start, "stts claims \(entries) entries in \(r.remaining) bytes") }
            for _ in 0..<entries {
                let count = Int(try r.u32be()), delta = Int(try r.u32be())
                guard count <= Self.sampleCountCap, delta <= 1 << 24 else {
                    throw AudioFileStreamError(.invalidData, .mp4, stts.start, "stts gives \(count) samples a duration of \(delta) each")
                }
                durations.append((count, delta))
            }
        }
        // Sample description: the first entry.
        r = FieldReader(body, from: stsd.body.lowerBound + 8, to: stsd.body.upperBound, base: base, container: .mp4)
        let entryStart = r.offset
        let entrySize = Int(try r.u32be("the sample entry size"))
        let entryType = try r.tag()
        guard entrySize >= 36, entryStart + entrySize <= stsd.body.upperBound else {
            throw AudioFileStreamError(.invalidData, .mp4, stsd.start, "the sample entry '\(entryType)' has size \(entrySize)")
        }
        try r.skip(8)
        let soundVersion = Int(try r.u16be()); try r.skip(6)
        let channels = Int(try r.u16be("the channel count")); try r.skip(6)
        let entryRate = Int(try r.u32be("the sample rate") >> 16)
        try r.skip(soundVersion == 1 ? 16 : soundVersion == 2 ? 36 : 0)
        let entry = Box(type: entryType, body: r.offset..<(entryStart + entrySize), start: base + Int64(entryStart))

        var format: AudioStreamDescription
        var formatList: [AudioStreamDescription]
        var cookie: [UInt8]?
        var frameScale = 1.0
        var note: String?
        var opusPreSkip: Int?
        switch entryType {
        case "mp4a":
            guard let esds = try boxes(body, entry.body, base: base).first(where: { $0.type == "esds" }), esds.body.count > 4 else {
                throw AudioFileStreamError(.invalidData, .mp4, entry.start, "the mp4a sample entry has no esds box")
            }
            guard let (objectType, config) = audioSpecificConfig(fromESDescriptor: Array(body[(esds.body.lowerBound + 4)..<esds.body.upperBound])) else {
                throw AudioFileStreamError(.invalidData, .mp4, esds.start, "the esds box holds no decoder configuration")
            }
            if objectType == 0x69 || objectType == 0x6B {
                let rate = Double(entryRate > 0 ? entryRate : timescale)
                format = AudioStreamDescription(sampleRate: rate, formatID: .mpegLayer3, bytesPerPacket: 0, framesPerPacket: rate < 32000 ? 576 : 1152,
                                                bytesPerFrame: 0, channelsPerFrame: max(channels, 1), bitsPerChannel: 0)
                formatList = [format]
            } else {
                guard [0x40, 0x66, 0x67, 0x68].contains(objectType), var asc = AudioSpecificConfig(config) else {
                    throw AudioFileStreamError(.unsupportedDataFormat, .mp4, esds.start, "object type 0x\(String(objectType, radix: 16)) is not AAC or MP3")
                }
                cookie = config
                if let inBand, let found = asc.withInBand(inBand) { asc = found }
                formatList = asc.formatList
                format = formatList.last ?? AudioStreamDescription(sampleRate: Double(asc.sampleRate), formatID: .aacLC, bytesPerPacket: 0, framesPerPacket: 1024, bytesPerFrame: 0, channelsPerFrame: max(channels, 1), bitsPerChannel: 0)
                if let best = formatList.first, best.sampleRate != Double(timescale) {
                    frameScale = best.sampleRate / Double(timescale)
                    note = "converted from the media timescale (\(timescale)) to the \(best.sampleRate == best.sampleRate.rounded() ? String(Int(best.sampleRate)) : String(best.sampleRate)) Hz output rate signalled for \(asc.profileName) (x\(frameScale))"
                }
            }
        case "alac":
            guard let box = try boxes(body, entry.body, base: base).first(where: { $0.type == "alac" }),
                  let config = ALACSpecificConfig(cookie: Array(body[(box.body.lowerBound - 8)..<box.body.upperBound])) else {
                throw AudioFileStreamError(.invalidData, .mp4, entry.start, "the alac sample entry has no usable ALACSpecificConfig box")
            }
            cookie = Array(body[(box.body.lowerBound - 8)..<box.body.upperBound])
            format = AudioStreamDescription(sampleRate: Double(config.sampleRate > 0 ? config.sampleRate : (entryRate > 0 ? entryRate : timescale)),
                                            formatID: .appleLossless, formatFlags: AudioFormatFlags(rawValue: UInt32(CAFParser.alacFlag(bitDepth: config.bitDepth))),
                                            bytesPerPacket: 0, framesPerPacket: config.frameLength, bytesPerFrame: 0,
                                            channelsPerFrame: config.channels, bitsPerChannel: 0)
            formatList = [format]
        case "samr", "sawb":
            // 3GPP AMR: the damr box holds only the encoder's vendor and modes. A sample holds one
            // or more 20 ms frames; the first sample's duration says how many.
            let wideband = entryType == "sawb"
            let rate = wideband ? 16000.0 : 8000.0, perFrame = AMRFrame.frames(wideband: wideband)
            var perSample = 1
            if let first = durations.first {
                let delta = Double(first.delta) * rate / Double(timescale)
                perSample = max(1, min(Int((delta / Double(perFrame)).rounded()), 50))
            }
            format = AudioStreamDescription(sampleRate: rate, formatID: wideband ? .amrWideband : .amr, bytesPerPacket: 0,
                                            framesPerPacket: perFrame * perSample, bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)
            formatList = [format]
            if Double(timescale) != rate { frameScale = rate / Double(timescale) }
        case ".mp3":
            format = AudioStreamDescription(sampleRate: Double(entryRate), formatID: .mpegLayer3, bytesPerPacket: 0, framesPerPacket: entryRate < 32000 ? 576 : 1152,
                                            bytesPerFrame: 0, channelsPerFrame: max(channels, 1), bitsPerChannel: 0)
            formatList = [format]
        case "Opus":
            // Opus in ISOBMFF: dOps holds OpusHead's fields big-endian, without the magic.
            guard let box = try boxes(body, entry.body, base: base).first(where: { $0.type == "dOps" }), box.body.count >= 11 else {
                throw AudioFileStreamError(.invalidData, .mp4, entry.start, "the Opus sample entry has no dOps box")
            }
            let d = Array(body[box.body])
            let family = Int(d[10]), outputChannels = Int(d[1])
            guard family == 0 || d.count >= 13 + outputChannels else {
                throw AudioFileStreamError(.invalidData, .mp4, box.start, "the dOps box ends before its channel mapping table")
            }
            let header = OpusHeader(channels: outputChannels, preSkip: Int(d[2]) << 8 | Int(d[3]),
                                    inputSampleRate: d[4...7].reduce(0) { $0 << 8 | Int($1) }, outputGain: Int(Int16(bitPattern: UInt16(d[8]) << 8 | UInt16(d[9]))),
                                    mappingFamily: family, streamCount: family == 0 ? 1 : Int(d[11]),
                                    coupledCount: family == 0 ? outputChannels - 1 : Int(d[12]),
                                    mapping: family == 0 ? (outputChannels == 2 ? [0, 1] : [0]) : Array(d[13..<(13 + outputChannels)]))
            var why = ""
            guard OpusHeader(header.bytes, why: &why) != nil else {
                throw AudioFileStreamError(.invalidData, .mp4, box.start, "the dOps box: \(why)")
            }
            cookie = header.bytes
            opusPreSkip = header.preSkip
            let uniform = durations.count == 1 || (durations.count == 2 && durations[1].count == 1) ? durations.first?.delta ?? 0 : 0
            format = AudioStreamDescription(sampleRate: Double(OpusHeader.decodingRate), formatID: .opus, bytesPerPacket: 0,
                                            framesPerPacket: timescale == OpusHeader.decodingRate ? uniform : 0, bytesPerFrame: 0,
                                            channelsPerFrame: outputChannels, bitsPerChannel: 0)
            formatList = [format]
            if timescale != OpusHeader.decodingRate { frameScale = Double(OpusHeader.decodingRate) / Double(timescale) }
        case "fLaC":
            // FLAC in ISOBMFF: dfLa holds the metadata blocks (headers included), STREAMINFO first.
            guard let box = try boxes(body, entry.body, base: base).first(where: { $0.type == "dfLa" }),
                  let info = FLACStreamInfo(magicCookie: Array(body[box.body])) else {
                throw AudioFileStreamError(.invalidData, .mp4, entry.start, "the fLaC sample entry has no dfLa box with a STREAMINFO block")
            }
            cookie = info.magicCookie
            format = info.format
            formatList = [format]
        default:
            throw AudioFileStreamError(.unsupportedDataFormat, .mp4, entry.start,
                "the audio track's codec '\(entryType)' is not supported (mp4a, .mp3, alac, Opus, fLaC, samr and sawb are)")
        }

        let samples = try sampleTable(body, stbl, base: base)
        // Pre-roll: sgpd 'roll' (with sbgp mapping samples to it); AAC usually says -1 packet.
        if let sgpd = try boxes(body, stbl.body, base: base).first(where: { $0.type == "sgpd" }) {
            var g = FieldReader(body, from: sgpd.body.lowerBound, to: sgpd.body.upperBound, base: base, container: .mp4)
            let version = try g.u8(); try g.skip(3)
            if try g.tag() == "roll" {
                if version == 1 { try g.skip(4) }
                if version >= 2 { try g.skip(4) }
                if try g.u32be() > 0 { out.packetRollDistance = Int(Int16(bitPattern: try g.u16be("the roll distance"))) }
            }
        }
        let sttsSamples = durations.reduce(0) { $0 + $1.count }
        guard sttsSamples <= Self.sampleCountCap else {
            throw AudioFileStreamError(.tooLarge, .mp4, stbl.start, "stts covers \(sttsSamples) samples (at most \(Self.sampleCountCap))")
        }
        if sttsSamples != samples.count {
            out.warn(AudioFileStreamError(.invalidData, .mp4, stbl.start, "stts covers \(sttsSamples) samples, stsz lists \(samples.count)"))
        }
        let totalUnits = Int64(durations.reduce(0) { $0 + $1.count * $1.delta })   // <= 2^26 * 2^24 per entry: no overflow
        let framesPerPacket = formatList.first?.framesPerPacket ?? format.framesPerPacket
        // ALAC packets hold what their durations say (the last one is short, and says so in its
        // header); AAC and MP3 packets always decode to whole codec frames.
        let variable: Set<AudioFormatID> = [.appleLossless, .amr, .amrWideband, .opus, .flac]
        let decodedFrames = variable.contains(format.formatID) && sttsSamples == samples.count && totalUnits > 0
            ? clampedInt64(Double(totalUnits) * frameScale) : Int64(samples.count * framesPerPacket)

        // Gapless numbers: the edit list against the media timescale, else iTunSMPB, else the
        // sample durations (a shortened last sample). Output frames; the remainder is what the
        // decoder outputs beyond priming + valid.
        var editMediaTime: Int64 = 0
        if let edts = try child(trak, "edts"), let elst = try boxes(body, edts.body, base: base).first(where: { $0.type == "elst" }) {
            r = FieldReader(body, from: elst.body.lowerBound, to: elst.body.upperBound, base: base, container: .mp4)
            let version = try r.u8(); try r.skip(3)
            let entries = Int(try r.u32be())
            for _ in 0..<min(entries, 16) {
                let segment = version == 1 ? Int64(bitPattern: try r.u64be()) : Int64(try r.u32be())
                let mediaTime = version == 1 ? Int64(bitPattern: try r.u64be()) : Int64(Int32(bitPattern: try r.u32be()))
                try r.skip(4)
                guard mediaTime >= 0 else { continue }   // an empty edit
                editMediaTime = mediaTime
                guard mediaTime <= totalUnits, mediaDuration >= 0, segment >= 0 else { break }
                let fromHeader = mediaDuration - mediaTime
                let fromEdit = movieTimescale > 0 ? clampedInt64(Double(segment) * Double(timescale) / Double(movieTimescale)) : fromHeader
                let tolerance = movieTimescale > 0 ? Int64((Double(timescale) / Double(movieTimescale)).rounded(.up)) : 0
                // mdhd is exact where it excludes the padding; otherwise the (rounded) edit duration.
                var valid = abs(fromEdit - fromHeader) <= tolerance ? fromHeader : min(fromEdit, fromHeader)
                valid = min(valid, totalUnits - mediaTime)
                let primingOut = clampedInt64(Double(mediaTime) * frameScale)
                let validOut = clampedInt64(Double(valid) * frameScale)
                if valid > 0, primingOut + validOut <= decodedFrames, mediaTime > 0 || validOut < decodedFrames {
                    out.packetTableInfo = AudioFilePacketTableInfo(validFrames: validOut, primingFrames: Int(primingOut),
                        remainderFrames: Int(decodedFrames - primingOut - validOut), source: .editList, note: note)
                }
                break
            }
        }
        if out.packetTableInfo == nil, let text = iTunSMPB, let smpb = parseITunSMPB(text) {
            out.packetTableInfo = AudioFilePacketTableInfo(validFrames: smpb.valid, primingFrames: smpb.priming, remainderFrames: smpb.remainder,
                                                           source: .iTunSMPB, note: frameScale != 1 ? "iTunSMPB taken as given (output frames); \(note ?? "")" : nil)
        }
        // Opus without an edit list: its pre-skip (dOps) is the priming, the durations the rest.
        if out.packetTableInfo == nil, let preSkip = opusPreSkip, decodedFrames > Int64(preSkip) {
            out.packetTableInfo = AudioFilePacketTableInfo(validFrames: decodedFrames - Int64(preSkip), primingFrames: preSkip, remainderFrames: 0,
                                                           source: .sampleDurations, note: "the Opus pre-skip of the dOps box")
        }
        let presentedOut = clampedInt64(Double(totalUnits) * frameScale)
        if out.packetTableInfo == nil, presentedOut > 0, presentedOut < decodedFrames, decodedFrames - presentedOut < Int64(framesPerPacket) {
            out.packetTableInfo = AudioFilePacketTableInfo(validFrames: presentedOut, primingFrames: 0,
                remainderFrames: Int(decodedFrames - presentedOut), source: .sampleDurations, note: note)
        }
        return Track(format: format, formatList: formatList, cookie: cookie, samples: samples, durations: durations,
                     mediaTimescale: timescale, frameScale: frameScale, framesPerPacket: framesPerPacket, trackID: trackID,
                     editMediaTime: editMediaTime, opusPreSkip: opusPreSkip)
    }

    // MARK: movie fragments

    /// An event message box (ISO/IEC 23009-1 `emsg`, versions 0 and 1): an ID3 tag in one of
    /// the ID3 schemes is reported as timed metadata; other messages (and damaged boxes) are
    /// passed over.
    private func readEmsg(_ body: [UInt8], at start: Int64, _ out: StreamOutput) {
        var r = FieldReader(body, base: start, container: .mp4)
        func string() -> String? {
            guard let end = body[r.offset...].firstIndex(of: 0) else { return nil }
            let text = String(decoding: body[r.offset..<end], as: UTF8.self)
            r.offset = end + 1
            return text
        }
        guard let versionAndFlags = try? r.u32be() else { return }
        let scheme: String?
        if versionAndFlags >> 24 == 0 {
            scheme = string()
            guard string() != nil, (try? r.skip(16)) != nil else { return }   // value, timescale, delta, duration, id
        } else {
            guard (try? r.skip(20)) != nil else { return }                     // timescale, time (64), duration, id
            scheme = string()
            guard string() != nil else { return }
        }
        guard let scheme, Self.id3Schemes.contains(scheme), r.offset < body.count else { return }
        out.timedMetadata(ID3v2.parse(Array(body[r.offset...])).metadata)
    }

    /// Appends the samples a `moof` lists for the track: each `traf` naming it gives a base
    /// offset (`tfhd`: explicit, the `moof`'s start, or after the previous run), defaults, and
    /// runs (`trun`) of samples with optional sizes and durations.
    private func readMoof(_ body: [UInt8], at start: Int64, boxStart: Int64, _ out: StreamOutput) throws {
        guard var track else { return }
        fragmentsSeen += 1
        var nextDataStart = boxStart   // where a traf without a base offset starts: the moof, then after the last run
        for traf in try boxes(body, 0..<body.count, base: start) where traf.type == "traf" {
            let children = try boxes(body, traf.body, base: start)
            guard let tfhd = children.first(where: { $0.type == "tfhd" }) else {
                throw AudioFileStreamError(.invalidData, .mp4, traf.start, "a track fragment has no tfhd box")
            }
            var r = FieldReader(body, from: tfhd.body.lowerBound, to: tfhd.body.upperBound, base: start, container: .mp4)
            let flags = try r.u32be("the tfhd flags") & 0xFF_FFFF
            guard Int(try r.u32be("the tfhd track id")) == track.trackID else { continue }
            if let tfdt = children.first(where: { $0.type == "tfdt" }), out.wantsSegmentTimestamp || out.segmented {
                var d = FieldReader(body, from: tfdt.body.lowerBound, to: tfdt.body.upperBound, base: start, container: .mp4)
                let version = try d.u32be("the tfdt version") >> 24
                let time = version == 1 ? Int64(bitPattern: try d.u64be("the base media decode time")) : Int64(try d.u32be("the base media decode time"))
                if out.wantsSegmentTimestamp {
                    out.segmentTimestamp(AudioStreamTimestamp(ticks: time, perSecond: Int64(track.mediaTimescale), source: .tfdt))
                }
                // Where the fragment's first sample lies in the stream's decoded frames (segmented
                // Opus: the end a shortened sample gives is counted from there).
                fragmentStarts[track.samples.count] = clampedInt64(Double(time) * track.frameScale)
            }
            var base = flags & 0x20000 != 0 ? boxStart : nextDataStart
            if flags & 0x1 != 0 { base = Int64(bitPattern: try r.u64be("the base data offset")) }
            if flags & 0x2 != 0 { _ = try r.u32be() }
            var defaultDuration = track.defaultSampleDuration, defaultSize = track.defaultSampleSize
            if flags & 0x8 != 0 { defaultDuration = Int(try r.u32be()) }
            if flags & 0x10 != 0 { defaultSize = Int(try r.u32be()) }
            var runStart = base
            for trun in children where trun.type == "trun" {
                var t = FieldReader(body, from: trun.body.lowerBound, to: trun.body.upperBound, base: start, container: .mp4)
                let runFlags = try t.u32be("the trun flags") & 0xFF_FFFF
                let count = Int(try t.u32be("the trun sample count"))
                if runFlags & 0x1 != 0 { runStart = base + Int64(Int32(bitPattern: try t.u32be("the trun data offset"))) }
                if runFlags & 0x4 != 0 { _ = try t.u32be() }
                let fieldBytes = [0x100, 0x200, 0x400, 0x800].filter { runFlags & $0 != 0 }.count * 4
                guard count <= t.remaining / max(fieldBytes, 1) || fieldBytes == 0, track.samples.count + count <= Self.sampleCountCap else {
                    throw AudioFileStreamError(.invalidData, .mp4, trun.start, "trun claims \(count) samples in \(t.remaining) bytes")
                }
                if let last = track.samples.lastOffset, count > 0, runStart < last {
                    throw AudioFileStreamError(.invalidData, .mp4, trun.start, "fragment \(fragmentsSeen) places a sample at byte \(runStart), before an earlier one (\(last))")
                }
                func addDurations(_ duration: Int, count: Int) {
                    if let last = track.durations.last, last.delta == duration {
                        track.durations[track.durations.count - 1].count += count
                    } else {
                        track.durations.append((count, duration))
                    }
                }
                if fieldBytes == 0 {
                    // Every sample of the default size and duration: one run, whatever its count.
                    guard count == 0 || (defaultSize > 0 && defaultSize <= Self.sampleCap && runStart >= 0) else {
                        throw AudioFileStreamError(.invalidData, .mp4, trun.start, "fragment \(fragmentsSeen) gives the \(count) samples of a run \(defaultSize) bytes each at byte \(runStart)")
                    }
                    let presented = Int((Double(defaultDuration) * track.frameScale).rounded())
                    if count == 1, presented > 0, presented < track.framesPerPacket || track.framesPerPacket == 0 {
                        // One sample of a shortened default duration (ffmpeg's last HLS fragment).
                        track.shortSamples[track.samples.count] = presented
                    }
                    track.samples.append(start: runStart, count: count, size: Int32(defaultSize))
                    if count > 0 { addDurations(defaultDuration, count: count) }
                    runStart += Int64(count) * Int64(defaultSize)
                } else {
                    var sizes: [Int32] = []
                    sizes.reserveCapacity(count)   // bounded by the box: each sample has its fields
                    var offset = runStart
                    for index in 0..<count {
                        var duration = defaultDuration, size = defaultSize
                        if runFlags & 0x100 != 0 { duration = Int(try t.u32be()) }
                        if runFlags & 0x200 != 0 { size = Int(try t.u32be()) }
                        if runFlags & 0x400 != 0 { _ = try t.u32be() }
                        if runFlags & 0x800 != 0 { _ = try t.u32be() }
                        guard size > 0, size <= Self.sampleCap, offset >= 0 else {
                            throw AudioFileStreamError(.invalidData, .mp4, trun.start, "fragment \(fragmentsSeen) gives sample \(index) of a run \(size) bytes at byte \(offset)")
                        }
                        sizes.append(Int32(size))
                        addDurations(duration, count: 1)
                        let presented = Int((Double(duration) * track.frameScale).rounded())
                        // (Packets of varying frames, Opus: every duration is kept until its packet
                        // is read, which says whether it was shortened.)
                        if presented > 0, presented < track.framesPerPacket || track.framesPerPacket == 0 {
                            track.shortSamples[track.samples.count + sizes.count - 1] = presented
                        }
                        offset += Int64(size)
                    }
                    track.samples.append(start: runStart, sizes: sizes)
                    runStart = offset
                }
            }
            nextDataStart = runStart
        }
        self.track = track
    }

    /// Each sample's absolute offset and size, from stsz/stz2, stsc and stco/co64: a run per chunk.
    private func sampleTable(_ body: [UInt8], _ stbl: Box, base: Int64) throws -> MP4SampleTable {
        let children = try boxes(body, stbl.body, base: base)
        // stsz sizes are read where they lie in `body` (from `listedAt`), checked first and never
        // copied: an hour of AAC lists 155 000 of them. stz2 sizes are unpacked into `sizes`.
        var sizes: [Int32] = []
        var listedAt: Int?
        var constantSize: Int32 = 0, sampleCount = 0
        if let stsz = children.first(where: { $0.type == "stsz" }) {
            var r = FieldReader(body, from: stsz.body.lowerBound + 4, to: stsz.body.upperBound, base: base, container: .mp4)
            let constant = Int(try r.u32be("the constant sample size")), count = Int(try r.u32be("the sample count"))
            guard count <= Self.sampleCountCap else { throw AudioFileStreamError(.tooLarge, .mp4, stsz.start, "stsz claims \(count) samples") }
            if constant != 0 {
                guard constant <= Self.sampleCap else { throw AudioFileStreamError(.invalidData, .mp4, stsz.start, "stsz says every sample is \(constant) bytes") }
                constantSize = Int32(constant)
                sampleCount = count
            } else {
                guard count <= r.remaining / 4 else {
                    throw AudioFileStreamError(.invalidData, .mp4, stsz.start, "stsz claims \(count) sample sizes but holds \(r.remaining / 4)")
                }
                listedAt = r.offset
                for index in 0..<count {
                    let size = try r.u32be()
                    guard size > 0, size <= UInt32(Self.sampleCap) else {
                        throw AudioFileStreamError(.invalidData, .mp4, r.absoluteOffset - 4,
                            "stsz gives sample \(index) a size of \(size) bytes; audio samples are 1...\(Self.sampleCap) bytes")
                    }
                }
                sampleCount = count
            }
        } else if let stz2 = children.first(where: { $0.type == "stz2" }) {
            var r = FieldReader(body, from: stz2.body.lowerBound + 4, to: stz2.body.upperBound, base: base, container: .mp4)
            try r.skip(3)
            let field = Int(try r.u8()), count = Int(try r.u32be())
            guard [4, 8, 16].contains(field), count <= r.remaining * 8 / field else {
                throw AudioFileStreamError(.invalidData, .mp4, stz2.start, "stz2 has field size \(field) and claims \(count) samples")
            }
            var bits = BitReader(Array(body[r.offset..<stz2.body.upperBound]))
            for index in 0..<count {
                guard let size = bits.read(field), size > 0 else {
                    throw AudioFileStreamError(.invalidData, .mp4, stz2.start, "stz2 gives sample \(index) no size")
                }
                sizes.append(Int32(size))
            }
            sampleCount = count
        } else {
            throw AudioFileStreamError(.invalidData, .mp4, stbl.start, "the sample table has no stsz or stz2 box")
        }

        var chunkOffsets: [Int64] = []
        if let stco = children.first(where: { $0.type == "stco" || $0.type == "co64" }) {
            var r = FieldReader(body, from: stco.body.lowerBound + 4, to: stco.body.upperBound, base: base, container: .mp4)
            let count = Int(try r.u32be()), wide = stco.type == "co64"
            guard count <= r.remaining / (wide ? 8 : 4) else {
                throw AudioFileStreamError(.invalidData, .mp4, stco.start, "\(stco.type) claims \(count) chunks in \(r.remaining) bytes")
            }
            for _ in 0..<count { chunkOffsets.append(wide ? Int64(bitPattern: try r.u64be()) : Int64(try r.u32be())) }
        } else {
            throw AudioFileStreamError(.invalidData, .mp4, stbl.start, "the sample table has no stco or co64 box")
        }
        guard let stsc = children.first(where: { $0.type == "stsc" }) else {
            throw AudioFileStreamError(.invalidData, .mp4, stbl.start, "the sample table has no stsc box")
        }
        var r = FieldReader(body, from: stsc.body.lowerBound + 4, to: stsc.body.upperBound, base: base, container: .mp4)
        let runs = Int(try r.u32be())
        guard runs <= r.remaining / 12 else { throw AudioFileStreamError(.invalidData, .mp4, stsc.start, "stsc claims \(runs) entries in \(r.remaining) bytes") }
        var table: [(firstChunk: Int, samples: Int)] = []
        for _ in 0..<runs {
            let first = Int(try r.u32be()), samples = Int(try r.u32be()); try r.skip(4)
            table.append((first, samples))
        }
        var samples = MP4SampleTable()
        samples.reserveListed(constantSize > 0 ? 0 : sampleCount)
        var sample = 0
        for (index, run) in table.enumerated() {
            let lastChunk = index + 1 < table.count ? table[index + 1].firstChunk - 1 : chunkOffsets.count
            guard run.firstChunk >= 1, lastChunk <= chunkOffsets.count, run.samples <= sampleCount else {
                throw AudioFileStreamError(.invalidData, .mp4, stsc.start, "stsc entry \(index) refers to chunks \(run.firstChunk)...\(lastChunk) of \(chunkOffsets.count)")
            }
            if run.firstChunk > lastChunk { continue }
            for chunk in run.firstChunk...lastChunk {
                let inChunk = min(run.samples, sampleCount - sample)
                if constantSize > 0 {
                    samples.append(start: chunkOffsets[chunk - 1], count: inChunk, size: constantSize)
                } else if let listedAt {
                    // Checked above: 4 bytes each, 1...sampleCap.
                    samples.append(start: chunkOffsets[chunk - 1], sizes: (sample..<(sample + inChunk)).lazy.map { index in
                        let at = listedAt + 4 * index
                        return Int32(body[at]) << 24 | Int32(body[at + 1]) << 16 | Int32(body[at + 2]) << 8 | Int32(body[at + 3])
                    })
                } else {
                    samples.append(start: chunkOffsets[chunk - 1], sizes: sizes[sample..<(sample + inChunk)])
                }
                sample += inChunk
                if sample == sampleCount { break }
            }
        }
        guard sample == sampleCount else {
            throw AudioFileStreamError(.invalidData, .mp4, stsc.start, "the chunk tables place \(sample) of \(sampleCount) samples")
        }
        return samples
    }

    // MARK: end, seeking, translation

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        if pendingScan != nil, let track {
            // The stream ended before the packets to scan: announce with what is there.
            try finishScan(packetsToScan(input, track, end: nil) ?? [], out)
            try parse(input, out)
        }
        if case .collectingMoov(let size, let start) = state {
            throw AudioFileStreamError(.truncated, .mp4, start - 8, "the moov box needs \(size) bytes but the stream ends after \(input.available)")
        }
        if case .boxHeader = state, input.available > 0 {
            throw AudioFileStreamError(.truncated, .mp4, input.position,
                "a box header starts here but the stream ends after \(input.available) of its bytes")
        }
        guard let track else {
            if let lastBox, input.skipPending > 0 {
                throw AudioFileStreamError(.truncated, .mp4, lastBox.start, "the '\(lastBox.type)' box runs past the end of the stream and no moov box was found")
            }
            throw AudioFileStreamError(.noAudio, .mp4, input.position, lastBox.map { "no moov box (the last box is '\($0.type)' at byte \($0.start))" } ?? "no moov box")
        }
        if track.samples.isEmpty {
            throw AudioFileStreamError(.noAudio, .mp4, input.position, track.fragmented
                ? "the movie is fragmented but no fragment (moof) lists samples of its audio track (id \(track.trackID))"
                : "the audio track lists no samples")
        }
        if nextSample < track.samples.count {
            throw AudioFileStreamError(.truncated, .mp4, input.position, "the sample tables list \(track.samples.count) samples but the stream ends after \(nextSample)")
        }
        if track.fragmented {
            out.audioDataPacketCount = Int64(track.samples.count)
            out.announce(.audioDataPacketCount)
            fragmentedGaplessNumbers(track, out)
        }
    }

    /// A fragmented track's gapless numbers, known only at its end: the edit list's media time is
    /// the priming, and the fragments' sample durations say what is presented (a last sample
    /// shorter than the codec's frame is the end trim).
    private func fragmentedGaplessNumbers(_ track: Track, _ out: StreamOutput) {
        if out.packetTableInfo == nil, track.format.formatID == .opus || track.format.formatID == .flac {
            // Packets of varying frames: what they decoded to, against what the fragments present.
            let totalUnits = track.durations.reduce(Int64(0)) { $0 + Int64($1.count) * Int64($1.delta) }
            let presented = min(clampedInt64(Double(totalUnits) * track.frameScale), emittedFrames)
            let priming = track.editMediaTime > 0 ? clampedInt64(Double(track.editMediaTime) * track.frameScale) : Int64(track.opusPreSkip ?? 0)
            guard presented > priming else { return }
            out.packetTableInfo = AudioFilePacketTableInfo(validFrames: presented - priming, primingFrames: Int(priming),
                remainderFrames: Int(emittedFrames - presented), source: track.editMediaTime > 0 ? .editList : .sampleDurations,
                note: track.editMediaTime > 0 || priming == 0 ? nil : "the Opus pre-skip of the dOps box")
            out.announce(.packetTableInfo)
            return
        }
        guard out.packetTableInfo == nil, track.framesPerPacket > 0,
              !Set<AudioFormatID>([.appleLossless, .amr, .amrWideband, .linearPCM]).contains(track.format.formatID) else { return }
        let totalUnits = track.durations.reduce(Int64(0)) { $0 + Int64($1.count) * Int64($1.delta) }
        let decoded = Int64(track.samples.count) * Int64(track.framesPerPacket)
        let presented = clampedInt64(Double(totalUnits) * track.frameScale)
        let priming = clampedInt64(Double(track.editMediaTime) * track.frameScale)
        guard presented > priming, presented <= decoded, decoded - presented < Int64(track.framesPerPacket),
              priming > 0 || presented < decoded else { return }
        out.packetTableInfo = AudioFilePacketTableInfo(validFrames: presented - priming, primingFrames: Int(priming),
            remainderFrames: Int(decoded - presented), source: priming > 0 ? .editList : .sampleDurations)
        out.announce(.packetTableInfo)
    }

    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard let track, packet >= 0, packet < Int64(track.samples.count) else { return nil }
        return AudioFileStreamSeekResult(byteOffset: track.samples[Int(packet)].offset, isEstimated: false)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard let result = byteOffset(forPacket: packet) else {
            throw AudioFileStreamError(.invalidOperation, .mp4, input.position, "packet \(packet) is not in the sample table")
        }
        input.reset(to: result.byteOffset)
        nextSample = Int(packet)
        // In a fragmented file the media data ends where its mdat does: boxes follow.
        let mdat = mdatRanges.last { $0.start <= result.byteOffset }
        state = .samples(end: track?.fragmented == true ? mdat?.end : nil)
        out.nextPacketIndex = packet
        return result
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) { input.dropBuffered() }

    func frames(beforePacket packet: Int64) -> Int64? {
        guard let track else { return nil }
        return packet * Int64(track.framesPerPacket)
    }

    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard let track, track.framesPerPacket > 0 else { return nil }
        return (frame / Int64(track.framesPerPacket), Int(frame % Int64(track.framesPerPacket)))
    }
}

/// A Double as Int64, saturating instead of trapping on values no real file has.
func clampedInt64(_ value: Double) -> Int64 {
    guard value.isFinite else { return value > 0 ? Int64.max : 0 }
    return Int64(max(min(value.rounded(), 9.0e18), -9.0e18))
}

/// A box type as Latin-1 text, so iTunes' `©nam` (0xA9 'n' 'a' 'm') reads as written.
func latin1(_ value: UInt32) -> String {
    String(String.UnicodeScalarView((0..<4).map { Unicode.Scalar(UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32($0)))) }))
}
