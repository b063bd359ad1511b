import AudioFileStream
import AudioPlayback
import BufferQueue
import FoundationEssentials

/// What a URL holds, as far as playing it needs: what `aqinfo URL` prints.
public struct StreamDescription: Sendable {
    /// The URL described.
    public var url: String
    /// The audio format the decoder will be set up with.
    public var format: AudioStreamDescription
    /// The container of the audio (for HLS: of the audio inside the segments).
    public var fileType: AudioFileType?
    /// Frames, and whether that is an estimate (nil for a live stream).
    public var duration: (frames: Int64, isEstimated: Bool)?
    /// The stream's title (ICY name, a tag), when it has one.
    public var title: String?
    /// A plain HTTP resource: what the server said.
    public var http: HTTPStreamInfo?
    /// HLS: the master playlist (when the URL is one), the variant chosen from it, the media
    /// playlist played, and how its segments carry the audio.
    public var master: HLSMasterPlaylist?
    /// The variant chosen from the master playlist.
    public var variant: HLSMasterPlaylist.Variant?
    /// The media playlist played.
    public var mediaPlaylist: HLSMediaPlaylist?
    /// How the segments carry the audio (MPEG-TS, packed audio, fMP4).
    public var segmentContainer: String?
    /// Problems the parser met that did not stop it.
    public var warnings: [AudioFileStreamError]
}

extension StreamDescription {
    /// Opens `url` (an HLS playlist when it is named or served as one, else a plain resource), reads
    /// until the first audio packets are parsed, and closes it again.
    /// - Throws: ``HTTPStreamError`` or ``HLSPlaylistError``-derived errors naming the URL.
    public static func inspect(_ url: String, http: HTTPStreamConfiguration = HTTPStreamConfiguration(),
                               hls: HLSConfiguration = HLSConfiguration()) async throws -> StreamDescription {
        let (arrivals, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let context = AudioSourceContext(available: { continuation.yield() })
        /// The sources tell when bytes arrive; each arrival is looked at until the format is
        /// known. A failure before the first packets is thrown by the read.
        func ready(_ source: some PacketSource) async throws {
            continuation.yield()
            for await _ in arrivals where source.isReady { break }
            _ = try source.read(maxPackets: 1, maxBytes: 1 << 16)
        }
        func describe(_ source: HLSAudioSource) -> StreamDescription {
            StreamDescription(url: url, format: source.format, fileType: source.segmentContainer?.audio, duration: source.duration,
                              title: source.title, master: source.masterPlaylist, variant: source.variant,
                              mediaPlaylist: source.playlist, segmentContainer: source.segmentContainer?.segments, warnings: source.warnings)
        }
        let location = try AudioLocation(url)
        let parsed = try AudioLocation.httpURL(url)
        if case .hls = location {
            let source = try HLSAudioSource(url: parsed, configuration: hls, context: context)
            defer { source.close() }
            try await ready(source)
            return describe(source)
        }
        // A plain resource, unless the server says it is a playlist.
        let source = RemoteAudioSource(url: parsed, http: http, hls: hls, context: context)
        defer { source.close() }
        try await ready(source)
        if let playlist = source.hls { return describe(playlist) }
        let plain = source.http
        return StreamDescription(url: url, format: source.format, fileType: plain?.fileType, duration: source.duration, title: source.title,
                                 http: plain?.info, warnings: source.warnings)
    }

    /// Whether this library can decode an RFC 6381 codec name from a `CODECS` attribute (video
    /// codecs count as decodable: their audio is played and the video ignored).
    public static func canDecode(codec: String) -> Bool { HLSLoader.canDecode(codec) }
}
