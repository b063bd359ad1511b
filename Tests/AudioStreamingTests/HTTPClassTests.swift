import Foundation
import Testing
import AudioPlayback
import AudioStreaming
import CodecTestSupport
import TestSupport

/// Classes 10, 12 and 16 of issue 37: what servers do that players must follow — a playlist
/// reached through a redirect, a playlist sent gzip-compressed, a redirect loop — from a loopback
/// server serving the presentation ffmpeg wrote.
@Suite(.serialized) struct HTTPClassTests {
    /// `ts/index.m3u8`, gzip-compressed by the gzip tool.
    static func gzipped(_ bytes: [UInt8]) async throws -> [UInt8] {
        let path = NSTemporaryDirectory() + "aq-gzip-\(UUID())"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await runTool("/bin/gzip", ["-c", "-n", path])
        try #require(result.status == 0)
        return [UInt8](result.output)
    }

    /// Class 10: `moved/index.m3u8` redirects to `ts/index.m3u8`, whose URIs are relative: they
    /// resolve against the URL after the redirect, and the presentation plays whole.
    /// Class 12: `ts/packed.m3u8` is sent gzip-compressed to a client that asked for it.
    @Test(arguments: ["moved/index.m3u8", "ts/compressed.m3u8"])
    func aRedirectedOrCompressedPlaylistPlaysWhole(_ path: String) async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let files = try HLSFaultTests.files(root, "ts")
        let playlist = try #require(files["ts/index.m3u8"])
        let compressed = try await Self.gzipped(playlist)
        let server = try LoopbackServer(files: files, rawHandler: { path, _, head in
            switch path {
            case "moved/index.m3u8": return (302, ["Location: /ts/index.m3u8"], [])
            case "ts/compressed.m3u8":
                guard head.lowercased().contains("accept-encoding: gzip") else { return (406, [], []) }
                return (200, ["Content-Type: application/vnd.apple.mpegurl", "Content-Encoding: gzip"], compressed)
            default: return nil
            }
        })
        defer { server.shutdown() }
        let (capture, outcome) = await playStreamToTheEnd([.hls(server.url(path), configuration: HLSFaultTests.quick())])
        let frames = try outcome.get()
        #expect(frames == 174 * 1024)
        #expect(capture.samples == (try HLSTests.localJoin(root, "ts")))
        #expect(!server.requestLog.contains { $0.path.hasPrefix("moved/seg") }, "a segment was asked for under the redirect's old path")
    }

    /// Class 16: a redirect loop fails at once, with a message in English (no Swift type names),
    /// for HLS and for a plain HTTP stream.
    @Test(arguments: [true, false])
    func aRedirectLoopFailsAtOnceAndSaysSo(_ hls: Bool) async throws {
        let server = try LoopbackServer(files: [:], rawHandler: { path, _, _ in
            path == "a" ? (302, ["Location: /b"], []) : (302, ["Location: /a"], [])
        })
        defer { server.shutdown() }
        var http = HTTPStreamConfiguration()
        http.initialBackoff = .milliseconds(200)
        var configuration = HLSConfiguration()
        configuration.http = http
        let item: AudioPlayerItem = hls ? .hls(server.url("a"), configuration: configuration) : .url(server.url("a"), configuration: http)
        let (_, outcome) = await playStreamToTheEnd([item])
        guard case .failure(let error) = outcome else {
            Issue.record("a redirect loop played")
            return
        }
        let message = "\(error)"
        #expect(message.contains("redirects in a loop"), "\(message)")
        #expect(!message.contains("HTTPClientError") && !message.contains("Optional("), "\(message)")
        // One attempt: the loop is a and b once each (the client stops where it would repeat).
        #expect(server.requestLog.count <= 3, "\(server.requestLog.count) requests: the loop was retried")
    }
}

/// Class 15 of issue 37: a live ICY stream that breaks off plays its last whole frame.
@Suite struct ICYEndClassTests {
    @Test func theLastFrameBeforeTheStreamBreaksIsHeard() async throws {
        let name = "lame-cbr128-44k-stereo.mp3"
        var faults = LoopbackServer.Faults()
        faults.live = true
        faults.icyInterval = 2000
        faults.goneAfterRequests = 1
        let server = try LoopbackServer(body: try bytes(name), faults: faults)
        defer { server.shutdown() }
        let (capture, outcome) = await playStreamToTheEnd([.url(server.url("live"), configuration: quick)])
        guard case .failure = outcome else { Issue.record("the stream was expected to fail once gone"); return }
        // The stream is the file sent once: its last frame, which only the break confirms, is
        // heard, and the LAME tag's trims apply (the break comes after the frames before it).
        let whole = try localRender(TestPaths.fixture(name))
        #expect(capture.samples.count / 2 == 48510, "\(capture.samples.count / 2) frames heard")
        #expect(difference(capture.samples, whole) == nil)
    }
}

/// Class 14 of issue 37: after `EXT-X-DISCONTINUITY` the decoder starts afresh: the frames after
/// it equal a fresh decode of the new encode.
@Suite(.bothAACDecoders) struct HLSDiscontinuityClassTests {
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing (make deps installs it)"))
    func theFramesAfterADiscontinuityAreAFreshDecode() async throws {
        let root = NSTemporaryDirectory() + "aq-disc-\(UUID())"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        // Two encodes of the same format (AAC-LC, 44.1 kHz, stereo) of different sound, each a
        // transport stream cut into 1 s segments.
        var files: [String: [UInt8]] = [:]
        var lists: [String] = []
        var expected: [Float] = []
        for (name, source, bitrate) in [("a", "sine=f=440:d=2:r=44100", "128k"), ("b", "anoisesrc=d=2:c=pink:a=0.3:r=44100:seed=5", "96k")] {
            let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", source, "-ac", "2", "-c:a", "aac", "-b:a", bitrate,
                                                               "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod",
                                                               "-hls_segment_filename", "\(root)/\(name)%d.ts", "\(root)/\(name).m3u8"])
            try #require(result.status == 0)
            let playlist = try String(contentsOfFile: "\(root)/\(name).m3u8", encoding: .utf8)
            var joined = Data()
            var entries: [String] = []
            var pendingInf = ""
            for line in playlist.split(separator: "\n").map(String.init) {
                if line.hasPrefix("#EXTINF") { pendingInf = line }
                if !line.hasPrefix("#") {
                    let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(root)/\(line)"))
                    files["hls/" + line] = [UInt8](bytes)
                    joined += bytes
                    entries += [pendingInf, line]
                }
            }
            lists.append(entries.joined(separator: "\n"))
            // The fresh decode of this encode alone.
            try joined.write(to: URL(fileURLWithPath: "\(root)/\(name)-joined.ts"))
            expected += try localRender("\(root)/\(name)-joined.ts")
        }
        let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            + lists[0] + "\n#EXT-X-DISCONTINUITY\n" + lists[1] + "\n#EXT-X-ENDLIST\n"
        files["hls/index.m3u8"] = Array(playlist.utf8)
        let server = try LoopbackServer(files: files, faults: LoopbackServer.Faults(), faultyPath: "none")
        defer { server.shutdown() }
        let (capture, outcome) = await playStreamToTheEnd([.hls(server.url("hls/index.m3u8"), configuration: HLSFaultTests.quick())])
        _ = try outcome.get()
        #expect(capture.samples.count == expected.count)
        #expect(difference(capture.samples, expected) == nil)
    }
}

/// Class 11 of issue 37: a segment marked `EXT-X-GAP` is not fetched (its URI answers 404 here,
/// which would end a VOD), is reported, and the segments after it play from a fresh decoder.
@Suite(.bothAACDecoders) struct HLSGapClassTests {
    @Test func aGapSegmentIsSkippedAndReported() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        var files = try HLSFaultTests.files(root, "ts")
        let playlist = try String(decoding: #require(files["ts/index.m3u8"]), as: UTF8.self)
        let names = playlist.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
        try #require(names.count >= 4)
        // The second segment is a gap: marked, and gone from the server.
        let gapName = names[1]
        files["ts/" + gapName] = nil
        let marked = playlist.replacingOccurrences(of: "\n" + gapName, with: "\n#EXT-X-GAP\n" + gapName)
        files["ts/gap.m3u8"] = Array(marked.utf8)
        let server = try LoopbackServer(files: files, faults: LoopbackServer.Faults(), faultyPath: "none")
        defer { server.shutdown() }
        let (capture, outcome) = await playStreamToTheEnd([.hls(server.url("ts/gap.m3u8"), configuration: HLSFaultTests.quick())])
        _ = try outcome.get()
        #expect(!server.requestLog.contains { $0.path == "ts/" + gapName }, "the gap segment was fetched")
        #expect(capture.events.contains { if case .property("hls-gap", let value, _) = $0 { return value.contains("EXT-X-GAP") } else { return false } })
        // What plays: the segment before the gap, then a fresh decode of the ones after it.
        func render(_ segments: ArraySlice<String>) throws -> [Float] {
            let path = root + "/ts/part-\(UUID()).ts"
            var joined = Data()
            for name in segments { joined += try Data(contentsOf: URL(fileURLWithPath: root + "/ts/" + name)) }
            try joined.write(to: URL(fileURLWithPath: path))
            return try localRender(path)
        }
        let expected = try render(names[..<1]) + render(names[2...])
        #expect(capture.samples.count == expected.count)
        #expect(difference(capture.samples, expected) == nil)
    }
}
