import AudioFileStream
import AudioPlayback
import BufferQueue
import Dispatch

/// An MP3/AAC/PCM resource over HTTP(S) as a ``PacketSource``: bytes go through the same parser
/// driver as a local file's, and the packets through the same ``PacketFeeder``, so a finite
/// resource plays the same frames as the file rendered locally — also after a seek (frame-exact
/// where the container has a packet table or constant-size frames, via the Xing TOC for VBR MP3)
/// and after reconnects, which resume with `Range` at the next byte.
///
/// The container is chosen by the bytes first, then `Content-Type`, then the URL's extension. MP4
/// files whose index follows the media are played by fetching the index with a `Range` request.
///
/// Nothing here blocks: a Swift task fetches into a bounded channel (which holds the fetch back
/// when full), and ``read(maxPackets:maxBytes:)`` parses what has arrived, answering
/// ``PacketRead/waiting`` when nothing has; the context's `available` is called when more comes.
public final class HTTPAudioSource: PacketSource, @unchecked Sendable {
    public let url: String
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
    private var liveGapPending = false
    private var closed = false

    /// Starts fetching `url`; returns at once (the first bytes arrive later).
    public init(url: String, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration(),
                context: AudioSourceContext = AudioSourceContext()) {
        self.url = url
        self.context = context
        fetcher = HTTPFetcher(url: url, configuration: configuration, report: context.report, available: context.available)
        context.report(.state(.connecting))
        fetcher.start(at: 0)
    }

    deinit { fetcher.close() }

    /// Stops fetching; reads end.
    public func close() {
        closed = true
        fetcher.close()
    }

    public var isReady: Bool {
        take { self.driver?.stream.isReadyToProducePackets == true }
        return driver?.stream.isReadyToProducePackets == true || failure != nil
    }

    public var format: AudioStreamDescription {
        driver.flatMap { $0.stream.formatList.first ?? $0.stream.dataFormat } ?? .float32(sampleRate: 44100, channels: 2)
    }
    public var magicCookie: [UInt8]? { driver?.stream.magicCookie }
    public var packetTable: AudioFilePacketTableInfo? { driver?.stream.packetTableInfo }
    public var rollDistance: Int? { driver?.stream.packetRollDistance }
    public var title: String? { driver?.stream.metadata.title }

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

    /// Refetches from packet `packet` with a `Range` request.
    public func seek(toPacket packet: Int64) throws {
        guard let driver else { return }
        guard info?.acceptsRanges == true else {
            throw HTTPStreamError(url: url, byteOffset: 0, message: "the server does not accept Range requests: not seekable")
        }
        let result = try driver.seek(toPacket: packet)
        pending.removeAll()
        ended = false
        fetcher.start(at: result.byteOffset)
        discontinuity = true
    }

    public func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        take { !self.pending.isEmpty || self.liveGapPending }
        if liveGapPending {
            liveGapPending = false
            return .discontinuity
        }
        if let packets = pending.read(maxPackets: maxPackets, maxBytes: maxBytes) { return packets }
        if let failure { throw failure }
        return ended || closed ? .end : .waiting
    }

    // MARK: reading

    /// Takes what the fetcher has delivered and parses it until `enough` holds; never waits.
    private func take(until enough: () -> Bool) {
        defer {
            // Still short of what is wanted, with nothing queued: the fetcher may ask the server
            // (after bytes from the cache it waits for this, so a seek needs no request).
            if !enough(), failure == nil, !ended, !closed { fetcher.wantMore() }
        }
        while !enough(), failure == nil, !ended, !closed, let item = fetcher.channel.tryPop() {
            do {
                switch item {
                case .info(let made):
                    info = made
                case .bytes(let bytes):
                    try parse(bytes)
                case .discontinuity:
                    // A live stream reconnected: what follows is not the rest of one file, so the
                    // file's end trim (from its header) no longer applies.
                    discontinuity = true
                    liveGapPending = true
                case .end:
                    if let driver, let target = try driver.finish(handle) { try follow(target) } else { ended = true }
                    if driver?.stream.isReadyToProducePackets != true {
                        throw HTTPStreamError(url: url, byteOffset: driver?.position ?? 0, message: "the stream ended before any audio")
                    }
                case .failure(let error):
                    throw error
                }
            } catch {
                failure = error
            }
        }
    }

    private func parse(_ bytes: [UInt8]) throws {
        if driver == nil {
            let hint = AudioFileType.sniff(bytes) ?? info?.contentType.flatMap(AudioFileType.init(contentType:))
                ?? AudioFileType(pathExtension: Self.pathExtension(of: url))
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
        guard info?.acceptsRanges == true || info?.isFinite == true else {
            throw HTTPStreamError(url: url, byteOffset: offset,
                                  message: "the \(fileType?.displayName ?? "file") keeps its index at byte \(offset), but the server does not accept Range requests: not seekable")
        }
        fetcher.start(at: offset)
    }

    private func handle(_ event: AudioFileStreamEvent) {
        guard case .packets(let packets) = event, let stream = driver?.stream else { return }
        pending.append(packets, stream: stream, format: format)
    }

    static func pathExtension(of url: String) -> String {
        let path = url.split(separator: "?").first.map(String.init) ?? url
        guard let last = path.split(separator: "/").last, let dot = last.lastIndex(of: ".") else { return "" }
        return String(last[last.index(after: dot)...]).lowercased()
    }
}

extension AudioPlayerItem {
    /// An HTTP(S) resource played through an ``HTTPAudioSource``; an HLS playlist (`.m3u8`)
    /// through an ``HLSAudioSource``.
    public static func url(_ url: String, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration()) -> AudioPlayerItem {
        if ["m3u8", "m3u"].contains(HTTPAudioSource.pathExtension(of: url)) {
            var hls = HLSConfiguration()
            hls.http.stallTimeout = configuration.stallTimeout
            hls.http.connectTimeout = configuration.connectTimeout
            hls.http.cache = configuration.cache
            return .hls(url, configuration: hls)
        }
        return AudioPlayerItem(name: url) { context in
            HTTPAudioSource(url: url, configuration: configuration, context: context)
        }
    }
}

extension AudioFileType {
    /// The container that the first bytes show unambiguously, if any.
    public static func sniff(_ bytes: [UInt8]) -> AudioFileType? {
        func ascii(_ at: Int, _ text: String) -> Bool {
            let want = Array(text.utf8)
            return bytes.count >= at + want.count && Array(bytes[at..<(at + want.count)]) == want
        }
        if ascii(4, "ftyp") { return .mp4 }
        if ascii(0, "caff") { return .caf }
        if ascii(0, "RIFF") && ascii(8, "WAVE") { return .wave }
        if ascii(0, "FORM") && ascii(8, "AIFF") { return .aiff }
        if ascii(0, "FORM") && ascii(8, "AIFC") { return .aifc }
        if ascii(0, "#!AMR") { return .amr }
        if ascii(0, "ID3") { return .mp3 }
        if bytes.count > 376 && bytes[0] == 0x47 && bytes[188] == 0x47 && bytes[376] == 0x47 { return .mpegTransportStream }
        if bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] & 0xF0 == 0xF0 && bytes[1] & 0x06 == 0 { return .adts }
        if bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0 { return .mp3 }
        return nil
    }

    /// The container a MIME type names, if any.
    public init?(contentType: String) {
        let type = contentType.split(separator: ";").first.map { $0.trimmingCharacters() } ?? ""
        switch type.lowercased() {
        case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg": self = .mp3
        case "audio/aac", "audio/aacp", "audio/x-aac": self = .adts
        case "audio/mp4", "audio/x-m4a", "audio/m4a", "video/mp4": self = .mp4
        case "audio/x-caf": self = .caf
        case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave": self = .wave
        case "audio/aiff", "audio/x-aiff": self = .aiff
        case "audio/amr", "audio/amr-wb": self = .amr
        case "video/mp2t", "audio/mp2t": self = .mpegTransportStream
        default: return nil
        }
    }

    /// The container a file extension names, if any.
    public init?(pathExtension: String) {
        switch pathExtension.lowercased() {
        case "mp3", "mp2", "mpga": self = .mp3
        case "aac", "adts": self = .adts
        case "m4a", "mp4", "m4b": self = .mp4
        case "caf": self = .caf
        case "wav": self = .wave
        case "aif", "aiff": self = .aiff
        case "aifc": self = .aifc
        case "amr", "awb": self = .amr
        case "ts": self = .mpegTransportStream
        default: return nil
        }
    }
}

private extension Substring {
    func trimmingCharacters() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
