// aqinfo: prints what Apple's afinfo prints about an audio file, or one JSON object with --json;
// for an http(s) URL, what the server and the stream say (an HLS playlist's variants too).
import ArgumentParser
import AudioFileStream
import AudioStreaming
import AudioPlayback
import AudioCodecs
import BufferQueue
import FoundationEssentials
import ExampleOptions

@main
struct AQInfo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqinfo", abstract: "Describe an audio file or URL: format, packets, gapless numbers, metadata; an HLS playlist's variants.")

    @Argument(help: "An audio file (MP3, ADTS, MP4/M4A, CAF, WAV, AIFF, AMR, FLAC, Ogg, Matroska/WebM or MPEG-TS), a .cue sheet (its tracks listed), or an http(s) URL (a file, a radio stream, an HLS .m3u8 playlist).")
    var file: String

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    @Flag(help: "Decode the whole file and measure its loudness (EBU R128): integrated, range, true and sample peak, loudest momentary and short-term.")
    var loudness = false

    func run() async throws {
        let path: String
        do {
            switch try AudioLocation(file) {
            case .file(let local): path = local
            case .http, .hls:
                if loudness {
                    writeError("aqinfo: --loudness measures files, not URLs\n")
                    throw ExitCode(1)
                }
                return try await describeURL()
            }
        } catch let error as HTTPStreamError {
            writeError("aqinfo: \(error)\n")
            throw ExitCode(1)
        }
        // A cue sheet: the album's (first) file described, with the sheet's tracks.
        var sheetTracks: [CueSheet.PlacedTrack]?
        var audioPath = path
        if AudioSniffer.pathExtension(of: path) == "cue" {
            do {
                let placed = try CueSheet(contentsOfFile: path).tracks(ofSheetAt: path)
                sheetTracks = placed
                audioPath = placed[0].path
            } catch {
                writeError("aqinfo: \(file): \(error)\n")
                throw ExitCode(1)
            }
        }
        let audio: AudioFile
        do { audio = try AudioFile(path: audioPath) } catch let error as AudioFileStreamError {
            writeError("aqinfo: \(error)\n")   // the error names the file
            throw ExitCode(1)
        }
        var info = Info(audio)
        if let sheetTracks {
            let files = Set(sheetTracks.map(\.path))
            info.tracks = sheetTracks.map { Info.Track($0.track, file: files.count > 1 ? $0.path : nil) }
        } else if let embedded = audio.cueTracks {
            info.tracks = embedded.map { Info.Track($0, file: nil) }
        }
        if loudness {
            AudioCodecs.registerAll()
            do { info.loudness = Info.Loudness(try LoudnessMeter.measuring(audio).reading) } catch {
                writeError("aqinfo: \(file): cannot measure the loudness: \(error)\n")
                throw ExitCode(1)
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            print(String(decoding: try encoder.encode(info), as: UTF8.self))
        } else {
            print(info.text(file: file, audio))
        }
        if let damage = audio.damage {
            writeError("aqinfo: \(damage)\n")   // the error names the file
            throw ExitCode(2)
        }
    }
}

struct Info: Encodable {
    struct Format: Encodable {
        var format: String
        var sampleRate: Double
        var channels: Int
        var framesPerPacket: Int
    }
    var fileType: String
    var format: String
    var sampleRate: Double
    var channels: Int
    var framesPerPacket: Int
    var packetCount: Int64
    var audioBytes: Int64
    var dataOffset: Int64?
    var validFrames: Int64
    var primingFrames: Int
    var remainderFrames: Int
    var durationSeconds: Double
    var bitRate: Int?
    var formatList: [Format]
    var metadata: [String: String]
    var pictures: [Picture]
    var links: [Link]
    var loudness: Loudness?
    /// A cue sheet's tracks (a `.cue` file, or one embedded in the file); absent without one.
    var tracks: [Track]?

    /// A track of a cue sheet, in the sample frames of its file.
    struct Track: Encodable {
        var number: Int
        var title: String?
        var performer: String?
        var startFrame: Int64
        var frames: Int64
        /// The track's file, when the sheet names several.
        var file: String?

        init(_ track: CueTrack, file: String?) {
            number = track.number
            title = track.title
            performer = track.performer
            startFrame = track.startFrame
            frames = track.frames
            self.file = file
        }
    }

    /// EBU R128 numbers; −∞ (nothing above the gate, silence) is null.
    struct Loudness: Encodable {
        var integrated, range, truePeak, samplePeak, momentaryMax, shortTermMax: Double?

        init(_ reading: LoudnessReading) {
            func finite(_ value: Double) -> Double? { value.isFinite ? (value * 100).rounded() / 100 : nil }
            integrated = finite(reading.integrated)
            range = finite(reading.range)
            truePeak = finite(reading.truePeak)
            samplePeak = finite(reading.samplePeak)
            momentaryMax = finite(reading.momentaryMax)
            shortTermMax = finite(reading.shortTermMax)
        }

        enum CodingKeys: String, CodingKey { case integrated, range, truePeak, samplePeak, momentaryMax, shortTermMax }

        func encode(to encoder: any Encoder) throws {
            // Every key, null included (the synthesised encoding would leave nil keys out).
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(integrated, forKey: .integrated)
            try container.encode(range, forKey: .range)
            try container.encode(truePeak, forKey: .truePeak)
            try container.encode(samplePeak, forKey: .samplePeak)
            try container.encode(momentaryMax, forKey: .momentaryMax)
            try container.encode(shortTermMax, forKey: .shortTermMax)
        }

        var text: [String] {
            func show(_ value: Double?, _ unit: String) -> String { value.map { formatted("%.2f ", $0) + unit } ?? "-inf \(unit)" }
            return ["loudness: integrated \(show(integrated, "LUFS")), range \(range.map { formatted("%.2f", $0) } ?? "0.00") LU",
                    "peaks: true \(show(truePeak, "dBTP")), sample \(show(samplePeak, "dBFS"))",
                    "loudest: momentary \(show(momentaryMax, "LUFS")), short-term \(show(shortTermMax, "LUFS"))"]
        }
    }

    struct Picture: Encodable {
        var type: String
        var mimeType: String
        var description: String
        var width: Int
        var height: Int
        var bytes: Int
    }

    /// A link of a chained stream (Ogg).
    struct Link: Encodable {
        var format: String
        var sampleRate: Double
        var channels: Int
        var firstPacket: Int64
        var primingFrames: Int
        var validFrames: Int64?
        var remainderFrames: Int?
        var title: String?
    }

    init(_ audio: AudioFile) {
        // The best reading decides the output rate and frame counts.
        let best = audio.formatList.first ?? audio.dataFormat
        fileType = audio.fileType.typeID
        format = Self.name(best)
        sampleRate = best.sampleRate
        channels = best.channelsPerFrame
        framesPerPacket = best.framesPerPacket
        packetCount = audio.packetCount
        audioBytes = audio.audioDataByteCount
        dataOffset = audio.dataOffset
        // In the best reading's output frames (an MP4's tables already are; ADTS counts HE-AAC
        // packets at the core rate).
        validFrames = audio.validFrames
        primingFrames = audio.packetTableInfo?.primingFrames ?? 0
        remainderFrames = audio.packetTableInfo?.remainderFrames ?? 0
        durationSeconds = Double(validFrames) / best.sampleRate
        bitRate = audio.bitRate
        formatList = audio.formatList.map { Format(format: Self.name($0), sampleRate: $0.sampleRate, channels: $0.channelsPerFrame, framesPerPacket: $0.framesPerPacket) }
        metadata = [:]
        if let title = audio.metadata.title { metadata["title"] = title }
        if let artist = audio.metadata.artist { metadata["artist"] = artist }
        if let album = audio.metadata.album { metadata["album"] = album }
        // Other tags under the format's own names (Vorbis comments: TRACKNUMBER, REPLAYGAIN_TRACK_GAIN …).
        for (name, value) in audio.metadata.tags { metadata[name] = value }
        pictures = audio.metadata.pictures.map {
            Picture(type: $0.typeName, mimeType: $0.mimeType, description: $0.description, width: $0.width, height: $0.height, bytes: $0.data.count)
        }
        links = audio.links.count > 1 ? audio.links.map {
            Link(format: Self.name($0.format), sampleRate: $0.format.sampleRate, channels: $0.format.channelsPerFrame, firstPacket: $0.firstPacket,
                 primingFrames: $0.primingFrames, validFrames: $0.validFrames, remainderFrames: $0.remainderFrames, title: $0.metadata.title)
        } : []
    }

    static func name(_ format: AudioStreamDescription) -> String { format.formatID.shortName }

    static func profile(_ format: AudioStreamDescription) -> String {
        switch format.formatID {
        case .aacLC: return " (AAC-LC)"
        case .heAAC: return " (HE-AAC)"
        case .heAACv2: return " (HE-AAC v2)"
        default: return ""
        }
    }

    func text(file: String, _ audio: AudioFile) -> String {
        var lines: [String] = []
        let data = audio.dataFormat
        lines.append("File: \(file.split(separator: "/").last.map(String.init) ?? file)")
        lines.append("File type ID: \(audio.fileType.typeID)")
        lines.append("Data format: \(data.channelsPerFrame) ch, \(AudioStreamDescription.rateText(data.sampleRate)) Hz, \(data.formatID)\(Self.profile(data))"
                     + (data.isLinearPCM ? " (\(data.bitsPerChannel)-bit)" : ", \(data.framesPerPacket) frames/packet"))
        if audio.formatList.count > 1 || audio.formatList.first != data {
            for (index, item) in audio.formatList.enumerated() {
                lines.append("  format list [\(index)]: \(item.channelsPerFrame) ch, \(AudioStreamDescription.rateText(item.sampleRate)) Hz, \(item.formatID)\(Self.profile(item)), \(item.framesPerPacket) frames/packet")
            }
        }
        lines.append(formatted("estimated duration: %.3f sec", durationSeconds))
        lines.append("audio bytes: \(audioBytes)")
        lines.append("audio packets: \(packetCount)")
        if let bitRate { lines.append("bit rate: \(bitRate) bits per second") }
        if let dataOffset { lines.append("audio data file offset: \(dataOffset)") }
        if let table = audio.packetTableInfo {
            lines.append("audio \(table.validFrames) valid frames + \(table.primingFrames) priming + \(table.remainderFrames) remainder = \(table.validFrames + Int64(table.primingFrames) + Int64(table.remainderFrames)) (\(table.source.rawValue))")
            if let note = table.note { lines.append("  note: \(note)") }
        }
        for (index, link) in links.enumerated() {
            lines.append("link \(index): \(link.channels) ch, \(AudioStreamDescription.rateText(link.sampleRate)) Hz, \(link.format), from packet \(link.firstPacket), "
                         + "\(link.validFrames.map(String.init) ?? "?") valid frames + \(link.primingFrames) priming + \(link.remainderFrames.map(String.init) ?? "?") remainder"
                         + (link.title.map { ", title: \($0)" } ?? ""))
        }
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) { lines.append("\(key): \(value)") }
        for picture in pictures {
            lines.append("picture: \(picture.type), \(picture.mimeType), \(picture.width)×\(picture.height), \(picture.bytes) bytes"
                         + (picture.description.isEmpty ? "" : " (\(picture.description))"))
        }
        if let loudness { lines += loudness.text }
        if let tracks {
            let rate = (audio.formatList.first ?? audio.dataFormat).sampleRate
            lines.append("tracks: \(tracks.count)")
            for track in tracks {
                let start = Double(track.startFrame) / rate, length = Double(track.frames) / rate
                lines.append(formatted("  %02d  from %d:%06.3f  %d:%06.3f  ", track.number, Int(start) / 60, start.truncatingRemainder(dividingBy: 60),
                                       Int(length) / 60, length.truncatingRemainder(dividingBy: 60))
                             + [track.title, track.performer].compactMap { $0 }.joined(separator: " — ")
                             + (track.file.map { "  (\($0))" } ?? ""))
            }
        }
        for warning in audio.warnings { lines.append("warning: \(warning)") }
        return lines.joined(separator: "\n")
    }
}

extension AudioStreamDescription {
    static func rateText(_ rate: Double) -> String { rate == rate.rounded() ? String(Int(rate)) : String(rate) }
}

// MARK: URLs

extension AQInfo {
    func describeURL() async throws {
        let stream: StreamDescription
        do { stream = try await StreamDescription.inspect(file) } catch {
            writeError("aqinfo: \(error)\n")
            throw ExitCode(1)
        }
        let info = URLInfo(stream)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(info), as: UTF8.self))
        } else {
            print(info.text(stream))
        }
    }
}

/// What a URL holds (`--json` prints it as is).
struct URLInfo: Encodable {
    struct Variant: Encodable {
        var index: Int
        var url: String
        var bandwidth: Int
        var averageBandwidth: Int?
        var codecs: [String]
        var audioGroup: String?
        var decodable: Bool
        var chosen: Bool
    }
    struct Rendition: Encodable {
        var groupID: String
        var name: String
        var language: String?
        var isDefault: Bool
        var url: String?
    }
    struct Media: Encodable {
        var live: Bool
        var playlistType: String?
        var targetDuration: Int
        var mediaSequence: Int
        var segments: Int
        var durationSeconds: Double
        var encryption: String?
        var segmentContainer: String?
    }
    var url: String
    var fileType: String?
    var format: String
    var sampleRate: Double
    var channels: Int
    var framesPerPacket: Int
    var durationSeconds: Double?
    var durationIsEstimated: Bool?
    var title: String?
    var contentType: String?
    var contentLength: Int64?
    var acceptsRanges: Bool?
    var station: String?
    var variants: [Variant]?
    var audioRenditions: [Rendition]?
    var mediaPlaylist: Media?

    init(_ stream: StreamDescription) {
        url = stream.url
        fileType = stream.fileType?.typeID
        format = Info.name(stream.format)
        sampleRate = stream.format.sampleRate
        channels = stream.format.channelsPerFrame
        framesPerPacket = stream.format.framesPerPacket
        durationSeconds = stream.duration.map { Double($0.frames) / stream.format.sampleRate }
        durationIsEstimated = stream.duration?.isEstimated
        title = stream.title
        contentType = stream.http?.contentType
        contentLength = stream.http?.contentLength
        acceptsRanges = stream.http?.acceptsRanges
        station = stream.http?.icyName
        if let master = stream.master {
            variants = master.variants.enumerated().map { index, variant in
                Variant(index: index, url: variant.url.absoluteString, bandwidth: variant.bandwidth, averageBandwidth: variant.averageBandwidth,
                        codecs: variant.codecs, audioGroup: variant.audioGroup,
                        decodable: variant.codecs.allSatisfy { StreamDescription.canDecode(codec: $0) }, chosen: variant == stream.variant)
            }
            audioRenditions = master.audioRenditions.map {
                Rendition(groupID: $0.groupID, name: $0.name, language: $0.language, isDefault: $0.isDefault, url: $0.url?.absoluteString)
            }
        }
        if let media = stream.mediaPlaylist {
            let methods = Set(media.segments.compactMap { $0.key?.method.rawValue }).sorted()
            mediaPlaylist = Media(live: media.isLive, playlistType: media.playlistType, targetDuration: media.targetDuration,
                                  mediaSequence: media.mediaSequence, segments: media.segments.count, durationSeconds: media.duration,
                                  encryption: methods.isEmpty ? nil : methods.joined(separator: ", "), segmentContainer: stream.segmentContainer)
        }
    }

    func text(_ stream: StreamDescription) -> String {
        var lines = ["URL: \(url)"]
        if let contentType { lines.append("Content type: \(contentType)") }
        if let contentLength { lines.append("Content length: \(contentLength) bytes" + (acceptsRanges == true ? " (ranges accepted)" : "")) }
        if let station { lines.append("Station: \(station)") }
        if let variants {
            lines.append("HLS master playlist: \(variants.count) variant\(variants.count == 1 ? "" : "s")")
            for variant in variants {
                var line = "  [\(variant.index)] BANDWIDTH=\(variant.bandwidth)"
                if let average = variant.averageBandwidth { line += " AVERAGE-BANDWIDTH=\(average)" }
                if !variant.codecs.isEmpty { line += " CODECS=\(variant.codecs.joined(separator: ","))" }
                if let group = variant.audioGroup { line += " AUDIO=\(group)" }
                line += " \(variant.url)"
                if variant.chosen { line += "  <- played" } else if !variant.decodable { line += "  (codecs not decoded)" }
                lines.append(line)
            }
            for rendition in audioRenditions ?? [] {
                lines.append("  audio rendition \(rendition.groupID) \"\(rendition.name)\"" + (rendition.language.map { " \($0)" } ?? "")
                             + (rendition.isDefault ? " (default)" : "") + (rendition.url.map { " \($0)" } ?? " (in the variant's segments)"))
            }
        }
        if let media = mediaPlaylist {
            let kind = media.live ? "live" : (media.playlistType ?? "VOD")
            lines.append("HLS media playlist: \(kind), \(media.segments) segments from sequence \(media.mediaSequence), target duration \(media.targetDuration) s, "
                         + formatted("%.3f s listed", media.durationSeconds))
            if let container = media.segmentContainer { lines.append("Segments: \(container)" + (fileType.map { ", audio as \($0)" } ?? "")) }
            if let encryption = media.encryption { lines.append("Encryption: \(encryption)") }
        } else if let fileType {
            lines.append("File type ID: \(fileType)")
        }
        let data = stream.format
        lines.append("Data format: \(data.channelsPerFrame) ch, \(AudioStreamDescription.rateText(data.sampleRate)) Hz, \(data.formatID)\(Info.profile(data))"
                     + (data.isLinearPCM ? " (\(data.bitsPerChannel)-bit)" : ", \(data.framesPerPacket) frames/packet"))
        if let durationSeconds {
            lines.append((durationIsEstimated == true ? "estimated " : "") + formatted("duration: %.3f sec", durationSeconds))
        } else {
            lines.append("duration: live")
        }
        if let title { lines.append("title: \(title)") }
        for warning in stream.warnings { lines.append("warning: \(warning)") }
        return lines.joined(separator: "\n")
    }
}
