import AudioFileStream
import AudioPlayback
import BufferQueue
import FoundationEssentials

/// Where audio is: a local file, a resource over HTTP(S), or an HLS presentation. The one
/// decision the sources and the examples make about a location given as text.
///
/// An `http(s)` URL whose name ends in `.m3u8` or `.m3u` is HLS; any other is fetched, and turns
/// into HLS when the server says it is a playlist (its `Content-Type`, or a body that starts with
/// `#EXTM3U`) — see ``AudioPlayback/AudioPlayerItem/url(_:configuration:)-(URL,_)``. Anything without a scheme, or with
/// `file:`, is a path; a path named `.m3u8` or `.m3u` is an HLS playlist on disk, played as over
/// HTTP with its relative URIs read beside it.
public enum AudioLocation: Hashable, Sendable {
    /// A local file (a `file:` URL or a path).
    case file(path: String)
    /// A resource over HTTP(S): a file, a radio stream, or a playlist the server names as one.
    case http(URL)
    /// An HLS playlist, by its name.
    case hls(URL)

    /// Decides what `text` names.
    /// - Throws: ``HTTPStreamError`` for a URL with another scheme or one that does not parse.
    public init(_ text: String) throws {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://"),
              text[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }) else {
            self = Self.local(text)
            return
        }
        let scheme = text[..<colon].lowercased()
        guard let url = URL(string: text) else {
            throw HTTPStreamError(url: text, byteOffset: 0, message: "not a valid URL")
        }
        switch scheme {
        case "file":
            self = Self.local(url.path)
        case "http", "https":
            self = AudioSniffer.kind(pathExtension: AudioSniffer.pathExtension(of: url.path)) == .hlsPlaylist ? .hls(url) : .http(url)
        default:
            throw HTTPStreamError(url: text, byteOffset: 0, message: "the \(scheme): scheme is not supported (files, http and https are)")
        }
    }

    /// A path: an HLS playlist on disk (named `.m3u8` or `.m3u`) is played as over HTTP, its
    /// segments read from beside it; anything else is a file.
    private static func local(_ path: String) -> AudioLocation {
        guard AudioSniffer.kind(pathExtension: AudioSniffer.pathExtension(of: path)) == .hlsPlaylist else { return .file(path: path) }
        return .hls(URL(fileURLWithPath: path).standardizedFileURL)
    }

    /// The http(s) URL `text` names (or the `file:` URL of a playlist on disk).
    /// - Throws: ``HTTPStreamError`` for anything else.
    public static func httpURL(_ text: String) throws -> URL {
        switch try AudioLocation(text) {
        case .http(let url), .hls(let url): return url
        case .file: throw HTTPStreamError(url: text, byteOffset: 0, message: "not an http(s) URL")
        }
    }

    /// Whether the audio comes over the network.
    public var isRemote: Bool {
        switch self {
        case .file: return false
        case .http(let url), .hls(let url): return !url.isFileURL
        }
    }
}

extension AudioPlayerItem {
    /// The item for a location given as text (``AudioLocation``): a file, an HTTP(S) resource or
    /// an HLS presentation.
    /// - Throws: ``HTTPStreamError`` when the text is a URL this library cannot fetch.
    public static func location(_ text: String, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration()) throws -> AudioPlayerItem {
        switch try AudioLocation(text) {
        case .file(let path): return .file(path)
        case .http(let url), .hls(let url): return .url(url, configuration: configuration)
        }
    }

    /// An HTTP(S) resource played through an ``HTTPAudioSource``; an HLS playlist — named
    /// `.m3u8`/`.m3u`, or served as one (`application/vnd.apple.mpegurl` and its aliases, or a
    /// body starting `#EXTM3U`) — through an ``HLSAudioSource``.
    public static func url(_ url: URL, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration()) -> AudioPlayerItem {
        let hls = HLSConfiguration.matching(configuration)
        if AudioSniffer.kind(pathExtension: AudioSniffer.pathExtension(of: url.path)) == .hlsPlaylist { return .hls(url, configuration: hls) }
        return AudioPlayerItem(name: url.absoluteString) { context in
            RemoteAudioSource(url: url, http: configuration, hls: hls, context: context)
        }
    }

    /// The item for the URL `text` names (an error when the item is opened, if it is not an http(s) URL).
    public static func url(_ text: String, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration()) -> AudioPlayerItem {
        do {
            return .url(try AudioLocation.httpURL(text), configuration: configuration)
        } catch {
            let failure = error as? HTTPStreamError ?? HTTPStreamError(url: text, byteOffset: 0, message: "not an http(s) URL")
            return AudioPlayerItem(name: text) { _ in throw failure }
        }
    }
}

extension HLSConfiguration {
    /// An HLS configuration whose requests use `http`'s timeouts and cache.
    public static func matching(_ http: HTTPStreamConfiguration) -> HLSConfiguration {
        var made = HLSConfiguration()
        made.http.stallTimeout = http.stallTimeout
        made.http.connectTimeout = http.connectTimeout
        made.http.cache = http.cache
        return made
    }
}

/// An HTTP(S) resource that plays as HLS when the server says it is a playlist: an
/// ``HTTPAudioSource`` until its first answer shows a playlist, then an ``HLSAudioSource`` on
/// the same URL.
///
/// Not `Sendable`: one owner reads it (a player's queue, a renderer's thread), as a file's source;
/// the fetching runs in a task of its own and crosses to it only through a `Sendable` channel.
public final class RemoteAudioSource: PacketSource {
    /// The URL played.
    public let url: URL
    private let hlsConfiguration: HLSConfiguration
    private let context: AudioSourceContext
    /// The source reading now.
    public private(set) var current: any PacketSource
    /// The HTTP source, while the resource is read as a plain one.
    public var http: HTTPAudioSource? { current as? HTTPAudioSource }
    /// The HLS source, once the server said the resource is a playlist.
    public var hls: HLSAudioSource? { current as? HLSAudioSource }
    private var failure: (any Error)?

    /// A source for `url`, reading it as HTTP with `http`, or as HLS with `hls` when it is a playlist.
    public init(url: URL, http: HTTPStreamConfiguration = HTTPStreamConfiguration(), hls: HLSConfiguration? = nil,
                context: AudioSourceContext = AudioSourceContext()) {
        self.url = url
        hlsConfiguration = hls ?? HLSConfiguration.matching(http)
        self.context = context
        current = HTTPAudioSource(url: url, configuration: http, context: context)
    }

    /// Stops fetching; reads end.
    public func close() {
        http?.close()
        hls?.close()
    }

    /// Moves to HLS once the HTTP source has seen a playlist.
    private func follow() {
        guard let source = http, source.isPlaylist, failure == nil else { return }
        do {
            source.close()
            context.report(.property(name: "hls", value: "the server says \(url.absoluteString) is a playlist (\(source.info?.contentType ?? "#EXTM3U"))"))
            current = try HLSAudioSource(url: url, configuration: hlsConfiguration, context: context)
        } catch {
            failure = error
        }
    }

    public var isReady: Bool {
        let ready = current.isReady
        follow()
        return failure != nil || (http == nil ? current.isReady : ready && !(http?.isPlaylist ?? false))
    }
    public var format: AudioStreamDescription { current.format }
    public var magicCookie: [UInt8]? { current.magicCookie }
    public var packetTable: AudioFilePacketTableInfo? { current.packetTable }
    public var rollDistance: Int? { current.rollDistance }
    public var duration: (frames: Int64, isEstimated: Bool)? { current.duration }
    public var title: String? { current.title }
    public var metadata: AudioFileMetadata? { current.metadata }
    /// What the parsers skipped or doubted.
    public var warnings: [AudioFileStreamError] { http?.warnings ?? hls?.warnings ?? [] }
    public func packet(forFrame frame: Int64) -> Int64? { current.packet(forFrame: frame) }
    public func frame(forPacket packet: Int64) -> Int64? { current.frame(forPacket: packet) }
    public func seek(toPacket packet: Int64) throws { try current.seek(toPacket: packet) }
    public func seek(toFrame frame: Int64, preRollPackets: Int) throws -> Bool { try current.seek(toFrame: frame, preRollPackets: preRollPackets) }
    public var links: [AudioStreamLink] { current.links }
    public var channelLayout: AudioChannelLayout? { current.channelLayout }
    public var maximumPacketSize: Int? { current.maximumPacketSize }
    public func peekPackets(from first: Int64, count: Int) -> [[UInt8]]? { current.peekPackets(from: first, count: count) }
    public var isSeekable: Bool { current.isSeekable }

    public func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        follow()
        if let failure { throw failure }
        return try current.read(maxPackets: maxPackets, maxBytes: maxBytes)
    }
}
