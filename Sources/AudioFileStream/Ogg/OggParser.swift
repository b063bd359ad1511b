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
        var lastGranule: Int64 = -1
        var ended = false
    }
    private var current: Current?
    /// Streams of the current link that are not played: serial → codec name.
    private var skippedStreams: [UInt32: String] = [:]
    private var reportedSkips = 0
    /// Decoded frames before each packet (one more entry than packets).
    private var framesBefore: [Int64] = [0]
    private var links: [AudioStreamLink] = []
    /// Bytes the pages' packets took (for the bit rate) and the frames they decoded to.
    private var packetBytes: Int64 = 0

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
        var audio: [[UInt8]] = []
        for packet in packets {
            if !link.headersDone {
                if packet.beginsStream { continue }   // the identification header, read by `begin`
                link.headersDone = try link.mapping.takeHeader(packet.data, at: page.offset)
                if link.headersDone { try ready(&link, out) }
                continue
            }
            audio.append(packet.data)
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
        if let link = current, !link.ended {
            // Multiplexed with the played stream: skipped.
            skippedStreams[page.serial] = oggStreamName(firstPacket: first)
            return
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
        let described = AudioStreamLink(index: links.count, firstPacket: out.nextPacketIndex, firstFrame: framesBefore[framesBefore.count - 1],
                                        format: format, magicCookie: mapping.magicCookie, channelLayout: mapping.channelLayout,
                                        metadata: mapping.metadata, primingFrames: mapping.headerPriming)
        link.link = described
        links.append(described)
        if !out.isReady {
            out.dataFormat = format
            out.formatList = [format]
            out.magicCookie = mapping.magicCookie
            out.channelLayout = mapping.channelLayout
            out.dataOffset = link.offset
            out.bitRate = mapping.bitRate
            out.metadata = mapping.metadata
            for (serial, name) in skippedStreams.sorted(by: { $0.key < $1.key }) {
                out.warn(AudioFileStreamError(.unsupportedDataFormat, .ogg, link.offset,
                    "a \(name) stream (serial \(String(serial, radix: 16))) is multiplexed with the \(mapping.name) stream and is skipped"))
            }
            out.announceReady()
        }
        out.links = links
        out.link(described)
    }

    /// Emits a page's audio packets; the first audio page fixes the link's start, the last its end.
    private func emit(_ packets: [[UInt8]], page: OggPage, _ link: inout Current, _ out: StreamOutput) throws {
        var frames: [Int] = []
        for packet in packets {
            guard let count = link.mapping.frames(ofPacket: packet) else {
                throw AudioFileStreamError(.invalidData, .ogg, page.offset,
                    "a \(link.mapping.name) packet of \(packet.count) bytes on the page at byte \(page.offset) is malformed (its frame count cannot be read)")
            }
            frames.append(count)
        }
        let pageFrames = Int64(frames.reduce(0, +))
        if link.initialGranule == nil, page.granulePosition >= 0, !packets.isEmpty {
            // On a page that also ends the stream, a granule short of the page's frames is the end
            // trim (RFC 7845 §4.5), not a start before 0.
            let initial = page.endsStream ? max(page.granulePosition - pageFrames, 0) : page.granulePosition - pageFrames
            link.initialGranule = initial
            if var described = link.link {
                let priming = max(described.primingFrames, Int(clamping: -initial))
                if initial < 0 && link.mapping.headerPriming > 0 {
                    out.warn(AudioFileStreamError(.invalidData, .ogg, page.offset,
                        "the first \(link.mapping.name) page's granule position (\(page.granulePosition)) is smaller than its \(pageFrames) frames; the difference is dropped at the start"))
                }
                described.primingFrames = priming
                link.link = described
                links[described.index] = described
            }
        }
        if page.granulePosition >= 0 { link.lastGranule = page.granulePosition }
        let endsLink = page.endsStream
        if endsLink { link.ended = true }
        link.decoded += pageFrames
        if endsLink { try end(&link, at: page.offset, out) }
        for (packet, count) in zip(packets, frames) {
            out.emitPacket(packet, frames: count, fileOffset: page.offset)
            framesBefore.append(framesBefore[framesBefore.count - 1] + Int64(count))
            packetBytes += Int64(packet.count)
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
        guard framesBefore.count > 1 else {
            throw AudioFileStreamError(.noAudio, .ogg, link.offset, "the \(link.mapping.name) stream holds no audio packet")
        }
        if var table = out.packetTableInfo {
            let total = framesBefore[framesBefore.count - 1]
            table.remainderFrames = Int(max(total - Int64(table.primingFrames) - table.validFrames, 0))
            out.packetTableInfo = table
            out.announce(.packetTableInfo)
        }
        out.audioDataPacketCount = Int64(framesBefore.count - 1)
        out.announce(.audioDataPacketCount)
        let seconds = Double(framesBefore[framesBefore.count - 1]) / max(out.dataFormat?.sampleRate ?? 1, 1)
        if out.bitRate == nil, seconds > 0 {
            out.bitRate = Int(Double(packetBytes * 8) / seconds)
            out.announce(.bitRate)
        }
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        throw AudioFileStreamError(.invalidOperation, .ogg, input.position,
            "an Ogg stream is not seeked by packet here; open it as an AudioFile (which indexes every packet) to seek")
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
        guard packet >= 0, packet < Int64(framesBefore.count) else { return nil }
        return framesBefore[Int(packet)]
    }

    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard frame >= 0, let total = framesBefore.last, frame < total else { return nil }
        var low = 0, high = framesBefore.count - 1
        while low + 1 < high {
            let middle = (low + high) / 2
            if framesBefore[middle] <= frame { low = middle } else { high = middle }
        }
        return (Int64(low), Int(frame - framesBefore[low]))
    }
}
