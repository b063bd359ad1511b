import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import AudioStreaming
import BufferQueue
import FLACDecoder
import OpusDecoder
import TestSupport
import VorbisDecoder

/// Ogg and FLAC over HTTP: a stream plays as the local render, and a seek — found by bisection on
/// granule positions or frame sample numbers with `Range` requests, as opusfile does — plays what
/// a local seek plays.
@Suite(.timeLimit(.minutes(2)), .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing (make deps installs it)"))
struct XiphStreamingTests {
    /// 20 s of two tones at 48 kHz in Ogg (or native FLAC), encoded by ffmpeg; `muxer`, other
    /// options in place of `-f ogg`/`-f flac` (the extension then picks the container).
    static func make(_ codec: String, _ ext: String, muxer: [String]? = nil) async throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("xiph-http-\(UUID()).\(ext)").path
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=20.0071:r=48000",
                                                           "-f", "lavfi", "-i", "sine=f=660:d=20.0071:r=48000", "-filter_complex", "amerge",
                                                           "-c:a", codec] + (muxer ?? ["-f", ext == "flac" ? "flac" : "ogg"]) + [path])
        try #require(result.status == 0, "ffmpeg could not write \(ext)")
        return path
    }

    @Test(arguments: [("libopus", "opus"), ("libvorbis", "ogg"), ("flac", "oga"), ("flac", "flac")])
    func aStreamAndItsSeeksPlayAsTheLocalFile(_ codec: String, _ ext: String) async throws {
        OpusDecoder.register()
        VorbisDecoder.register()
        FLACDecoder.register()
        let path = try await Self.make(codec, ext)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await streamAndSeeksPlayAsTheLocalFile(path, ext: ext, requestsPerSeek: 3)
    }
}

/// Matroska and WebM over HTTP: a seek beyond the clusters read is found by bisection on cluster
/// timestamps with `Range` requests (ffmpeg writes the Cues at the end, not read when streaming)
/// and plays what a local seek plays: where a packet's frames are constant (Opus 960, AAC 1024,
/// FLAC 4608 here) the cluster's timestamp lands on the packet grid exactly; Vorbis, whose
/// packets vary, reads on from the last cluster read.
@Suite(.timeLimit(.minutes(2)), .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing (make deps installs it)"))
struct MatroskaStreamingTests {
    @Test(arguments: [("libopus", "webm"), ("flac", "mka"), ("aac", "mka"), ("libvorbis", "webm")])
    func aStreamAndItsSeeksPlayAsTheLocalFile(_ codec: String, _ ext: String) async throws {
        OpusDecoder.register()
        FLACDecoder.register()
        VorbisDecoder.register()
        // Clusters of one second (by the extension, ffmpeg's Matroska or WebM muxer).
        let path = try await XiphStreamingTests.make(codec, ext, muxer: ["-cluster_time_limit", "1000"])
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await streamAndSeeksPlayAsTheLocalFile(path, ext: ext)
    }
}

/// Serves `path` over HTTP and plays it from the start and from 3.3, 12.71 and 19.5 s: every play
/// has the local render's frames, bit for bit, and each seek makes at least `requestsPerSeek`
/// requests: the head, then the probes and the resumed read (a Matroska seek among the clusters
/// read makes one, from the cluster found).
func streamAndSeeksPlayAsTheLocalFile(_ path: String, ext: String, requestsPerSeek: Int = 2) async throws {
    let server = try LoopbackServer(body: Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    defer { server.shutdown() }
    let (whole, frames) = try await playStream([.url(server.url("a.\(ext)"), configuration: quick)])
    let expected = try localRender(path)
    #expect(Int(frames) * 2 == expected.count)
    #expect(difference(whole.samples, expected) == nil, "from the start: \(whole.samples.count / 2) frames, \(expected.count / 2) expected")
    for seconds in [3.3, 12.71, 19.5] {
        let before = server.ranges.count
        let (capture, _) = try await playStream([.url(server.url("a.\(ext)"), configuration: quick)], seek: seconds)
        let local = try localRender(path, startSeconds: seconds)
        #expect(capture.samples.count == local.count, "from \(seconds) s: \(capture.samples.count / 2) frames, \(local.count / 2) expected; \(server.ranges.suffix(12))")
        #expect(difference(capture.samples, local) == nil, "from \(seconds) s")
        #expect(server.ranges.count - before >= requestsPerSeek, "from \(seconds) s: \(server.ranges.suffix(server.ranges.count - before))")
    }
}
