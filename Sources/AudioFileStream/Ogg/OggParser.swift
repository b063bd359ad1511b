import BufferQueue

/// Ogg carrying Opus, Vorbis or FLAC: pages (``OggPageReader``), packets per logical stream
/// (``OggPacketAssembler``), the codec's headers and packet frame counts (``OggMapping``), and
/// the gapless numbers from granule positions.
///
/// The first logical stream of a link whose codec is played is read; others multiplexed with it
/// (Skeleton, video) are skipped and named in a warning. A new beginning-of-stream page after the
/// played stream's end begins a new link (a chained stream): an ``AudioFileStreamEvent/link(_:)``
/// event, and its packets continue the numbering.
///
/// Gapless numbers, per link: decoded frame 0 is granule `g₀ = G₁ − frames(first audio page)`
/// (at least 0 when that page also ends the stream: its granule then trims the end).
/// The start drops `max(pre-skip, −g₀)` frames (Opus's pre-skip; a negative `g₀` is a stream
/// whose first samples are not to be played); the end is the last page's granule, so the
/// remainder is what the last packets decode past it. A stream that starts at `g₀ > 0` (cut from
/// a longer one) plays all its frames.
final class OggParser: ContainerParser {
    private var reader = OggPageReader()
    private var assembler = OggPacketAssembler()

    /// The link being read.
    private struct Current {
        var serial: UInt32
        var mapping: any OggMapping
        var headersDone: Bool
        var offset: Int64
        var link: AudioStreamLink?
        /// Decoded frames of the link's packets so far, and its `g₀` once the first audio page is read.
        var decoded: Int64 = 0
        var initialGranule: Int64?
        /// Where the link's first audio page begins.
        var audioOffset: Int64?
        var lastGranule: Int64 = -1
        var ended = false
    }
    private var current: Current?
    /// Streams of the current link that are not played: serial → codec name.
    private var skippedStreams: [UInt32: String] = [:]
    private var reportedSkips = 0
    /// Decoded frames before each packet (one more entry than packets).
    private var framesBefore = CumulativeFrames()
    private var links: [AudioStreamLink] = []
    /// Bytes the pages' packets took (for the bit rate) and the frames they decoded to.
    private var packetBytes: Int64 = 0
    /// Packets emitted and their frames (after jumps too): the average frames a packet.
    private var parsedPackets: Int64 = 0
    private var parsedFrames: Int64 = 0
    /// Pages of the played streams read, with a granule position: where they start and the
    /// decoded frame their last packet ends at (for seeks among them, without probing).
    private var pageIndex: [(offset: Int64, decodedEnd: Int64, granule: Int64, serial: UInt32)] = []
    /// False after a jump (a seek by granule): ``framesBefore`` then holds the packets before it only.
    private var indexIsWhole = true
    /// A jump to a page (see ``resume(atPage:granule:)``) whose packets are still to be met.
    private var resumePage: (offset: Int64, granule: Int64)?

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        while input.skipPending == 0, let page = reader.nextPage(from: input) {
            reportSkips(out)
            try handle(page, out)
        }
    }

    private func reportSkips(_ out: StreamOutput) {
        for skip in reader.skipped[reportedSkips...] {
            out.warn(AudioFileStreamError(.invalidData, .ogg, skip.offset,
                "skipped \(skip.bytes) bytes: \(skip.why)\(skip.why.contains("CRC") ? " (the page was dropped)" : ""); reading resumed at the next Ogg page"))
        }
        reportedSkips = reader.skipped.count
    }

    private func handle(_ page: OggPage, _ out: StreamOutput) throws {
        if page.beginsStream { try begin(page, out) }
        let packets = assembler.packets(of: page)
        guard var link = current, page.serial == link.serial, !link.ended else { return }
        if let resume = resumePage {
            // The page a seek landed on: its packets end before the target; the next ones begin
            // at its granule. They are counted (Vorbis needs the last block size), not emitted.
            guard page.granulePosition >= 0 else { return }
            resumePage = nil
            for packet in packets where link.headersDone { _ = link.mapping.frames(ofPacket: packet.data) }
            link.lastGranule = page.granulePosition
            link.decoded = page.granulePosition - (link.initialGranule ?? 0)
            if page.offset != resume.offset || page.granulePosition != resume.granule {
                out.warn(AudioFileStreamError(.invalidData, .ogg, page.offset,
                    "a seek expected the page at byte \(resume.offset) (granule \(resume.granule)) and found one at \(page.offset) (granule \(page.granulePosition))"))
            }
            if page.endsStream {
                link.ended = true
                try end(&link, at: page.offset, out)
            }
            current = link
            return
        }
        var audio: [OggPacket] = []
        for packet in packets {
            if !link.headersDone {
                if packet.beginsStream { continue }   // the identification header, read by `begin`
                link.headersDone = try link.mapping.takeHeader(packet.data, at: page.offset)
                if link.headersDone { try ready(&link, out) }
                continue
            }
            // An empty packet holds no audio (ffmpeg ends Ogg FLAC with one on the last page).
            if !packet.data.isEmpty { audio.append(packet) }
        }
        if link.headersDone, !audio.isEmpty || page.endsStream {
            try emit(audio, page: page, &link, out)
        }
        current = link
    }

    /// A beginning-of-stream page: a stream of this link, or the first of a new link.
    private func begin(_ page: OggPage, _ out: StreamOutput) throws {
        // The first packet of a stream is alone on its BOS page (RFC 3533, and every mapping).
        let first = OggPacketAssembler.firstPacket(of: page)
        if var link = current, !link.ended {
            guard link.initialGranule != nil else {
                // Among the beginning pages of the played stream's group: multiplexed, skipped.
                skippedStreams[page.serial] = oggStreamName(firstPacket: first)
                return
            }
            // A beginning after the played stream's audio: a new link, the previous one cut
            // without its last page (a source that reconnected). It ends at its last granule.
            out.warn(AudioFileStreamError(.truncated, .ogg, page.offset,
                "the \(link.mapping.name) stream ends without its last page: a new stream begins at byte \(page.offset)"))
            link.ended = true
            try end(&link, at: page.offset, out)
            current = link
        }
        guard let mapping = try oggMapping(forFirstPacket: first, at: page.offset) else {
            skippedStreams[page.serial] = oggStreamName(firstPacket: first)
            return
        }
        if current?.ended == true { skippedStreams.removeAll() }
        current = Current(serial: page.serial, mapping: mapping, headersDone: !mapping.awaitsHeaders, offset: page.offset)
        if !mapping.awaitsHeaders, var link = current {
            try ready(&link, out)
            current = link
        }
    }

    /// All headers of the link are read: its format is known.
    private func ready(_ link: inout Current, _ out: StreamOutput) throws {
        let mapping = link.mapping
        let format = mapping.format
        let described = AudioStreamLink(index: links.count, firstPacket: out.nextPacketIndex, firstFrame: framesBefore.total,
                                        format: format, magicCookie: mapping.magicCookie, channelLayout: mapping.channelLayout,
                                        metadata: mapping.metadata, primingFrames: mapping.headerPriming)
        link.link = described
        links.append(described)
        if !out.isReady {
            out.dataFormat = format
            out.formatList = [format]
            out.magicCookie = mapping.magicCookie
            out.channelLayout = mapping.channelLayout
            out.bitRate = mapping.bitRate
            out.metadata = mapping.metadata
            for (serial, name) in skippedStreams.sorted(by: { $0.key < $1.key }) {
                out.warn(AudioFileStreamError(.unsupportedDataFormat, .ogg, link.offset,
                    "a \(name) stream (serial \(String(serial, radix: 16))) is multiplexed with the \(mapping.name) stream and is skipped"))
            }
            // Ready (and the first link announced) with the first audio page, whose granule
            // position says where decoded frame 0 lies.
            out.links = links
            return
        }
        out.links = links
        out.link(described)
    }

    /// Emits a page's audio packets; the first audio page fixes the link's start, the last its end.
    private func emit(_ packets: [OggPacket], page: OggPage, _ link: inout Current, _ out: StreamOutput) throws {
        var frames: [Int] = []
        for packet in packets {
            guard let count = link.mapping.frames(ofPacket: packet.data) else {
                throw AudioFileStreamError(.invalidData, .ogg, page.offset,
                    "a \(link.mapping.name) packet of \(packet.data.count) bytes on the page at byte \(page.offset) is malformed (its frame count cannot be read)")
            }
            frames.append(count)
        }
        let pageFrames = Int64(frames.reduce(0, +))
        if link.initialGranule == nil, page.granulePosition >= 0, !packets.isEmpty {
            // On a page that also ends the stream, a granule short of the page's frames is the end
            // trim (RFC 7845 §4.5), not a start before 0.
            let initial = page.endsStream ? max(page.granulePosition - pageFrames, 0) : page.granulePosition - pageFrames
            link.initialGranule = initial
            link.audioOffset = page.offset
            if var described = link.link {
                let priming = max(described.primingFrames, Int(clamping: -initial))
                if initial < 0 && link.mapping.headerPriming > 0 {
                    out.warn(AudioFileStreamError(.invalidData, .ogg, page.offset,
                        "the first \(link.mapping.name) page's granule position (\(page.granulePosition)) is smaller than its \(pageFrames) frames; the difference is dropped at the start"))
                }
                described.primingFrames = priming
                link.link = described
                links[described.index] = described
                out.links = links
                if !out.isReady {
                    out.dataOffset = page.offset
                    out.announceReady()
                    out.link(described)
                }
            }
        }
        if page.granulePosition >= 0 { link.lastGranule = page.granulePosition }
        if page.granulePosition >= 0, let initial = link.initialGranule, let described = link.link,
           pageIndex.last.map({ page.offset > $0.offset }) ?? true {
            pageIndex.append((page.offset, described.firstFrame + page.granulePosition - initial, page.granulePosition, page.serial))
        }
        let endsLink = page.endsStream
        if endsLink { link.ended = true }
        link.decoded += pageFrames
        if endsLink { try end(&link, at: page.offset, out) }
        for (packet, count) in zip(packets, frames) {
            out.emitPacket(packet.data, frames: count, fileOffset: page.offset, pieces: packet.pieces)
            if indexIsWhole { framesBefore.append(count) }
            packetBytes += Int64(packet.data.count)
            parsedFrames += Int64(count)
            parsedPackets += 1
        }
    }

    /// The link's length from its last granule position: announced before its last packets.
    private func end(_ link: inout Current, at offset: Int64, _ out: StreamOutput) throws {
        guard var described = link.link else { return }
        let initial = link.initialGranule ?? 0
        let decoded = link.decoded
        var end = link.lastGranule >= 0 ? link.lastGranule - initial : decoded
        if end > decoded {
            out.warn(AudioFileStreamError(.invalidData, .ogg, offset,
                "the last granule position of the \(link.mapping.name) stream says \(end) frames but its packets decode to \(decoded); all are played"))
            end = decoded
        }
        let priming = Int64(described.primingFrames)
        if end < priming {
            out.warn(AudioFileStreamError(.invalidData, .ogg, offset,
                "the \(link.mapping.name) stream ends (granule \(link.lastGranule)) before its \(priming) frames of priming; nothing of it plays"))
            end = priming
        }
        described.validFrames = end - priming
        described.remainderFrames = Int(decoded - end)
        link.link = described
        links[described.index] = described
        out.links = links
        out.link(described)
        // The stream's packet table: the first link's start, every link's valid frames.
        let valid = links.reduce(Int64(0)) { $0 + ($1.validFrames ?? 0) }
        let first = links[0]
        out.packetTableInfo = AudioFilePacketTableInfo(validFrames: valid, primingFrames: first.primingFrames,
                                                       remainderFrames: 0, source: .granulePosition,
                                                       note: links.count > 1 ? "\(links.count) chained links; each is trimmed on its own" : nil)
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        reportSkips(out)
        if input.available > 0 {
            out.warn(AudioFileStreamError(.truncated, .ogg, input.position, "the last \(input.available) bytes are not a whole Ogg page; they were dropped"))
            input.consume(input.available)
        }
        guard var link = current else {
            let names = Set(skippedStreams.values).sorted().joined(separator: ", ")
            throw AudioFileStreamError(names.isEmpty ? .noAudio : .unsupportedDataFormat, .ogg, 0,
                names.isEmpty ? "no Ogg stream with a played codec (Opus, Vorbis, FLAC)" : "the Ogg streams are \(names): none is played here")
        }
        guard link.headersDone else {
            throw AudioFileStreamError(.truncated, .ogg, link.offset, "the \(link.mapping.name) stream ends inside its headers")
        }
        if !link.ended {
            out.warn(AudioFileStreamError(.truncated, .ogg, input.position,
                "the \(link.mapping.name) stream ends without its last page (no end-of-stream flag); its end is the last granule position read"))
            link.ended = true
            try end(&link, at: input.position, out)
            current = link
        }
        guard parsedPackets > 0 else {
            throw AudioFileStreamError(.noAudio, .ogg, link.offset, "the \(link.mapping.name) stream holds no audio packet")
        }
        // After a seek by granule position the packets read are not the whole stream: nothing to count.
        guard indexIsWhole else { return }
        if var table = out.packetTableInfo {
            let total = framesBefore.total
            table.remainderFrames = Int(max(total - Int64(table.primingFrames) - table.validFrames, 0))
            out.packetTableInfo = table
            out.announce(.packetTableInfo)
        }
        out.audioDataPacketCount = Int64(framesBefore.count)
        out.announce(.audioDataPacketCount)
        let seconds = Double(framesBefore.total) / max(out.dataFormat?.sampleRate ?? 1, 1)
        if out.bitRate == nil, seconds > 0 {
            out.bitRate = Int(Double(packetBytes * 8) / seconds)
            out.announce(.bitRate)
        }
    }

    /// Packet 0 is the start: everything is read again from the first byte (headers, links).
    /// Other packets are found by granule position (``seekPlan(forFrame:preRollPackets:)``).
    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard packet == 0 else {
            throw AudioFileStreamError(.invalidOperation, .ogg, input.position,
                "an Ogg stream seeks by granule position (AudioFileStream.seekPlan(forFrame:preRollPackets:)), not by packet; an AudioFile indexes every packet")
        }
        input.reset(to: 0)
        reader = OggPageReader()
        reportedSkips = 0
        assembler = OggPacketAssembler()
        current = nil
        skippedStreams = [:]
        framesBefore = CumulativeFrames()
        links = []
        indexIsWhole = true
        resumePage = nil
        packetBytes = 0
        out.nextPacketIndex = 0
        return AudioFileStreamSeekResult(byteOffset: 0, isEstimated: false)
    }

    /// Frames a packet decodes to on average so far (a seek's pre-roll and estimates beyond the
    /// packets read).
    var averageFramesPerPacket: Int64 {
        parsedPackets > 0 ? max(parsedFrames / parsedPackets, 1) : 960   // (none read yet: a 20 ms packet at 48 kHz)
    }

    /// Where to look for decoded frame `frame`, `preRollPackets` packets earlier (see ``AudioStreamSeekPlan``).
    func seekPlan(forFrame frame: Int64, preRollPackets: Int) -> AudioStreamSeekPlan? {
        guard let link = current, let described = link.link, let initial = link.initialGranule, let dataStart = link.audioOffset else { return nil }
        let start = max(frame - Int64(preRollPackets) * averageFramesPerPacket, described.firstFrame)
        let target = start - described.firstFrame + initial
        // The last page read whose packets end at or before the start, and the first after it.
        let pages = pageIndex.filter { $0.serial == link.serial }
        let before = pages.last { $0.granule <= target }
        let after = pages.first { $0.granule > target }
        return AudioStreamSeekPlan(serial: link.serial, target: target,
                                   low: before.map { ($0.offset, $0.granule) } ?? (dataStart, initial),
                                   highOffset: after?.offset, lowIsFound: before != nil)
    }

    /// The next pushed byte is the start of the page at `offset` whose granule position is
    /// `granule`: its packets are skipped, and the packets after it begin at the returned decoded frame.
    /// With `skippingPage` false, `offset` is where the audio data begins (`granule` its initial
    /// granule position) and nothing is skipped.
    func resume(atPage offset: Int64, granule: Int64, skippingPage: Bool, _ input: ByteInput, _ out: StreamOutput) -> Int64? {
        guard var link = current, let described = link.link, let initial = link.initialGranule else { return nil }
        input.reset(to: offset)
        assembler = OggPacketAssembler()
        reader.clearSkipped()
        reportedSkips = 0
        link.mapping.restart()
        link.ended = false
        if !skippingPage {
            link.decoded = granule - initial
            link.lastGranule = granule
        }
        current = link
        resumePage = skippingPage ? (offset, granule) : nil
        indexIsWhole = false
        let decoded = described.firstFrame + granule - initial
        out.nextPacketIndex = decoded / averageFramesPerPacket
        return decoded
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) {
        input.dropBuffered()
        assembler = OggPacketAssembler()
        if var link = current {
            link.mapping.restart()
            current = link
        }
    }

    func frames(beforePacket packet: Int64) -> Int64? {
        guard packet >= 0 else { return nil }
        // Beyond the packets read: estimated (a seek by granule finds the real place).
        return framesBefore.frames(beforePacket: packet)
            ?? framesBefore.total + (packet - Int64(framesBefore.count)) * averageFramesPerPacket
    }

    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard frame >= 0 else { return nil }
        if let found = framesBefore.packet(forFrame: frame) { return found }
        // Beyond the packets read: an estimate.
        let past = frame - framesBefore.total, average = averageFramesPerPacket
        return (Int64(framesBefore.count) + past / average, Int(past % average))
    }
}

/// Where a seek by position looks, for containers a reader finds its place in by probing (Ogg by
/// granule position, native FLAC by sample number): the place to start from is the last page or
/// frame whose position is at most ``target``. ``low`` is known to be at or before it (one read, or
/// the first audio data); ``highOffset``, when known, is past it. The reader probes between them
/// (bisection, as opusfile does) with ``AudioFileStream/seekProbe(in:plan:)`` and resumes with
/// ``AudioFileStream/resume(at:position:skippingFound:)``.
public struct AudioStreamSeekPlan: Sendable {
    /// The Ogg logical stream whose pages count (nil for FLAC).
    public var serial: UInt32?
    /// The granule position (Ogg) or sample number (FLAC) sought.
    public var target: Int64
    /// A byte offset at or before the place sought, and its position.
    public var low: (offset: Int64, position: Int64)
    /// A byte offset past the place sought (nil: the end of the resource).
    public var highOffset: Int64?
    /// Whether ``low`` is a page or frame found (read before, or probed); otherwise it is where the
    /// audio data begins.
    public var lowIsFound: Bool
}
