import AudioFileStream
import AudioPlayback
import BufferQueue
import Foundation

/// An HLS presentation (RFC 8216), audio only, as a ``PacketSource``: the segments' packets flow
/// into one decoder, so joins add and lose nothing — a VOD presentation plays exactly the packets
/// of the file it was cut from.
///
/// - Master playlists: a variant is chosen by ``HLSConfiguration/variant`` (by default the highest
///   `BANDWIDTH` whose `CODECS` can be decoded); a variant whose audio is in an `AUDIO` rendition
///   plays that rendition.
/// - Segments: MPEG-TS carrying ADTS AAC or MPEG audio, packed audio (ADTS or MP3 with the ID3
///   `com.apple.streaming.transportStreamTimestamp`), and fragmented MP4 / CMAF with `EXT-X-MAP`;
///   byte ranges; AES-128 (SAMPLE-AES is refused with an error saying so).
/// - VOD seeks land frame-exact: the segment is chosen by its `EXTINF` time, and the packet
///   position comes from the segment's own timestamp (PES PTS, the ID3 timestamp, or `tfdt`).
/// - Live: starts three target durations before the live edge, follows the playlist's reloads,
///   and reports a skipped segment as a ``PacketRead/discontinuity``. A server with blocking
///   reloads (`CAN-BLOCK-RELOAD=YES`) is asked for each next segment (`_HLS_msn`) and answers
///   when it exists, with no reload timer.
///
/// Events: `hls-variant` (the variant chosen), `program-date-time` (a segment's
/// `EXT-X-PROGRAM-DATE-TIME`, when the segment is read), ID3 timed metadata as
/// ``AudioSourceEvent/streamTitle(_:)`` and an `id3` property, `hls-gap` for skipped segments,
/// `hls-blocking-reload` when a blocking reload failed and an ordinary one followed.
/// HLS carries no gapless numbers: every decoded frame is played (priming included).
public final class HLSAudioSource: PacketSource, @unchecked Sendable {
    public let url: String
    /// The media playlist being played (after the first load).
    public private(set) var playlist: HLSMediaPlaylist?
    /// The variant chosen from a master playlist (nil when the URL is a media playlist).
    public private(set) var variant: HLSMasterPlaylist.Variant?
    /// The master playlist, when the URL is one (once loaded).
    public var masterPlaylist: HLSMasterPlaylist? { loader.master }
    /// How the segments carry their audio ("MPEG-TS", "fragmented MP4" or "packed audio"), and
    /// the elementary stream's container (ADTS, MP3, MP4), once the first segment was parsed.
    public private(set) var segmentContainer: (segments: String, audio: AudioFileType?)?

    private let loader: HLSLoader
    private let context: AudioSourceContext
    private var pipeline: HLSSegmentPipeline?
    /// The parser whose format the decoder was set up with.
    private var formatStream: AudioFileStream?
    private var initSection: [UInt8]?
    private var pending = PendingPackets()
    private var ended = false
    private var failure: (any Error)?
    private var closed = false
    private var gapPending = false
    private var segment: HLSSegmentStart?
    /// Index of the next packet parsed; nil after a seek until the segment's timestamp says.
    private var nextPacket: Int64? = 0
    /// Packets before this one are dropped (a seek's target).
    private var dropBefore: Int64 = 0
    /// After a restart: the first packets show whether the segment began early enough.
    private var checkStart = false
    /// The first segment's timestamp: packet positions after a seek are counted from it.
    private var origin: (ticks: Int64, perSecond: Int64, discontinuitySequence: Int)?

    /// Starts loading `url` (a master or media playlist); returns at once.
    public init(url: String, configuration: HLSConfiguration = HLSConfiguration(), context: AudioSourceContext = AudioSourceContext()) throws {
        guard let parsed = URL(string: url), parsed.scheme?.lowercased().hasPrefix("http") == true else {
            throw HTTPStreamError(url: url, byteOffset: 0, message: "not an http(s) URL")
        }
        self.url = url
        self.context = context
        loader = HLSLoader(url: parsed, configuration: configuration, report: context.report, available: context.available)
        context.report(.state(.connecting))
        loader.start(.beginning)
    }

    deinit { loader.close() }

    /// Stops loading; reads end.
    public func close() {
        closed = true
        loader.close()
    }

    public var isReady: Bool {
        take { self.formatStream?.isReadyToProducePackets == true }
        return formatStream?.isReadyToProducePackets == true || failure != nil
    }

    public var format: AudioStreamDescription {
        formatStream.flatMap { $0.formatList.first ?? $0.dataFormat } ?? .float32(sampleRate: 44100, channels: 2)
    }
    public var magicCookie: [UInt8]? { formatStream?.magicCookie }
    /// None: HLS has no gapless numbers.
    public var packetTable: AudioFilePacketTableInfo? { nil }
    public var rollDistance: Int? { formatStream?.packetRollDistance }
    public var title: String? { formatStream?.metadata.title }
    /// What the parsers skipped or doubted.
    public var warnings: [AudioFileStreamError] { formatStream?.warnings ?? [] }

    /// VOD: the `EXTINF` durations' sum (an estimate); nil for live streams.
    public var duration: (frames: Int64, isEstimated: Bool)? {
        guard let playlist, !playlist.isLive, formatStream != nil else { return nil }
        return (Int64((playlist.duration * format.sampleRate).rounded()), true)
    }

    private var framesPerPacket: Int64 { Int64(max(format.framesPerPacket, 1)) }

    public func packet(forFrame frame: Int64) -> Int64? { frame / framesPerPacket }
    public func frame(forPacket packet: Int64) -> Int64? { packet * framesPerPacket }

    /// VOD: restarts loading at the segment holding packet `packet` (by `EXTINF` time, with a
    /// margin for inexact durations); packets before it are dropped once the segment's timestamp
    /// has placed them.
    public func seek(toPacket packet: Int64) throws {
        guard let playlist else { return }
        guard !playlist.isLive else {
            throw HTTPStreamError(url: url, byteOffset: 0, message: "a live HLS stream cannot seek")
        }
        let time = Double(packet * framesPerPacket) / format.sampleRate
        restart(at: Self.segment(containing: time - 0.5, in: playlist), dropBefore: packet)
    }

    /// The segment whose `EXTINF` span holds `time`.
    static func segment(containing time: Double, in playlist: HLSMediaPlaylist) -> Int {
        var start = 0.0
        for (index, segment) in playlist.segments.enumerated() {
            if time < start + segment.duration { return index }
            start += segment.duration
        }
        return max(playlist.segments.count - 1, 0)
    }

    private func restart(at index: Int, dropBefore packet: Int64) {
        pending.removeAll()
        pipeline = nil
        ended = false
        failure = nil
        gapPending = false
        nextPacket = nil
        dropBefore = packet
        checkStart = true
        loader.start(.segment(index))
    }

    public func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        take { !self.pending.isEmpty || self.gapPending }
        if gapPending, pending.isEmpty {
            gapPending = false
            return .discontinuity
        }
        if let packets = pending.read(maxPackets: maxPackets, maxBytes: maxBytes) { return packets }
        if let failure { throw failure }
        return ended || closed ? .end : .waiting
    }

    // MARK: reading

    /// Takes what the loader has delivered and parses it until `enough` holds; never waits.
    private func take(until enough: () -> Bool) {
        while !enough(), failure == nil, !ended, !closed, let item = loader.channel.tryPop() {
            do {
                switch item {
                case .playlist(let media, let chosen):
                    playlist = media
                    variant = chosen
                case .initSection(let bytes):
                    try endPipeline()
                    initSection = bytes
                case .segment(let start):
                    if start.segment.discontinuity { try endPipeline() }
                    segment = start
                    if let time = start.segment.programDateTime { context.report(.property(name: "program-date-time", value: time)) }
                    if pipeline == nil { pipeline = makePipeline() }
                    pipeline?.beginSegment()
                case .bytes(let bytes):
                    try pipeline?.feed(bytes)
                case .gap(let why):
                    context.report(.property(name: "hls-gap", value: why))
                    try endPipeline()
                    gapPending = true
                case .end:
                    try pipeline?.finish()
                    ended = true
                    if formatStream?.isReadyToProducePackets != true {
                        throw HTTPStreamError(url: url, byteOffset: 0, message: "the presentation ended before any audio")
                    }
                case .failure(let error):
                    // What the parsers hold is played before the error (an error while finishing
                    // is outweighed by the one that ended the stream).
                    try? endPipeline()
                    throw error
                }
            } catch {
                failure = error
            }
        }
    }

    /// Ends the current run of segments: the packets its parsers still hold (the last PES, the
    /// last frame waiting for the next header) are delivered before the next run starts.
    private func endPipeline() throws {
        try pipeline?.finish()
        pipeline = nil
    }

    private func makePipeline() -> HLSSegmentPipeline {
        let made = HLSSegmentPipeline(initSection: initSection)
        made.onTimestamp = { [unowned self] ticks, perSecond in self.place(ticks: ticks, perSecond: perSecond) }
        made.onMetadata = { [unowned self] tag in
            guard let metadata = AudioFileMetadata(id3v2: tag), !metadata.isEmpty else { return }
            if let title = metadata.title { self.context.report(.streamTitle(title)) }
            self.context.report(.property(name: "id3", value: [metadata.artist, metadata.title, metadata.album].compactMap { $0 }.joined(separator: " — ")))
        }
        made.onEvent = { [unowned self] stream, event in try self.handle(stream, event) }
        return made
    }

    /// A segment's first timestamp: where its packets are, counted from the first segment's.
    private func place(ticks: Int64, perSecond: Int64) {
        let sequence = segment?.segment.discontinuitySequence ?? 0
        guard let origin else {
            origin = (ticks, perSecond, sequence)
            return
        }
        guard nextPacket == nil, origin.discontinuitySequence == sequence, origin.perSecond == perSecond, formatStream != nil else { return }
        let seconds = Double(ticks - origin.ticks) / Double(perSecond)
        nextPacket = Int64((seconds * format.sampleRate / Double(framesPerPacket)).rounded())
    }

    private func handle(_ stream: AudioFileStream, _ event: AudioFileStreamEvent) throws {
        // A pipeline dropped by a restart may still be finishing the bytes it was given.
        guard pipeline?.owns(stream) == true else { return }
        switch event {
        case .property(.readyToProducePackets):
            if let locked = formatStream, locked !== stream {
                let was = locked.formatList.first ?? locked.dataFormat, now = stream.formatList.first ?? stream.dataFormat
                if was?.formatID != now?.formatID || was?.sampleRate != now?.sampleRate || was?.channelsPerFrame != now?.channelsPerFrame
                    || locked.magicCookie != stream.magicCookie {
                    throw HTTPStreamError(url: segment?.segment.url.absoluteString ?? url, byteOffset: 0,
                                          message: "the audio format changes at segment \(segment?.segment.sequence ?? 0) (\(String(describing: was)) to \(String(describing: now))); one item plays one format")
                }
            }
            if formatStream == nil {
                formatStream = stream
                segmentContainer = (pipeline?.kindName ?? "unknown", stream.fileType)
                context.report(.state(.buffering))
            }
        case .packets(let packets):
            guard formatStream != nil else { return }
            let count = packets.descriptions.isEmpty ? packets.packetCount : packets.descriptions.count
            if nextPacket == nil {
                // No timestamp placed the segment: its EXTINF start is the estimate.
                let start = segment?.startTime ?? 0
                nextPacket = Int64((start * format.sampleRate / Double(framesPerPacket)).rounded())
            }
            guard let first = nextPacket else { return }
            if checkStart {
                checkStart = false
                if first > dropBefore, let index = segment?.index, index > 0 {
                    // The segment starts after the target (its EXTINF time was late): one earlier.
                    restart(at: index - 1, dropBefore: dropBefore)
                    return
                }
            }
            pending.append(packets, stream: stream, format: format, dropping: Int(max(0, min(dropBefore - first, Int64(count)))))
            nextPacket = first + Int64(count)
        default:
            break
        }
    }
}

/// The parsers of one run of segments (until a discontinuity): a transport-stream demuxer, or
/// the packed-audio ID3 header, in front of one ``AudioFileStream``, which sees the segments'
/// audio as one stream.
final class HLSSegmentPipeline {
    enum Kind { case transportStream, mp4, elementary }
    private var kind: Kind?
    private var driver: AudioFileStreamDriver?
    private var demuxer: MPEGTransportStreamDemuxer?
    private let initSection: [UInt8]?
    /// The bytes of the segment's head while its timestamp (or its kind) is being read.
    private var head: [UInt8] = []
    private var readingHead = false
    private var esDiscontinuity = false
    private var timescale: Int64?

    var onTimestamp: (Int64, Int64) -> Void = { _, _ in }
    var onMetadata: ([UInt8]) -> Void = { _ in }
    var onEvent: (AudioFileStream, AudioFileStreamEvent) throws -> Void = { _, _ in }

    init(initSection: [UInt8]?) {
        self.initSection = initSection
    }

    /// How the segments carry their audio, once the first bytes told.
    var kindName: String? {
        switch kind {
        case .transportStream: return "MPEG-TS"
        case .mp4: return "fragmented MP4"
        case .elementary: return "packed audio"
        case nil: return nil
        }
    }

    /// Whether `stream` is this pipeline's parser.
    func owns(_ stream: AudioFileStream) -> Bool { driver?.stream === stream }

    /// The next bytes start a new segment.
    func beginSegment() {
        readingHead = true
        readingHeadForTimestamp = true
        head.removeAll()
        demuxer?.segmentBoundary()
    }

    func feed(_ bytes: [UInt8]) throws {
        guard readingHead else { return try route(bytes) }
        head += bytes
        if kind == nil {
            guard head.count >= 12 else { return }
            kind = Self.kind(of: head, hasInit: initSection != nil)
            if kind == .mp4, let initSection {
                timescale = HLSFragmentTime.timescale(initSection)
                try feedAudio(initSection, hint: .mp4)
            }
        }
        switch kind {
        case .elementary:
            // Packed audio: an ID3 tag with the segment's timestamp, then ADTS or MP3 frames.
            guard head.count >= 10 else { return }
            if head[0] == 0x49, head[1] == 0x44, head[2] == 0x33 {
                let size = 10 + (Int(head[6]) << 21 | Int(head[7]) << 14 | Int(head[8]) << 7 | Int(head[9])) + (head[5] & 0x10 != 0 ? 10 : 0)
                guard head.count >= size else { return }
                let tag = Array(head[..<size])
                if let pts = HLSFragmentTime.transportStreamTimestamp(tag) { onTimestamp(pts, 90_000) }
                onMetadata(tag)
                head.removeFirst(size)
            }
            readingHead = false
            let rest = head
            head.removeAll()
            try route(rest)
        case .mp4:
            // The moof's tfdt places the segment; the bytes go on to the parser at once.
            let found = HLSFragmentTime.baseDecodeTime(head)
            if case .needMore = found, head.count < 1 << 16 { return }
            if case .found(let time) = found, let timescale { onTimestamp(time, timescale) }
            readingHead = false
            let rest = head
            head.removeAll()
            try route(rest)
        default:
            readingHead = false
            let rest = head
            head.removeAll()
            try route(rest)
        }
    }

    func finish() throws {
        if readingHead, !head.isEmpty {
            readingHead = false
            try route(head)
            head.removeAll()
        }
        if let demuxer { try demuxer.finish { try self.demuxed($0) } }
        guard let driver else { return }
        _ = try driver.finish { try self.onEvent(driver.stream, $0) }
    }

    private func route(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        switch kind {
        case .transportStream:
            if demuxer == nil { demuxer = MPEGTransportStreamDemuxer() }
            var first = readingHeadForTimestamp
            try demuxer?.push(bytes) { event in
                if case .pesStart(_, let pts) = event, first, let pts {
                    first = false
                    self.onTimestamp(pts, 90_000)
                }
                try self.demuxed(event)
            }
            readingHeadForTimestamp = first
        case .mp4:
            try feedAudio(bytes, hint: .mp4)
        case .elementary, nil:
            try feedAudio(bytes, hint: nil)
        }
    }
    /// A transport-stream segment's first PES timestamp is still to be reported.
    private var readingHeadForTimestamp = true

    private func demuxed(_ event: MPEGTransportStreamDemuxer.Event) throws {
        switch event {
        case .audio(let bytes): try feedAudio(bytes, hint: demuxer?.audioFileType)
        case .discontinuity: esDiscontinuity = true
        case .metadata(_, let tag): onMetadata(tag)
        case .program, .pesStart: break
        }
    }

    private func feedAudio(_ bytes: [UInt8], hint: AudioFileType?) throws {
        if driver == nil { driver = AudioFileStreamDriver(stream: AudioFileStream(fileTypeHint: hint, sourceIsSeekable: false)) }
        guard let driver else { return }
        let discontinuity = esDiscontinuity
        esDiscontinuity = false
        _ = try driver.feed(bytes, discontinuity: discontinuity) { try self.onEvent(driver.stream, $0) }
    }

    static func kind(of head: [UInt8], hasInit: Bool) -> Kind {
        if hasInit { return .mp4 }
        if head[0] == 0x47 && (head.count < 189 || head[188] == 0x47) { return .transportStream }
        let box = String(decoding: head[4..<8], as: UTF8.self)
        if ["ftyp", "styp", "moof", "sidx", "moov", "prft"].contains(box) { return .mp4 }
        return .elementary
    }
}

/// Timestamps inside segments: the packed-audio ID3 PRIV frame and a fragment's `tfdt`.
enum HLSFragmentTime {
    enum Search: Equatable { case found(Int64), needMore, absent }

    /// The 33-bit PTS of `com.apple.streaming.transportStreamTimestamp` in an ID3v2.3/2.4 tag.
    static func transportStreamTimestamp(_ tag: [UInt8]) -> Int64? {
        guard tag.count >= 10 else { return nil }
        let version = tag[3]
        var i = 10
        let owner = Array("com.apple.streaming.transportStreamTimestamp".utf8) + [0]
        while i + 10 <= tag.count {
            let id = tag[i..<(i + 4)]
            let raw = tag[(i + 4)..<(i + 8)].reduce(0) { $0 << 8 | Int($1) }
            let size = version >= 4 ? (raw >> 24 & 0x7F) << 21 | (raw >> 16 & 0x7F) << 14 | (raw >> 8 & 0x7F) << 7 | raw & 0x7F : raw
            guard size > 0, i + 10 + size <= tag.count else { return nil }
            let body = Array(tag[(i + 10)..<(i + 10 + size)])
            if Array(id) == Array("PRIV".utf8), body.count == owner.count + 8, Array(body[..<owner.count]) == owner {
                return body[owner.count...].reduce(Int64(0)) { $0 << 8 | Int64($1) } & ((1 << 33) - 1)
            }
            i += 10 + size
        }
        return nil
    }

    /// The `baseMediaDecodeTime` of the first `moof/traf/tfdt` in a fragment's head.
    static func baseDecodeTime(_ bytes: [UInt8]) -> Search {
        var i = 0
        while i + 8 <= bytes.count {
            let size = Int(bytes[i..<(i + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            let type = String(decoding: bytes[(i + 4)..<(i + 8)], as: UTF8.self)
            guard size >= 8 else { return .absent }
            if type == "moof" || type == "traf" {
                i += 8   // look inside
                continue
            }
            if type == "tfdt" {
                guard i + 16 <= bytes.count else { return .needMore }
                let version = bytes[i + 8]
                if version == 1 {
                    guard i + 20 <= bytes.count else { return .needMore }
                    return .found(bytes[(i + 12)..<(i + 20)].reduce(Int64(0)) { $0 << 8 | Int64($1) })
                }
                return .found(bytes[(i + 12)..<(i + 16)].reduce(Int64(0)) { $0 << 8 | Int64($1) })
            }
            if type == "mdat" { return .absent }
            i += size
        }
        return .needMore
    }

    /// The first `mdhd` timescale in an init section.
    static func timescale(_ bytes: [UInt8]) -> Int64? {
        guard let at = bytes.indices.dropLast(24).first(where: { bytes[$0] == 0x6D && bytes[$0 + 1] == 0x64 && bytes[$0 + 2] == 0x68 && bytes[$0 + 3] == 0x64 }) else { return nil }
        let version = bytes[at + 4]
        let offset = at + 4 + 4 + (version == 1 ? 16 : 8)
        guard offset + 4 <= bytes.count else { return nil }
        let value = bytes[offset..<(offset + 4)].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        return value > 0 ? value : nil
    }
}

extension AudioPlayerItem {
    /// An HLS presentation played through an ``HLSAudioSource``.
    public static func hls(_ url: String, configuration: HLSConfiguration = HLSConfiguration()) -> AudioPlayerItem {
        AudioPlayerItem(name: url) { context in
            try HLSAudioSource(url: url, configuration: configuration, context: context)
        }
    }
}
