import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import AudioStreaming
import BufferQueue
import CodecTestSupport
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

/// Tagged FLACs over HTTP with a crossfade and ReplayGain: each item's gain is decided once its
/// stream's header (and its tags) came, before its first frame — not when it opened, before a
/// byte had arrived (it played at unity gain from frame 0).
@Test(.enabled(if: ["sox", "flac", "metaflac"].allSatisfy { Where.tool($0) != nil }, "sox, flac or metaflac is missing"))
func streamsGetTheirReplayGainWithACrossfade() async throws {
    FLACDecoder.register()
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stream-gain-\(UUID())")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    var files: [String: [UInt8]] = [:], renders: [[Float]] = []
    let tags = [(name: "a", gain: -4.0, frequency: 440), (name: "b", gain: 3.0, frequency: 660)]
    for tag in tags {
        let wav = folder.appendingPathComponent("\(tag.name).wav").path, flac = folder.appendingPathComponent("\(tag.name).flac").path
        for (tool, arguments) in [("sox", ["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "1", "sine", "\(tag.frequency)", "vol", "0.3"]),
                                  ("flac", ["-s", "-f", wav, "-o", flac]),
                                  ("metaflac", [String(format: "--set-tag=REPLAYGAIN_TRACK_GAIN=%.2f dB", tag.gain), "--set-tag=REPLAYGAIN_TRACK_PEAK=0.3", flac])] {
            let result = try await runTool(try #require(Where.tool(tool)), arguments)
            #expect(result.status == 0, "\(tool): \(String(decoding: result.errorOutput, as: UTF8.self))")
        }
        files["\(tag.name).flac"] = Array(try Data(contentsOf: URL(fileURLWithPath: flac)))
        let gain = Float(pow(10, tag.gain / 20))
        renders.append(try localRender(flac).map { $0 * gain })
    }
    // The crossfade as documented: the outgoing item's last D frames × cos, the incoming one's first × sin.
    let d = Int((0.25 * 44_100).rounded()), lengthA = renders[0].count / 2
    var expected = Array(renders[0][0..<((lengthA - d) * 2)])
    for i in 0..<d {
        let x = Double(i) / Double(d)
        let (out, into) = (Float(cos(Double.pi / 2 * x)), Float(sin(Double.pi / 2 * x)))
        for c in 0..<2 { expected.append(renders[0][(lengthA - d + i) * 2 + c] * out + renders[1][i * 2 + c] * into) }
    }
    expected += renders[1][(d * 2)...]
    let server = try LoopbackServer(files: files, faultyPath: nil)
    defer { server.shutdown() }
    let capture = Capture()
    let player = AudioPlayer(items: [.url(server.url("a.flac"), configuration: quick), .url(server.url("b.flac"), configuration: quick)],
                             configuration: .init(crossfade: try AudioPlayerCrossfade(seconds: 0.25),
                                                  replayGain: ReplayGainSettings(mode: .track), onEvent: { capture.add($0) }),
                             makeSink: { capture.makeSink() })
    let report = try await player.play()
    #expect(report.framesPlayed == Int64(expected.count / 2))
    #expect(difference(capture.samples, expected, tolerance: 1e-6) == nil)
}
