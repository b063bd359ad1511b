import AsyncHTTPClient
import AudioFileStream
import AudioPlayback
import BufferQueue
import Dispatch
import NIOCore
import NIOHTTP1

/// What the server said about the resource, from the first response.
public struct HTTPStreamInfo: Sendable {
    /// The URL asked for (redirects are followed by the client).
    public var url: String
    /// `Content-Type`, as sent.
    public var contentType: String?
    /// The whole resource's length in bytes (nil for live streams).
    public var contentLength: Int64?
    /// Whether the server honours `Range` (it answered 206 or advertised `Accept-Ranges: bytes`).
    public var acceptsRanges: Bool
    /// `icy-metaint`, when the server interleaves metadata.
    public var icyMetaInterval: Int?
    /// `icy-name`: the station's name.
    public var icyName: String?
    /// `icy-genre`.
    public var icyGenre: String?
    /// Whether the resource has an end (a length): finite resources can seek and resume exactly.
    public var isFinite: Bool { contentLength != nil }
    /// An Icecast/SHOUTcast stream (it sent `icy-` headers) without a length: a live radio.
    public var isRadio: Bool { contentLength == nil && (icyMetaInterval != nil || icyName != nil || icyGenre != nil) }
}

/// Errors of HTTP streaming, naming the URL and the byte offset.
public struct HTTPStreamError: Error, CustomStringConvertible, Sendable {
    /// The resource.
    public var url: String
    /// Where in the resource (audio bytes, ICY metadata not counted) it happened.
    public var byteOffset: Int64
    /// What happened, in a sentence.
    public var message: String
    public var description: String { "\(url) at byte \(byteOffset): \(message)" }
}

/// One item the fetcher hands to the reading side.
enum FetchItem: Sendable {
    case info(HTTPStreamInfo)
    case bytes([UInt8])
    /// The next bytes do not follow the previous ones (a live stream reconnected).
    case discontinuity
    case end
    case failure(HTTPStreamError)
}

/// An item that carries bytes: the channel bounds how many it holds.
protocol ChannelItem: Sendable {
    var byteCount: Int { get }
}

extension FetchItem: ChannelItem {
    var byteCount: Int { if case .bytes(let b) = self { return b.count } else { return 0 } }
}

/// A bounded queue from the async fetch task to the synchronous reader (the player's thread).
final class ByteChannel<Item: ChannelItem>: Sendable {
    private struct State {
        var items: [Item] = []
        var bytes = 0
        var generation = 0
        var closed = false
        /// Pushes waiting for room; resumed when a pop frees bytes, or on restart or close.
        var spaceWaiters: [CheckedContinuation<Void, Never>] = []

        func isFull(adding count: Int, capacity: Int) -> Bool { bytes + count > capacity && bytes > 0 }

        mutating func takeWaiters() -> [CheckedContinuation<Void, Never>] {
            defer { spaceWaiters.removeAll() }
            return spaceWaiters
        }
    }
    private let state = Lock(State())
    private let signal = DispatchSemaphore(value: 0)
    let capacity: Int
    /// Called (outside the lock) after every item pushed: the reader has something to take.
    private let onPush: @Sendable () -> Void

    init(capacity: Int, onPush: @escaping @Sendable () -> Void = {}) {
        self.capacity = capacity
        self.onPush = onPush
    }

    /// Nothing is queued: the reader has taken every item pushed so far.
    var isEmpty: Bool { state.withLock { $0.items.isEmpty } }

    /// The next item if one is queued now; never waits.
    func tryPop() -> Item? {
        let (item, waiters) = state.withLock { s -> (Item?, [CheckedContinuation<Void, Never>]) in
            guard !s.closed, !s.items.isEmpty else { return (nil, []) }
            let first = s.items.removeFirst()
            s.bytes -= first.byteCount
            return (first, s.takeWaiters())
        }
        for waiter in waiters { waiter.resume() }
        return item
    }

    /// Adds an item unless `generation` is stale; while the channel is full it waits (without
    /// blocking a thread) until a pop frees room, or the channel restarts or closes.
    func push(_ item: Item, generation: Int) async -> Bool {
        let count = item.byteCount
        let capacity = self.capacity
        while true {
            let outcome = state.withLock { s -> Bool? in
                guard s.generation == generation, !s.closed else { return false }
                if s.isFull(adding: count, capacity: capacity) { return nil }
                s.items.append(item)
                s.bytes += count
                return true
            }
            if let outcome {
                if outcome {
                    signal.signal()
                    onPush()
                }
                return outcome
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Checked again under the lock that pops take: no wake-up can be missed.
                let now = state.withLock { s -> Bool in
                    if s.generation != generation || s.closed || !s.isFull(adding: count, capacity: capacity) { return true }
                    s.spaceWaiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }

    /// The next item, waiting up to `timeout`; nil on timeout or once closed.
    func pop(timeout: DispatchTimeInterval) -> Item? {
        let deadline = DispatchTime.now() + timeout
        while true {
            let (item, waiters) = state.withLock { s -> (Item??, [CheckedContinuation<Void, Never>]) in
                if s.closed { return (.some(nil), []) }
                guard !s.items.isEmpty else { return (nil, []) }
                let first = s.items.removeFirst()
                s.bytes -= first.byteCount
                return (.some(first), s.takeWaiters())
            }
            for waiter in waiters { waiter.resume() }
            if let item { return item }
            if signal.wait(timeout: deadline) == .timedOut { return nil }
        }
    }

    /// Drops everything queued and starts a new generation (a new request); returns it.
    func restart() -> Int {
        let (generation, waiters) = state.withLock { s in
            s.items.removeAll()
            s.bytes = 0
            s.generation += 1
            return (s.generation, s.takeWaiters())
        }
        for waiter in waiters { waiter.resume() }
        return generation
    }

    func close() {
        let waiters = state.withLock { s in
            s.closed = true
            s.items.removeAll()
            s.bytes = 0
            return s.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
        signal.signal()
    }
}

/// How ``HTTPAudioSource`` connects, waits and retries.
public struct HTTPStreamConfiguration: Sendable {
    /// No byte for this long is a stall: the connection is dropped and retried.
    public var stallTimeout: Duration
    /// Time to establish a connection.
    public var connectTimeout: Duration
    /// Reconnect attempts in a row (without progress) before the stream fails.
    public var maximumReconnects: Int
    /// First back-off; it doubles per attempt, up to 4 s.
    public var initialBackoff: Duration
    /// Bytes read ahead of the decoder.
    public var readAheadBytes: Int
    /// Send `Icy-MetaData: 1` (in-band titles from Icecast/SHOUTcast servers).
    public var requestICYMetadata: Bool
    /// Keep what is fetched of finite resources (and HLS VOD segments) on disk, and read it
    /// from there (nil: no cache). Live streams are never cached.
    public var cache: AudioDiskCache?

    /// A configuration; every value has the default the type's properties describe.
    public init(stallTimeout: Duration = .seconds(10), connectTimeout: Duration = .seconds(10), maximumReconnects: Int = 5,
                initialBackoff: Duration = .milliseconds(250), readAheadBytes: Int = 1 << 20, requestICYMetadata: Bool = true,
                cache: AudioDiskCache? = nil) {
        self.cache = cache
        self.stallTimeout = stallTimeout
        self.connectTimeout = connectTimeout
        self.maximumReconnects = max(maximumReconnects, 0)
        self.initialBackoff = initialBackoff
        self.readAheadBytes = max(readAheadBytes, 4096)
        self.requestICYMetadata = requestICYMetadata
    }
}

/// Fetches a URL from a byte offset into a ``ByteChannel``: strips ICY metadata, resumes with
/// `Range` after a dropped connection or a stall (exactly at the next byte for finite resources,
/// at the live edge otherwise), backs off exponentially, and reports what happens.
final class HTTPFetcher: Sendable {
    let url: String
    let configuration: HTTPStreamConfiguration
    private let work: ChannelTask<FetchItem>
    var channel: ByteChannel<FetchItem> { work.channel }
    private var client: HTTPClient { work.client }
    private let report: @Sendable (AudioSourceEvent) -> Void
    /// What the first response said (kept for later requests).
    let info = Lock<HTTPStreamInfo?>(nil)

    init(url: String, configuration: HTTPStreamConfiguration, report: @escaping @Sendable (AudioSourceEvent) -> Void,
         available: @escaping @Sendable () -> Void = {}) {
        self.url = url
        self.configuration = configuration
        self.report = report
        work = ChannelTask(channel: ByteChannel(capacity: configuration.readAheadBytes, onPush: available), configuration: configuration)
    }

    /// Starts (or restarts) fetching at `offset`; what was queued before is dropped.
    func start(at offset: Int64) {
        // (The demand flag is not reset here: a waiting task's continuation must be resumed by
        // its cancellation, and the flag is cleared whenever bytes come from the cache.)
        work.restart { [self] generation in await fetch(from: offset, generation: generation) }
    }

    /// The reader took everything queued and wants more. With a cache, a request for missing
    /// bytes that follow held ones waits for this: the reader may seek before it needs them.
    private let demand = Lock<(wanted: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func wantMore() {
        let waiter = demand.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state = (true, nil) }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns once the reader wants more (or at once if it already said so), or when the task
    /// is cancelled (a restart or close).
    private func waitForDemand() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = demand.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    // A demand stated while bytes were still queued (the reader asked before the
                    // cache's last piece was pushed) is stale: the reader has not seen them yet.
                    // Checked under the demand lock, so a pop followed by `wantMore` is not lost.
                    if state.wanted && channel.isEmpty { return true }
                    state.wanted = false
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = demand.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Stops fetching and releases the connection (without waiting).
    func close() { work.close() }

    private func fetch(from start: Int64, generation: Int) async {
        var offset = start
        var failures = 0
        var first = true
        let entry = await cacheEntry()
        if let entry, info.withLock({ $0 }) == nil, let stored = Self.info(from: entry, url: url) {
            // Known from an earlier play: no request is needed to start.
            info.withLock { $0 = stored }
            _ = await channel.push(.info(stored), generation: generation)
        }
        defer { if let entry { Task { await entry.release() } } }
        var servedFromCache = false
        while !Task.isCancelled {
            do {
                if let entry, let length = info.withLock({ $0?.contentLength }) {
                    if offset >= length {
                        try? await entry.commit()
                        _ = await channel.push(.end, generation: generation)
                        return
                    }
                    if let held = entry.held(containing: offset) {
                        // Held bytes come from the disk, in read-ahead-sized pieces.
                        let end = min(held.upperBound, length, offset + Int64(min(configuration.readAheadBytes / 4, 256 << 10)))
                        let bytes = try await entry.read(offset..<end)
                        deliveredFromCache.withLock { $0 = true }
                        servedFromCache = true
                        demand.withLock { $0.wanted = false }
                        guard await channel.push(.bytes(bytes), generation: generation) else { return }
                        offset = end
                        continue
                    }
                }
            } catch {
                // A cache that cannot be read is bypassed: the bytes are fetched.
                bypassCache("\(error)")
            }
            if servedFromCache {
                // Bytes came from the disk: ask the server only once the reader needs more.
                await waitForDemand()
                if Task.isCancelled { return }
                servedFromCache = false
            }
            let wasFirst = first
            first = false
            do {
                let usable = cacheBypassed.withLock { $0 } ? nil : entry
                let until = usable?.nextHeld(after: offset)
                let finished = try await request(from: &offset, until: until, entry: usable,
                                                 generation: generation, progress: { failures = 0 }, first: wasFirst)
                if finished {
                    // Recorded before the end is reported: a player started next finds it whole.
                    if let entry { try? await entry.commit() }
                    _ = await channel.push(.end, generation: generation)
                    return
                }
                if let until, offset >= until { continue }
                throw HTTPStreamError(url: url, byteOffset: offset, message: "the connection closed before the end of the resource")
            } catch {
                if Task.isCancelled { return }
                let failure = error as? HTTPStreamError
                    ?? HTTPStreamError(url: url, byteOffset: offset, message: Self.describe(error, stall: configuration.stallTimeout))
                // A client error on the first request is final; a live stream whose source is
                // restarting answers 404 for a moment, so later ones are retried.
                if (wasFirst && failure.message.hasPrefix("HTTP ") && !failure.message.hasPrefix("HTTP 5")) || Self.isPermanent(error) {
                    _ = await channel.push(.failure(failure), generation: generation)
                    return
                }
                failures += 1
                if failures > configuration.maximumReconnects {
                    var message = "\(failure.message); gave up after \(configuration.maximumReconnects) reconnects"
                    if let why = cacheFailure.withLock({ $0 }) { message += " (the disk cache could not supply the bytes: \(why))" }
                    _ = await channel.push(.failure(HTTPStreamError(url: url, byteOffset: offset, message: message)), generation: generation)
                    return
                }
                report(.state(.reconnecting))
                // Reconnect back-off (doubling, at most 4 s): a pause before retrying a server,
                // not a wait for an event; closing the source cancels the task and ends it at once.
                try? await Task.sleep(for: configuration.backoff(attempt: failures))
                if let known = info.withLock({ $0 }), !known.isFinite, offset > start {
                    // A live stream goes on from the live edge: the next bytes do not follow.
                    // (Before any answer, or before any byte, a retry is simply a fresh start.)
                    offset = 0
                    _ = await channel.push(.discontinuity, generation: generation)
                }
            }
        }
    }

    /// The cache entry for this URL, when a cache is configured (nil for live streams, known
    /// once their first answer came).
    private func cacheEntry() async -> AudioDiskCache.Entry? {
        guard let cache = configuration.cache, info.withLock({ $0?.isFinite ?? true }) else { return nil }
        do { return try await cache.entry(forKey: url) } catch {
            bypassCache("\(error)")
            return nil
        }
    }

    /// The cache is not used for this resource (it is live, or the cache failed).
    private let cacheBypassed = Lock(false)

    /// Stops using the cache for this resource; a failure (`why`) is reported as a `cache`
    /// property, once.
    private func bypassCache(_ why: String?) {
        let first = cacheBypassed.withLock { bypassed -> Bool in defer { bypassed = true }; return !bypassed }
        if first, let why {
            cacheFailure.withLock { $0 = why }
            report(.property(name: "cache", value: "the disk cache failed (\(why)); fetching without it"))
        }
    }
    /// Why the cache was bypassed, for the message of a fetch that then fails too.
    private let cacheFailure = Lock<String?>(nil)
    /// Bytes were delivered from the cache: a validator change from now on is an error.
    private let deliveredFromCache = Lock(false)

    static func info(from entry: AudioDiskCache.Entry, url: String) -> HTTPStreamInfo? {
        let record = entry.snapshot
        guard let length = record.length, !record.ranges.isEmpty else { return nil }
        return HTTPStreamInfo(url: url, contentType: record.contentType, contentLength: length,
                              acceptsRanges: record.acceptsRanges || record.isComplete)
    }

    /// One request from `offset` (up to `until`, where held bytes resume); returns true when the
    /// resource ended normally. With a cache `entry`, what arrives is also written to it.
    private func request(from offset: inout Int64, until: Int64? = nil, entry: AudioDiskCache.Entry? = nil,
                         generation: Int, progress: () -> Void, first: Bool) async throws -> Bool {
        var entry = entry
        var fields = [("User-Agent", "AudioStreaming/1 (swift-audio-queue)")]
        // (A station that interleaves metadata is live: its answer turns the cache off below.)
        if configuration.requestICYMetadata { fields.append(("Icy-MetaData", "1")) }
        let known = info.withLock { $0 }
        let finite = known?.isFinite ?? false
        if offset > 0 && (finite || known == nil) || until != nil {
            fields.append(("Range", "bytes=\(offset)-" + (until.map { String($0 - 1) } ?? "")))
            if let entry, entry.hasData, let validator = entry.ifRange { fields.append(("If-Range", validator)) }
        }
        let response = try await open(fields)
        let status = response.status
        if status == 416 {
            // Resuming past what the server has: the end of the resource (even when an earlier
            // answer claimed it was longer).
            if offset > 0 { return true }
            throw HTTPStreamError(url: url, byteOffset: offset, message: "HTTP 416: the server refused the range from byte \(offset)")
        }
        guard (200..<300).contains(status) else {
            throw HTTPStreamError(url: url, byteOffset: offset, message: "HTTP \(status) \(response.reason)")
        }
        let headers = response.headers
        var skip: Int64 = 0
        if known == nil {
            var made = HTTPStreamInfo(url: url, contentType: headers.first(name: "content-type"), contentLength: nil,
                                      acceptsRanges: status == 206 || headers.first(name: "accept-ranges")?.lowercased() == "bytes",
                                      icyMetaInterval: headers.first(name: "icy-metaint").flatMap { Int($0) }.flatMap { $0 > 0 ? $0 : nil },
                                      icyName: headers.first(name: "icy-name"), icyGenre: headers.first(name: "icy-genre"))
            if status == 206, let range = headers.first(name: "content-range"), let total = range.split(separator: "/").last.flatMap({ Int64($0) }) {
                made.contentLength = total
            } else if status == 200, let length = headers.first(name: "content-length").flatMap({ Int64($0) }) {
                made.contentLength = length
                skip = offset   // the server ignored Range: read up to where we were
            }
            info.withLock { $0 = made }
            _ = await channel.push(.info(made), generation: generation)
            if let name = made.icyName { report(.property(name: "icy-name", value: name)) }
            if let genre = made.icyGenre { report(.property(name: "icy-genre", value: genre)) }
        } else if status == 200 && offset > 0 && finite {
            skip = offset   // no Range support: re-download up to where we were
        }
        if let cached = entry {
            // The answer's validator against the record's: another version drops what is held.
            let seen = AudioDiskCache.validator(status: status, headers: headers)
            if seen.length == nil || headers.first(name: "icy-metaint") != nil {
                // A live stream: not cached.
                entry = nil
                bypassCache(nil)
            } else if try await cached.validate(seen, contentType: headers.first(name: "content-type"),
                                               acceptsRanges: status == 206 || headers.first(name: "accept-ranges")?.lowercased() == "bytes"),
                      deliveredFromCache.withLock({ $0 }) {
                throw HTTPStreamError(url: url, byteOffset: offset,
                                      message: "the resource changed on the server (its validator differs from the cached copy's) while it was played from the cache; the cached copy was dropped, play it again")
            }
        }
        if !first { report(.state(.buffering)) }
        var icy = (known ?? info.withLock { $0 })?.icyMetaInterval.flatMap { headers.first(name: "icy-metaint") != nil ? ICYMetadataFilter(interval: $0) : nil }
        var audio: [UInt8] = []
        for try await chunk in response.body {
            if Task.isCancelled { return false }
            progress()
            audio.removeAll(keepingCapacity: true)
            chunk.withUnsafeReadableBytes { raw in
                if icy != nil {
                    for update in icy?.process(raw, audio: &audio) ?? [] {
                        if let title = update.streamTitle { report(.streamTitle(title)) }
                    }
                } else {
                    audio.append(contentsOf: raw)
                }
            }
            if skip > 0 {
                let drop = Int(min(skip, Int64(audio.count)))
                audio.removeFirst(drop)
                skip -= Int64(drop)
            }
            guard !audio.isEmpty else { continue }
            if let until, offset + Int64(audio.count) > until { audio.removeLast(Int(offset + Int64(audio.count) - until)) }
            if let entry, !cacheBypassed.withLock({ $0 }) {
                do { try await entry.write(audio, at: offset) } catch { bypassCache("\(error)") }
            }
            offset += Int64(audio.count)
            guard await channel.push(.bytes(audio), generation: generation) else { return false }
            if let until, offset >= until { return false }
        }
        let final = info.withLock { $0 }
        if let length = final?.contentLength { return offset >= length }
        // No length. An Icecast/SHOUTcast stream closing means its source went away: reconnect
        // (within the attempts). Anything else without a length ends where the body ends.
        return final?.isRadio != true
    }

    private struct Opened {
        var status: Int
        var reason: String
        var headers: HTTPHeaders
        var body: any AsyncSequence<ByteBuffer, any Error>
    }

    /// Servers that answered `ICY 200 OK` are asked through ``ICYConnection`` from then on.
    private let icyStatusLine = Lock(false)

    private func open(_ fields: [(String, String)]) async throws -> Opened {
        if !icyStatusLine.withLock({ $0 }) {
            var request = HTTPClientRequest(url: url)
            for (name, value) in fields { request.headers.add(name: name, value: value) }
            do {
                let response = try await client.execute(request, deadline: .distantFuture)
                return Opened(status: Int(response.status.code), reason: response.status.reasonPhrase, headers: response.headers, body: response.body)
            } catch {
                // Maybe a SHOUTcast "ICY 200 OK", which AsyncHTTPClient refuses (as a parser
                // error, or as a closed connection, depending on timing); only plain http:// can
                // be one. Ask once more reading that status line as HTTP/1.0.
                if let http = error as? HTTPClientError, http == .readTimeout || http == .connectTimeout { throw error }
                guard url.lowercased().hasPrefix("http://"),
                      let response = try? await ICYConnection.get(url: url, headers: fields, stallTimeout: .init(configuration.stallTimeout)),
                      response.wasICY else { throw error }
                icyStatusLine.withLock { $0 = true }
                return Opened(status: response.status, reason: response.reason, headers: response.headers, body: response.body)
            }
        }
        let response = try await ICYConnection.get(url: url, headers: fields, stallTimeout: .init(configuration.stallTimeout))
        return Opened(status: response.status, reason: response.reason, headers: response.headers, body: response.body)
    }

    static func describe(_ error: any Error, stall: Duration) -> String {
        guard let http = error as? HTTPClientError else { return "\(error)" }
        let known: [(HTTPClientError, String)] = [
            (.readTimeout, "no bytes for \(stall) (stalled)"),
            (.connectTimeout, "could not connect in time"),
            (.remoteConnectionClosed, "the server closed the connection"),
            (.redirectCycleDetected, "the server redirects in a loop"),
            (.redirectLimitReached, "too many redirects (more than 8)"),
            (.invalidURL, "the URL is not valid"), (.emptyHost, "the URL has no host"), (.emptyScheme, "the URL has no scheme"),
            (.alreadyShutdown, "the HTTP client has shut down"),
            (.bodyLengthMismatch, "the body's length differs from its Content-Length"),
            (.invalidProxyResponse, "the proxy answered with an error"),
        ]
        if let text = known.first(where: { $0.0 == http })?.1 { return text }
        // The client's own description, without Swift's type name.
        let text = "\(http)"
        return text.hasPrefix("HTTPClientError.") ? "HTTP client error: " + text.dropFirst("HTTPClientError.".count) : text
    }

    /// Whether retrying cannot help: a redirect loop or limit, or a URL the client cannot use.
    /// Such a failure ends the request at once instead of after the reconnect attempts.
    static func isPermanent(_ error: any Error) -> Bool {
        guard let http = error as? HTTPClientError else { return false }
        return [.redirectCycleDetected, .redirectLimitReached, .invalidURL, .emptyHost, .emptyScheme, .alreadyShutdown].contains(http)
            || "\(http)".contains("unsupportedScheme")
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
