import BufferQueue

/// A push parser for audio files and streams: Apple's AudioFileStream for Linux.
///
/// Push bytes as they arrive, in any chunking; get back properties and packets. The result is
/// the same whether the bytes come in one piece or one at a time. Call ``finish()`` at the end of
/// the data. Reads MP3 (MPEG-1/2/2.5 Layer I/II/III), ADTS, MP4/M4A/3GP (fragmented too), CAF,
/// WAV/AIFF/AIFC, raw AMR and MPEG transport streams, and turns each container's gapless
/// convention into one ``AudioFilePacketTableInfo`` in the decoder's output frames. What the
/// bytes are is decided by ``AudioSniffer``; formats it knows and nothing here decodes (AC-3,
/// E-AC-3, Ogg, FLAC …) end in an error naming them. ``beginSegment(initializationSection:)``
/// reads a source made of segments (HLS) as one stream.
///
/// ```swift
/// let stream = AudioFileStream()
/// for chunk in chunks {
///     for event in try stream.parse(chunk) {
///         switch event {
///         case .property(.readyToProducePackets): makeQueue(stream.dataFormat!, stream.magicCookie)
///         case .packets(let packets): enqueue(packets)
///         default: break
///         }
///     }
/// }
/// _ = try stream.finish()
/// ```
///
/// Not thread-safe: use one stream from one thread at a time.
public final class AudioFileStream {
    private let input = ByteInput()
    private let out = StreamOutput()
    private var parser: (any ContainerParser)?
    private let hint: AudioFileType?
    /// Whether the caller can move to another byte offset when asked (``AudioFileStreamEvent/seekRequired(byteOffset:)``).
    public let sourceIsSeekable: Bool
    private var id3: ID3v2.Contents?
    private var sniffedJunk = 0
    /// The first plausible MPEG header met while sniffing, for the message when none is confirmed.
    private var firstCandidate: (offset: Int64, length: Int, summary: String)?
    private var finished = false
    /// Damage found by ``finish()`` after it had released packets: thrown by the next call.
    private var errorAfterPackets: Error?
    private var justSeeked = false
    /// Segmented mode: the head of the segment begun last, while its ID3 tag is being read.
    private var segmentHead: [UInt8]?

    /// - Parameters:
    ///   - fileTypeHint: the container, if known (e.g. from a file extension); the bytes decide when they are unambiguous.
    ///   - sourceIsSeekable: the caller can push bytes from another offset when asked; needed for
    ///     MP4 files whose index (`moov`) follows the media data.
    public init(fileTypeHint: AudioFileType? = nil, sourceIsSeekable: Bool = false) {
        hint = fileTypeHint
        self.sourceIsSeekable = sourceIsSeekable
    }

    /// False: packets are described (file offset, size, frames) without their bytes, for a
    /// caller that reads them again from the file (``AudioFile`` while indexing). A transport
    /// stream's packets keep their bytes. Set before the first bytes.
    package var keepsPacketBytes: Bool {
        get { out.keepsPacketBytes }
        set { out.keepsPacketBytes = newValue }
    }

    /// While packet bytes are not kept: where the bytes of the packets emitted since the last
    /// call lie in the file, in order, for a container that spreads them over its own (Ogg pages).
    package func takePacketPieces() -> [(offset: Int64, length: Int)] { out.takePieces() }

    // MARK: properties

    /// The container, once the first bytes are sniffed.
    public var fileType: AudioFileType? { out.fileType }
    /// The format of the packets; for AAC the core (LC) reading, see ``formatList``.
    public var dataFormat: AudioStreamDescription? { out.dataFormat }
    /// Every reading of the stream, best first (HE-AAC v2, HE-AAC, AAC-LC for an AAC stream).
    public var formatList: [AudioStreamDescription] { out.formatList }
    /// What the decoder needs besides the packets (an AudioSpecificConfig, ALAC's config, Opus's `OpusHead`).
    public var magicCookie: [UInt8]? { out.magicCookie }
    /// Absolute byte offset of the first audio packet.
    public var dataOffset: Int64? { out.dataOffset }
    /// Bytes of audio data, when the container says.
    public var audioDataByteCount: Int64? { out.audioDataByteCount }
    /// Packets in the stream, from a header or table (MP3: the Xing/VBRI count until the end is seen).
    public var audioDataPacketCount: Int64? { out.audioDataPacketCount }
    /// Bits per second.
    public var bitRate: Int? { out.bitRate }
    /// The largest packet in bytes, when the container says or all packets are seen.
    public var maximumPacketSize: Int? { out.maximumPacketSize }
    /// The speakers of the channels, when the container or the codec says.
    public var channelLayout: AudioChannelLayout? { out.channelLayout }
    /// The valid frames, priming and remainder, from the container's gapless numbers.
    public var packetTableInfo: AudioFilePacketTableInfo? { out.packetTableInfo }
    /// Tags, pictures and cue sheet read so far.
    public var metadata: AudioFileMetadata { out.metadata }
    /// Packets a decoder needs before a packet to decode it correctly after a seek (MP4 `sgpd`
    /// roll distance, negative = before), when the container says.
    public var packetRollDistance: Int? { out.packetRollDistance }
    /// The links of a chained stream read so far, the first included (Ogg; empty for other
    /// containers). Each is also reported as an ``AudioFileStreamEvent/link(_:)`` event.
    public var links: [AudioStreamLink] { out.links }
    /// Whether everything needed to decode is known (packets follow).
    public var isReadyToProducePackets: Bool { out.isReady }
    /// Problems that did not stop parsing (skipped junk, a cut last frame, a header that miscounts).
    public var warnings: [AudioFileStreamError] { out.warnings }
    /// Absolute offset of the next byte the stream expects.
    public var nextByteOffset: Int64 { input.position + Int64(input.available) + input.skipPending }

    // MARK: parsing

    /// The stream broke here (a live connection dropped; other bytes follow after a
    /// discontinuity, or none): the packets whose bytes have all arrived are handed over, as at the
    /// end of a stream, instead of waiting for the next packet to confirm them. Partial packets
    /// stay, for the discontinuity that follows to drop. Not for a seek: there the buffered
    /// bytes are simply not wanted.
    public func parseBufferedAsEnd() throws -> [AudioFileStreamEvent] {
        guard !finished, parser != nil, segmentHead == nil else { return out.takeEvents() }
        input.atEnd = true
        defer { input.atEnd = false }
        try run()
        return out.takeEvents()
    }

    /// Parses more bytes.
    ///
    /// When the format changes mid-stream (a new MPEG sample rate, a new ADTS configuration) after
    /// this call has produced events, the call returns before the change, keeping the rest of the
    /// bytes; the next `parse` or ``finish()`` announces it and continues. So a property read while
    /// handling its event is the value it announced.
    /// - Parameters:
    ///   - bytes: the next bytes of the stream.
    ///   - discontinuity: these bytes do not follow the previously pushed ones (after a
    ///     seek); any packet split across the break is dropped. After an exact
    ///     ``seek(toPacket:)`` nothing is split and the flag changes nothing.
    public func parse(_ bytes: UnsafeRawBufferPointer, discontinuity: Bool = false) throws -> [AudioFileStreamEvent] {
        guard !finished else {
            throw AudioFileStreamError(.invalidOperation, out.fileType, input.position, "parse after finish")
        }
        if segmentHead != nil {
            guard let rest = takeSegmentHead(adding: bytes, atEnd: false) else { return out.takeEvents() }
            return try rest.withUnsafeBytes { try parse($0, discontinuity: discontinuity) }
        }
        // After an exact seek nothing is split across the break; otherwise drop the partial packet.
        if discontinuity, let parser, !justSeeked { parser.discontinuity(input, out) }
        justSeeked = false
        input.append(bytes)
        out.pauseRequested = false
        try run()
        return out.takeEvents()
    }

    /// Parses more bytes.
    public func parse<Bytes: Sequence>(_ bytes: Bytes, discontinuity: Bool = false) throws -> [AudioFileStreamEvent] where Bytes.Element == UInt8 {
        let array = Array(bytes)
        return try array.withUnsafeBytes { try parse($0, discontinuity: discontinuity) }
    }

    /// Ends the data: emits what is complete and reports what is missing.
    ///
    /// Packets are normally returned as their bytes arrive. Some only the end releases (an AAC
    /// stream shorter than the packets the SBR scan looks at): when damage is found after such
    /// packets, this call returns them and the next call throws the error.
    /// - Throws: ``AudioFileStreamError`` when the data ended early or held no audio; packets
    ///   produced before the damage have already been returned.
    public func finish() throws -> [AudioFileStreamEvent] {
        if let error = errorAfterPackets {
            errorAfterPackets = nil
            throw error
        }
        guard !finished else { return [] }
        // A segment's head still being read (shorter than an ID3 header): what it holds goes to
        // the parser, and its events come with the ones below.
        if segmentHead != nil, let rest = takeSegmentHead(adding: UnsafeRawBufferPointer(start: nil, count: 0), atEnd: true) {
            rest.withUnsafeBytes { input.append($0) }
        }
        finished = true
        input.atEnd = true
        do {
            // One list for everything left: format changes in it are announced in order and the
            // last value wins for reads.
            out.pauseRequested = false
            out.finishing = true
            try run()
            if parser == nil { try sniffFailedAtEnd() }
            try parser?.finish(input, out)
        } catch {
            let produced = out.takeEvents()
            if produced.contains(where: { if case .packets = $0 { return true } else { return false } }) {
                errorAfterPackets = error
                return produced
            }
            throw error
        }
        return out.takeEvents()
    }

    /// Tells the stream that the next pushed byte is at `offset` (after a ``AudioFileStreamEvent/seekRequired(byteOffset:)``).
    public func resume(atByteOffset offset: Int64) {
        input.reset(to: offset)
        if finished { finished = false }
    }

    /// Where packet `packet` starts. After this, push bytes from that offset.
    public func seek(toPacket packet: Int64) throws -> AudioFileStreamSeekResult {
        guard let parser, out.isReady else {
            throw AudioFileStreamError(.invalidOperation, out.fileType, input.position, "cannot seek before the stream is ready to produce packets")
        }
        guard packet >= 0 else {
            throw AudioFileStreamError(.invalidOperation, out.fileType, input.position, "cannot seek to packet \(packet)")
        }
        finished = false
        let result = try parser.seek(toPacket: packet, input, out)
        justSeeked = !result.isEstimated
        return result
    }

    // MARK: segments

    /// Segmented mode, for a source made of segments (HLS): the bytes pushed next begin a new
    /// segment of the same stream, parsed on as one stream (a frame split across the boundary
    /// is joined). The segment's first stated time is reported as
    /// ``AudioFileStreamEvent/segmentTimestamp(_:)`` before its packets — a transport stream's
    /// first PES PTS, packed audio's ID3 `transportStreamTimestamp`, a fragment's `tfdt` in its
    /// track's timescale — and its ID3 tags as ``AudioFileStreamEvent/timedMetadata(_:)``.
    /// A packed-audio segment's leading ID3 tag is read here and not passed to the parser.
    ///
    /// - Parameter initializationSection: an `EXT-X-MAP` section (fragmented MP4's `ftyp` +
    ///   `moov`), parsed before the segment; give it with the first segment it applies to (a
    ///   new one needs a new stream).
    /// - Returns: the events of parsing the initialization section.
    public func beginSegment(initializationSection: [UInt8]? = nil) throws -> [AudioFileStreamEvent] {
        out.segmented = true
        var events: [AudioFileStreamEvent] = []
        if let initializationSection {
            if parser == nil, hint == nil { start(.mp4) }
            events = try parse(initializationSection)
        }
        parser?.beginSegment()
        out.wantsSegmentTimestamp = true
        segmentHead = []
        return events
    }

    /// The container of the audio a transport stream carries (ADTS or MPEG audio), once known.
    public var elementaryStreamType: AudioFileType? { parser?.elementaryStreamType }

    /// Collects a segment's head until its leading ID3 tag, if any, is whole; reports the tag and
    /// returns the bytes after it (nil: still collecting).
    private func takeSegmentHead(adding bytes: UnsafeRawBufferPointer, atEnd: Bool) -> [UInt8]? {
        guard var head = segmentHead else { return nil }
        head.append(contentsOf: bytes)
        segmentHead = head
        guard head.count >= 10 || atEnd else { return nil }
        var rest = head
        if head.count >= 10, let size = ID3v2.totalSize(header: Array(head[0..<10])) {
            guard head.count >= size || atEnd else { return nil }
            let tag = ID3v2.parse(Array(head.prefix(size)))
            if let pts = tag.transportStreamTimestamp {
                out.segmentTimestamp(AudioStreamTimestamp(ticks: pts, perSecond: 90_000, source: .id3))
            }
            out.timedMetadata(tag.metadata)
            rest = Array(head.dropFirst(size))
        }
        segmentHead = nil
        return rest
    }

    // MARK: seeking by position (Ogg, FLAC, Matroska)

    /// For a stream a reader finds its place in by probing (Ogg by granule position, native FLAC
    /// by sample number, Matroska by cluster timestamp beyond the clusters read), where to look
    /// for a decode that starts `preRollPackets` packets (on average) before decoded frame
    /// `frame`; nil for other containers, before the stream is ready, or where a seek by packet
    /// finds the frame (a Matroska cluster read already).
    public func seekPlan(forFrame frame: Int64, preRollPackets: Int) -> AudioStreamSeekPlan? {
        if let ogg = parser as? OggParser { return ogg.seekPlan(forFrame: frame, preRollPackets: preRollPackets) }
        if let flac = parser as? FLACParser { return flac.seekPlan(forFrame: frame) }
        if let matroska = parser as? MatroskaParser { return matroska.seekPlan(forFrame: frame, preRollPackets: preRollPackets) }
        return nil
    }

    /// The first place in `bytes` (read from anywhere in the resource) that the plan's container
    /// can start from: an Ogg page of the plan's stream that carries a granule position, a FLAC
    /// frame header of this stream, a Matroska cluster with its timestamp. Its offset in `bytes`
    /// and its position.
    public func seekProbe(in bytes: [UInt8], plan: AudioStreamSeekPlan) -> (offset: Int, position: Int64)? {
        if parser is OggParser { return Self.oggPage(in: bytes, serial: plan.serial).map { ($0.offset, $0.granule) } }
        if let flac = parser as? FLACParser { return flac.probe(bytes) }
        if parser is MatroskaParser { return MatroskaParser.probe(bytes) }
        return nil
    }

    /// The first whole page of logical stream `serial` in `bytes` (any page when nil) that carries
    /// a granule position: its offset in `bytes`, its granule position and its length.
    static func oggPage(in bytes: [UInt8], serial: UInt32?) -> (offset: Int, granule: Int64, length: Int)? {
        let input = ByteInput()
        bytes.withUnsafeBytes { input.append($0) }
        var reader = OggPageReader()
        while let page = reader.nextPage(from: input) {
            if serial.map({ $0 == page.serial }) ?? true, page.granulePosition >= 0 {
                return (Int(page.offset), page.granulePosition, 27 + page.segments.count + page.body.count)
            }
        }
        return nil
    }

    /// Moves the stream to the page or frame at byte `offset` whose position is `position` (found
    /// by ``seekPlan(forFrame:preRollPackets:)`` and probing): the next bytes pushed start there.
    /// With `skippingFound`, an Ogg page's own packets are skipped (they end at its granule
    /// position); FLAC frames and Matroska clusters are read from the one found. Without it,
    /// `offset` is where the audio data begins. Returns the decoded frame (priming included) the
    /// packets read next begin at (for a Matroska cluster not read before, from its timestamp:
    /// exact where the packets' frame counts are constant); nil for other containers, or before
    /// the stream is ready.
    public func resume(at offset: Int64, position: Int64, skippingFound: Bool) -> Int64? {
        finished = false
        justSeeked = true
        if let ogg = parser as? OggParser { return ogg.resume(atPage: offset, granule: position, skippingPage: skippingFound, input, out) }
        if let flac = parser as? FLACParser { return flac.resume(atFrame: offset, sample: position, input, out) }
        if let matroska = parser as? MatroskaParser { return matroska.resume(atCluster: offset, timestamp: position, input, out) }
        return nil
    }

    /// The first frame of packet `packet`, counting every decoded frame (priming included).
    public func frame(forPacket packet: Int64) -> Int64? { parser?.frames(beforePacket: packet) }

    /// The packet holding decoded frame `frame` (priming included) and the frame's offset in it.
    public func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? { parser?.packet(forFrame: frame) }

    /// Where packet `packet` starts without moving the stream (exact from a table, else estimated).
    public func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        (parser as? any PacketLocating)?.byteOffset(forPacket: packet)
    }

    // MARK: sniffing

    private func run() throws {
        if input.mustWait { return }
        if parser == nil { try sniff() }
        try parser?.parse(input, out)
    }

    private func sniff() throws {
        while parser == nil {
            let available = input.available
            guard available >= 12 || (input.atEnd && available > 0) else { return }
            if available >= 3, input.u8(0) == 0x49, input.u8(1) == 0x44, input.u8(2) == 0x33, id3 == nil {
                guard available >= 10 || input.atEnd else { return }
                if available >= 10, let total = ID3v2.totalSize(header: input.bytes(0, 10)) {
                    let keep = min(total, ID3v2.readCap)
                    guard available >= keep || input.atEnd else {
                        input.waitFor(keep)
                        return
                    }
                    if available < keep {
                        throw AudioFileStreamError(.truncated, nil, input.position,
                            "the ID3v2 tag declares \(total) bytes but the stream ends after \(available); no audio follows")
                    }
                    id3 = ID3v2.parse(input.bytes(0, keep))
                    out.metadata = id3?.metadata ?? AudioFileMetadata()
                    input.skip(Int64(total))
                    continue
                }
            }
            switch AudioSniffer.magic(AudioSniffer.HeadBytes(input), atEnd: input.atEnd) {
            case .found(.audio(let type)):
                start(type)
                return
            case .found(let other):
                throw refusal(other)
            case .needMore(let count):
                input.waitFor(count)
                return
            case .none:
                break
            }
            // A transport stream shows itself by a sync byte every 188 bytes: wait for three.
            if input.u8(0) == 0x47 {
                if TransportStreamParser.isSynced(input) {
                    start(.mpegTransportStream)
                    return
                }
                if !input.atEnd && input.available < TransportStreamParser.bytesToSniff {
                    input.waitFor(TransportStreamParser.bytesToSniff)
                    return
                }
            }
            if hint == .mpegTransportStream {
                start(.mpegTransportStream)
                return
            }
            // MPEG audio or ADTS, possibly after junk: find the first confirmed frame.
            var offset = 0
            while offset + 4 <= input.available {
                if sniffedJunk + offset > 256 * 1024 {
                    throw AudioFileStreamError(.unsupportedFileType, nil, input.position + Int64(offset),
                        "no known container and no MPEG audio or ADTS frame in the first \(sniffedJunk + offset) bytes")
                }
                if input.u8(offset) != 0xFF {   // jump to the next sync byte
                    offset = input.firstIndex(of: 0xFF, from: offset, to: input.available - 3) ?? input.available - 3
                    continue
                }
                if firstCandidate == nil, let header = MPEGHeader.at(input, offset), !header.isFreeFormat {
                    firstCandidate = (input.position + Int64(offset), header.frameLength, header.summary)
                }
                let adts = ADTSHeader.confirm(input, at: offset, matching: nil)
                let mpeg = MPEGHeader.confirmStream(input, at: offset, followsTag: id3 != nil && sniffedJunk + offset == 0)
                if case .yes = adts {
                    skipJunk(offset)
                    start(.adts)
                    return
                }
                if case .yes = mpeg {
                    skipJunk(offset)
                    start(.mp3)
                    return
                }
                // FLAC without its header (a stream cut before a frame), once neither is undecided.
                var wait = Int.max
                if case .no = adts, case .no = mpeg {
                    let flac = FLACFrameHeader.confirmHeaderless(input, at: offset)
                    if flac.yes {
                        skipJunk(offset)
                        start(.flac)
                        return
                    }
                    if let count = flac.needMore { wait = count }
                }
                // Undecided: wait for the bytes that can decide it (a `no` is final).
                if case .needMore(let count) = adts { wait = min(wait, count) }
                if case .needMore(let count) = mpeg { wait = min(wait, count) }
                if wait < Int.max {
                    skipJunk(offset)
                    input.waitFor(wait - offset)
                    return
                }
                offset += 1
            }
            skipJunk(offset)
            return
        }
    }

    private func skipJunk(_ count: Int) {
        guard count > 0 else { return }
        sniffedJunk += count
        input.consume(count)
    }

    /// The error for bytes the sniffer knows and nothing here plays.
    private func refusal(_ kind: AudioContentKind) -> AudioFileStreamError {
        let at = input.position - Int64(sniffedJunk)
        if kind == .hlsPlaylist {
            return AudioFileStreamError(.unsupportedFileType, nil, at, "an HLS playlist (#EXTM3U), not audio: play it as an HLS presentation")
        }
        return AudioFileStreamError(.unsupportedDataFormat, nil, at, "\(kind) audio: recognised, but no decoder in this library plays it")
    }

    private func start(_ type: AudioFileType) {
        if sniffedJunk > 0 {
            out.warn(AudioFileStreamError(.invalidData, type, input.position - Int64(sniffedJunk),
                "skipped \(sniffedJunk) bytes before the first \(type.displayName) frame"))
        }
        out.fileType = type
        switch type {
        case .mp3: parser = MPEGAudioParser(iTunSMPB: id3?.iTunSMPB, followsTag: id3 != nil && sniffedJunk == 0)
        case .adts: parser = ADTSParser()
        case .mp4: parser = MP4Parser(seekable: sourceIsSeekable)
        case .caf: parser = CAFParser(seekable: sourceIsSeekable)
        case .wave, .aiff, .aifc: parser = RIFFParser(type: type, seekable: sourceIsSeekable)
        case .amr: parser = AMRParser()
        case .mpegTransportStream: parser = TransportStreamParser()
        case .ogg: parser = OggParser()
        case .matroska: parser = MatroskaParser()
        case .flac: parser = FLACParser()
        }
    }

    private func sniffFailedAtEnd() throws {
        if input.position == 0 && input.available == 0 {
            throw AudioFileStreamError(.unsupportedFileType, hint, 0, "the stream is empty")
        }
        if let candidate = firstCandidate {
            let end = input.position + Int64(input.available)
            let why = candidate.offset + Int64(candidate.length) > end
                ? "its frame needs \(candidate.length) bytes but the stream ends at byte \(end)"
                : "fewer than \(MPEGHeader.framesToAgree) frames in a row agree, and neither the end of the stream nor a tag follows a frame"
            throw AudioFileStreamError(.noAudio, .mp3, candidate.offset,
                "the only \(candidate.summary) frame header is not confirmed: \(why)")
        }
        let head = (0..<min(input.available, 8)).map { String(input.u8($0), radix: 16) }.joined(separator: " ")
        let start = input.position - Int64(sniffedJunk)
        throw AudioFileStreamError(id3 != nil ? .noAudio : .unsupportedFileType, hint, start,
            id3 != nil ? "no MPEG audio or ADTS frame after the ID3v2 tag"
                       : "not a known container and no MPEG audio or ADTS frame in \(sniffedJunk + input.available) bytes (last bytes: \(head.isEmpty ? "none" : head))")
    }
}

/// Parsers that know where packets lie without moving.
protocol PacketLocating {
    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult?
}
