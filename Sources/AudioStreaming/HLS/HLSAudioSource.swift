import AudioFileStream
import AudioPlayback
import BufferQueue
import FoundationEssentials

/// An HLS presentation (RFC 8216), audio only, as a ``/AudioPlayback/PacketSource``: the segments' packets flow
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
///   and reports a skipped segment as a ``/AudioPlayback/PacketRead/discontinuity``. A server with blocking
///   reloads (`CAN-BLOCK-RELOAD=YES`) is asked for each next segment (`_HLS_msn`) and answers
///   when it exists, with no reload timer.
///
/// Events: `hls-variant` (the variant chosen), `program-date-time` (a segment's
/// `EXT-X-PROGRAM-DATE-TIME`, when the segment is read), ID3 timed metadata as
/// ``/AudioPlayback/AudioSourceEvent/streamTitle(_:)`` and an `id3` property, `hls-gap` for skipped segments,
/// `hls-blocking-reload` when a blocking reload failed and an ordinary one followed.
/// HLS carries no gapless numbers: every decoded frame is played (priming included) — except
/// Opus in fMP4, whose pre-skip (the init section's edit list or `dOps`) is trimmed and whose
/// shortened last sample ends it, as the one link the parser reports.
///
/// Not `Sendable`: one owner reads it (a player's queue, a renderer's thread), as a file's source;
/// the fetching runs in a task of its own and crosses to it only through a `Sendable` channel.
public final class HLSAudioSource: PacketSource {
    /// The playlist's URL.
    public let url: URL
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
    /// The parser of the current run of segments (until a discontinuity or a new init section):
    /// ``AudioFileStream`` in segmented mode, which reads the segments' containers, timestamps
    /// and ID3 tags; this source keeps playlists, keys and scheduling.
    private var run: AudioFileStreamDriver?
    /// The parser whose format the decoder was set up with.
    private var formatStream: AudioFileStream?
    private var initSection: [UInt8]?
    private var pending = PendingPackets()
    private var ended = false
    private var failure: (any Error)?
    private var closed = false
    private var segment: HLSSegmentStart?
    /// Index of the next packet parsed; nil after a seek until the segment's timestamp says.
    private var nextPacket: Int64? = 0
    /// Packets before this one are dropped (a seek's target).
    private var dropBefore: Int64 = 0
    /// After a restart: the first packets show whether the segment began early enough.
    private var checkStart = false
    /// The first segment's timestamp: packet positions after a seek are counted from it.
    private var origin: (ticks: Int64, perSecond: Int64, discontinuitySequence: Int)?
    /// Packets of varying frames: how many were read and their frames (a seek's pre-roll), and
    /// whether a seek's landing is still to be said.
    private var packetsSeen: Int64 = 0
    private var framesSeen: Int64 = 0
    private var resumeDue = false

    /// Starts loading `url` (a master or media playlist); returns at once.
    /// A `file:` URL is a playlist on disk: it and what it names relative to it are read from there.
    /// - Throws: ``HTTPStreamError`` when it is not an http(s) or file URL.
    public init(url: URL, configuration: HLSConfiguration = HLSConfiguration(), context: AudioSourceContext = AudioSourceContext()) throws {
        guard ["http", "https", "file"].contains(url.scheme?.lowercased() ?? "") else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "not an http(s) or file URL")
        }
        self.url = url
        self.context = context
        loader = HLSLoader(url: url, configuration: configuration, report: context.report, available: context.available)
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
    public var channelLayout: AudioChannelLayout? { formatStream?.channelLayout }
    public var maximumPacketSize: Int? { formatStream?.maximumPacketSize }
    public var rollDistance: Int? { formatStream?.packetRollDistance }
    public var title: String? { formatStream?.metadata.title }
    /// The stream's link when the parser reports one (Opus in fMP4: its pre-skip).
    public var links: [AudioStreamLink] { formatStream?.links ?? [] }
    /// What the parsers skipped or doubted.
    public var warnings: [AudioFileStreamError] { formatStream?.warnings ?? [] }

    /// VOD: the `EXTINF` durations' sum (an estimate); nil for live streams.
    public var duration: (frames: Int64, isEstimated: Bool)? {
        guard let playlist, !playlist.isLive, formatStream != nil else { return nil }
        return (Int64((playlist.duration * format.sampleRate).rounded()), true)
    }

    private var framesPerPacket: Int64 { Int64(max(format.framesPerPacket, 1)) }

    /// VOD: yes; a live presentation cannot seek.
    public var isSeekable: Bool { playlist.map { !$0.isLive } ?? false }

    public func packet(forFrame frame: Int64) -> Int64? { frame / framesPerPacket }
    public func frame(forPacket packet: Int64) -> Int64? { packet * framesPerPacket }

    /// VOD: restarts loading at the segment holding packet `packet` (by `EXTINF` time, with a
    /// margin for inexact durations); packets before it are dropped once the segment's timestamp
    /// has placed them.
    public func seek(toPacket packet: Int64) throws {
        guard let playlist else { return }
        guard !playlist.isLive else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "a live HLS stream cannot seek")
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

    /// Packets of varying frames (Opus, FLAC of variable block size): positions are counted in
    /// frames, a seek drops the packets that end before its start and says where the first kept
    /// one begins (``/AudioPlayback/PacketRead/resume(atFrame:)``). Packets of a constant count seek by packet.
    public func seek(toFrame frame: Int64, preRollPackets: Int) throws -> Bool {
        guard let playlist, formatStream != nil, format.framesPerPacket == 0 else { return false }
        guard !playlist.isLive else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "a live HLS stream cannot seek")
        }
        // The frames a packet holds so far (before any was read, 20 ms: Opus's usual packet).
        let average = packetsSeen > 0 ? max(framesSeen / packetsSeen, 1) : max(Int64(format.sampleRate / 50), 1)
        let start = max(frame - Int64(preRollPackets) * average, 0)
        restart(at: Self.segment(containing: Double(start) / format.sampleRate - 0.5, in: playlist), dropBefore: start)
        resumeDue = true
        return true
    }

    private func restart(at index: Int, dropBefore packet: Int64) {
        pending.removeAll()
        run = nil
        ended = false
        failure = nil
        nextPacket = nil
        dropBefore = packet
        checkStart = true
        loader.start(.segment(index))
    }

    public func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        take { !self.pending.isEmpty }
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
                    try endRun()
                    initSection = bytes
                case .segment(let start):
                    if start.segment.discontinuity {
                        try endRun()
                        // Another encode follows: the reader (the feeder) starts a fresh decoder.
                        if pending.parsedFrames > 0 { pending.appendBreak() }
                    }
                    segment = start
                    if let time = start.segment.programDateTime { context.report(.property(name: "program-date-time", value: time)) }
                    try beginSegment()
                case .bytes(let bytes):
                    if let run { _ = try run.feed(bytes) { try self.handle(run.stream, $0) } }
                case .gap(let why, let seconds):
                    context.report(.property(name: "hls-gap", value: why))
                    try endRun()
                    // The timeline keeps the gap: the packets after it are counted from where the
                    // skipped segment ends (a timestamp that comes places them anyway).
                    if let seconds, let next = nextPacket, formatStream != nil {
                        nextPacket = next + Int64((seconds * format.sampleRate / Double(framesPerPacket)).rounded())
                    }
                    // What follows does not continue what came before: a fresh decoder.
                    if pending.parsedFrames > 0 { pending.appendBreak() }
                case .end:
                    try endRun()
                    ended = true
                    if formatStream?.isReadyToProducePackets != true {
                        throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "the presentation ended before any audio")
                    }
                case .failure(let error):
                    // What the parsers hold is played before the error (an error while finishing
                    // is outweighed by the one that ended the stream).
                    try? endRun()
                    throw error
                }
            } catch {
                failure = error
            }
        }
    }

    /// Starts the next segment, in the current run or a new one (whose stream gets the init section).
    private func beginSegment() throws {
        // A new run's stream gets the init section with its first segment.
        let starts = run == nil
        let run = self.run ?? AudioFileStreamDriver(stream: AudioFileStream())
        self.run = run
        for event in try run.stream.beginSegment(initializationSection: starts ? initSection : nil) { try handle(run.stream, event) }
    }

    /// Ends the current run of segments: the packets its parser still holds (the last PES, the
    /// last frame waiting for the next header) are delivered before the next run starts.
    private func endRun() throws {
        guard let run else { return }
        defer { if self.run === run { self.run = nil } }
        _ = try run.finish { try self.handle(run.stream, $0) }
    }

    /// How segments carry their audio, for messages and `aqinfo`.
    private static func segmentKind(_ stream: AudioFileStream) -> String {
        switch stream.fileType {
        case .mpegTransportStream: return "MPEG-TS"
        case .mp4: return "fragmented MP4"
        default: return "packed audio"
        }
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
        // A run dropped by a restart may still be finishing the bytes it was given.
        guard run?.stream === stream else { return }
        switch event {
        case .segmentTimestamp(let time):
            place(ticks: time.ticks, perSecond: time.perSecond)
        case .timedMetadata(let metadata):
            if let title = metadata.title { context.report(.streamTitle(title)) }
            context.report(.property(name: "id3", value: [metadata.artist, metadata.title, metadata.album].compactMap { $0 }.joined(separator: " — ")))
        case .property(.readyToProducePackets):
            if let locked = formatStream, locked !== stream {
                let was = locked.formatList.first ?? locked.dataFormat, now = stream.formatList.first ?? stream.dataFormat
                if was?.formatID != now?.formatID || was?.sampleRate != now?.sampleRate || was?.channelsPerFrame != now?.channelsPerFrame
                    || locked.magicCookie != stream.magicCookie {
                    throw HTTPStreamError(url: segment?.segment.url.absoluteString ?? url.absoluteString, byteOffset: 0,
                                          message: "the audio format changes at segment \(segment?.segment.sequence ?? 0) (\(was.map { "\($0)" } ?? "no format") to \(now.map { "\($0)" } ?? "no format")); one item plays one format")
                }
            }
            if formatStream == nil {
                formatStream = stream
                segmentContainer = (Self.segmentKind(stream), stream.elementaryStreamType ?? stream.fileType)
                context.report(.state(.buffering))
            }
        case .link(let link):
            // Opus in fMP4: the pre-skip when it begins, its length when the last sample says.
            guard formatStream != nil || link.validFrames == nil else { return }
            pending.appendLink(link)
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
            guard format.framesPerPacket == 0, !packets.descriptions.isEmpty else {
                pending.append(packets, stream: stream, format: format, dropping: Int(max(0, min(dropBefore - first, Int64(count)))))
                nextPacket = first + Int64(count)
                return
            }
            // Packets of varying frames: positions (`nextPacket`, `dropBefore`) count frames. The
            // packets that end before a seek's start are dropped; the reader learns where the
            // first kept one begins.
            var position = first, dropping = 0
            for description in packets.descriptions {
                let frames = Int64(description.variableFramesInPacket)
                if position + frames <= dropBefore { dropping += 1 }
                position += frames
                packetsSeen += 1
                framesSeen += frames
            }
            if resumeDue, dropping < count {
                resumeDue = false
                let kept = packets.descriptions.prefix(dropping).reduce(first) { $0 + Int64($1.variableFramesInPacket) }
                pending.appendResume(atFrame: kept)
            }
            pending.append(packets, stream: stream, format: format, dropping: dropping)
            nextPacket = position
        default:
            break
        }
    }
}

extension AudioPlayerItem {
    /// An HLS presentation played through an ``HLSAudioSource``.
    public static func hls(_ url: URL, configuration: HLSConfiguration = HLSConfiguration()) -> AudioPlayerItem {
        AudioPlayerItem(name: url.absoluteString) { context in
            try HLSAudioSource(url: url, configuration: configuration, context: context)
        }
    }

    /// An HLS presentation at the URL `text` names (an error when the item is opened, if it is not one).
    public static func hls(_ text: String, configuration: HLSConfiguration = HLSConfiguration()) -> AudioPlayerItem {
        AudioPlayerItem(name: text) { context in
            try HLSAudioSource(url: try AudioLocation.httpURL(text), configuration: configuration, context: context)
        }
    }
}
