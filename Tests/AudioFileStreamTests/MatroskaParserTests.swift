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
