import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

/// The Matroska parser on files ffmpeg writes: the same packets and gapless numbers at any
/// chunking, live WebM (unknown sizes) included; the sniffer's three ways of knowing it.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing (make deps installs it): Matroska parser tests skipped"))
struct MatroskaParserTests {
    static let files: [[String]] = [["libopus", "webm"], ["libopus", "webm", "-live", "1"], ["libvorbis", "webm"], ["flac", "mka"], ["aac", "mka"]]

    @Test(arguments: files)
    func theSamePacketsAtAnyChunking(_ spec: [String]) async throws {
        let codec = spec[0], ext = spec[1], extra = Array(spec.dropFirst(2))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mkv-\(UUID()).\(ext)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=1.01:r=48000",
                                                           "-ac", "2", "-c:a", codec] + extra + [path])
        try #require(result.status == 0, "ffmpeg: \(String(decoding: result.errorOutput, as: UTF8.self))")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let whole = XiphContainerTests.stream(bytes, chunk: bytes.count)
        #expect(whole.trace.error == nil && whole.trace.warnings.isEmpty, "\(whole.trace.error ?? "") \(whole.trace.warnings)")
        #expect(whole.stream.fileType == .matroska)
        #expect(whole.trace.packets.count > 10)
        for chunk in [1, 7, 1000] {
            let dripped = XiphContainerTests.stream(bytes, chunk: chunk)
            #expect(dripped.trace == whole.trace, "chunk \(chunk)")
        }
        let table = try #require(whole.stream.packetTableInfo)
        #expect(Int64(table.primingFrames) + table.validFrames + Int64(table.remainderFrames) == XiphContainerTests.frames(whole.trace), "\(table)")
        if codec == "libopus" {
            // CodecDelay and DiscardPadding: exactly the source's 48 480 frames.
            #expect(table.validFrames == 48_480, "\(table)")
            let head = try #require(whole.stream.magicCookie)
            #expect(table.primingFrames == Int(head[10]) | Int(head[11]) << 8)
        }
    }

    /// A seek beyond the clusters read: the plan, a probe of bytes from the middle of the file, and
    /// the resume land on the packet the whole parse numbers there, at its exact decoded frame
    /// (constant packets: the timestamp snaps to the packet grid); what follows is the same packets.
    @Test(arguments: ["libopus", "aac", "flac"])
    func aSeekByTimeLandsOnTheExactPacket(_ codec: String) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mkv-seek-\(UUID()).mka").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=12.3:r=48000",
                                                           "-ac", "2", "-c:a", codec, "-cluster_time_limit", "500", path])
        try #require(result.status == 0, "ffmpeg: \(String(decoding: result.errorOutput, as: UTF8.self))")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let whole = XiphContainerTests.stream(bytes, chunk: bytes.count)
        let packets = whole.trace.packets
        // The head only: up to the second cluster's end.
        let stream = AudioFileStream()
        let clusterID: [UInt8] = [0x1F, 0x43, 0xB6, 0x75]
        let clusters = bytes.indices.dropLast(4).filter { bytes[$0..<($0 + 4)].elementsEqual(clusterID) }
        try #require(clusters.count > 10)
        _ = try stream.parse(bytes[0..<clusters[2]])
        let frame: Int64 = 7 * 48_000 + 123
        let plan = try #require(stream.seekPlan(forFrame: frame, preRollPackets: 2))
        #expect(plan.low.offset < Int64(clusters[2]))
        // A probe in the second half of the file finds a cluster and its timestamp.
        let middle = bytes.count / 2
        let found = try #require(stream.seekProbe(in: Array(bytes[middle...]), plan: plan))
        let offset = Int64(middle + found.offset)
        #expect(clusters.contains(Int(offset)))
        let decoded = try #require(stream.resume(at: offset, position: found.position, skippingFound: true))
        let events = try stream.parse(bytes[Int(offset)...])
        var read: [(index: Int64, bytes: [UInt8])] = []
        for case .packets(let batch) in events {
            for (i, d) in batch.descriptions.enumerated() {
                read.append((batch.firstPacketIndex + Int64(i), Array(batch.data[d.startOffset..<(d.startOffset + d.dataByteSize)])))
            }
        }
        let first = try #require(read.first)
        // The packet the whole parse has at that index is the same packet, and begins at that frame.
        let index = Int(first.index)
        try #require(index < packets.count)
        #expect(packets[index].bytes == first.bytes, "packet \(index)")
        let framesBefore = packets[..<index].reduce(Int64(0)) { $0 + Int64($1.frames) }
        #expect(decoded == framesBefore, "resumed at frame \(decoded), the packet begins at \(framesBefore)")
        #expect(read.map(\.bytes) == packets[index..<(index + read.count)].map(\.bytes))
    }

    /// An EBML element: its ID bytes, a size of 8 bytes (or unknown), its body.
    static func element(_ id: [UInt8], _ body: [UInt8], unknownSize: Bool = false) -> [UInt8] {
        let size = unknownSize ? [UInt8](repeating: 0xFF, count: 8) : [0x01] + (0..<7).map { UInt8(truncatingIfNeeded: body.count >> (8 * (6 - $0))) }
        return id + (unknownSize ? [0x01] + Array(size.dropFirst()) : size) + body
    }

    /// A hand-made file of 16-bit mono PCM whose blocks use every lacing — none, Xiph, EBML and
    /// fixed — in a Segment and Cluster of unknown size: every frame is a packet, in order, each
    /// the bytes laced, at any chunking.
    @Test func everyLacingGivesItsFrames() {
        let header = Self.element([0x1A, 0x45, 0xDF, 0xA3], Self.element([0x42, 0x82], Array("matroska".utf8)))
        let audio = Self.element([0xE1], Self.element([0xB5], [0x40, 0xBF, 0x40, 0, 0, 0, 0, 0]) + Self.element([0x9F], [1]) + Self.element([0x62, 0x64], [16]))
        let entry = Self.element([0xAE], Self.element([0xD7], [1]) + Self.element([0x83], [2]) + Self.element([0x86], Array("A_PCM/INT/LIT".utf8)) + audio)
        let tracks = Self.element([0x16, 0x54, 0xAE, 0x6B], entry)
        // Frame k's bytes are k repeated; sizes in bytes (even: whole 16-bit frames).
        func frames(_ sizes: [Int], from first: Int) -> [[UInt8]] { sizes.enumerated().map { [UInt8](repeating: UInt8(first + $0.offset), count: $0.element) } }
        let plain = frames([6], from: 1)
        let xiph = frames([300, 4, 10], from: 2)
        let ebml = frames([4, 260, 2, 8], from: 5)
        let fixed = frames([6, 6, 6], from: 9)
        func block(_ lacing: UInt8, _ laced: [[UInt8]], _ sizes: [UInt8]) -> [UInt8] {
            Self.element([0xA3], [0x81, 0, 0, 0x80 | lacing << 1] + (lacing == 0 ? [] : [UInt8(laced.count - 1)]) + sizes + laced.flatMap { $0 })
        }
        // Xiph: 300 = 255 + 45, then 4. EBML: 4 (1-byte vint 0x84), then +256 (2 bytes, bias 8191),
        // then -258 (2 bytes); the last size is what remains.
        let cluster = Self.element([0x1F, 0x43, 0xB6, 0x75], Self.element([0xE7], [0])
            + block(0, plain, []) + block(1, xiph, [255, 45, 4]) + block(3, ebml, [0x84, 0x60, 0xFF, 0x5E, 0xFD]) + block(2, fixed, []),
            unknownSize: true)
        let file = header + Self.element([0x18, 0x53, 0x80, 0x67], tracks + cluster, unknownSize: true)
        let expected = (plain + xiph + ebml + fixed).flatMap { $0 }
        for chunk in [1, 5, file.count] {
            let result = trace(file, chunks: [chunk])
            #expect(result.error == nil && result.warnings.isEmpty, "chunk \(chunk): \(result.error ?? "") \(result.warnings)")
            #expect(result.packets.flatMap(\.bytes) == expected, "chunk \(chunk): \(result.packets.count) packets")
            #expect(result.packets.count == expected.count / 2, "chunk \(chunk)")
        }
    }

    @Test func theSnifferKnowsMatroskaByBytesTypeAndName() {
        let head: [UInt8] = [0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x86, 0x81, 0x01, 0x42, 0xF7, 0x81]
        #expect(AudioSniffer.kind(ofHead: head) == .audio(.matroska))
        for type in ["audio/webm", "video/webm", "audio/x-matroska", "video/x-matroska; codecs=opus"] {
            #expect(AudioSniffer.kind(contentType: type) == .audio(.matroska), "\(type)")
        }
        for ext in ["webm", "mka", "MKV"] {
            #expect(AudioSniffer.kind(pathExtension: ext) == .audio(.matroska), "\(ext)")
        }
    }

    /// Bytes that are no EBML element before any audio is a clear error, never a hang or garbage.
    @Test func aDocumentOfAnotherTypeIsRefused() {
        // An EBML header whose DocType is "other".
        let header: [UInt8] = [0x1A, 0x45, 0xDF, 0xA3, 0x88, 0x42, 0x82, 0x85] + Array("other".utf8)
        let trace = XiphContainerTests.stream(header + [0x18, 0x53, 0x80, 0x67, 0x80], chunk: 3)
        #expect(trace.trace.error?.contains("\"other\"") == true, "\(trace.trace.error ?? "no error")")
    }
}

extension MatroskaParserTests {
    /// A Cluster whose size field is invalid (a zero byte) is skipped to the next Cluster, not
    /// found again where it is: the parse ends, with a warning, and the next cluster's frames come.
    @Test func aClusterWithAnInvalidSizeIsSkipped() {
        let header = Self.element([0x1A, 0x45, 0xDF, 0xA3], Self.element([0x42, 0x82], Array("webm".utf8)))
        let audio = Self.element([0xE1], Self.element([0xB5], [0x40, 0xBF, 0x40, 0, 0, 0, 0, 0]) + Self.element([0x9F], [1]) + Self.element([0x62, 0x64], [16]))
        let entry = Self.element([0xAE], Self.element([0xD7], [1]) + Self.element([0x83], [2]) + Self.element([0x86], Array("A_PCM/INT/LIT".utf8)) + audio)
        let tracks = Self.element([0x16, 0x54, 0xAE, 0x6B], entry)
        let good = Self.element([0x1F, 0x43, 0xB6, 0x75], Self.element([0xE7], [0]) + Self.element([0xA3], [0x81, 0, 0, 0x80, 1, 2, 3, 4]))
        let broken: [UInt8] = [0x1F, 0x43, 0xB6, 0x75, 0x00, 0xE7, 0x81, 0x00]
        let file = header + Self.element([0x18, 0x53, 0x80, 0x67], tracks + good + broken + good, unknownSize: true)
        for chunk in [1, 3, file.count] {
            let result = trace(file, chunks: [chunk])
            #expect(result.error == nil, "chunk \(chunk): \(result.error ?? "")")
            #expect(result.packets.flatMap(\.bytes) == [1, 2, 3, 4, 1, 2, 3, 4], "chunk \(chunk): \(result.warnings) \(result.items)")
            #expect(result.warnings.contains { $0.contains("reading resumed at the next Cluster") }, "chunk \(chunk): \(result.warnings)")
        }
    }
}
