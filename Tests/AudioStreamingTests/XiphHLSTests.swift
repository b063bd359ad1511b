import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import AudioStreaming
import BufferQueue
import FLACDecoder
import OpusDecoder
import TestSupport

/// HLS with Opus or FLAC in fMP4 segments (ffmpeg's HLS muxer): the presentation plays exactly
/// what the segments joined into one file render — Opus without its pre-skip and to the last
/// sample's end — and seeks land where a local seek lands.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct XiphHLSTests {
    static func presentation(_ codec: [String]) async throws -> String? {
        if NginxServer.missing {
            print("nginx or ffmpeg is not installed: skipped")
            return nil
        }
        let root = NSTemporaryDirectory() + "aq-hls-xiph-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root + "/media", withIntermediateDirectories: true)
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", TestPaths.fixture("demo-melody.m4a"), "-vn"] + codec
                                       + ["-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4",
                                          "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename", "\(root)/media/seg%03d.m4s",
                                          "\(root)/media/index.m3u8"])
        try #require(result.status == 0, "ffmpeg's HLS muxer failed: \(String(decoding: result.errorOutput, as: UTF8.self))")
        return root
    }

    /// The segments joined after the init section, rendered as a file.
    static func join(_ root: String, startSeconds: Double = 0) throws -> [Float] {
        let playlist = try String(contentsOfFile: "\(root)/media/index.m3u8", encoding: .utf8)
        var joined = try Data(contentsOf: URL(fileURLWithPath: "\(root)/media/init.mp4"))
        for name in playlist.split(separator: "\n").filter({ !$0.hasPrefix("#") }) {
            joined += try Data(contentsOf: URL(fileURLWithPath: "\(root)/media/\(name)"))
        }
        let path = "\(root)/media/joined.mp4"
        try joined.write(to: URL(fileURLWithPath: path))
        return try localRender(path, startSeconds: startSeconds)
    }

    @Test(arguments: [["-c:a", "libopus"], ["-c:a", "flac", "-strict", "-2"]])
    func segmentsPlayAsTheJoinedFile(_ codec: [String]) async throws {
        OpusDecoder.register()
        FLACDecoder.register()
        guard let root = try await Self.presentation(codec) else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        let expected = try Self.join(root)
        let file = try AudioFile(path: "\(root)/media/joined.mp4")
        if codec.contains("libopus") { #expect(file.packetTableInfo?.primingFrames == 312, "\(String(describing: file.packetTableInfo))") }
        let (capture, frames) = try await playStream([.url(server.url("media/index.m3u8"))])
        #expect(Int(frames) * 2 == expected.count, "\(frames) frames played, \(expected.count / 2) rendered")
        #expect(difference(capture.samples, expected) == nil)
        for seconds in [1.0, 2.2, 3.5] {
            let (sought, _) = try await playStream([.url(server.url("media/index.m3u8"))], seek: seconds)
            let local = try Self.join(root, startSeconds: seconds)
            #expect(sought.samples.count == local.count, "from \(seconds) s: \(sought.samples.count / 2) frames, \(local.count / 2) rendered")
            #expect(difference(sought.samples, local) == nil, "from \(seconds) s")
        }
    }
}
