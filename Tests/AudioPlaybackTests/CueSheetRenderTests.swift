import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport
import MPG123Decoder

/// A FLAC album with a cue sheet (a `.cue` file, and the same sheet imported into the FLAC by
/// `metaflac`): `aqinfo --json` lists the tracks; `aqrender SHEET OUT --track N` writes exactly
/// the source's samples between the track's indexes (sox's `trim` of the WAV the FLAC was made from).
@Suite(.enabled(if: Where.tool("sox") != nil && Where.tool("flac") != nil && Where.tool("metaflac") != nil, "sox, flac or metaflac is missing"))
struct CueSheetRenderTests {
    static let tools = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    static let sheet = """
        PERFORMER "Tone Band"
        TITLE "Tones"
        FILE "album.flac" WAVE
          TRACK 01 AUDIO
            TITLE "A"
            INDEX 01 00:00:00
          TRACK 02 AUDIO
            TITLE "E"
            INDEX 00 00:02:00
            INDEX 01 00:02:37
          TRACK 03 AUDIO
            TITLE "A high"
            INDEX 01 00:05:52

        """
    /// Track starts at 588 samples a CD frame; the album is 2.5 + 3.2 + 1.7 s.
    static let starts: [Int64] = [0, (2 * 75 + 37) * 588, (5 * 75 + 52) * 588]
    static let total: Int64 = 326_340

    static func album() async throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aq-cue-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let sox = try #require(Where.tool("sox"))
        for (name, seconds, hz) in [("t1", "2.5", "440"), ("t2", "3.2", "660"), ("t3", "1.7", "880")] {
            _ = try await run(sox, ["-n", "-r", "44100", "-c", "2", "-b", "16", "\(folder)/\(name).wav", "synth", seconds, "sine", hz, "vol", "0.5"])
        }
        _ = try await run(sox, ["\(folder)/t1.wav", "\(folder)/t2.wav", "\(folder)/t3.wav", "\(folder)/album.wav"])
        _ = try await run(try #require(Where.tool("flac")), ["-s", "-f", "\(folder)/album.wav", "-o", "\(folder)/album.flac"])
        try sheet.write(toFile: "\(folder)/album.cue", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: "\(folder)/album.flac", toPath: "\(folder)/embedded.flac")
        _ = try await run(try #require(Where.tool("metaflac")), ["--import-cuesheet-from=\(folder)/album.cue", "\(folder)/embedded.flac"])
        return folder
    }

    @Test func aqinfoListsTheTracksOfASheetAndOfAnEmbeddedOne() async throws {
        let folder = try await Self.album()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for input in ["album.cue", "embedded.flac"] {
            let result = try await runTool(Self.tools.appendingPathComponent("aqinfo").path, ["--json", "\(folder)/\(input)"])
            try #require(result.status == 0, "\(String(decoding: result.errorOutput, as: UTF8.self))")
            let json = try #require(try JSONSerialization.jsonObject(with: result.output) as? [String: Any])
            let tracks = try #require(json["tracks"] as? [[String: Any]], "\(input)")
            #expect(tracks.compactMap { $0["number"] as? Int } == [1, 2, 3])
            #expect(tracks.compactMap { ($0["startFrame"] as? NSNumber)?.int64Value } == Self.starts)
            let ends = Array(Self.starts.dropFirst()) + [Self.total]
            #expect(tracks.compactMap { ($0["frames"] as? NSNumber)?.int64Value } == zip(Self.starts, ends).map { $1 - $0 })
            if input == "album.cue" {
                #expect(tracks.compactMap { $0["title"] as? String } == ["A", "E", "A high"])
                #expect(tracks.allSatisfy { $0["performer"] as? String == "Tone Band" })
            }
        }
    }

    @Test(arguments: ["album.cue", "embedded.flac"])
    func aTrackRendersExactlyItsSamples(_ input: String) async throws {
        let folder = try await Self.album()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let ends = Array(Self.starts.dropFirst()) + [Self.total]
        for (number, (start, end)) in zip(Self.starts, ends).enumerated().map({ ($0 + 1, $1) }) {
            let ours = "\(folder)/ours\(number).wav", theirs = "\(folder)/sox\(number).wav"
            let result = try await runTool(Self.tools.appendingPathComponent("aqrender").path, ["\(folder)/\(input)", ours, "--track", String(number)])
            try #require(result.status == 0, "\(String(decoding: result.errorOutput, as: UTF8.self))")
            _ = try await run(try #require(Where.tool("sox")), ["\(folder)/album.wav", "-e", "floating-point", "-b", "32", theirs,
                                                                "trim", "\(start)s", "\(end - start)s"])
            let a = try await rendered(ours).samples, b = try await rendered(theirs).samples
            #expect(a.count == Int(end - start) * 2, "track \(number)")
            #expect(difference(a, b) == nil, "track \(number)")
        }
    }
}

/// The player takes a sheet's tracks as items (`AudioPlayerItem.tracks(ofCueSheet:)`): one after
/// the other they are the album, bit for bit; a track of a codec with a decoder delay is its
/// slice of the whole render.
@Suite(.enabled(if: Where.tool("sox") != nil && Where.tool("flac") != nil && Where.tool("metaflac") != nil, "sox, flac or metaflac is missing"))
struct CueSheetPlayerTests {
    @Test(arguments: ["album.cue", "embedded.flac"])
    func theTracksPlayAsTheAlbumGapless(_ input: String) async throws {
        let folder = try await CueSheetRenderTests.album()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let album = try await rendered("\(folder)/album.flac").samples
        let items = try AudioPlayerItem.tracks(ofCueSheet: "\(folder)/\(input)")
        #expect(items.count == 3)
        let collector = SinkCollector()
        let player = AudioPlayer(items: items,
                                 configuration: .init(record: { samples, _ in collector.record(samples) }),
                                 makeSink: { collector.make() })
        let frames = try await player.play().framesPlayed
        #expect(frames == CueSheetRenderTests.total)
        #expect(collector.recording == album)
        #expect(items.map(\.name).allSatisfy { $0.contains("#") })
    }

    /// A start inside a track lands on the album's frame there: track 2 from 1 s in.
    @Test func aStartInsideATrackIsTheAlbumFromThere() async throws {
        let folder = try await CueSheetRenderTests.album()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let album = try await rendered("\(folder)/album.flac").samples
        let items = try AudioPlayerItem.tracks(ofCueSheet: "\(folder)/album.cue")
        let collector = SinkCollector()
        let player = AudioPlayer(items: [items[1]],
                                 configuration: .init(startSeconds: 1.0, record: { samples, _ in collector.record(samples) }),
                                 makeSink: { collector.make() })
        _ = try await player.play()
        let from = Int(CueSheetRenderTests.starts[1]) + 44_100, to = Int(CueSheetRenderTests.starts[2])
        #expect(collector.recording == Array(album[(from * 2)..<(to * 2)]))
    }

    /// A track of an MP3 (a codec with a decoder delay and a bit reservoir) is exactly its slice of
    /// the whole file's gapless render: the range source starts decoding the pre-roll early.
    @Test func aTrackOfAnMP3IsItsSliceOfTheWholeRender() async throws {
        let path = Where.fixture("lame-vbr-v2-44k-stereo.mp3")
        let whole = try await rendered(path).samples
        let file = try AudioFile(path: path)
        MPG123Decoder.register()
        for range in [Int64(30_000)..<40_000, 1..<1153, 12_345..<Int64(whole.count / 2)] {
            let item = AudioPlayerItem(name: "slice") { _ in try FrameRangePacketSource(base: FilePacketSource(file: file), range: range) }
            let collector = SinkCollector()
            let player = AudioPlayer(items: [item],
                                     configuration: .init(record: { samples, _ in collector.record(samples) }),
                                     makeSink: { collector.make() })
            let frames = try await player.play().framesPlayed
            #expect(frames == Int64(range.count))
            let out = collector.recording
            #expect(difference(out, Array(whole[Int(range.lowerBound * 2)..<Int(range.upperBound * 2)])) == nil, "\(range)")
        }
    }
}
