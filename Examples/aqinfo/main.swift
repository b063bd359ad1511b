// aqinfo: prints what Apple's afinfo prints about an audio file, or one JSON object with --json.
import ArgumentParser
import AudioFileStream
import BufferQueue
import Foundation

@main
struct AQInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqinfo", abstract: "Describe an audio file: format, packets, gapless numbers, metadata.")

    @Argument(help: "An audio file (MP3, ADTS, MP4/M4A, CAF, WAV, AIFF, AMR or MPEG-TS).")
    var file: String

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func run() throws {
        let audio: AudioFile
        do { audio = try AudioFile(path: file) } catch let error as AudioFileStreamError {
            FileHandle.standardError.write(Data("aqinfo: \(file): \(error)\n".utf8))
            throw ExitCode(1)
        }
        let info = Info(audio)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            print(String(decoding: try encoder.encode(info), as: UTF8.self))
        } else {
            print(info.text(file: file, audio))
        }
        if let damage = audio.damage {
            FileHandle.standardError.write(Data("aqinfo: \(file): \(damage)\n".utf8))
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
        // Packet frame counts are already in the best reading's output frames.
        let total = audio.totalFrames
        if let table = audio.packetTableInfo {
            validFrames = table.validFrames
            primingFrames = table.primingFrames
            remainderFrames = table.remainderFrames
        } else {
            validFrames = total
            primingFrames = 0
            remainderFrames = 0
        }
        durationSeconds = Double(validFrames) / best.sampleRate
        bitRate = audio.bitRate
        formatList = audio.formatList.map { Format(format: Self.name($0), sampleRate: $0.sampleRate, channels: $0.channelsPerFrame, framesPerPacket: $0.framesPerPacket) }
        metadata = [:]
        if let title = audio.metadata.title { metadata["title"] = title }
        if let artist = audio.metadata.artist { metadata["artist"] = artist }
        if let album = audio.metadata.album { metadata["album"] = album }
    }

    static func name(_ format: AudioStreamDescription) -> String {
        switch format.formatID {
        case .linearPCM: return "lpcm"
        case .mpegLayer3: return "mp3"
        case .mpegLayer2: return "mp2"
        case .mpegLayer1: return "mp1"
        case .aacLC: return "aac-lc"
        case .heAAC: return "he-aac"
        case .heAACv2: return "he-aac-v2"
        default: return format.formatID.description.trimmingCharacters(in: CharacterSet(charactersIn: "'"))
        }
    }

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
        lines.append("File: \((file as NSString).lastPathComponent)")
        lines.append("File type ID: \(audio.fileType.typeID)")
        lines.append("Data format: \(data.channelsPerFrame) ch, \(AudioStreamDescription.rateText(data.sampleRate)) Hz, \(data.formatID)\(Self.profile(data))"
                     + (data.isLinearPCM ? " (\(data.bitsPerChannel)-bit)" : ", \(data.framesPerPacket) frames/packet"))
        if audio.formatList.count > 1 || audio.formatList.first != data {
            for (index, item) in audio.formatList.enumerated() {
                lines.append("  format list [\(index)]: \(item.channelsPerFrame) ch, \(AudioStreamDescription.rateText(item.sampleRate)) Hz, \(item.formatID)\(Self.profile(item)), \(item.framesPerPacket) frames/packet")
            }
        }
        lines.append(String(format: "estimated duration: %.3f sec", durationSeconds))
        lines.append("audio bytes: \(audioBytes)")
        lines.append("audio packets: \(packetCount)")
        if let bitRate { lines.append("bit rate: \(bitRate) bits per second") }
        if let dataOffset { lines.append("audio data file offset: \(dataOffset)") }
        if let table = audio.packetTableInfo {
            lines.append("audio \(table.validFrames) valid frames + \(table.primingFrames) priming + \(table.remainderFrames) remainder = \(table.validFrames + Int64(table.primingFrames) + Int64(table.remainderFrames)) (\(table.source.rawValue))")
            if let note = table.note { lines.append("  note: \(note)") }
        }
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) { lines.append("\(key): \(value)") }
        for warning in audio.warnings { lines.append("warning: \(warning)") }
        return lines.joined(separator: "\n")
    }
}

extension AudioStreamDescription {
    static func rateText(_ rate: Double) -> String { rate == rate.rounded() ? String(Int(rate)) : String(rate) }
}
