import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport

/// Matroska and WebM made by ffmpeg and by mkvmerge, rendered against the reference decodes:
/// exact frame counts always; FLAC and PCM the source's samples; AAC ffmpeg's decode bit for bit;
/// Opus within the 16-bit rounding of ffmpeg's libopus decode; MP3 from mkvmerge (which keeps the
/// LAME tag) exactly the source's length, mpg123's gapless decode bit for bit.
@Suite(.enabled(if: ["ffmpeg", "sox", "mkvmerge", "opusenc", "lame", "mpg123"].allSatisfy { Where.tool($0) != nil },
                "ffmpeg, sox, mkvtoolnix, opus-tools, lame or mpg123 is missing (make deps installs them): Matroska tests skipped"))
struct MatroskaTests {
    static let rate = 48_000

    static func source() async throws -> String { try await XiphFiles.source(channels: 2, rate: rate) }

    /// ffmpeg's files: each codec, with the reference decode and the tolerance it is held to
    /// (nil: the source's own samples, exactly).
    /// One of ffmpeg's files: a name, ffmpeg's arguments, the extension, and the tolerance against
    /// the reference decode (nil: the source's own samples, exactly).
    struct Made: Sendable, CustomTestStringConvertible {
        var name: String
        var arguments: [String]
        var ext: String
        var tolerance: Float?
        var testDescription: String { name }
    }

    static let ffmpegFiles: [Made] = [
        Made(name: "flac", arguments: ["-c:a", "flac"], ext: "mka", tolerance: nil),
        Made(name: "pcm16", arguments: ["-c:a", "pcm_s16le"], ext: "mka", tolerance: nil),
        Made(name: "pcm16be", arguments: ["-c:a", "pcm_s16be"], ext: "mka", tolerance: nil),
        Made(name: "float", arguments: ["-c:a", "pcm_f32le"], ext: "mka", tolerance: nil),
        Made(name: "aac", arguments: ["-c:a", "aac", "-b:a", "128k"], ext: "mka", tolerance: 0),
        Made(name: "opus", arguments: ["-c:a", "libopus", "-b:a", "96k"], ext: "webm", tolerance: 1.0 / 32768),
        Made(name: "opus-live", arguments: ["-c:a", "libopus", "-live", "1", "-f", "webm"], ext: "webm", tolerance: 1.0 / 32768),
        Made(name: "vorbis", arguments: ["-c:a", "libvorbis"], ext: "webm", tolerance: 1e-6),
    ]

    @Test(arguments: ffmpegFiles)
    func ffmpegsFilesRenderAsTheReference(_ made: Made) async throws {
        let (name, arguments, ext, tolerance) = (made.name, made.arguments, made.ext, made.tolerance)
        let source = try await Self.source()
        let file = try await XiphFiles.encode(source, "ffmpeg", arguments, ext: ext, tag: "-\(name)")
        // AAC by libavcodec: ffmpeg's own decoder, so its decode is the reference bit for bit.
        let (ours, format, renderer) = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(file) }
        #expect(renderer.file.fileType == .matroska)
        #expect(format.channelsPerFrame == 2)
        let reference: [Float]
        if let tolerance {
            reference = try await referenceDecode(file, libopus: name.hasPrefix("opus"))
            #expect(ours.count == reference.count, "\(name): \(ours.count / 2) frames rendered, ffmpeg decodes \(reference.count / 2)")
            #expect(differing(ours, reference, channels: 2, tolerance: tolerance) == 0, "\(name)")
        } else {
            reference = try await ffmpegFloats(source)
            #expect(ours.count == XiphFiles.frames * 2, "\(name): \(ours.count / 2) frames rendered, \(XiphFiles.frames) in the source")
            #expect(differing(ours, reference, channels: 2) == 0, "\(name)")
        }
        if name.hasPrefix("opus") {
            // A 48 kHz source keeps its length: CodecDelay is the priming, DiscardPadding the end trim.
            #expect(ours.count == XiphFiles.frames * 2, "\(name): \(ours.count / 2) frames, \(XiphFiles.frames) in the source")
        }
        if name == "opus-live" {
            // The shape a browser's MediaRecorder streams: ffmpeg's live WebM has a Segment of
            // unknown size; its Clusters' sizes are rewritten as unknown too (same length, all ones).
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            let clusterID: [UInt8] = [0x1F, 0x43, 0xB6, 0x75]
            var rewritten = 0
            for index in bytes.indices.dropLast(12) where bytes[index..<(index + 4)].elementsEqual(clusterID) {
                let length = bytes[index + 4].leadingZeroBitCount + 1
                bytes[index + 4] = UInt8(truncatingIfNeeded: 0xFF >> (length - 1))
                for k in 1..<length { bytes[index + 4 + k] = 0xFF }
                rewritten += 1
            }
            #expect(rewritten > 0)
            let unknown = try XiphFiles.write(bytes, ext: "webm")
            let (live, _, _) = try await rendered(unknown)
            #expect(live == ours, "unknown-size clusters render \(live.count / 2) frames, the sized ones \(ours.count / 2)")
        }
        #expect(renderer.lastConverterError == nil)
    }

    /// mkvmerge's files lace frames (8 a block, Xiph or EBML lacing) and keep an MP3's LAME tag frame.
    @Test(arguments: ["opus", "flac", "mp3", "aac"])
    func mkvmergesLacedFilesRenderExactly(_ codec: String) async throws {
        let source = try await Self.source()
        let input: String
        switch codec {
        case "opus": input = try await XiphFiles.encode(source, "opusenc", [], ext: "opus")
        case "flac": input = try await XiphFiles.encode(source, "flac", [], ext: "flac")
        case "mp3": input = try await XiphFiles.encode(source, "ffmpeg", ["-c:a", "libmp3lame", "-b:a", "128k"], ext: "mp3")
        default: input = try await XiphFiles.encode(source, "ffmpeg", ["-c:a", "aac", "-f", "adts"], ext: "aac")
        }
        let file = XiphFiles.directory.appendingPathComponent("mkvmerge-\(codec).mka").path
        if !FileManager.default.fileExists(atPath: file) {
            let partial = XiphFiles.directory.appendingPathComponent("partial-\(UUID()).mka").path
            _ = try await runTool(try #require(Where.tool("mkvmerge")), ["-q", "-o", partial, input])
            #expect(rename(partial, file) == 0)
        }
        // mkvmerge laces frames: mkvinfo lists blocks of several frames.
        let info = String(decoding: try await run(try #require(Where.tool("mkvinfo")), ["-v", file]), as: UTF8.self)
        #expect(info.split(separator: "\n").contains { $0.contains("frame(s)") && !$0.contains(" 1 frame(s)") }, "mkvmerge laced no block")
        let (ours, _, renderer) = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(file) }
        switch codec {
        case "opus":
            let reference = try await referenceDecode(file, libopus: true)
            #expect(ours.count == XiphFiles.frames * 2 && reference.count == ours.count)
            #expect(differing(ours, reference, channels: 2, tolerance: 1.0 / 32768) == 0)
        case "flac":
            #expect(ours.count == XiphFiles.frames * 2)
            #expect(differing(ours, try await ffmpegFloats(source), channels: 2) == 0)
        case "mp3":
            // The LAME tag's delay and padding trim it to the source's length, as mpg123 decodes the MP3.
            let reference = try await run(try #require(Where.tool("mpg123")), ["-q", "-e", "f32", "-s", input])
                .withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
            #expect(ours.count == XiphFiles.frames * 2, "\(ours.count / 2) frames rendered, \(XiphFiles.frames) in the source")
            #expect(reference.count == ours.count)
            #expect(differing(ours, reference, channels: 2) == 0)
            #expect(renderer.file.packetTableInfo?.primingFrames == 1105)
        default:
            let reference = try await ffmpegFloats(file)
            #expect(ours.count == reference.count)
            #expect(differing(ours, reference, channels: 2) == 0)
        }
    }

    /// A seek renders what the linear render has from the same frame on (FLAC: exactly).
    @Test func aSeekRendersTheLinearTail() async throws {
        let source = try await Self.source()
        let file = try await XiphFiles.encode(source, "ffmpeg", ["-c:a", "flac", "-cluster_time_limit", "100"], ext: "mka", tag: "-seek")
        let (linear, _, _) = try await rendered(file)
        for start: Int64 in [1, 12_345, Int64(XiphFiles.frames) - 100] {
            let tail = try await renderedFrom(file, start: start)
            #expect(tail.count == linear.count - Int(start) * 2)
            #expect(tail == Array(linear[(Int(start) * 2)...]), "from frame \(start)")
        }
    }

    /// Video and a second audio track are skipped and named; the title, artist and chapters are read.
    @Test func videoIsSkippedAndTagsAndChaptersAreRead() async throws {
        let source = try await Self.source()
        let chapters = XiphFiles.directory.appendingPathComponent("chapters-\(UUID()).txt").path
        try """
        ;FFMETADATA1
        title=Night Tune
        artist=The Testers
        [CHAPTER]
        TIMEBASE=1/1000
        START=0
        END=250
        title=Opening
        [CHAPTER]
        TIMEBASE=1/1000
        START=250
        END=625
        title=Second Part
        """.write(toFile: chapters, atomically: true, encoding: .utf8)
        let file = XiphFiles.directory.appendingPathComponent("video-\(UUID()).mkv").path
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        _ = try await run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=0.6", "-i", source,
                                   "-i", chapters, "-map", "0:v", "-map", "1:a", "-map", "1:a", "-map_metadata", "2", "-map_chapters", "2",
                                   "-c:v", "mpeg4", "-c:a:0", "flac", "-c:a:1", "ac3", file])
        let audio = try AudioFile(path: file)
        #expect(audio.fileType == .matroska)
        #expect(audio.dataFormat.formatID == .flac)
        #expect(audio.validFrames == Int64(XiphFiles.frames))
        let warnings = audio.warnings.map(\.description).joined(separator: "\n")
        #expect(warnings.contains("video track 1"), "\(warnings)")
        #expect(warnings.contains("A_AC3"), "\(warnings)")
        #expect(audio.metadata.title == "Night Tune")
        #expect(audio.metadata.artist == "The Testers")
        let tracks = try #require(audio.metadata.cueSheet?.tracks)
        #expect(tracks.map(\.title) == ["Opening", "Second Part"])
        #expect(tracks.map { $0.start.frame(atRate: Double(Self.rate)) } == [0, 12_000])
        try? FileManager.default.removeItem(atPath: file)
        try? FileManager.default.removeItem(atPath: chapters)
    }

    /// A track this library does not decode is refused by name.
    @Test func anAC3TrackIsRefusedByName() async throws {
        let source = try await Self.source()
        let file = try await XiphFiles.encode(source, "ffmpeg", ["-c:a", "ac3"], ext: "mka", tag: "-ac3")
        do {
            _ = try AudioFile(path: file)
            Issue.record("an AC-3 track was opened")
        } catch let error as AudioFileStreamError {
            #expect(error.code == .unsupportedDataFormat)
            #expect(error.message.contains("AC-3"), "\(error)")
        }
    }

    /// A file cut short plays what is there; a damaged cluster is skipped to the next one, with a
    /// warning, and what came before it is kept.
    @Test func damageIsReportedAndWhatCameBeforeIsKept() async throws {
        let source = try await Self.source()
        let file = try await XiphFiles.encode(source, "ffmpeg", ["-c:a", "pcm_s16le", "-cluster_size_limit", "20000"], ext: "mka", tag: "-damage")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let clusterID: [UInt8] = [0x1F, 0x43, 0xB6, 0x75]
        let clusters = bytes.indices.dropLast(4).filter { bytes[$0..<($0 + 4)].elementsEqual(clusterID) }
        #expect(clusters.count >= 4)
        // The second cluster's first SimpleBlock ID (after the cluster's size and Timestamp) made 0:
        // no EBML element starts with a zero byte.
        var at = clusters[1] + 4
        at += (bytes[at].leadingZeroBitCount + 1)
        if bytes[at] == 0xBF { at += 2 + Int(bytes[at + 1] & 0x7F) }   // ffmpeg's CRC-32 element
        try #require(bytes[at] == 0xE7 && bytes[at + 1] & 0x80 != 0, "no cluster Timestamp where expected")
        at += 2 + Int(bytes[at + 1] & 0x7F)
        try #require(bytes[at] == 0xA3, "no SimpleBlock where expected")
        bytes[at] = 0
        let damaged = try XiphFiles.write(bytes, ext: "mka")
        let (ours, _, renderer) = try await rendered(damaged)
        let warnings = renderer.file.warnings.map(\.description).joined(separator: "\n")
        #expect(warnings.contains("reading resumed at the next Cluster"), "\(warnings)")
        let reference = try await ffmpegFloats(source)
        // One cluster (about 5 000 frames) is lost; everything before it and after it is the source's.
        #expect(ours.count < XiphFiles.frames * 2 && ours.count > (XiphFiles.frames - 6_000) * 2, "\(ours.count / 2) frames")
        let before = 2 * 4_000, after = 2 * 10_000
        #expect(ours.count >= before && Array(ours.prefix(before)) == Array(reference.prefix(before)))
        #expect(ours.count >= after && Array(ours.suffix(after)) == Array(reference.suffix(after)), "reading resumed at the next cluster")

        let cut = try XiphFiles.write(Array([UInt8](try Data(contentsOf: URL(fileURLWithPath: file))).prefix(clusters[2] + 100)), ext: "mka")
        let (short, _, shortRenderer) = try await rendered(cut)
        #expect(short.count > 0 && short == Array(reference.prefix(short.count)))
        #expect(shortRenderer.file.warnings.contains { $0.code == .truncated }, "\(shortRenderer.file.warnings)")
    }

    /// ffmpeg's decode of a file (`-c:a libopus` first for Opus: libopus, as this library decodes).
    func referenceDecode(_ file: String, libopus: Bool) async throws -> [Float] {
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let data = try await run(ffmpeg, ["-v", "error"] + (libopus ? ["-c:a", "libopus"] : []) + ["-i", file, "-f", "f32le", "-acodec", "pcm_f32le", "-"])
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }
}
