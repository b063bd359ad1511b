import FoundationEssentials

/// An HLS playlist (RFC 8216): a master playlist listing variants, or a media playlist listing
/// segments. Only what audio playback needs is kept; tags the parser does not know are skipped, as
/// the RFC asks.
public enum HLSPlaylist: Sendable, Equatable {
    /// A master playlist: variants and renditions.
    case master(HLSMasterPlaylist)
    /// A media playlist: segments.
    case media(HLSMediaPlaylist)

    /// Parses playlist text fetched from `url` (relative URIs are resolved against it).
    /// - Throws: ``HLSPlaylistError`` naming the line when the text is not a playlist or a tag
    ///   the playlist depends on is malformed.
    public static func parse(_ text: String, url: URL) throws -> HLSPlaylist {
        try HLSPlaylistParser(text: text, url: url).parse()
    }
}

/// A master playlist: the variants of one presentation and the audio renditions they refer to.
public struct HLSMasterPlaylist: Sendable, Equatable {
    /// One `EXT-X-STREAM-INF` entry.
    public struct Variant: Sendable, Equatable {
        /// The variant's media playlist.
        public var url: URL
        /// Peak bits per second (`BANDWIDTH`, required).
        public var bandwidth: Int
        /// Average bits per second (`AVERAGE-BANDWIDTH`), when given.
        public var averageBandwidth: Int?
        /// The `CODECS` list split at commas (`mp4a.40.2`, `mp4a.40.5`, `mp4a.40.34`, …); empty when absent.
        public var codecs: [String]
        /// The `AUDIO` group whose renditions carry this variant's audio, if any.
        public var audioGroup: String?
    }
    /// One `EXT-X-MEDIA` entry of type `AUDIO`.
    public struct Rendition: Sendable, Equatable {
        /// The group (`GROUP-ID`).
        public var groupID: String
        /// The rendition's name (`NAME`).
        public var name: String
        /// Its language (`LANGUAGE`), when given.
        public var language: String?
        /// Whether it is the group's default (`DEFAULT=YES`).
        public var isDefault: Bool
        /// Absent when the audio is in the variant's own segments.
        public var url: URL?
    }
    /// The variants, in the playlist's order.
    public var variants: [Variant]
    /// The audio renditions, in the playlist's order.
    public var audioRenditions: [Rendition]
}

/// A media playlist: segments in order, with what is needed to fetch, decrypt and join them.
public struct HLSMediaPlaylist: Sendable, Equatable {
    /// One media segment.
    public struct Segment: Sendable, Equatable {
        /// The segment's resource.
        public var url: URL
        /// `EXTINF` duration in seconds.
        public var duration: Double
        /// The `EXTINF` title, when given.
        public var title: String?
        /// The media sequence number (`EXT-X-MEDIA-SEQUENCE` plus the segment's position).
        public var sequence: Int
        /// The discontinuity sequence number (`EXT-X-DISCONTINUITY-SEQUENCE` plus the
        /// `EXT-X-DISCONTINUITY` tags before it).
        public var discontinuitySequence: Int
        /// Whether an `EXT-X-DISCONTINUITY` tag comes right before it.
        public var discontinuity: Bool
        /// `EXT-X-BYTERANGE`: a part of the resource at `url`.
        public var byteRange: HLSByteRange?
        /// The key in force (`EXT-X-KEY`), nil for clear segments.
        public var key: HLSKey?
        /// The initialisation section in force (`EXT-X-MAP`), for fragmented MP4 segments.
        public var map: HLSMap?
        /// `EXT-X-PROGRAM-DATE-TIME` as given for this segment (ISO 8601 text).
        public var programDateTime: String?
        /// `EXT-X-GAP`: the segment's media is missing; it is not fetched (RFC 8216bis 4.4.4.7).
        public var isGap = false
    }
    /// `EXT-X-TARGETDURATION`, seconds.
    public var targetDuration: Int
    /// The first segment's media sequence number (`EXT-X-MEDIA-SEQUENCE`).
    public var mediaSequence: Int
    /// `EXT-X-PLAYLIST-TYPE`: `VOD`, `EVENT`, or nil.
    public var playlistType: String?
    /// `EXT-X-ENDLIST` is present: no segment will be added.
    public var hasEndList: Bool
    /// The segments, in order.
    public var segments: [Segment]
    /// `EXT-X-SERVER-CONTROL` says `CAN-BLOCK-RELOAD=YES` (Low-Latency HLS, RFC 8216bis 6.2.5.2):
    /// the server holds a reload that asks for a segment (`_HLS_msn`) until that segment exists.
    public var canBlockReload = false

    /// Whether the playlist can change (no `EXT-X-ENDLIST`): a live or event playlist to reload.
    public var isLive: Bool { !hasEndList }
    /// The sum of the segments' durations.
    public var duration: Double { segments.reduce(0) { $0 + $1.duration } }
}

/// A byte range of a resource: `length` bytes from `offset`.
public struct HLSByteRange: Sendable, Equatable {
    /// Bytes in the range.
    public var length: Int64
    /// The first byte's offset.
    public var offset: Int64
}

/// An `EXT-X-KEY` in force.
public struct HLSKey: Sendable, Equatable {
    /// The encryption method (`METHOD=`).
    public enum Method: String, Sendable {
        /// Whole segments encrypted with AES-128 in CBC mode.
        case aes128 = "AES-128"
        /// Sample encryption (not decrypted here).
        case sampleAES = "SAMPLE-AES"
        /// Sample encryption in CTR mode (not decrypted here).
        case sampleAESCTR = "SAMPLE-AES-CTR"
    }
    /// How the segments are encrypted.
    public var method: Method
    /// Where the key is fetched.
    public var url: URL
    /// The explicit 16-byte IV; nil means the segment's media sequence number, big-endian.
    public var iv: [UInt8]?
}

/// An `EXT-X-MAP`: the initialisation section segments need before their first bytes.
public struct HLSMap: Sendable, Equatable {
    /// The initialisation section's resource.
    public var url: URL
    /// The part of it that is the section, when not all of it.
    public var byteRange: HLSByteRange?
}

/// A playlist that cannot be used, with the line where that was found.
public struct HLSPlaylistError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line number, 0 for the playlist as a whole.
    public let line: Int
    /// What is wrong.
    public let message: String
    /// The playlist's URL.
    public let url: URL
    public var description: String { "HLS playlist \(url.absoluteString)\(line > 0 ? ", line \(line)" : ""): \(message)" }
}

private struct HLSPlaylistParser {
    let text: String
    let url: URL

    func fail(_ line: Int, _ message: String) -> HLSPlaylistError { HLSPlaylistError(line: line, message: message, url: url) }

    func parse() throws -> HLSPlaylist {
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
            .map { $0.trimmingWhitespace }
        guard lines.first?.hasPrefix("#EXTM3U") == true else {
            throw fail(1, "does not start with #EXTM3U; this is not an HLS playlist")
        }
        let isMaster = lines.contains { $0.hasPrefix("#EXT-X-STREAM-INF:") || $0.hasPrefix("#EXT-X-MEDIA:") }
        let isMedia = lines.contains { $0.hasPrefix("#EXTINF:") || $0.hasPrefix("#EXT-X-TARGETDURATION:") }
        if isMaster && isMedia { throw fail(0, "has both variant streams and media segments") }
        return isMaster ? .master(try master(lines)) : .media(try media(lines))
    }

    private func resolve(_ reference: String, _ line: Int) throws -> URL {
        guard let resolved = URL(string: reference, relativeTo: url)?.absoluteURL else {
            throw fail(line, "'\(reference)' is not a URI")
        }
        return resolved
    }

    private func master(_ lines: [String]) throws -> HLSMasterPlaylist {
        var variants: [HLSMasterPlaylist.Variant] = [], renditions: [HLSMasterPlaylist.Rendition] = []
        var pending: (attributes: [String: String], line: Int)?
        for (index, line) in lines.enumerated() {
            let number = index + 1
            if line.hasPrefix("#EXT-X-STREAM-INF:") {
                pending = (try attributes(line.dropFirst("#EXT-X-STREAM-INF:".count), number), number)
            } else if line.hasPrefix("#EXT-X-MEDIA:") {
                let a = try attributes(line.dropFirst("#EXT-X-MEDIA:".count), number)
                guard a["TYPE"] == "AUDIO" else { continue }
                guard let group = a["GROUP-ID"], let name = a["NAME"] else {
                    throw fail(number, "EXT-X-MEDIA of type AUDIO needs GROUP-ID and NAME")
                }
                renditions.append(.init(groupID: group, name: name, language: a["LANGUAGE"], isDefault: a["DEFAULT"] == "YES",
                                        url: try a["URI"].map { try resolve($0, number) }))
            } else if !line.isEmpty && !line.hasPrefix("#"), let (a, tagLine) = pending {
                // A decimal-integer (RFC 8216 4.2): no sign.
                guard let bandwidth = a["BANDWIDTH"].flatMap({ Int($0) }), bandwidth >= 0 else {
                    throw fail(tagLine, "EXT-X-STREAM-INF has no decimal BANDWIDTH")
                }
                let codecs = a["CODECS"].map { $0.split(separator: ",").map { $0.trimmingWhitespace } } ?? []
                variants.append(.init(url: try resolve(line, number), bandwidth: bandwidth,
                                      averageBandwidth: a["AVERAGE-BANDWIDTH"].flatMap { Int($0) }.flatMap { $0 >= 0 ? $0 : nil }, codecs: codecs, audioGroup: a["AUDIO"]))
                pending = nil
            }
        }
        if let pending { throw fail(pending.line, "EXT-X-STREAM-INF is not followed by a URI") }
        guard !variants.isEmpty else { throw fail(0, "the master playlist lists no variant") }
        return HLSMasterPlaylist(variants: variants, audioRenditions: renditions)
    }

    private func media(_ lines: [String]) throws -> HLSMediaPlaylist {
        var targetDuration: Int?, mediaSequence = 0, discontinuitySequence = 0, playlistType: String?, endList = false
        var canBlockReload = false
        var segments: [HLSMediaPlaylist.Segment] = []
        var duration: Double?, title: String?, discontinuity = false, dateTime: String?
        var key: HLSKey?, map: HLSMap?
        // Where the next range without an offset starts: after the previous range of the same resource.
        var lastRange: (url: URL, end: Int64)?
        func byteRange(_ text: Substring, _ number: Int, _ resource: URL?) throws -> HLSByteRange {
            let parts = text.split(separator: "@", maxSplits: 1)
            guard let length = parts.first.flatMap({ Int64($0) }), length >= 0,
                  parts.count == 1 || Int64(parts[1]) != nil else {
                throw fail(number, "'\(text)' is not a byte range (length[@offset])")
            }
            if parts.count == 2, let offset = Int64(parts[1]), offset >= 0 { return HLSByteRange(length: length, offset: offset) }
            guard parts.count == 1 else { throw fail(number, "byte range '\(text)' has a negative offset") }
            guard let resource, let lastRange, lastRange.url == resource else {
                throw fail(number, "byte range '\(text)' has no offset and does not follow a range of the same resource")
            }
            return HLSByteRange(length: length, offset: lastRange.end)
        }
        var pendingRangeText: (Substring, Int)?
        var gap = false
        for (index, line) in lines.enumerated() {
            let number = index + 1
            if line.isEmpty { continue }
            if !line.hasPrefix("#") {
                guard let segmentDuration = duration else {
                    throw fail(number, "the URI '\(line)' is not preceded by EXTINF")
                }
                let segmentURL = try resolve(line, number)
                let range = try pendingRangeText.map { try byteRange($0.0, $0.1, segmentURL) }
                if let range { lastRange = (segmentURL, range.offset + range.length) }
                segments.append(.init(url: segmentURL, duration: segmentDuration, title: title, sequence: mediaSequence + segments.count,
                                      discontinuitySequence: discontinuitySequence, discontinuity: discontinuity, byteRange: range,
                                      key: key, map: map, programDateTime: dateTime, isGap: gap))
                duration = nil; title = nil; discontinuity = false; dateTime = nil; pendingRangeText = nil; gap = false
                continue
            }
            guard let colon = line.firstIndex(of: ":") else {
                switch line {
                case "#EXT-X-ENDLIST": endList = true
                case "#EXT-X-DISCONTINUITY":   // the segments after it have the next discontinuity sequence number
                    discontinuity = true
                    discontinuitySequence += 1
                case "#EXT-X-GAP": gap = true
                default: break   // #EXTM3U, #EXT-X-INDEPENDENT-SEGMENTS, comments, unknown tags
                }
                continue
            }
            let tag = line[..<colon], value = line[line.index(after: colon)...]
            switch tag {
            case "#EXT-X-TARGETDURATION":
                guard let seconds = Int(value), seconds >= 0 else { throw fail(number, "EXT-X-TARGETDURATION '\(value)' is not a decimal integer") }
                targetDuration = seconds
            case "#EXT-X-MEDIA-SEQUENCE":
                guard let sequence = Int(value), sequence >= 0 else { throw fail(number, "EXT-X-MEDIA-SEQUENCE '\(value)' is not a decimal integer") }
                // It numbers the segments from the first: after one, the numbers would disagree.
                guard segments.isEmpty else { throw fail(number, "EXT-X-MEDIA-SEQUENCE comes after the first segment (RFC 8216 4.3.3.2: it must come before)") }
                mediaSequence = sequence
            case "#EXT-X-DISCONTINUITY-SEQUENCE":
                guard let sequence = Int(value), sequence >= 0 else { throw fail(number, "EXT-X-DISCONTINUITY-SEQUENCE '\(value)' is not a decimal integer") }
                guard segments.isEmpty else { throw fail(number, "EXT-X-DISCONTINUITY-SEQUENCE comes after the first segment (RFC 8216 4.3.3.3: it must come before)") }
                discontinuitySequence = sequence
            case "#EXT-X-PLAYLIST-TYPE":
                playlistType = String(value)
            case "#EXT-X-SERVER-CONTROL":
                canBlockReload = try attributes(value, number)["CAN-BLOCK-RELOAD"] == "YES"
            case "#EXTINF":
                let parts = value.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false)
                guard let seconds = parts.first.flatMap({ Double($0) }), seconds >= 0, seconds.isFinite else {
                    throw fail(number, "EXTINF '\(value)' does not start with a duration")
                }
                duration = seconds
                title = parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : nil
            case "#EXT-X-BYTERANGE":
                pendingRangeText = (value, number)
            case "#EXT-X-PROGRAM-DATE-TIME":
                dateTime = String(value)
            case "#EXT-X-KEY":
                let a = try attributes(value, number)
                switch a["METHOD"] {
                case "NONE": key = nil
                case let method?:
                    guard let parsed = HLSKey.Method(rawValue: method) else { throw fail(number, "EXT-X-KEY METHOD \(method) is not one HLS defines") }
                    guard let uri = a["URI"] else { throw fail(number, "EXT-X-KEY \(method) has no URI") }
                    var iv: [UInt8]?
                    if let text = a["IV"] {
                        guard let bytes = hexBytes(text), bytes.count == 16 else { throw fail(number, "EXT-X-KEY IV '\(text)' is not 16 hexadecimal bytes") }
                        iv = bytes
                    }
                    key = HLSKey(method: parsed, url: try resolve(uri, number), iv: iv)
                case nil:
                    throw fail(number, "EXT-X-KEY has no METHOD")
                }
            case "#EXT-X-MAP":
                let a = try attributes(value, number)
                guard let uri = a["URI"] else { throw fail(number, "EXT-X-MAP has no URI") }
                let mapURL = try resolve(uri, number)
                var mapRange: HLSByteRange?
                if let text = a["BYTERANGE"] {
                    guard text.contains("@") else { throw fail(number, "EXT-X-MAP BYTERANGE '\(text)' needs an offset") }
                    mapRange = try byteRange(Substring(text), number, nil)
                }
                map = HLSMap(url: mapURL, byteRange: mapRange)
            default:
                break
            }
        }
        guard let targetDuration else { throw fail(0, "a media playlist without EXT-X-TARGETDURATION") }
        return HLSMediaPlaylist(targetDuration: targetDuration, mediaSequence: mediaSequence, playlistType: playlistType,
                                hasEndList: endList, segments: segments, canBlockReload: canBlockReload)
    }

    /// An attribute list: `NAME=value` pairs separated by commas; quoted strings lose their quotes.
    private func attributes(_ text: Substring, _ number: Int) throws -> [String: String] {
        var result: [String: String] = [:]
        var rest = text[...]
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else { throw fail(number, "attribute list '\(text)' has a name without a value") }
            let name = rest[..<equals].trimmingWhitespace
            rest = rest[rest.index(after: equals)...]
            let value: Substring
            if rest.first == "\"" {
                let body = rest.dropFirst()
                guard let close = body.firstIndex(of: "\"") else { throw fail(number, "attribute \(name) has an unterminated quoted string") }
                value = body[..<close]
                rest = body[body.index(after: close)...]
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<end]
                rest = rest[end...]
            }
            result[name] = String(value)
            if rest.first == "," { rest = rest.dropFirst() } else if !rest.isEmpty {
                throw fail(number, "attribute \(name) is followed by '\(rest.prefix(10))' instead of a comma")
            }
        }
        return result
    }

    private func hexBytes(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("0x") || text.hasPrefix("0X") else { return nil }
        var digits = Array(text.dropFirst(2).utf8)
        if digits.count % 2 == 1 { digits.insert(UInt8(ascii: "0"), at: 0) }
        var bytes: [UInt8] = []
        for pair in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[pair...(pair + 1)], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}
