import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

/// Class 5 of issue 37: ADTS with junk or tags between frames keeps every frame, whatever the
/// chunking; and an SSR profile field on a stream that is LC in every other respect plays as LC.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing (make deps installs it): ADTS class tests skipped"))
struct ADTSClassTests {
    /// A second of AAC in ADTS, made by ffmpeg, cut into its frames.
    static func frames() async throws -> [[UInt8]] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("adts-\(UUID()).aac").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=1.0:r=44100",
                                                           "-c:a", "aac", "-b:a", "96k", path])
        try #require(result.status == 0)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var frames: [[UInt8]] = []
        var at = 0
        while at + 7 <= bytes.count {
            let length = Int(bytes[at + 3] & 3) << 11 | Int(bytes[at + 4]) << 3 | Int(bytes[at + 5] >> 5)
            try #require(length >= 7 && at + length <= bytes.count)
            frames.append(Array(bytes[at..<(at + length)]))
            at += length
        }
        return frames
    }

    /// What can lie between two frames of a real stream.
    static let between: [(String, [UInt8])] = {
        var noise: [UInt8] = []
        var state: UInt32 = 12345
        for _ in 0..<300 { state = state &* 1_103_515_245 &+ 12345; noise.append(UInt8(truncatingIfNeeded: state >> 16)) }
        let id3: [UInt8] = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 20] + Array("TIT2".utf8) + [0, 0, 0, 10, 0, 0, 3] + Array("A title".utf8) + [0, 0]
        let id3v1: [UInt8] = Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125)
        // A header of the same stream (LC, 44.1 kHz, mono) whose frame runs into the next real one.
        let fakeHeader: [UInt8] = [0xFF, 0xF1, 0x50, 0x40, 0x20, 0x1F, 0xFC] + [UInt8](repeating: 0x11, count: 20)
        // A header claiming 2 raw data blocks, in junk.
        let fakeBlocks: [UInt8] = [0xFF, 0xF1, 0x50, 0x40, 0x10, 0x1F, 0xFD] + Array(noise.prefix(40))
        // Short noise that starts with a sync word, at several lengths and seeds.
        var shortNoise: [(String, [UInt8])] = []
        for seed in 1...12 {
            var value = UInt32(seed) &* 2_654_435_761
            var bytes: [UInt8] = [0xFF, 0xF1]
            for _ in 0..<(seed * 5) { value = value &* 1_103_515_245 &+ 12345; bytes.append(UInt8(truncatingIfNeeded: value >> 16)) }
            shortNoise.append(("sync and noise \(seed)", bytes))
        }
        return shortNoise + [("noise", noise), ("sync bytes", [0xFF, 0xFF, 0xF1, 0x00, 0xFF]), ("ID3v2", id3), ("ID3v1", id3v1),
                ("same-stream header", fakeHeader), ("header with 2 blocks", fakeBlocks)]
    }()

    @Test(arguments: between.map(\.0))
    func junkOrATagBetweenFramesLosesNoFrame(_ name: String) async throws {
        let frames = try await Self.frames()
        let junk = try #require(Self.between.first { $0.0 == name }).1
        let bytes = frames[..<10].flatMap { $0 } + junk + frames[10...].flatMap { $0 }
        let payloads = frames.map { Array($0[7...]) }
        for chunks in [[1], [7], [100], [4096], [3, 500, 17]] {
            let result = trace(bytes, chunks: chunks)
            #expect(result.error == nil, "\(name), chunks \(chunks): \(result.error ?? "")")
            let packets = result.packets.map(\.bytes)
            #expect(packets.count == frames.count, "\(name), chunks \(chunks): \(packets.count) of \(frames.count) frames")
            let same = packets == payloads
            #expect(same, "\(name), chunks \(chunks): the frames differ")
        }
    }

    /// Issue 52, class 5b: the first frame sits between a leading ID3v2.4 tag and a second ID3
    /// tag of 86 bytes. A frame followed by a tag is a frame (as for MPEG audio): none is lost,
    /// whatever the chunking, and a file of it opens as ADTS.
    @Test func aFirstFrameBetweenTwoID3TagsIsKept() async throws {
        let frames = try await Self.frames()
        func tag(_ size: Int) -> [UInt8] {
            // Sizes are syncsafe: 7 bits a byte.
            func syncsafe(_ value: Int) -> [UInt8] { [21, 14, 7, 0].map { UInt8(value >> $0 & 0x7F) } }
            let body = size - 10
            let frame: [UInt8] = Array("TXXX".utf8) + syncsafe(body - 10) + [0, 0, 3] + [UInt8](repeating: 0x41, count: body - 11)
            return Array("ID3".utf8) + [4, 0, 0] + syncsafe(body) + frame
        }
        let second = tag(86)
        #expect(second.count == 86)
        let bytes = tag(300) + frames[0] + second + frames[1...].flatMap { $0 }
        let payloads = frames.map { Array($0[7...]) }
        for chunks in [[1], [7], [100], [4096], [3, 500, 17]] {
            let result = trace(bytes, chunks: chunks)
            #expect(result.error == nil, "chunks \(chunks): \(result.error ?? "")")
            let packets = result.packets.map(\.bytes)
            #expect(packets.count == frames.count, "chunks \(chunks): \(packets.count) of \(frames.count) frames")
            let same = packets == payloads
            #expect(same, "chunks \(chunks): the frames differ")
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("adts-tags-\(UUID()).aac").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let file = try AudioFile(path: path)
        #expect(file.fileType == .adts)
        #expect(file.packetCount == Int64(frames.count))
    }
}

/// Class 7 of issue 37: `aqinfo` on implicit HE-AAC in ADTS counts in the output rate it announces.
@Suite(.enabled(if: Paths.sharedFixtures != nil, "../shared/fixtures (or $AQ_FIXTURES) is absent: implicit HE-AAC aqinfo test skipped"))
struct ImplicitHEAACInfoTests {
    @Test(arguments: ["gen-fdk-he-aac-v1-implicit-stereo.aac", "gen-fdk-he-aac-v2-implicit.aac", "gen-fdk-he-aac-v1-implicit-mono.aac"])
    func aqinfoCountsInTheAnnouncedRate(_ name: String) async throws {
        let aqinfo = SnifferTests.aqinfo
        try #require(FileManager.default.isExecutableFile(atPath: aqinfo), "aqinfo is built with the tests")
        let path = try #require(Paths.shared(name)).path
        let result = try await runTool(aqinfo, ["--json", path])
        try #require(result.status == 0, "\(result.errorText)")
        let json = try #require(try JSONSerialization.jsonObject(with: result.output) as? [String: Any])
        let packets = try #require(json["packetCount"] as? Int), perPacket = try #require(json["framesPerPacket"] as? Int)
        let valid = try #require(json["validFrames"] as? Int), priming = try #require(json["primingFrames"] as? Int)
        let remainder = try #require(json["remainderFrames"] as? Int), rate = try #require(json["sampleRate"] as? Double)
        let seconds = try #require(json["durationSeconds"] as? Double)
        #expect(perPacket == 2048)
        #expect(priming + valid + remainder == packets * perPacket)
        #expect(abs(seconds - Double(valid) / rate) < 1e-9)
        // The file's own length, as ffprobe gives it in SOURCES.md: about two seconds.
        #expect(seconds > 1.9 && seconds < 2.3, "\(seconds) s")
    }
}

/// Class 9a of issue 37: a file of one Layer III frame followed by a tag (APE with or without its
/// header, ID3v1 after an APE tag, an appended ID3v2) is MPEG audio with that one frame.
@Suite struct OneFrameWithTagsTests {
    /// The first audio frame (after the Info frame) of a LAME CBR fixture.
    static func oneFrame() throws -> [UInt8] {
        let bytes = try load(Paths.projectFixtures.appendingPathComponent("lame-cbr128-44k-stereo.mp3"))
        var at = 0
        if bytes.starts(with: Array("ID3".utf8)) {
            at = 10 + (Int(bytes[6]) << 21 | Int(bytes[7]) << 14 | Int(bytes[8]) << 7 | Int(bytes[9]))
        }
        var frames: [[UInt8]] = []
        while frames.count < 2 {
            let rates = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
            let length = 144 * rates[Int(bytes[at + 2] >> 4)] * 1000 / 44100 + Int(bytes[at + 2] >> 1 & 1)
            frames.append(Array(bytes[at..<(at + length)]))
            at += length
        }
        return frames[1]
    }

    static func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }

    /// An APE tag with one item, with or without its header.
    static func ape(header: Bool) -> [UInt8] {
        let items = le32(5) + le32(0) + Array("Title".utf8) + [0] + Array("Hello".utf8)
        let size = items.count + 32
        func block(_ isHeader: Bool) -> [UInt8] {
            Array("APETAGEX".utf8) + le32(2000) + le32(size) + le32(1) + le32(isHeader ? 0xA000_0000 : 0x8000_0000) + [UInt8](repeating: 0, count: 8)
        }
        return (header ? block(true) : []) + items + block(false)
    }

    @Test(arguments: ["APE", "APE without header", "APE without header, ID3v1", "ID3v1", "ID3v2"])
    func oneFrameAndATagIsMPEGAudio(_ tags: String) throws {
        let id3v1 = Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125)
        let id3v2 = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 10] + Array("TIT2".utf8) + [0, 0, 0, 0, 0, 0]
        let after: [UInt8]
        switch tags {
        case "APE": after = Self.ape(header: true)
        case "APE without header": after = Self.ape(header: false)
        case "APE without header, ID3v1": after = Self.ape(header: false) + id3v1
        case "ID3v1": after = id3v1
        default: after = id3v2
        }
        let frame = try Self.oneFrame()
        for chunks in [[1], [7], [4096]] {
            let result = trace(frame + after, chunks: chunks)
            #expect(result.error == nil, "\(tags), chunks \(chunks): \(result.error ?? "")")
            #expect(result.packets.map(\.bytes) == [Array(frame[4...])] || result.packets.map(\.bytes) == [frame],
                    "\(tags), chunks \(chunks): \(result.packets.count) packets")
        }
    }
}
