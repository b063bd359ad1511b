import AudioFileStream
import AudioPlayback
import BufferQueue
import Dispatch
import FoundationEssentials

/// An MP3/AAC/PCM resource over HTTP(S) as a ``/AudioPlayback/PacketSource``: bytes go through the same parser
/// driver as a local file's, and the packets through the same ``/AudioPlayback/PacketFeeder``, so a finite
/// resource plays the same frames as the file rendered locally — also after a seek (frame-exact
/// where the container has a packet table or constant-size frames, via the Xing TOC for VBR MP3)
/// and after reconnects, which resume with `Range` at the next byte.
///
/// The container is chosen by the bytes first, then `Content-Type`, then the URL's extension. MP4
/// files whose index follows the media are played by fetching the index with a `Range` request.
///
/// Nothing here blocks: a Swift task fetches into a bounded channel (which holds the fetch back
/// when full), and ``read(maxPackets:maxBytes:)`` parses what has arrived, answering
/// ``/AudioPlayback/PacketRead/waiting`` when nothing has; the context's `available` is called when more comes.
///
/// Not `Sendable`: one owner reads it (a player's queue, a renderer's thread), as a file's source;
/// the fetching runs in a task of its own and crosses to it only through a `Sendable` channel.
public final class HTTPAudioSource: PacketSource {
    /// The URL fetched.
    public let url: URL
    /// What the server said.
    public private(set) var info: HTTPStreamInfo?
    /// The container the bytes turned out to be.
    public var fileType: AudioFileType? { driver?.stream.fileType }

    private let fetcher: HTTPFetcher
    private let context: AudioSourceContext
    private var driver: AudioFileStreamDriver?
    /// Packets parsed but not yet read.
    private var pending = PendingPackets()
    private var ended = false
    private var failure: (any Error)?
    private var discontinuity = false

    private var closed = false

    /// Starts fetching `url`; returns at once (the first bytes arrive later).
    public init(url: URL, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration(),
                context: AudioSourceContext = AudioSourceContext()) {
        self.url = url
        self.context = context
        fetcher = HTTPFetcher(url: url.absoluteString, configuration: configuration, report: context.report, available: context.available)
        context.report(.state(.connecting))
        fetcher.start(at: 0)
    }

    /// Starts fetching the URL `text` names.
    /// - Throws: ``HTTPStreamError`` when it is not an http(s) URL.
    public convenience init(url text: String, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration(),
                            context: AudioSourceContext = AudioSourceContext()) throws {
        self.init(url: try AudioLocation.httpURL(text), configuration: configuration, context: context)
    }

    deinit { fetcher.close() }

    /// Stops fetching; reads end.
    public func close() {
        closed = true
        fetcher.close()
    }

    public var isReady: Bool {
        take { self.driver?.stream.isReadyToProducePackets == true }
        return driver?.stream.isReadyToProducePackets == true || failure != nil || isPlaylist
    }

    /// The resource turned out to be an HLS playlist (its `Content-Type` or its `#EXTM3U`): no
    /// packets come from here; play the URL as HLS (``AudioPlayback/AudioPlayerItem/url(_:configuration:)-(URL,_)``
    /// does that by itself).
    public private(set) var isPlaylist = false

    public var format: AudioStreamDescription {
        driver.flatMap { $0.stream.formatList.first ?? $0.stream.dataFormat } ?? .float32(sampleRate: 44100, channels: 2)
    }
    public var magicCookie: [UInt8]? { driver?.stream.magicCookie }
    public var packetTable: AudioFilePacketTableInfo? { driver?.stream.packetTableInfo }
    public var channelLayout: AudioChannelLayout? { driver?.stream.channelLayout }
    public var maximumPacketSize: Int? { driver?.stream.maximumPacketSize }
    public var rollDistance: Int? { driver?.stream.packetRollDistance }
    public var title: String? { driver?.stream.metadata.title }
    public var metadata: AudioFileMetadata? { driver?.stream.metadata }
    /// The links of an Ogg stream met so far (each also comes as a `.link` read).
    public var links: [AudioStreamLink] { driver?.stream.links ?? [] }

    /// What the parser skipped or doubted (junk between frames, say); empty for a clean stream.
    public var warnings: [AudioFileStreamError] { driver?.stream.warnings ?? [] }

    /// Exact from a packet count (MP4, CAF, Xing/LAME, WAV); otherwise estimated from the average
    /// bit rate and `Content-Length`; nil for live streams.
    public var duration: (frames: Int64, isEstimated: Bool)? {
        guard let stream = driver?.stream, stream.dataFormat != nil else { return nil }
        let format = self.format
        if let table = stream.packetTableInfo { return (table.validFrames, false) }
        if let packets = stream.audioDataPacketCount, format.framesPerPacket > 0 {
            return (packets * Int64(format.framesPerPacket), false)
        }
        guard let length = info?.contentLength else { return nil }
        let audioBytes = length - (stream.dataOffset ?? 0)
        if let rate = stream.bitRate, rate > 0 {
            return (Int64(Double(audioBytes) * 8 / Double(rate) * format.sampleRate), true)
        }
        // No declared bit rate (ADTS): the running average of what was parsed so far.
        if pending.parsedFrames > 0, pending.parsedBytes > 0 {
            return (Int64(Double(audioBytes) * Double(pending.parsedFrames) / Double(pending.parsedBytes)), true)
        }
        return nil
    }

    public func packet(forFrame frame: Int64) -> Int64? { driver?.stream.packet(forFrame: frame)?.packet }
    public func frame(forPacket packet: Int64) -> Int64? { driver?.stream.frame(forPacket: packet) }

    /// A finite resource, or one whose server takes `Range`: not a live stream.
    public var isSeekable: Bool { info?.acceptsRanges == true || info?.isFinite == true }

    /// Refetches from packet `packet` with a `Range` request. A finite resource is asked with
    /// `Range` even when the server did not say it accepts them; one that answers with the whole
    /// resource is read up to the packet instead. Only a live stream cannot seek.
    public func seek(toPacket packet: Int64) throws {
        guard let driver else { return }
        probe = nil
        guard isSeekable else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "a live stream without Range support cannot seek")
        }
        let result = try driver.seek(toPacket: packet)
        pending.removeAll()
        ended = false
        fetcher.start(at: result.byteOffset)
        discontinuity = true
    }

    // MARK: seeking Ogg and FLAC by position

    /// A seek by position under way: the page or frame sought lies between `low` and `high`.
    private struct PositionProbe {
        var plan: AudioStreamSeekPlan
        var low: (offset: Int64, position: Int64)
        var lowIsFound: Bool
        var high: Int64
        var at: Int64 = 0
        var bytes: [UInt8] = []
        var probes = 0
    }
    private var probe: PositionProbe?
    /// A probe reads this much at most to find a page (a page is at most 65 307 bytes).
    private static let probeBytes = 2 * 65_536
    /// Below this window the search stops and reading goes on from its low end.
    private static let probeWindow: Int64 = 65_536

    /// Ogg and native FLAC find decoded frame `frame` by bisection — on granule positions, on
    /// frame sample numbers — with `Range` requests, as opusfile does (what was read already, and
    /// a FLAC seek table, narrow it without a request); other containers seek by packet.
    public func seek(toFrame frame: Int64, preRollPackets: Int) throws -> Bool {
        guard let driver, let plan = driver.stream.seekPlan(forFrame: frame, preRollPackets: preRollPackets) else { return false }
        guard isSeekable else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "a live stream without Range support cannot seek")
        }
        guard let high = plan.highOffset ?? info?.contentLength else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "the stream's length is unknown: no bisection to seek with")
        }
        pending.removeAll()
        ended = false
        probe = PositionProbe(plan: plan, low: plan.low, lowIsFound: plan.lowIsFound, high: high)
        try nextProbe()
        return true
    }

    /// Probes the middle of the window, or resumes reading at its low end when it is small.
    private func nextProbe() throws {
        guard var current = probe, let driver else { return }
        if current.high - current.low.offset <= Self.probeWindow || current.probes >= 48 {
            probe = nil
            guard let frame = driver.resume(at: current.low.offset, position: current.low.position, skippingFound: current.lowIsFound) else {
                throw HTTPStreamError(url: url.absoluteString, byteOffset: current.low.offset, message: "the stream cannot resume here")
            }
            pending.appendResume(atFrame: frame)
            fetcher.start(at: current.low.offset)
            return
        }
        current.at = current.low.offset + (current.high - current.low.offset) / 2
        current.bytes = []
        current.probes += 1
        probe = current
        fetcher.start(at: current.at)
    }

    /// Bytes of a probe: once they hold a page or frame of the stream, or enough to know there is
    /// none, the window shrinks and the next probe begins.
    private func probe(_ bytes: [UInt8], atEnd: Bool) throws {
        guard var current = probe, let stream = driver?.stream else { return }
        current.bytes += bytes
        probe = current
        let found = stream.seekProbe(in: current.bytes, plan: current.plan)
        guard found != nil || atEnd || current.bytes.count >= Self.probeBytes else { return }
        if let place = found, current.at + Int64(place.offset) < current.high {
            if place.position <= current.plan.target {
                current.low = (current.at + Int64(place.offset), place.position)
                current.lowIsFound = true
            } else {
                current.high = current.at + Int64(place.offset)
            }
        } else {
            current.high = current.at   // no page of the stream between here and the high end
        }
        probe = current
        try nextProbe()
    }

    public func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        take { !self.pending.isEmpty }
        if let packets = pending.read(maxPackets: maxPackets, maxBytes: maxBytes) { return packets }
        if let failure { throw failure }
        if isPlaylist {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "the resource is an HLS playlist (\(info?.contentType ?? "#EXTM3U")): play it as HLS")
        }
        return ended || closed ? .end : .waiting
    }

    // MARK: reading

    /// Takes what the fetcher has delivered and parses it until `enough` holds; never waits.
    private func take(until enough: () -> Bool) {
        defer {
            // Still short of what is wanted, with nothing queued: the fetcher may ask the server
            // (after bytes from the cache it waits for this, so a seek needs no request).
            if !enough(), failure == nil, !ended, !closed, !isPlaylist { fetcher.wantMore() }
        }
        while !enough(), failure == nil, !ended, !closed, !isPlaylist, let item = fetcher.channel.tryPop() {
            do {
                switch item {
                case .info(let made):
                    info = made
                    if let type = made.contentType, AudioSniffer.kind(contentType: type) == .hlsPlaylist {
                        isPlaylist = true
                        fetcher.close()
                    }
                case .bytes(let bytes):
                    if probe != nil { try probe(bytes, atEnd: false) } else { try parse(bytes) }
                case .discontinuity:
                    // A live stream reconnected: what follows is not the rest of one file, so the
                    // file's end trim (from its header) no longer applies. The last whole frame
                    // before the break plays (nothing after it will confirm it).
                    try driver?.parseBufferedAsEnd(handle)
                    discontinuity = true
                    // The reader gets `.discontinuity` after the packets before the break.
                    pending.appendBreak()
                case .end where probe != nil:
                    try probe([], atEnd: true)
                case .end:
                    if let driver, let target = try driver.finish(handle) { try follow(target) } else { ended = true }
                    if driver?.stream.isReadyToProducePackets != true {
                        throw HTTPStreamError(url: url.absoluteString, byteOffset: driver?.position ?? 0, message: "the stream ended before any audio")
                    }
                case .failure(let error):
                    // What arrived whole before the failure plays before the error.
                    try? driver?.parseBufferedAsEnd(handle)
                    throw error
                }
            } catch {
                failure = error
            }
        }
    }

    private func parse(_ bytes: [UInt8]) throws {
        if driver == nil {
            // The bytes decide, then the server's type, then the name (the stream sniffs the
            // bytes again as they come; the hint only matters where they cannot tell).
            let kind = AudioSniffer.identify(head: bytes, contentType: info?.contentType, pathExtension: AudioSniffer.pathExtension(of: url.path))
            if kind == .hlsPlaylist {
                isPlaylist = true
                fetcher.close()
                context.available()
                return
            }
            var hint: AudioFileType?
            if case .audio(let type) = kind { hint = type }
            driver = AudioFileStreamDriver(fileTypeHint: hint)
            context.report(.state(.buffering))
        }
        guard let driver else { return }
        let jump = try driver.feed(bytes, discontinuity: discontinuity, handle)
        discontinuity = false
        if let jump { try follow(jump) }
    }

    /// The container keeps what the parser needs elsewhere (an MP4 index at the end).
    private func follow(_ offset: Int64) throws {
        guard isSeekable else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: offset,
                                  message: "the \(fileType?.displayName ?? "file") keeps its index at byte \(offset), but the server does not accept Range requests: not seekable")
        }
        fetcher.start(at: offset)
    }

    private func handle(_ event: AudioFileStreamEvent) {
        switch event {
        case .packets(let packets):
            guard let stream = driver?.stream else { return }
            pending.append(packets, stream: stream, format: format)
        case .link(let link):
            // A chained stream (Icecast's Ogg at each track change): the reader begins a decoder
            // for the link and trims it on its own; a new link's tags are the new title.
            pending.appendLink(link)
            if link.validFrames == nil, link.index > 0 || !link.metadata.isEmpty {
                if let title = link.metadata.title { context.report(.streamTitle(title)) }
                let words = [link.metadata.artist, link.metadata.title, link.metadata.album].compactMap { $0 }
                if !words.isEmpty { context.report(.property(name: "vorbis-comment", value: words.joined(separator: " — "))) }
            }
        default:
            break
        }
    }

}
