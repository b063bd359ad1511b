import AsyncHTTPClient
import AudioPlayback
import BufferQueue
import Crypto
import FoundationEssentials
import NIOCore
import _CryptoExtras

/// How ``HLSAudioSource`` picks a variant, joins a live stream, and retries.
public struct HLSConfiguration: Sendable {
    /// Which variant of a master playlist to play.
    public enum VariantChoice: Sendable, Equatable {
        /// The highest `BANDWIDTH` whose codecs can be decoded (the default).
        case highestBandwidth
        /// The lowest `BANDWIDTH` whose codecs can be decoded.
        case lowestBandwidth
        /// The highest `BANDWIDTH` at most this many bits per second (else the lowest).
        case maximumBandwidth(Int)
        /// The variant at this position in the master playlist, whatever its codecs.
        case index(Int)
    }
    /// Connection, stall and retry settings: `maximumReconnects` bounds the attempts per segment,
    /// key and playlist; `readAheadBytes` the bytes fetched ahead of the decoder.
    public var http: HTTPStreamConfiguration
    /// Which variant of a master playlist plays.
    public var variant: VariantChoice
    /// How far behind the live edge a live stream starts, in seconds (nil: three target
    /// durations, as RFC 8216 asks of clients).
    public var liveStartDistance: Double?
    /// How long a live playlist may go without a new segment before the stream counts as stopped
    /// and playback ends with an error (nil: three target durations plus 30 s).
    public var stalePlaylistTimeout: Duration?

    /// A configuration; every value has the default the type's properties describe.
    public init(http: HTTPStreamConfiguration = HTTPStreamConfiguration(maximumReconnects: 3, requestICYMetadata: false),
                variant: VariantChoice = .highestBandwidth, liveStartDistance: Double? = nil, stalePlaylistTimeout: Duration? = nil) {
        self.http = http
        self.variant = variant
        self.liveStartDistance = liveStartDistance
        self.stalePlaylistTimeout = stalePlaylistTimeout
    }
}

/// One segment about to be delivered.
struct HLSSegmentStart: Sendable {
    /// Its position in the media playlist of a VOD presentation (nil for live).
    var index: Int?
    var segment: HLSMediaPlaylist.Segment
    /// Seconds from the start of the presentation to this segment, from the `EXTINF` durations
    /// (VOD; an estimate, exact only where the durations are).
    var startTime: Double
}

/// What the loader hands to the source.
enum HLSItem: ChannelItem {
    /// The media playlist (after the first load, and again for live reloads that change it).
    case playlist(HLSMediaPlaylist, variant: HLSMasterPlaylist.Variant?)
    /// An `EXT-X-MAP` initialisation section, before the first segment that uses it.
    case initSection([UInt8])
    /// A segment starts; its (decrypted) bytes follow.
    case segment(HLSSegmentStart)
    case bytes([UInt8])
    /// Segments were skipped (a live stream moved on, a segment stayed unavailable, or one is
    /// marked `EXT-X-GAP`), lasting `seconds` when known: the next bytes do not follow.
    case gap(String, seconds: Double?)
    case end
    case failure(HTTPStreamError)

    var byteCount: Int {
        switch self {
        case .bytes(let b), .initSection(let b): return b.count
        default: return 0
        }
    }
}

/// Fetches an HLS presentation segment after segment into a ``ByteChannel``: loads the playlists
/// (choosing a variant, then its audio rendition if it has one), follows a live playlist's reloads,
/// fetches keys and init sections once each, decrypts AES-128 segments as they stream, resumes a
/// dropped segment with `Range` at the next byte, and retries within bounds.
///
/// Live reloads wait for the playlist's schedule (its target duration, half of it after an
/// unchanged reload, as RFC 8216 asks); retries back off as ``HTTPFetcher``'s do. These are the
/// protocol's timers, not waits for an event; closing the loader cancels them at once.
final class HLSLoader: Sendable {
    let url: URL
    let configuration: HLSConfiguration
    private let work: ChannelTask<HLSItem>
    var channel: ByteChannel<HLSItem> { work.channel }
    private var client: HTTPClient { work.client }
    private let report: @Sendable (AudioSourceEvent) -> Void
    /// The media playlist's URL once the master playlist (if any) was resolved, and the variant.
    private let resolved = Lock<(url: URL, variant: HLSMasterPlaylist.Variant?)?>(nil)
    private let keys = Lock<[URL: [UInt8]]>([:])
    private let loadedMaster = Lock<HLSMasterPlaylist?>(nil)
    /// The master playlist, when the URL was one (after the first load).
    var master: HLSMasterPlaylist? { loadedMaster.withLock { $0 } }

    init(url: URL, configuration: HLSConfiguration, report: @escaping @Sendable (AudioSourceEvent) -> Void,
         available: @escaping @Sendable () -> Void) {
        self.url = url
        self.configuration = configuration
        self.report = report
        work = ChannelTask(channel: ByteChannel(capacity: configuration.http.readAheadBytes, onPush: available), configuration: configuration.http)
    }

    /// Where to start.
    enum Start: Sendable {
        /// VOD: the first segment; live: the live edge.
        case beginning
        /// VOD: the segment at this position.
        case segment(Int)
    }

    /// Starts (or restarts) loading; what was queued before is dropped.
    func start(_ start: Start) {
        work.restart { [self] generation in await run(start, generation: generation) }
    }

    /// Stops loading (without waiting).
    func close() { work.close() }

    // MARK: the loop

    private func run(_ start: Start, generation: Int) async {
        func push(_ item: HLSItem) async throws {
            guard await channel.push(item, generation: generation) else { throw CancellationError() }
        }
        do {
            let first = try await mediaPlaylist()
            var media = first.0, loadedAt = first.2
            let variant = first.1
            try await push(.playlist(media, variant: variant))
            var next: Int
            switch start {
            case .segment(let index) where !media.isLive:
                next = media.segments[min(max(index, 0), max(media.segments.count - 1, 0))].sequence
            default:
                next = media.isLive ? Self.liveStart(media, distance: configuration.liveStartDistance) : media.mediaSequence
            }
            var lastMap: HLSMap?
            var unchangedReloads = 0
            var lastChange = loadedAt
            while !Task.isCancelled {
                if let position = media.segments.firstIndex(where: { $0.sequence == next }) {
                    let segment = media.segments[position]
                    if segment.isGap {
                        // Marked missing: not asked for. The segments after it keep their place
                        // on the timeline (their timestamps, or their EXTINF start).
                        try await push(.gap(formatted("segment %d is marked EXT-X-GAP: its %.3f s are skipped", segment.sequence, segment.duration),
                                            seconds: segment.duration))
                        next += 1
                        continue
                    }
                    if let map = segment.map, map != lastMap {
                        let key = Self.cacheKey(map.url, map.byteRange)
                        let section: [UInt8]
                        if !media.isLive, let cached = await cached(key: key) {
                            section = cached
                        } else {
                            section = try await fetchWhole(map.url, range: map.byteRange, what: "the init section").bytes
                            if !media.isLive { await store(section, key: key) }
                        }
                        try await push(.initSection(section))
                        lastMap = map
                    }
                    let startTime = media.segments[..<position].reduce(0) { $0 + $1.duration }
                    try await push(.segment(HLSSegmentStart(index: media.isLive ? nil : position, segment: segment, startTime: startTime)))
                    if let why = try await fetchSegment(segment, cacheable: !media.isLive, generation: generation) {
                        let message = "segment \(segment.sequence) could not be fetched (\(why)); gave up after \(configuration.http.maximumReconnects) retries"
                        guard media.isLive else { throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: 0, message: message) }
                        try await push(.gap(message + "; skipped", seconds: segment.duration))
                    }
                    next += 1
                    continue
                }
                if media.hasEndList || !media.isLive {
                    try await push(.end)
                    return
                }
                if let first = media.segments.first, first.sequence > next {
                    try await push(.gap("segments \(next)…\(first.sequence - 1) left the live playlist before they were fetched", seconds: nil))
                    next = first.sequence
                    continue
                }
                let reloaded: (HLSMediaPlaylist, ContinuousClock.Instant)
                if media.canBlockReload && unchangedReloads == 0 {
                    // A server with blocking reloads (LL-HLS, RFC 8216bis 6.2.5.2) answers a
                    // request for segment `next` when that segment exists: no timer, the answer
                    // is the event.
                    reloaded = try await blockingReload(next, targetDuration: media.targetDuration)
                } else {
                    // Wait for the playlist to grow: a target duration after the last load, half
                    // of it after a reload that brought nothing new (RFC 8216, 6.3.4). This is the
                    // protocol's reload timer, not a wait standing in for an event: a classic HLS
                    // server announces nothing, the client is required to ask on this schedule.
                    // It also paces a server that offers blocking reloads but answered one with
                    // nothing new, so that such a server is never asked in a tight loop.
                    // close() cancels the sleep at once.
                    let wait = Double(media.targetDuration) * (unchangedReloads > 0 ? 0.5 : 1)
                    try await Task.sleep(until: loadedAt + .milliseconds(Int64(wait * 1000)), clock: .continuous)
                    reloaded = try await reload()
                }
                let changed = reloaded.0.segments.last?.sequence != media.segments.last?.sequence || reloaded.0.hasEndList != media.hasEndList
                unchangedReloads = changed ? 0 : unchangedReloads + 1
                (media, loadedAt) = reloaded
                if changed { lastChange = loadedAt }
                let stale = configuration.stalePlaylistTimeout ?? .seconds(3 * media.targetDuration + 30)
                if loadedAt - lastChange > stale {
                    throw HTTPStreamError(url: resolvedURL.absoluteString, byteOffset: 0,
                                          message: "the live playlist has not changed for \(stale): the stream stopped")
                }
            }
        } catch is CancellationError {
            return
        } catch let error as HTTPStreamError {
            _ = await channel.push(.failure(error), generation: generation)
        } catch let error as HLSPlaylistError {
            _ = await channel.push(.failure(HTTPStreamError(url: error.url.absoluteString, byteOffset: 0, message: error.description)), generation: generation)
        } catch {
            if Task.isCancelled { return }
            _ = await channel.push(.failure(HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "\(error)")), generation: generation)
        }
    }

    /// The sequence number a live stream starts at: the segment at least `distance` seconds
    /// (three target durations by default) before the end of the playlist.
    static func liveStart(_ media: HLSMediaPlaylist, distance: Double?) -> Int {
        let wanted = distance ?? Double(3 * media.targetDuration)
        var total = 0.0
        for segment in media.segments.reversed() {
            total += segment.duration
            if total >= wanted { return segment.sequence }
        }
        return media.segments.first?.sequence ?? media.mediaSequence
    }

    private var resolvedURL: URL { resolved.withLock { $0?.url } ?? url }

    /// The media playlist to play: the URL's own, or the chosen variant's (or its audio rendition's).
    private func mediaPlaylist() async throws -> (HLSMediaPlaylist, HLSMasterPlaylist.Variant?, ContinuousClock.Instant) {
        if let known = resolved.withLock({ $0 }) {
            let (media, at) = try await loadMedia(known.url)
            return (media, known.variant, at)
        }
        let loadedAt = ContinuousClock.now
        switch try await loadPlaylist(url) {
        case .media(let media):
            resolved.withLock { $0 = (url, nil) }
            return (media, nil, loadedAt)
        case .master(let master):
            loadedMaster.withLock { $0 = master }
            let variant = try Self.choose(master, configuration.variant, url: url)
            var mediaURL = variant.url
            if let group = variant.audioGroup {
                let renditions = master.audioRenditions.filter { $0.groupID == group }
                if let rendition = renditions.first(where: { $0.isDefault && $0.url != nil }) ?? renditions.first(where: { $0.url != nil }),
                   let renditionURL = rendition.url {
                    mediaURL = renditionURL
                }
            }
            report(.property(name: "hls-variant", value: Self.describe(variant) + (mediaURL != variant.url ? " audio \(mediaURL.absoluteString)" : "")))
            resolved.withLock { $0 = (mediaURL, variant) }
            let (media, at) = try await loadMedia(mediaURL)
            return (media, variant, at)
        }
    }

    static func describe(_ variant: HLSMasterPlaylist.Variant) -> String {
        "BANDWIDTH=\(variant.bandwidth)" + (variant.codecs.isEmpty ? "" : " CODECS=\(variant.codecs.joined(separator: ","))") + " \(variant.url.absoluteString)"
    }

    /// Codecs (RFC 6381 names) a variant may list and still be played: audio formats the parsers
    /// read (``AudioFormatID/init(codecName:)``), and video and subtitle codecs, whose streams are
    /// ignored (only the audio is played).
    static func canDecode(_ codec: String) -> Bool {
        if AudioFormatID(codecName: codec) != nil { return true }
        let name = codec.lowercased()
        return ["avc1", "avc3", "hvc1", "hev1", "vp09", "av01", "dvh1", "dvhe", "wvtt", "stpp"].contains { name.hasPrefix($0) }
    }

    static func choose(_ master: HLSMasterPlaylist, _ choice: HLSConfiguration.VariantChoice, url: URL) throws -> HLSMasterPlaylist.Variant {
        if case .index(let index) = choice {
            guard master.variants.indices.contains(index) else {
                throw HLSPlaylistError(line: 0, message: "variant \(index) was asked for, but the master playlist has \(master.variants.count)", url: url)
            }
            return master.variants[index]
        }
        let playable = master.variants.filter { $0.codecs.allSatisfy(canDecode) }.sorted { $0.bandwidth < $1.bandwidth }
        guard let lowest = playable.first, let highest = playable.last else {
            let codecs = Set(master.variants.flatMap(\.codecs)).sorted().joined(separator: ", ")
            throw HLSPlaylistError(line: 0, message: "no variant has codecs this library decodes (\(codecs))", url: url)
        }
        switch choice {
        case .lowestBandwidth: return lowest
        case .maximumBandwidth(let limit): return playable.last { $0.bandwidth <= limit } ?? lowest
        default: return highest
        }
    }

    private func reload() async throws -> (HLSMediaPlaylist, ContinuousClock.Instant) {
        try await loadMedia(resolvedURL)
    }

    /// A blocking playlist reload (RFC 8216bis 6.2.5.2): the playlist's URL with `_HLS_msn=sequence`,
    /// which the server answers once segment `sequence` is listed (or the playlist has ended). One
    /// request, given three target durations (after which the server should have answered, 503
    /// if nothing came); if it fails in any way, an ordinary reload with its retries follows.
    private func blockingReload(_ sequence: Int, targetDuration: Int) async throws -> (HLSMediaPlaylist, ContinuousClock.Instant) {
        let url = resolvedURL
        let at = ContinuousClock.now
        guard let blocking = Self.blockingReloadURL(url, sequence: sequence) else { return try await reload() }
        do {
            let (bytes, found) = try await fetchOnce(blocking, range: nil, what: "the blocking reload", limit: 16 << 20,
                                                     deadline: .now() + .seconds(Int64(3 * max(targetDuration, 1))))
            guard case .media(let media) = try Self.parsePlaylist(bytes, url: found == blocking ? url : found) else {
                throw HLSPlaylistError(line: 0, message: "the blocking reload did not answer with a media playlist", url: blocking)
            }
            return (media, at)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            report(.property(name: "hls-blocking-reload", value: "\(blocking.absoluteString) failed (\(HTTPFetcher.describe(error, stall: configuration.http.stallTimeout))); reloading without it"))
            return try await reload()
        }
    }

    /// `url` with the delivery directive `_HLS_msn=sequence` added to its query (any directive
    /// already there replaced).
    static func blockingReloadURL(_ url: URL, sequence: Int) -> URL? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return nil }
        var items = (components.queryItems ?? []).filter { !$0.name.hasPrefix("_HLS_") }
        items.append(URLQueryItem(name: "_HLS_msn", value: String(sequence)))
        components.queryItems = items
        return components.url
    }

    private func loadMedia(_ url: URL) async throws -> (HLSMediaPlaylist, ContinuousClock.Instant) {
        let at = ContinuousClock.now
        guard case .media(let media) = try await loadPlaylist(url) else {
            throw HLSPlaylistError(line: 0, message: "a master playlist where a media playlist was expected", url: url)
        }
        return (media, at)
    }

    private func loadPlaylist(_ url: URL) async throws -> HLSPlaylist {
        // A cached master or VOD playlist is used without asking the server: a VOD playlist
        // cannot change (RFC 8216, 4.3.3.5), and a master playlist lists the same variants. A live
        // playlist is never cached.
        if let cached = await cached(key: url.absoluteString), let text = String(bytes: cached, encoding: .utf8),
           let playlist = try? HLSPlaylist.parse(text, url: url) {
            report(.property(name: "hls-cache", value: "\(url.absoluteString) from the cache"))
            return playlist
        }
        // Its URIs are relative to where it was found: the URL after any redirect.
        let (bytes, found) = try await fetchWhole(url, range: nil, what: "the playlist", limit: 16 << 20)
        let playlist = try Self.parsePlaylist(bytes, url: found)
        switch playlist {
        case .master: await store(bytes, key: url.absoluteString)
        case .media(let media) where media.hasEndList: await store(bytes, key: url.absoluteString)
        case .media: break
        }
        return playlist
    }

    /// A fetched playlist's bytes, parsed (`url` resolves its URIs).
    private static func parsePlaylist(_ bytes: [UInt8], url: URL) throws -> HLSPlaylist {
        guard let text = String(bytes: bytes, encoding: .utf8) else {
            throw HLSPlaylistError(line: 0, message: "the playlist is not UTF-8 text", url: url)
        }
        return try HLSPlaylist.parse(text, url: url)
    }

    // MARK: fetching

    /// A whole (small) resource, retried within the configured attempts.
    /// Returns the bytes and the URL they came from (after redirects).
    func fetchWhole(_ url: URL, range: HLSByteRange?, what: String, limit: Int = 1 << 20) async throws -> (bytes: [UInt8], url: URL) {
        // A playlist on disk names files beside it: read, not fetched (nothing to retry).
        if url.isFileURL {
            return (try await LocalResource.read(url, range: range.map { $0.offset..<($0.offset + $0.length) }, limit: limit, what: what), url)
        }
        var attempt = 0
        while true {
            do {
                return try await fetchOnce(url, range: range, what: what, limit: limit, deadline: .distantFuture)
            } catch {
                if Task.isCancelled { throw CancellationError() }
                let failure = error as? HTTPStreamError
                    ?? HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "\(what): " + HTTPFetcher.describe(error, stall: configuration.http.stallTimeout))
                attempt += 1
                if attempt > configuration.http.maximumReconnects || failure.message.hasPrefix("HTTP 4") && failure.message.hasPrefix("HTTP 404") == false
                    || HTTPFetcher.isPermanent(error) {
                    throw HTTPStreamError(url: failure.url, byteOffset: failure.byteOffset,
                                          message: failure.message + (attempt > 1 ? "; gave up after \(attempt - 1) retries" : ""))
                }
                try await backOff(attempt)
            }
        }
    }

    /// One request for a whole (small) resource: a status outside 2xx is an error naming `what`.
    /// Returns the bytes and the URL they came from (after redirects).
    private func fetchOnce(_ url: URL, range: HLSByteRange?, what: String, limit: Int, deadline: NIODeadline) async throws -> (bytes: [UInt8], url: URL) {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "User-Agent", value: "AudioStreaming/1 (swift-audio-queue)")
        if let range {
            request.headers.add(name: "Range", value: "bytes=\(range.offset)-\(range.offset + range.length - 1)")
        } else {
            // Whole text resources (playlists) are often served compressed; the client inflates them.
            request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
        }
        let response = try await client.execute(request, deadline: deadline)
        let status = Int(response.status.code)
        guard (200..<300).contains(status) else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "HTTP \(status) \(response.status.reasonPhrase) for \(what)")
        }
        var body = try await response.body.collect(upTo: limit)
        var bytes = body.readBytes(length: body.readableBytes) ?? []
        if let range, status == 200 {
            // The server ignored Range: cut the part out.
            let start = Int(range.offset), end = Int(range.offset + range.length)
            guard end <= bytes.count else {
                throw HTTPStreamError(url: url.absoluteString, byteOffset: range.offset, message: "\(what) ends before its byte range")
            }
            bytes = Array(bytes[start..<end])
        }
        let found = response.url.flatMap { $0.scheme == nil ? nil : $0 } ?? url
        return (bytes, found)
    }

    private func backOff(_ attempt: Int) async throws {
        report(.state(.reconnecting))
        // Retry back-off (doubling, at most 4 s): a pause before asking the server again.
        try await Task.sleep(for: configuration.http.backoff(attempt: attempt))
    }

    /// Streams one segment's bytes (decrypted) into the channel, resuming with `Range` after a
    /// dropped connection. Returns nil once delivered, or why it stayed unavailable after the retries.
    private func fetchSegment(_ segment: HLSMediaPlaylist.Segment, cacheable: Bool, generation: Int) async throws -> String? {
        var entry: AudioDiskCache.Entry?
        if cacheable, !segment.url.isFileURL, let cache = configuration.http.cache { entry = try? await cache.entry(forKey: Self.cacheKey(segment.url, segment.byteRange)) }
        do {
            let outcome = try await fetchSegment(segment, entry: entry, generation: generation)
            await entry?.release()
            return outcome
        } catch {
            await entry?.release()
            throw error
        }
    }

    /// The cache's key for a resource or a byte range of one.
    static func cacheKey(_ url: URL, _ range: HLSByteRange?) -> String {
        url.absoluteString + (range.map { "#bytes=\($0.offset)+\($0.length)" } ?? "")
    }

    /// A whole resource from the cache, when it holds all of it.
    private func cached(key: String) async -> [UInt8]? {
        guard let cache = configuration.http.cache, let entry = try? await cache.entry(forKey: key) else { return nil }
        let record = entry.snapshot
        let bytes = record.isComplete ? try? await entry.read(0..<(record.length ?? 0)) : nil
        await entry.release()
        return bytes
    }

    /// Keeps a whole resource in the cache.
    private func store(_ bytes: [UInt8], key: String) async {
        guard let cache = configuration.http.cache, let entry = try? await cache.entry(forKey: key) else { return }
        // The content's digest is the validator: a playlist that changed is written again.
        let digest = "sha256:" + SHA256.hash(data: bytes).map { formatted("%02x", $0) }.joined()
        let validator = AudioDiskCache.Validator(etag: digest, length: Int64(bytes.count))
        if entry.validator != validator || !entry.isComplete {
            _ = try? await entry.validate(validator, contentType: nil, acceptsRanges: false)
            try? await entry.write(bytes, at: 0)
        }
        await entry.release()
    }

    private func fetchSegment(_ segment: HLSMediaPlaylist.Segment, entry: AudioDiskCache.Entry?, generation: Int) async throws -> String? {
        var decryptor: SegmentDecryptor?
        if let key = segment.key {
            switch key.method {
            case .aes128:
                let keyBytes = try await keyBytes(at: key.url)
                decryptor = try SegmentDecryptor(key: keyBytes, iv: key.iv ?? SegmentDecryptor.iv(sequence: segment.sequence), url: segment.url)
            case .sampleAES, .sampleAESCTR:
                throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: 0,
                                      message: "segment \(segment.sequence) is encrypted with \(key.method.rawValue), which this library does not decrypt (AES-128 whole-segment encryption is supported)")
            }
        }
        let start = segment.byteRange?.offset ?? 0
        let end = segment.byteRange.map { $0.offset + $0.length }
        if segment.url.isFileURL {
            return try await readLocalSegment(segment, from: start, to: end, decryptor: decryptor, generation: generation)
        }
        var received: Int64 = 0
        var attempt = 0
        // What the cache holds of the segment from its start is delivered from the disk; the rest
        // is fetched from there. (A VOD segment does not change; a server's validator that
        // differs all the same drops the cached copy.)
        var fromCache = false
        if let entry, let held = entry.held(containing: 0) {
            let length = entry.snapshot.length
            while received < held.upperBound {
                let piece: [UInt8]
                do {
                    piece = try await entry.read(received..<min(held.upperBound, received + (256 << 10)))
                } catch let error as AudioDiskCacheError {
                    // A block that fails its checksum (or a file that cannot be read): the rest
                    // of the segment comes from the server.
                    report(.property(name: "cache", value: "the disk cache failed (\(error)); fetching without it"))
                    break
                }
                received += Int64(piece.count)
                fromCache = true
                let plain = try decryptor.map { try $0.decrypt(piece) } ?? piece
                if !plain.isEmpty { guard await channel.push(.bytes(plain), generation: generation) else { throw CancellationError() } }
            }
            if let length, received >= length {
                if let decryptor {
                    let last = try decryptor.finish()
                    if !last.isEmpty { guard await channel.push(.bytes(last), generation: generation) else { throw CancellationError() } }
                }
                return nil
            }
        }
        while true {
            do {
                var request = HTTPClientRequest(url: segment.url.absoluteString)
                request.headers.add(name: "User-Agent", value: "AudioStreaming/1 (swift-audio-queue)")
                let from = start + received
                if from > 0 || end != nil {
                    request.headers.add(name: "Range", value: "bytes=\(from)-" + (end.map { String($0 - 1) } ?? ""))
                }
                let response = try await client.execute(request, deadline: .distantFuture)
                let status = Int(response.status.code)
                guard (200..<300).contains(status) else {
                    throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: from, message: "HTTP \(status) \(response.status.reasonPhrase)")
                }
                // A server that ignores Range sends from byte 0: skip to where we are.
                var skip = status == 200 ? from : 0
                var limit = end.map { $0 - from }
                if let entry {
                    let seen = AudioDiskCache.validator(status: status, headers: response.headers, length: segment.byteRange?.length)
                    if try await entry.validate(seen, contentType: nil, acceptsRanges: status == 206), fromCache {
                        throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: from,
                                              message: "the segment changed on the server (its validator differs from the cached copy's); the cached copy was dropped")
                    }
                }
                for try await chunk in response.body {
                    if Task.isCancelled { throw CancellationError() }
                    var bytes = chunk.getBytes(at: chunk.readerIndex, length: chunk.readableBytes) ?? []
                    if skip > 0 {
                        let drop = Int(min(skip, Int64(bytes.count)))
                        bytes.removeFirst(drop)
                        skip -= Int64(drop)
                    }
                    if let left = limit {
                        if Int64(bytes.count) > left { bytes.removeLast(bytes.count - Int(left)) }
                        limit = left - Int64(bytes.count)
                    }
                    guard !bytes.isEmpty else { continue }
                    if let entry { try? await entry.write(bytes, at: received) }
                    received += Int64(bytes.count)
                    attempt = 0
                    let plain = try decryptor.map { try $0.decrypt(bytes) } ?? bytes
                    if !plain.isEmpty { guard await channel.push(.bytes(plain), generation: generation) else { throw CancellationError() } }
                    if limit == 0 { break }
                }
                if let end, start + received < end {
                    throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: start + received, message: "the connection closed inside the segment's byte range")
                }
                if let decryptor {
                    let last = try decryptor.finish()
                    if !last.isEmpty { guard await channel.push(.bytes(last), generation: generation) else { throw CancellationError() } }
                }
                return nil
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as SegmentDecryptor.Failure {
                throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: start + received, message: error.message)
            } catch {
                if Task.isCancelled { throw CancellationError() }
                attempt += 1
                if attempt > configuration.http.maximumReconnects || HTTPFetcher.isPermanent(error) {
                    let message = (error as? HTTPStreamError)?.message ?? HTTPFetcher.describe(error, stall: configuration.http.stallTimeout)
                    if received > 0 { throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: start + received, message: message) }
                    return message
                }
                try await backOff(attempt)
            }
        }
    }

    /// A segment of a playlist on disk, read in pieces into the channel. Returns nil once
    /// delivered, or why the file could not be read (a missing segment, as an HTTP 404 would be).
    private func readLocalSegment(_ segment: HLSMediaPlaylist.Segment, from start: Int64, to end: Int64?, decryptor: SegmentDecryptor?,
                                  generation: Int) async throws -> String? {
        let what = "segment \(segment.sequence)"
        let stop: Int64
        if let end {
            stop = end
        } else {
            do { stop = try await LocalResource.length(segment.url, what: what) } catch let error as HTTPStreamError { return error.message }
        }
        var at = start
        while at < stop {
            if Task.isCancelled { throw CancellationError() }
            let piece: [UInt8]
            do { piece = try await LocalResource.read(segment.url, range: at..<min(stop, at + (256 << 10)), what: what) } catch let error as HTTPStreamError {
                if at == start { return error.message }
                throw error
            }
            at += Int64(piece.count)
            let plain: [UInt8]
            do { plain = try decryptor.map { try $0.decrypt(piece) } ?? piece } catch let error as SegmentDecryptor.Failure {
                throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: at, message: error.message)
            }
            if !plain.isEmpty { guard await channel.push(.bytes(plain), generation: generation) else { throw CancellationError() } }
        }
        if let decryptor {
            let last: [UInt8]
            do { last = try decryptor.finish() } catch let error as SegmentDecryptor.Failure {
                throw HTTPStreamError(url: segment.url.absoluteString, byteOffset: at, message: error.message)
            }
            if !last.isEmpty { guard await channel.push(.bytes(last), generation: generation) else { throw CancellationError() } }
        }
        return nil
    }

    private func keyBytes(at url: URL) async throws -> [UInt8] {
        if let known = keys.withLock({ $0[url] }) { return known }
        let bytes = try await fetchWhole(url, range: nil, what: "the AES-128 key", limit: 64).bytes
        guard bytes.count == 16 else {
            throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "the AES-128 key is \(bytes.count) bytes, not 16")
        }
        keys.withLock { $0[url] = bytes }
        return bytes
    }
}

/// AES-128-CBC decryption of one segment as its bytes arrive: whole blocks are decrypted at once,
/// the last one is held back until the end, where its PKCS#7 padding is removed.
final class SegmentDecryptor {
    struct Failure: Error { var message: String }
    private let key: SymmetricKey
    private var iv: [UInt8]
    private var pending: [UInt8] = []
    private let url: URL

    init(key: [UInt8], iv: [UInt8], url: URL) throws {
        guard key.count == 16, iv.count == 16 else { throw Failure(message: "the AES-128 key or IV is not 16 bytes") }
        self.key = SymmetricKey(data: key)
        self.iv = iv
        self.url = url
    }

    /// The IV of a segment without an `IV` attribute: its media sequence number, big-endian, in 16 bytes.
    static func iv(sequence: Int) -> [UInt8] {
        [UInt8](repeating: 0, count: 8) + (0..<8).map { UInt8(truncatingIfNeeded: UInt64(sequence) >> (56 - 8 * $0)) }
    }

    func decrypt(_ bytes: [UInt8]) throws -> [UInt8] {
        pending += bytes
        // Keep at least one whole block for the end (its padding).
        let usable = (pending.count - 1) / 16 * 16
        guard usable > 0 else { return [] }
        let plain = try run(Array(pending[..<usable]))
        iv = Array(pending[(usable - 16)..<usable])
        pending.removeFirst(usable)
        return plain
    }

    func finish() throws -> [UInt8] {
        guard pending.count == 16 else {
            throw Failure(message: "the encrypted segment is not a whole number of 16-byte blocks (\(pending.count) bytes left over)")
        }
        let last = try run(pending)
        pending.removeAll()
        guard let pad = last.last, pad >= 1, pad <= 16, last.suffix(Int(pad)).allSatisfy({ $0 == pad }) else {
            throw Failure(message: "the decrypted segment does not end with PKCS#7 padding: wrong key or IV")
        }
        return Array(last.dropLast(Int(pad)))
    }

    private func run(_ blocks: [UInt8]) throws -> [UInt8] {
        do {
            return Array(try AES._CBC.decrypt(blocks, using: key, iv: try AES._CBC.IV(ivBytes: iv), noPadding: true))
        } catch {
            throw Failure(message: "AES-128 decryption failed: \(error)")
        }
    }
}
