import BufferQueue

/// Matroska and WebM audio (RFC 9559): the first audio track whose codec this library decodes is
/// read; video, subtitles and other audio tracks are skipped and named in a warning.
///
/// Elements are read as they arrive, in any chunking. The Segment and its Clusters are entered
/// (either may be of unknown size, as a live WebM stream's are: a Cluster then ends where an
/// element that cannot be its child begins); the small top-level elements (Info, Tracks, Tags,
/// Chapters, Cues) are read whole; SimpleBlocks and BlockGroups are read whole and their frames
/// (unlaced, or in Xiph, EBML or fixed lacing) emitted as packets at their file offsets.
///
/// Gapless numbers: the track's `CodecDelay` (nanoseconds) is the priming — for Opus it is the
/// pre-skip, which stands in for it when absent; a block's `DiscardPadding` (nanoseconds) is the
/// end trim, announced before that block's packets. Everything else decoded is played: block
/// timestamps are rounded to the timestamp scale and do not trim.
final class MatroskaParser: ContainerParser {
    private struct Open {
        var id: UInt32
        var end: Int64?
    }
    /// The master elements entered (Segment, Cluster), outermost first.
    private var stack: [Open] = []
    private var headerRead = false
    private var segmentDataStart: Int64?
    private var timestampScale: Int64 = 1_000_000
    private var infoTitle: String?
    private var track: MatroskaTrackEntry?
    private var codec: MatroskaCodec?
    private var trackTags = AudioFileMetadata()
    private var chapters: [(start: Int64, title: String?)] = []
    /// Cue points of the played track: a time (in timestamp-scale units) and its cluster's offset.
    private var cues: [(time: Int64, offset: Int64)] = []
    /// Clusters met: where each begins, its timestamp, and the first packet and decoded frame in it.
    private var clusters: [(offset: Int64, timestamp: Int64?, firstPacket: Int64, firstFrame: Int64)] = []
    private var clusterTimestamp: Int64?
    private var framesBefore = CumulativeFrames()
    private var link: AudioStreamLink?
    private var priming = 0
    /// The last block's `DiscardPadding` in frames, when it had one.
    private var endTrim = 0
    private var packetBytes: Int64 = 0
    /// Whether the track's first frame was met (an MP3 track's may be its LAME tag).
    private var sawFirstFrame = false
    /// The padding a LAME tag states, less the decoder's delay: the end trim when no block has `DiscardPadding`.
    private var lamePadding = 0
    /// Where the gapless numbers come from: Matroska's own elements, or an MP3 track's LAME tag.
    private var gaplessSource: AudioFilePacketTableInfo.Source = .codecDelay
    /// Packets of the cluster a seek landed in that come before the packet sought: counted, not emitted.
    private var packetsToDrop: Int64 = 0
    /// The index of the next packet of the track, emitted or not.
    private var packetCursor: Int64 = 0
    /// The decoded frame the next packet begins at (an estimate after a seek by time into clusters not read).
    private var decodedCursor: Int64 = 0
    /// PCM's packets are its frames: counted, not listed.
    private var pcmFrames: Int64 = 0
    private var isPCM: Bool { if case .pcm = codec?.kind { return true }; return false }
    /// Frames decoded by all packets read from the start.
    private var decodedTotal: Int64 { isPCM ? pcmFrames : framesBefore.total }
    /// False after a seek by time into clusters not read: the packets' numbers are estimates from
    /// there on, and neither the frame index nor the cluster list grows.
    private var indexIsWhole = true
    /// Frames every packet read so far decodes to, while they are all alike (nil: they vary, or none read).
    private var constantPacketFrames: Int?
    private var packetFramesVary = false
    private var skippedTracks: [String] = []

    /// The largest element read whole (a block, the Tracks or Tags element); larger ones are skipped
    /// (blocks: refused) with a warning.
    static let wholeElementCap: Int64 = 64 << 20

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        while input.skipPending == 0, !input.mustWait {
            while let top = stack.last, let end = top.end, input.position >= end { close(stack.removeLast()) }
            let header: EBML.Header
            switch EBML.header(at: 0, count: input.available, { input.u8($0) }) {
            case .needMore(let count):
                input.waitFor(count)
                return
            case .invalid(let why):
                guard try resynchronize(why, input, out) else { return }
                continue
            case .value(let found):
                header = found
            }
            // An unknown-size Cluster (or Segment) ends where an element that cannot be its child begins.
            if let top = stack.last, top.end == nil, !Self.canContain(top.id, header.id) {
                close(stack.removeLast())
                continue
            }
            guard try handle(header, input, out) else { return }
        }
    }

    /// Whether a master element of unknown size can hold an element `child`.
    private static func canContain(_ parent: UInt32, _ child: UInt32) -> Bool {
        switch parent {
        case EBML.ID.segment: return child != EBML.ID.header && child != EBML.ID.segment
        case EBML.ID.cluster:
            let topLevel: Set<UInt32> = [EBML.ID.header, EBML.ID.segment, EBML.ID.cluster, EBML.ID.cues, EBML.ID.tags, EBML.ID.chapters,
                                         EBML.ID.info, EBML.ID.tracks, EBML.ID.seekHead, EBML.ID.attachments]
            return !topLevel.contains(child)
        default: return true
        }
    }

    private func close(_ element: Open) {
        if element.id == EBML.ID.cluster { clusterTimestamp = nil }
    }

    /// Handles the element whose header is at the read position; false when it needs more bytes.
    private func handle(_ header: EBML.Header, _ input: ByteInput, _ out: StreamOutput) throws -> Bool {
        let start = input.position
        let parent = stack.last?.id
        switch (parent, header.id) {
        case (nil, EBML.ID.header):
            guard let body = try whole(header, input, out) else { return false }
            try readHeader(body, at: start)
            return true
        case (nil, EBML.ID.segment):
            guard headerRead else {
                throw AudioFileStreamError(.invalidData, .matroska, start, "a Segment without the EBML header before it")
            }
            input.consume(header.length)
            segmentDataStart = input.position
            stack.append(Open(id: header.id, end: header.size.map { input.position + $0 }))
            return true
        case (nil, _):
            guard headerRead else {
                throw AudioFileStreamError(.invalidData, .matroska, start, "the stream does not begin with an EBML header")
            }
            // After a Segment (or between chained ones): skipped.
            try skip(header, input)
            return true
        case (EBML.ID.segment, EBML.ID.cluster):
            try ready(at: start, out)
            input.consume(header.length)
            stack.append(Open(id: header.id, end: header.size.map { input.position + $0 }))
            clusterTimestamp = nil
            if indexIsWhole, clusters.last.map({ start > $0.offset }) ?? true {
                clusters.append((start, nil, packetCursor, decodedCursor))
            }
            return true
        case (EBML.ID.segment, EBML.ID.info), (EBML.ID.segment, EBML.ID.tracks), (EBML.ID.segment, EBML.ID.tags),
             (EBML.ID.segment, EBML.ID.chapters), (EBML.ID.segment, EBML.ID.cues):
            guard let body = try whole(header, input, out) else { return false }
            try readTopLevel(header.id, body, at: start + Int64(header.length), out)
            return true
        case (EBML.ID.cluster, EBML.ID.timestamp):
            guard let body = try whole(header, input, out) else { return false }
            clusterTimestamp = Int64(clamping: EBML.uint(body, 0..<body.count))
            if let last = clusters.indices.last, clusters[last].timestamp == nil { clusters[last].timestamp = clusterTimestamp }
            return true
        case (EBML.ID.cluster, EBML.ID.simpleBlock), (EBML.ID.cluster, EBML.ID.blockGroup):
            guard let size = header.size else {
                throw AudioFileStreamError(.invalidData, .matroska, start, "a block of unknown size")
            }
            guard size <= Self.wholeElementCap else {
                throw AudioFileStreamError(.tooLarge, .matroska, start, "a block of \(size) bytes (at most \(Self.wholeElementCap) are read)")
            }
            let total = header.length + Int(size)
            guard input.available >= total else {
                input.waitFor(total)
                return false
            }
            try readBlock(header, total: total, input, out)
            return true
        default:
            try skip(header, input)
            return true
        }
    }

    /// The body of an element read whole (consumed); nil when more bytes are needed.
    private func whole(_ header: EBML.Header, _ input: ByteInput, _ out: StreamOutput) throws -> [UInt8]? {
        guard let size = header.size else {
            throw AudioFileStreamError(.invalidData, .matroska, input.position,
                "the element 0x\(String(header.id, radix: 16)) has an unknown size (only a Segment or a Cluster may)")
        }
        guard size <= Self.wholeElementCap else {
            out.warn(AudioFileStreamError(.tooLarge, .matroska, input.position,
                "the element 0x\(String(header.id, radix: 16)) of \(size) bytes is too large to read and was skipped"))
            try skip(header, input)
            return []
        }
        let total = header.length + Int(size)
        guard input.available >= total else {
            input.waitFor(total)
            return nil
        }
        let body = input.bytes(header.length, Int(size))
        input.consume(total)
        return body
    }

    private func skip(_ header: EBML.Header, _ input: ByteInput) throws {
        guard let size = header.size else {
            throw AudioFileStreamError(.invalidData, .matroska, input.position,
                "the element 0x\(String(header.id, radix: 16)) has an unknown size (only a Segment or a Cluster may)")
        }
        input.skip(Int64(header.length) + size)
    }

    /// After bytes that are no element: inside a cluster, reading goes on at the next Cluster ID
    /// (the damaged cluster's rest is lost, with a warning). Returns false when more bytes are needed.
    private func resynchronize(_ why: String, _ input: ByteInput, _ out: StreamOutput) throws -> Bool {
        let start = input.position
        guard codec != nil, stack.contains(where: { $0.id == EBML.ID.segment }) else {
            throw AudioFileStreamError(.invalidData, .matroska, start, why)
        }
        // From the next byte: a Cluster ID here whose size is what failed must not be found again.
        var from = 1
        while let index = input.firstIndex(of: 0x1F, from: from) {
            if input.available < index + 4 && !input.atEnd {
                input.consume(index)
                input.waitFor(4)
                report(skipped: Int64(index), at: start, why, out)
                return false
            }
            if input.u8(index + 1) == 0x43, input.u8(index + 2) == 0xB6, input.u8(index + 3) == 0x75 {
                input.consume(index)
                while let top = stack.last, top.id != EBML.ID.segment { close(stack.removeLast()) }
                report(skipped: Int64(index), at: start, why, out)
                return true
            }
            from = index + 1
        }
        let dropped = input.available
        input.consume(dropped)
        report(skipped: Int64(dropped), at: start, why, out)
        return false
    }

    private func report(skipped bytes: Int64, at offset: Int64, _ why: String, _ out: StreamOutput) {
        guard bytes > 0 else { return }
        out.warn(AudioFileStreamError(.invalidData, .matroska, offset,
            "skipped \(bytes) bytes: \(why); reading resumed at the next Cluster"))
    }

    // MARK: the top-level elements

    private func readHeader(_ body: [UInt8], at offset: Int64) throws {
        var docType = "matroska"
        for child in try EBML.children(of: body, 0..<body.count, base: offset) where child.id == EBML.ID.docType {
            docType = EBML.string(body, child.body)
        }
        guard docType == "matroska" || docType == "webm" else {
            throw AudioFileStreamError(.unsupportedDataFormat, .matroska, offset, "an EBML document of type \"\(docType)\", not Matroska or WebM")
        }
        headerRead = true
    }

    private func readTopLevel(_ id: UInt32, _ body: [UInt8], at base: Int64, _ out: StreamOutput) throws {
        let children = try EBML.children(of: body, 0..<body.count, base: base)
        switch id {
        case EBML.ID.info:
            for child in children {
                if child.id == EBML.ID.timestampScale {
                    let scale = Int64(clamping: EBML.uint(body, child.body))
                    if scale > 0 { timestampScale = scale }
                }
                if child.id == EBML.ID.title { infoTitle = EBML.string(body, child.body) }
            }
        case EBML.ID.tracks:
            guard track == nil else { return }
            try chooseTrack(children.filter { $0.id == EBML.ID.trackEntry }.map { try MatroskaTrackEntry(body, $0.body, base: base) }, at: base, out)
        case EBML.ID.tags:
            readTags(body, children, base: base, out)
        case EBML.ID.chapters:
            try readChapters(body, children, base: base, out)
        case EBML.ID.cues:
            guard let number = track?.number, let segment = segmentDataStart else { return }
            for point in children where point.id == EBML.ID.cuePoint {
                var time: Int64?
                var position: Int64?
                for field in try EBML.children(of: body, point.body, base: base) {
                    if field.id == EBML.ID.cueTime { time = Int64(clamping: EBML.uint(body, field.body)) }
                    if field.id == EBML.ID.cueTrackPositions {
                        var matches = false
                        var cluster: Int64?
                        for part in try EBML.children(of: body, field.body, base: base) {
                            if part.id == EBML.ID.cueTrack { matches = Int64(clamping: EBML.uint(body, part.body)) == number }
                            if part.id == EBML.ID.cueClusterPosition { cluster = Int64(clamping: EBML.uint(body, part.body)) }
                        }
                        if matches, let cluster { position = segment + cluster }
                    }
                }
                if let time, let position { cues.append((time, position)) }
            }
            cues.sort { $0.time < $1.time }
        default:
            break
        }
    }

    /// The first enabled audio track whose codec is decoded; the others are named in a warning.
    private func chooseTrack(_ entries: [MatroskaTrackEntry], at offset: Int64, _ out: StreamOutput) throws {
        var refusals: [AudioFileStreamError] = []
        for entry in entries {
            guard entry.type == 2 else {
                let kinds = [1: "video", 3: "complex", 16: "logo", 17: "subtitle", 18: "buttons", 32: "control", 33: "metadata"]
                skippedTracks.append("a \(kinds[entry.type] ?? "type \(entry.type)") \(entry.label)")
                continue
            }
            if track != nil || !entry.enabled {
                skippedTracks.append("the audio \(entry.label)\(entry.enabled ? "" : ", disabled")")
                continue
            }
            if let encoding = entry.encoding {
                refusals.append(AudioFileStreamError(.unsupportedDataFormat, .matroska, entry.offset,
                    "\(entry.label): its blocks are \(encoding), which this library does not read"))
                skippedTracks.append("the audio \(entry.label)")
                continue
            }
            do {
                codec = try MatroskaCodec(entry)
                track = entry
            } catch let error as AudioFileStreamError {
                refusals.append(error)
                skippedTracks.append("the audio \(entry.label)")
            }
        }
        guard let codec, let track else {
            if let first = refusals.first { throw first }
            throw AudioFileStreamError(.noAudio, .matroska, offset, entries.isEmpty ? "the Tracks element lists no track" : "no audio track (\(skippedTracks.joined(separator: "; ")))")
        }
        // Priming: CodecDelay, or the Opus pre-skip when it is absent.
        let rate = (codec.formatList.first ?? codec.format).sampleRate
        priming = track.codecDelay > 0 ? Int(clampedInt64((Double(track.codecDelay) * rate / 1e9).rounded())) : codec.headerPriming
        if !skippedTracks.isEmpty {
            out.warn(AudioFileStreamError(.unsupportedDataFormat, .matroska, offset,
                "\(track.label) is played; skipped: \(skippedTracks.joined(separator: "; "))"))
        }
    }

    /// Tags: those of the played track and of the whole file. `TITLE` at the track level (30, or
    /// targeted at the track) is the title; at the album level (50, the default) it is the album,
    /// or the title when the file says no other (nor Info's `Title`). Other names land in `tags`.
    private func readTags(_ body: [UInt8], _ children: [(id: UInt32, body: Range<Int>)], base: Int64, _ out: StreamOutput) {
        var albumTitle: String?
        for tag in children where tag.id == EBML.ID.tag {
            guard let fields = try? EBML.children(of: body, tag.body, base: base) else { continue }
            var level: UInt64 = 50
            var trackUIDs: [UInt64] = []
            for field in fields where field.id == EBML.ID.targets {
                for target in (try? EBML.children(of: body, field.body, base: base)) ?? [] {
                    if target.id == EBML.ID.targetTypeValue { level = EBML.uint(body, target.body) }
                    if target.id == EBML.ID.tagTrackUID { trackUIDs.append(EBML.uint(body, target.body)) }
                }
            }
            if !trackUIDs.isEmpty, let uid = track?.uid, !trackUIDs.contains(uid) { continue }
            let trackLevel = level <= 30 || !trackUIDs.isEmpty
            for field in fields where field.id == EBML.ID.simpleTag {
                var name: String?
                var value: String?
                for part in (try? EBML.children(of: body, field.body, base: base)) ?? [] {
                    if part.id == EBML.ID.tagName { name = EBML.string(body, part.body).uppercased() }
                    if part.id == EBML.ID.tagString { value = EBML.string(body, part.body) }
                }
                guard let name, let value else { continue }
                switch name {
                case "TITLE":
                    if trackLevel { trackTags.title = value } else { albumTitle = value }
                case "ARTIST":
                    if trackLevel || trackTags.artist == nil { trackTags.artist = value }
                case "ALBUM": trackTags.album = value
                case "ENCODER", "DURATION": break
                default: trackTags.tags[name] = value
                }
            }
        }
        if trackTags.album == nil, trackTags.title != nil, let albumTitle { trackTags.album = albumTitle }
        if trackTags.title == nil, infoTitle == nil, let albumTitle { trackTags.title = albumTitle }
        publishMetadata(out)
    }

    /// Chapters of the first edition, not hidden, as a cue sheet of tracks (their starts in frames).
    private func readChapters(_ body: [UInt8], _ children: [(id: UInt32, body: Range<Int>)], base: Int64, _ out: StreamOutput) throws {
        guard chapters.isEmpty, let edition = children.first(where: { $0.id == EBML.ID.editionEntry }) else { return }
        for atom in try EBML.children(of: body, edition.body, base: base) where atom.id == EBML.ID.chapterAtom {
            var start: Int64 = 0
            var hidden = false
            var title: String?
            for field in try EBML.children(of: body, atom.body, base: base) {
                switch field.id {
                case EBML.ID.chapterTimeStart: start = Int64(clamping: EBML.uint(body, field.body))
                case EBML.ID.chapterFlagHidden: hidden = EBML.uint(body, field.body) != 0
                case EBML.ID.chapterDisplay:
                    for part in try EBML.children(of: body, field.body, base: base) where part.id == EBML.ID.chapString && title == nil {
                        title = EBML.string(body, part.body)
                    }
                default: break
                }
            }
            if !hidden { chapters.append((start, title)) }
        }
        chapters.sort { $0.start < $1.start }
        publishMetadata(out)
    }

    /// The metadata so far: the codec's (Vorbis comments), then Info's title, then the tags, and
    /// the chapters as a cue sheet.
    private func publishMetadata(_ out: StreamOutput) {
        var metadata = codec?.metadata ?? AudioFileMetadata()
        if let infoTitle, !infoTitle.isEmpty { metadata.title = infoTitle }
        if let title = trackTags.title { metadata.title = title }
        if let artist = trackTags.artist { metadata.artist = artist }
        if let album = trackTags.album { metadata.album = album }
        for (name, value) in trackTags.tags { metadata.tags[name] = value }
        if !chapters.isEmpty, let codec {
            let rate = codec.format.sampleRate
            let tracks = chapters.enumerated().map { index, chapter in
                CueSheet.Track(number: index + 1, title: chapter.title, performer: nil, file: nil,
                               start: .sampleFrame(clampedInt64((Double(chapter.start) * rate / 1e9).rounded())), pregap: nil)
            }
            let sheet = CueSheet(title: metadata.album ?? metadata.title, performer: metadata.artist, tracks: tracks)
            metadata.cueSheet = sheet
        }
        guard metadata != out.metadata else { return }
        out.metadata = metadata
        if out.isReady { out.announce(.metadata) }
    }

    /// The first Cluster: everything needed to decode is known.
    private func ready(at offset: Int64, _ out: StreamOutput) throws {
        guard !out.isReady else { return }
        guard let codec else {
            throw AudioFileStreamError(.invalidData, .matroska, offset, "a Cluster before the Tracks element: the codec is unknown")
        }
        out.dataFormat = codec.format
        out.formatList = codec.formatList
        out.magicCookie = codec.magicCookie
        out.channelLayout = codec.channelLayout
        out.dataOffset = offset
        publishMetadata(out)
        let described = AudioStreamLink(index: 0, firstPacket: 0, firstFrame: 0, format: codec.format, magicCookie: codec.magicCookie,
                                        channelLayout: codec.channelLayout, metadata: out.metadata, primingFrames: priming)
        link = described
        out.links = [described]
        out.announceReady()
        out.link(described)
        if case .pcm = codec.kind { out.framesPerPacket = 1 }
    }

    // MARK: blocks

    /// A SimpleBlock or BlockGroup, all `total` bytes of it available at the read position.
    private func readBlock(_ header: EBML.Header, total: Int, _ input: ByteInput, _ out: StreamOutput) throws {
        let start = input.position
        var blockRange = header.length..<total
        var discardPadding: Int64?
        if header.id == EBML.ID.blockGroup {
            var found: Range<Int>?
            var at = header.length
            while at < total {
                guard case .value(let child) = EBML.header(at: at, count: total, { input.u8($0) }), let size = child.size,
                      Int64(at + child.length) + size <= Int64(total) else {
                    throw AudioFileStreamError(.invalidData, .matroska, start + Int64(at), "a malformed element inside a BlockGroup")
                }
                let body = (at + child.length)..<(at + child.length + Int(size))
                if child.id == EBML.ID.block { found = body }
                if child.id == EBML.ID.discardPadding {
                    let bytes = input.bytes(body.lowerBound, body.count)
                    discardPadding = EBML.int(bytes, 0..<bytes.count)
                }
                at = body.upperBound
            }
            guard let found else {
                input.consume(total)
                return
            }
            blockRange = found
        } else {
            blockRange = header.length..<total
        }
        guard let track, var codec else { input.consume(total); return }
        let count = blockRange.upperBound
        let byte: (Int) -> UInt8 = { input.u8($0) }
        guard let number = EBML.vint(at: blockRange.lowerBound, count: count, byte) else {
            throw AudioFileStreamError(.invalidData, .matroska, start, "a block too short for its track number")
        }
        guard number.value == track.number else {
            input.consume(total)
            return
        }
        var at = blockRange.lowerBound + number.length
        guard at + 3 <= count else { throw AudioFileStreamError(.invalidData, .matroska, start, "a block too short for its header") }
        let flags = input.u8(at + 2)
        at += 3
        // The frames' sizes, by lacing.
        var sizes: [Int] = []
        let lacing = (flags >> 1) & 3
        if lacing == 0 {
            sizes = [count - at]
        } else {
            guard at < count else { throw AudioFileStreamError(.invalidData, .matroska, start, "a laced block without its frame count") }
            let frames = Int(input.u8(at)) + 1
            at += 1
            switch lacing {
            case 1:   // Xiph
                for _ in 0..<(frames - 1) {
                    var size = 0
                    while true {
                        guard at < count else { throw AudioFileStreamError(.invalidData, .matroska, start, "a Xiph lace runs past its block") }
                        let b = Int(input.u8(at))
                        at += 1
                        size += b
                        if b < 255 { break }
                    }
                    sizes.append(size)
                }
            case 3:   // EBML: the first size, then signed differences
                guard let first = EBML.vint(at: at, count: count, byte) else {
                    throw AudioFileStreamError(.invalidData, .matroska, start, "an EBML lace runs past its block")
                }
                at += first.length
                var size = first.value
                guard size <= Int64(count - at) else {
                    throw AudioFileStreamError(.invalidData, .matroska, start, "an EBML lace size (\(size)) does not fit in its block")
                }
                sizes.append(Int(size))
                for _ in 0..<max(frames - 2, 0) {
                    guard let delta = EBML.vint(at: at, count: count, byte) else {
                        throw AudioFileStreamError(.invalidData, .matroska, start, "an EBML lace runs past its block")
                    }
                    at += delta.length
                    let bias = (Int64(1) << (7 * Int64(delta.length) - 1)) - 1
                    size = size &+ (delta.value - bias)
                    guard size >= 0, size <= Int64(count - at) else {
                        throw AudioFileStreamError(.invalidData, .matroska, start, "an EBML lace size (\(size)) does not fit in its block")
                    }
                    sizes.append(Int(size))
                }
            default:   // fixed
                let each = (count - at) / frames
                guard each * frames == count - at else {
                    throw AudioFileStreamError(.invalidData, .matroska, start, "a block of fixed lacing whose \(count - at) bytes do not split into \(frames) frames")
                }
                sizes = Array(repeating: each, count: frames)
            }
            if lacing != 2 {
                let known = sizes.reduce(0, +)
                guard sizes.allSatisfy({ $0 >= 0 }), known <= count - at else {
                    throw AudioFileStreamError(.invalidData, .matroska, start, "the lace sizes of a block add up to more than its \(count - at) bytes")
                }
                sizes.append(count - at - known)
            }
        }
        // An MP3 track's first frame may be a Xing/Info tag (mkvmerge keeps it): not audio. Its
        // LAME delay and padding are the gapless numbers where CodecDelay and DiscardPadding are absent.
        var tagBytes = 0
        if case .mpeg = codec.kind, packetCursor == 0, !sawFirstFrame, let first = sizes.first, first >= 4,
           let mpeg = MPEGHeader(input.u8(at), input.u8(at + 1), input.u8(at + 2), input.u8(at + 3)),
           let xing = MPEGTags.xing(input.bytes(at, first), mpeg) {
            tagBytes = first
            sizes.removeFirst()
            if track.codecDelay == 0, let delay = xing.encoderDelay, let padding = xing.padding {
                priming = delay + MPEGAudioParser.decoderDelay
                gaplessSource = .lameTag
                lamePadding = max(padding - MPEGAudioParser.decoderDelay, 0)
                if var described = link {
                    described.primingFrames = priming
                    link = described
                    out.links = [described]
                    out.link(described)
                }
            }
        }
        sawFirstFrame = true
        // Frames each one decodes to, in order (Vorbis counts follow the previous frame).
        var frames: [Int] = []
        var offset = at + tagBytes
        for size in sizes {
            let decoded = input.withBytes(offset + size) { codec.frames(of: UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            guard let decoded else {
                throw AudioFileStreamError(.invalidData, .matroska, start + Int64(offset),
                    "a \(codec.name) frame of \(size) bytes in the block at byte \(start) is malformed (its frame count cannot be read)")
            }
            frames.append(decoded)
            offset += size
        }
        self.codec = codec
        let blockFrames = Int64(frames.reduce(0, +))
        if let padding = discardPadding, padding > 0 {
            let trim = Int(clampedInt64((Double(padding) * codec.format.sampleRate / 1e9).rounded()))
            endTrim = Int(min(Int64(trim), blockFrames))
            end(decoded: decodedCursor + blockFrames, out)
        } else if endTrim > 0 {
            // A block after the one that ended the stream: the trim was not the end after all.
            endTrim = 0
            end(decoded: decodedCursor + blockFrames, out)
        }
        input.consume(at + tagBytes)
        for (size, count) in zip(sizes, frames) {
            // Packets read again after a seek are counted once; those before the packet sought are not emitted.
            if case .pcm(let bytesPerFrame) = codec.kind {
                // Each block's frames are one run of constant packets: block headers lie between runs.
                out.flushBatch()
                if packetsToDrop > 0 {
                    let dropped = Int(min(packetsToDrop, Int64(count)))
                    packetsToDrop -= Int64(dropped)
                    input.consume(dropped * bytesPerFrame)
                    out.emitConstantPackets(from: input, count: count - dropped, bytesPerPacket: bytesPerFrame)
                } else {
                    out.emitConstantPackets(from: input, count: count, bytesPerPacket: bytesPerFrame)
                }
                packetCursor += Int64(count)
                decodedCursor += Int64(count)
                if indexIsWhole { pcmFrames = max(pcmFrames, packetCursor) }
            } else {
                if indexIsWhole, packetCursor == Int64(framesBefore.count) {
                    framesBefore.append(count)
                    if let constant = constantPacketFrames {
                        if constant != count { packetFramesVary = true; constantPacketFrames = nil }
                    } else if !packetFramesVary {
                        constantPacketFrames = count
                    }
                }
                packetCursor += 1
                decodedCursor += Int64(count)
                if packetsToDrop > 0 {
                    packetsToDrop -= 1
                    input.consume(size)
                } else {
                    out.emitPacket(from: input, size: size, frames: count)
                }
            }
            packetBytes += Int64(size)
        }
        input.consume(total - offset)
    }

    /// The stream's end is known: `decoded` frames, the last `endTrim` of them not played.
    private func end(decoded: Int64, _ out: StreamOutput) {
        guard var described = link else { return }
        let valid = max(decoded - Int64(priming) - Int64(endTrim), 0)
        described.validFrames = valid
        described.remainderFrames = endTrim
        link = described
        out.links = [described]
        out.link(described)
        out.packetTableInfo = AudioFilePacketTableInfo(validFrames: valid, primingFrames: priming, remainderFrames: endTrim,
                                                       source: gaplessSource)
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        if input.available > 0 {
            out.warn(AudioFileStreamError(.truncated, .matroska, input.position,
                "the stream ends inside an element; its last \(input.available) bytes were dropped"))
            input.consume(input.available)
        }
        guard headerRead else { throw AudioFileStreamError(.invalidData, .matroska, 0, "the stream ends before its EBML header") }
        guard track != nil else {
            throw AudioFileStreamError(.noAudio, .matroska, input.position, "the stream ends before its Tracks element")
        }
        let total = indexIsWhole ? decodedTotal : decodedCursor
        if endTrim == 0, lamePadding > 0 { endTrim = Int(min(Int64(lamePadding), max(total - Int64(priming), 0))) }
        guard out.isReady, total > 0 else {
            throw AudioFileStreamError(.noAudio, .matroska, input.position, "the \(codec?.name ?? "audio") track has no block")
        }
        if Int64(priming) + Int64(endTrim) > total {
            out.warn(AudioFileStreamError(.invalidData, .matroska, input.position,
                "the track decodes to \(total) frames, fewer than its \(priming) frames of priming and \(endTrim) of padding; nothing of it plays"))
        }
        end(decoded: total, out)
        out.announce(.packetTableInfo)
        guard indexIsWhole else { return }
        out.audioDataPacketCount = packetCursor
        out.announce(.audioDataPacketCount)
        let seconds = Double(total) / max(out.dataFormat?.sampleRate ?? 1, 1)
        if out.bitRate == nil, seconds > 0 {
            out.bitRate = Int(Double(packetBytes * 8) / seconds)
            out.announce(.bitRate)
        }
    }

    // MARK: seeking

    /// Packet 0 reads everything again from the first byte. Another packet among those read: its
    /// cluster is read again (the packets before it there counted, not emitted).
    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard packet > 0 else {
            input.reset(to: 0)
            stack = []
            headerRead = false
            track = nil
            codec = nil
            skippedTracks = []
            chapters = []
            cues = []
            clusters = []
            clusterTimestamp = nil
            endTrim = 0
            packetBytes = 0
            packetsToDrop = 0
            packetCursor = 0
            decodedCursor = 0
            indexIsWhole = true
            constantPacketFrames = nil
            packetFramesVary = false
            sawFirstFrame = false
            lamePadding = 0
            gaplessSource = .codecDelay
            trackTags = AudioFileMetadata()
            out.nextPacketIndex = 0
            return AudioFileStreamSeekResult(byteOffset: 0, isEstimated: false)
        }
        let known = isPCM ? pcmFrames : Int64(framesBefore.count)
        guard packet < known, let cluster = clusters.last(where: { $0.firstPacket <= packet }),
              let segment = stack.first(where: { $0.id == EBML.ID.segment }) else {
            throw AudioFileStreamError(.invalidOperation, .matroska, input.position,
                "packet \(packet) lies beyond the \(known) packets read; a Matroska stream seeks among the clusters it has read")
        }
        input.reset(to: cluster.offset)
        stack = [segment]
        clusterTimestamp = nil
        codec?.restart()
        packetCursor = cluster.firstPacket
        decodedCursor = cluster.firstFrame
        indexIsWhole = true
        packetsToDrop = packet - cluster.firstPacket
        endTrim = 0
        out.nextPacketIndex = packet
        return AudioFileStreamSeekResult(byteOffset: cluster.offset, isEstimated: false)
    }

    // MARK: seeking by time (over HTTP)

    /// Where the decode of the last seek planned should start: a resume drops the packets before
    /// it, so a seek decodes from the same packet wherever the cluster found begins.
    private var plannedStart: Int64?

    /// Frames a timestamp tick lasts, at the track's output rate.
    private var framesPerTick: Double { (codec?.format.sampleRate ?? 48_000) * Double(timestampScale) / 1e9 }

    /// The last cluster read whose timestamp is known: the reference a timestamp is turned into
    /// decoded frames by.
    private var reference: (offset: Int64, timestamp: Int64, firstFrame: Int64)? {
        clusters.last(where: { $0.timestamp != nil }).map { ($0.offset, $0.timestamp ?? 0, $0.firstFrame) }
    }

    /// Where to look for a decode that starts `preRollPackets` packets before decoded frame
    /// `frame`, when it lies beyond the clusters read (nil: among them, where
    /// ``seek(toPacket:_:_:)`` finds it exactly). Positions are cluster timestamps; the cues,
    /// when read, narrow the window, else the reader bisects on cluster timestamps. Where the
    /// packets' frame counts vary, the plan is the last cluster read, from which reading counts on.
    func seekPlan(forFrame frame: Int64, preRollPackets: Int) -> AudioStreamSeekPlan? {
        guard codec != nil, indexIsWhole, let reference else { return nil }
        let average = framesBefore.count > 0 ? max(framesBefore.total / Int64(framesBefore.count), 1) : 1
        let start = max(frame - Int64(preRollPackets) * (isPCM ? 0 : average), 0)
        guard start >= decodedTotal else { return nil }
        plannedStart = start
        guard constantPacketFrames != nil || isPCM else {
            // Packets of varying frames (Vorbis, Opus of mixed frame sizes): a timestamp cannot say
            // which decoded frame a cluster begins at, so reading goes on from the last cluster
            // read, counting every packet: exact, and as long as the distance.
            return AudioStreamSeekPlan(serial: nil, target: reference.timestamp, low: (reference.offset, reference.timestamp),
                                       highOffset: reference.offset, lowIsFound: true)
        }
        let target = reference.timestamp &+ clampedInt64((Double(start - reference.firstFrame) / framesPerTick).rounded(.down))
        var low = (offset: reference.offset, position: reference.timestamp)
        if let cue = cues.last(where: { $0.time <= target }), cue.offset > low.offset { low = (cue.offset, cue.time) }
        let high = cues.first(where: { $0.time > target && $0.offset > low.offset })?.offset
        return AudioStreamSeekPlan(serial: nil, target: target, low: low, highOffset: high, lowIsFound: true)
    }

    /// The first cluster in `bytes` (read from anywhere in the resource) whose start is whole
    /// enough to show its timestamp: its offset in `bytes` and its timestamp.
    static func probe(_ bytes: [UInt8]) -> (offset: Int, position: Int64)? {
        var from = 0
        while let found = bytes[from...].firstIndex(of: 0x1F) {
            from = found + 1
            guard found + 4 <= bytes.count, bytes[found + 1] == 0x43, bytes[found + 2] == 0xB6, bytes[found + 3] == 0x75 else { continue }
            guard case .value(let cluster) = EBML.header(at: found, count: bytes.count, { bytes[$0] }) else { continue }
            var at = found + cluster.length
            // A CRC-32 or Void element may come first; then the Timestamp.
            for _ in 0..<3 {
                guard case .value(let child) = EBML.header(at: at, count: bytes.count, { bytes[$0] }), let size = child.size else { break }
                if child.id == EBML.ID.crc32 || child.id == EBML.ID.void {
                    at += child.length + Int(size)
                    continue
                }
                if child.id == EBML.ID.timestamp, size <= 8, at + child.length + Int(size) <= bytes.count {
                    let body = (at + child.length)..<(at + child.length + Int(size))
                    return (found, Int64(clamping: EBML.uint(bytes, body)))
                }
                break
            }
        }
        return nil
    }

    /// The next pushed byte is the start of the cluster at `offset` whose timestamp is
    /// `timestamp`: returns the decoded frame its first packet begins at — exact for a cluster
    /// read before; otherwise from the timestamp, snapped to the packet grid while every packet
    /// read decoded to the same frame count (a timestamp is rounded to the timestamp scale).
    func resume(atCluster offset: Int64, timestamp: Int64, _ input: ByteInput, _ out: StreamOutput) -> Int64? {
        guard let reference, let segment = stack.first(where: { $0.id == EBML.ID.segment }) else { return nil }
        if let known = clusters.first(where: { $0.offset == offset }) {
            packetCursor = known.firstPacket
            decodedCursor = known.firstFrame
        } else {
            let estimate = Double(reference.firstFrame) + Double(timestamp - reference.timestamp) * framesPerTick
            if let grid = constantPacketFrames ?? (isPCM ? 1 : nil) {
                packetCursor = max(clampedInt64((estimate / Double(grid)).rounded()), 0)
                decodedCursor = packetCursor.multipliedReportingOverflow(by: Int64(grid)).overflow ? .max / 2 : packetCursor * Int64(grid)
            } else {
                decodedCursor = max(clampedInt64(estimate.rounded()), 0)
                let average = framesBefore.count > 0 ? max(framesBefore.total / Int64(framesBefore.count), 1) : 1
                packetCursor = decodedCursor / average
            }
            indexIsWhole = false
        }
        input.reset(to: offset)
        stack = [segment]
        clusterTimestamp = nil
        codec?.restart()
        packetsToDrop = 0
        endTrim = 0
        var first = (packet: packetCursor, frame: decodedCursor)
        if let start = plannedStart, let grid = constantPacketFrames ?? (isPCM ? 1 : nil) {
            let startPacket = start / Int64(grid)
            if startPacket > packetCursor {
                packetsToDrop = startPacket - packetCursor
                first = (startPacket, decodedCursor + packetsToDrop * Int64(grid))
            }
        }
        plannedStart = nil
        out.nextPacketIndex = first.packet
        return first.frame
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) {
        input.dropBuffered()
        codec?.restart()
    }

    func frames(beforePacket packet: Int64) -> Int64? {
        guard packet >= 0 else { return nil }
        if isPCM { return packet <= pcmFrames ? packet : nil }
        return framesBefore.frames(beforePacket: packet)
    }

    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard frame >= 0 else { return nil }
        if isPCM { return frame < pcmFrames ? (frame, 0) : nil }
        return framesBefore.packet(forFrame: frame)
    }
}
