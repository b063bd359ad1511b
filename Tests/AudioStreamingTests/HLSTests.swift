import Foundation
import Testing
import AudioFileStream
import AudioPlayback
@testable import AudioStreaming
import BufferQueue
import CodecTestSupport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A real nginx serving a folder on a loopback port, run unprivileged in the foreground.
final class NginxServer: @unchecked Sendable {
    static var missing: Bool {
        !FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") || !FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg")
    }

    let root: String
    let port: Int
    private let process = Process()
    private let log = Watched<[String]>([])
    private var reader: LineReader?

    /// Starts nginx on `root` on a free loopback port (another, when the one drawn is taken);
    /// returns once it says its worker started.
    static func start(root: String) async throws -> NginxServer {
        var last: (any Error)?
        for _ in 0..<5 {
            do { return try await NginxServer(root: root, port: Int.random(in: 20000...40000)) } catch {
                last = error
                guard "\(error)".contains("Address already in use") else { throw error }
            }
        }
        throw last ?? CocoaError(.executableLoad)
    }

    private init(root: String, port: Int) async throws {
        self.root = root
        self.port = port
        let work = root + "/.nginx"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let config = """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(work)/nginx.pid;
        error_log stderr notice;
        events { worker_connections 64; }
        http {
          access_log off;
          types { application/vnd.apple.mpegurl m3u8 hls; video/mp2t ts; audio/aac aac; audio/mp4 m4s; video/mp4 mp4; }
          default_type text/plain;
          client_body_temp_path \(work)/body; proxy_temp_path \(work)/proxy; fastcgi_temp_path \(work)/fastcgi;
          uwsgi_temp_path \(work)/uwsgi; scgi_temp_path \(work)/scgi;
          server { listen 127.0.0.1:\(port); root \(root); }
        }
        """
        try config.write(toFile: work + "/nginx.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-c", work + "/nginx.conf", "-p", work]
        process.standardOutput = FileHandle.nullDevice
        let pipe = Pipe()
        process.standardError = pipe
        let lines = log
        reader = LineReader(pipe.fileHandleForReading, onEnd: { lines.update { $0.append("(log ended)") } }) { line in
            lines.update { $0.append(line) }
        }
        try process.run()
        reader?.start()
        // Without a master process nginx logs its start (the "using the epoll event method"
        // notice) once it is listening.
        let up = await log.wait(timeout: .seconds(15)) { $0.contains { $0.contains("event method") || $0.contains("(log ended)") || $0.contains("emerg") } }
        guard up, !log.current.contains(where: { $0.contains("(log ended)") || $0.contains("emerg") }) else {
            stop()
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "nginx did not start: \(log.current.suffix(5))"])
        }
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

    /// Kills the server; Foundation reaps it (waiting here would block a thread of the pool).
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    deinit { stop() }
}

/// HLS against a real nginx serving what ffmpeg's HLS muxer writes from the project's fixtures
/// (`-c:a copy`, so the packets are the fixture's): what reaches the sink equals the render of the
/// segments' packets, bit for bit, across every join; seeks land where a local seek lands.
@Suite(.serialized, .bothAACDecoders) struct HLSTests {
    /// A temporary folder with `demo-melody.m4a` (174 AAC packets) and the LAME MP3 fixture cut
    /// into 1 s (AAC) and 0.3 s (MP3) segments.
    static func presentation() async throws -> String? {
        if NginxServer.missing {
            print("nginx or ffmpeg is not installed: skipped")
            return nil
        }
        let root = NSTemporaryDirectory() + "aq-hls-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for folder in ["ts", "fmp4", "mp3", "aes", "packed"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
        let aac = TestPaths.fixture("demo-melody.m4a"), mp3 = TestPaths.fixture("lame-cbr128-44k-stereo.mp3")
        func hls(_ input: String, _ folder: String, _ extra: [String], segment: String = "seg%03d.ts", time: String = "1") async throws {
            let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", input, "-vn", "-c:a", "copy", "-f", "hls", "-hls_time", time,
                                                               "-hls_playlist_type", "vod", "-hls_segment_filename", "\(root)/\(folder)/\(segment)"]
                                           + extra + ["\(root)/\(folder)/index.m3u8"])
            #expect(result.status == 0, "ffmpeg's HLS muxer failed for \(folder)")
        }
        try await hls(aac, "ts", ["-hls_segment_type", "mpegts"])
        try await hls(aac, "fmp4", ["-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4"], segment: "seg%03d.m4s")
        try await hls(mp3, "mp3", ["-hls_segment_type", "mpegts"], time: "0.3")
        // AES-128: a key, and the key info file ffmpeg reads (URI, key path, IV).
        let key = (0..<16).map { UInt8($0 * 7 + 3) }
        try Data(key).write(to: URL(fileURLWithPath: root + "/aes/key.bin"))
        try "key.bin\n\(root)/aes/key.bin\n".write(toFile: root + "/aes/keyinfo", atomically: true, encoding: .utf8)
        try await hls(aac, "aes", ["-hls_segment_type", "mpegts", "-hls_key_info_file", root + "/aes/keyinfo"])
        try await makePacked(root: root)
        return root
    }

    /// Packed audio: the fixture's ADTS frames cut into segments of 43 frames, each opening with an
    /// ID3 tag whose PRIV frame carries the segment's 90 kHz timestamp (what Apple's packagers write).
    static func makePacked(root: String) async throws {
        let adts = root + "/packed/all.aac"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", TestPaths.fixture("demo-melody.m4a"), "-c:a", "copy", "-f", "adts", adts])
        #expect(made.status == 0, "ffmpeg could not extract the ADTS stream")
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: adts)))
        var frames: [[UInt8]] = [], i = 0
        while i + 7 <= bytes.count {
            let length = Int(bytes[i + 3] & 3) << 11 | Int(bytes[i + 4]) << 3 | Int(bytes[i + 5] >> 5)
            frames.append(Array(bytes[i..<(i + length)]))
            i += length
        }
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:0\n"
        for (n, start) in stride(from: 0, to: frames.count, by: 43).enumerated() {
            let pts = UInt64(900_000 + Double(start) * 1024 * 90_000 / 44_100)
            let owner = Array("com.apple.streaming.transportStreamTimestamp".utf8) + [0]
            let priv = owner + (0..<8).map { UInt8(truncatingIfNeeded: pts >> (56 - 8 * UInt64($0))) }
            let frame = Array("PRIV".utf8) + [0, 0, 0, UInt8(priv.count), 0, 0] + priv
            let tag = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, UInt8(frame.count)] + frame
            let segment = tag + frames[start..<min(start + 43, frames.count)].flatMap { $0 }
            try Data(segment).write(to: URL(fileURLWithPath: root + "/packed/seg\(n).aac"))
            let count = min(43, frames.count - start)
            playlist += "#EXTINF:\(String(format: "%.6f", Double(count) * 1024 / 44_100)),\nseg\(n).aac\n"
        }
        playlist += "#EXT-X-ENDLIST\n"
        try playlist.write(toFile: root + "/packed/index.m3u8", atomically: true, encoding: .utf8)
    }

    /// The segments joined into one local file (the init section first), rendered offline from `seconds`.
    static func localJoin(_ root: String, _ folder: String, startSeconds: Double = 0) throws -> [Float] {
        let playlist = try String(contentsOfFile: "\(root)/\(folder)/index.m3u8", encoding: .utf8)
        let names = playlist.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
        var joined = Data()
        if folder == "fmp4" { joined += try Data(contentsOf: URL(fileURLWithPath: "\(root)/fmp4/init.mp4")) }
        for name in names { joined += try Data(contentsOf: URL(fileURLWithPath: "\(root)/\(folder)/\(name)")) }
        let path = "\(root)/\(folder)/joined." + (folder == "fmp4" ? "mp4" : folder == "packed" ? "aac" : "ts")
        try joined.write(to: URL(fileURLWithPath: path))
        return try localRender(path, startSeconds: startSeconds)
    }

    static func same(_ a: [Float], _ b: [Float]) -> Bool { a.count == b.count && a == b }

    /// Frames of the fMP4 fixture's last sample that its shortened duration leaves out of a local
    /// file's render (the file's end trim) and that the HLS stream plays (1024 − 272).
    static let fragmentTail = 752

    /// What the stream played is the local join's render; for fMP4 followed by the last sample's
    /// frames that the file trims (a file trusts its sample durations, segments do not).
    static func sameAsJoin(_ heard: [Float], _ join: [Float], _ folder: String) -> Bool {
        guard folder == "fmp4" else { return same(heard, join) }
        return heard.count == join.count + fragmentTail * 2 && Array(heard.prefix(join.count)) == join
    }

    @Test(arguments: ["ts", "fmp4", "mp3", "packed"])
    func segmentsJoinBitExactly(_ folder: String) async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        let (capture, frames) = try await playStream([.url(server.url("\(folder)/index.m3u8"))])
        let expected = try Self.localJoin(root, folder)
        // AAC: 174 packets of 1024 frames; MP3: the 44 frames ffmpeg copied, 1152 each. (fMP4
        // too: the shortened last sample of ffmpeg's last fragment is an estimate, not a trim.)
        #expect(frames == (folder == "mp3" ? 44 * 1152 : 174 * 1024))
        #expect(Self.sameAsJoin(capture.samples, expected, folder), "\(folder): \(capture.samples.count / 2) frames heard, \(expected.count / 2) rendered")
        if folder != "mp3" {
            // The join is the source file's packets: its gapless render is inside, 1024 priming frames in.
            let source = try localRender(TestPaths.fixture("demo-melody.m4a"))
            #expect(Self.same(Array(capture.samples[(1024 * 2)..<(1024 * 2 + source.count)]), source) == true)
        }
    }

    /// Issue 52, class 5e: ffmpeg's fMP4 HLS of an AAC M4A of 9.8765 s shortens the last
    /// fragment's last sample to the segments' `EXTINF` total (9.899229 s: 436 556 frames), which
    /// it took from the source's edit list rounded to milliseconds, 22 frames before the source's
    /// last valid frame (1 024 priming + 435 554). That is an estimate: the stream plays every
    /// decoded frame, as ffmpeg's decode of the playlist does (427 packets), and the source's
    /// gapless render is inside it whole, 1 024 frames in.
    @Test func anEXTINFEstimateNeverCutsTheAudio() async throws {
        guard !NginxServer.missing else { return print("nginx or ffmpeg is not installed: skipped") }
        let root = NSTemporaryDirectory() + "aq-hls-extinf-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let source = root + "/x.m4a"
        var made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=9.8765:r=44100",
                                                         "-ac", "2", "-c:a", "aac", "-b:a", "128k", source])
        try #require(made.status == 0)
        made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", source, "-c", "copy", "-f", "hls", "-hls_segment_type", "fmp4",
                                                     "-hls_playlist_type", "vod", "-hls_fmp4_init_filename", "init.mp4",
                                                     "-hls_segment_filename", root + "/seg%03d.m4s", root + "/index.m3u8"])
        try #require(made.status == 0)
        let playlist = try String(contentsOfFile: root + "/index.m3u8", encoding: .utf8)
        let extinf = playlist.split(separator: "\n").filter { $0.hasPrefix("#EXTINF:") }
            .compactMap { Double($0.dropFirst(8).split(separator: ",")[0]) }.reduce(0, +)
        let rendered = try localRender(source)
        #expect(rendered.count == 435_554 * 2)
        // The estimate ends before the source's audio does (what this class is about).
        #expect(Int((extinf * 44_100).rounded()) < 1024 + 435_554)
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        let (capture, frames) = try await playStream([.url(server.url("index.m3u8"))])
        #expect(frames == 427 * 1024)
        try #require(capture.samples.count >= (1024 + 435_554) * 2)
        #expect(Self.same(Array(capture.samples[(1024 * 2)..<(1024 * 2 + rendered.count)]), rendered) == true)
    }

    /// Issue 52, part 3: a playlist on disk plays as it does over HTTP, its relative segment,
    /// init-section and key URIs read beside it: the segments' join, bit for bit (AES-128 too);
    /// `aqinfo` describes it; a missing segment is an error naming it. (It was refused: "an HLS
    /// playlist, not audio".)
    @Test(arguments: ["ts", "fmp4", "mp3", "packed", "aes"])
    func aPlaylistOnDiskPlaysAsOverHTTP(_ folder: String) async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (capture, frames) = try await playStream([try AudioPlayerItem.location("\(root)/\(folder)/index.m3u8")])
        let expected = try Self.localJoin(root, folder == "aes" ? "ts" : folder)
        #expect(frames == (folder == "mp3" ? 44 * 1152 : 174 * 1024))
        #expect(Self.sameAsJoin(capture.samples, expected, folder), "\(folder): \(capture.samples.count / 2) frames heard, \(expected.count / 2) rendered")
        if folder == "fmp4" {
            let aqinfo = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("aqinfo").path
            let result = try await runTool(aqinfo, ["\(root)/\(folder)/index.m3u8"])
            let text = String(decoding: result.output, as: UTF8.self)
            #expect(result.status == 0 && text.contains("HLS media playlist") && text.contains("AAC"), "aqinfo: \(result.status) \(text)")
            // A segment gone from the disk: the error names it.
            try FileManager.default.removeItem(atPath: "\(root)/\(folder)/seg002.m4s")
            let (_, outcome) = await playStreamToTheEnd([try AudioPlayerItem.location("\(root)/\(folder)/index.m3u8")])
            #expect("\(outcome)".contains("seg002.m4s"), "\(outcome)")
        }
    }

    @Test(arguments: ["ts", "fmp4", "packed"])
    func seekingLandsWhereALocalSeekLands(_ folder: String) async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        for seconds in [1.0, 2.0, 3.5] {
            let (capture, frames) = try await playStream([.url(server.url("\(folder)/index.m3u8"))], seek: seconds)
            let expected = try Self.localJoin(root, folder, startSeconds: seconds)
            #expect(frames == Int64(capture.samples.count / 2))
            #expect(Self.sameAsJoin(capture.samples, expected, folder), "\(folder) from \(seconds) s: \(capture.samples.count / 2) frames heard, \(expected.count / 2) rendered")
        }
    }

    /// A playlist whose URL does not end in `.m3u8` plays as HLS when the server says it is one:
    /// by its MIME type (`application/vnd.apple.mpegurl`, here for a `.hls` name) or, served as
    /// `text/plain`, by its `#EXTM3U` — the same frames as the `.m3u8` URL.
    @Test func aPlaylistIsKnownByWhatTheServerSays() async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.copyItem(atPath: root + "/packed/index.m3u8", toPath: root + "/packed/stream.hls")
        try FileManager.default.copyItem(atPath: root + "/packed/index.m3u8", toPath: root + "/packed/playlist")
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        let expected = try Self.localJoin(root, "packed")
        for name in ["stream.hls", "playlist"] {
            let (capture, frames) = try await playStream([.url(server.url("packed/" + name))])
            #expect(frames == 174 * 1024, "\(name)")
            #expect(Self.same(capture.samples, expected) == true, "\(name): \(capture.samples.count / 2) frames heard")
        }
        let described = try await StreamDescription.inspect(server.url("packed/playlist"))
        #expect(described.mediaPlaylist?.segments.count == 5 && described.segmentContainer == "packed audio")
    }

    /// E-AC-3 packed in HLS segments (an ID3 timestamp, then the frames), as a video player's test
    /// asset has it: an error naming E-AC-3, never noise (it was taken for MPEG Layer I and played).
    @Test func packedDolbySegmentsAreRefusedByName() async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/eac3", withIntermediateDirectories: true)
        let raw = root + "/eac3/all.eac3"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=4:r=48000", "-ac", "2",
                                                         "-c:a", "eac3", "-f", "eac3", raw])
        #expect(made.status == 0)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: raw)))
        let owner = Array("com.apple.streaming.transportStreamTimestamp".utf8) + [0]
        let frame = Array("PRIV".utf8) + [0, 0, 0, UInt8(owner.count + 8), 0, 0] + owner + [0, 0, 0, 0, 0, 0x0D, 0xBB, 0xA0]
        let tag = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, UInt8(frame.count)] + frame
        let half = bytes.count / 2
        try Data(tag + bytes[..<half]).write(to: URL(fileURLWithPath: root + "/eac3/seg0.ec3"))
        try Data(tag + bytes[half...]).write(to: URL(fileURLWithPath: root + "/eac3/seg1.ec3"))
        try "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg0.ec3\n#EXTINF:2.0,\nseg1.ec3\n#EXT-X-ENDLIST\n"
            .write(toFile: root + "/eac3/index.m3u8", atomically: true, encoding: .utf8)
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        let (capture, outcome) = await playStreamToTheEnd([.url(server.url("eac3/index.m3u8"))])
        #expect("\(outcome)".contains("E-AC-3"), "\(outcome)")
        #expect(capture.samples.allSatisfy { $0 == 0 }, "\(capture.samples.count) samples reached the sink")
        let aqinfo = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("aqinfo").path
        if FileManager.default.isExecutableFile(atPath: aqinfo) {
            let result = try await runTool(aqinfo, [server.url("eac3/index.m3u8")])
            let text = String(decoding: result.errorOutput, as: UTF8.self)
            #expect(result.status == 1 && text.contains("E-AC-3"), "aqinfo: \(result.status) \(text)")
        }
    }

    @Test func aes128SegmentsDecryptToTheSameAudio() async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        let playlist = try String(contentsOfFile: root + "/aes/index.m3u8", encoding: .utf8)
        #expect(playlist.contains("#EXT-X-KEY:METHOD=AES-128"))
        let (capture, frames) = try await playStream([.url(server.url("aes/index.m3u8"))])
        #expect(frames == 174 * 1024)
        #expect(Self.same(capture.samples, try Self.localJoin(root, "ts")) == true)
        // The same segments with a wrong key: a clear error, not noise.
        try Data((0..<16).map { _ in UInt8(0x55) }).write(to: URL(fileURLWithPath: root + "/aes/key.bin"))
        let (_, outcome) = await playStreamToTheEnd([.url(server.url("aes/index.m3u8"))])
        #expect("\(outcome)".contains("wrong key or IV") || "\(outcome)".contains("PKCS#7"), "\(outcome)")
    }

    @Test func theMasterPlaylistsVariantIsChosenByBandwidthAndCodecs() async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        try """
        #EXTM3U
        #EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS="mp4a.40.34"
        mp3/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=130000,CODECS="mp4a.40.2"
        ts/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=400000,CODECS="ac-3"
        surround/index.m3u8
        """.write(toFile: root + "/master.m3u8", atomically: true, encoding: .utf8)
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        // The highest bandwidth that can be decoded: the AAC one, not AC-3.
        let (best, bestFrames) = try await playStream([.url(server.url("master.m3u8"))])
        #expect(bestFrames == 174 * 1024)
        #expect(best.events.contains { if case .property(let name, let value, _) = $0 { name == "hls-variant" && value.contains("BANDWIDTH=130000") } else { false } })
        var lowest = HLSConfiguration()
        lowest.variant = .lowestBandwidth
        let (_, lowFrames) = try await playStream([.hls(server.url("master.m3u8"), configuration: lowest)])
        #expect(lowFrames == 44 * 1152)
        // What aqinfo prints: the variants, the one played, how its segments carry the audio.
        let described = try await StreamDescription.inspect(server.url("master.m3u8"))
        #expect(described.master?.variants.map(\.bandwidth) == [64000, 130000, 400000])
        #expect(described.variant?.bandwidth == 130000 && described.segmentContainer == "MPEG-TS" && described.fileType == .adts)
        #expect(described.format.formatID == .aacLC && described.format.sampleRate == 44100 && described.format.channelsPerFrame == 2)
        #expect(described.mediaPlaylist?.segments.count == 5 && described.mediaPlaylist?.isLive == false)
        let fmp4 = try await StreamDescription.inspect(server.url("fmp4/index.m3u8"))
        #expect(fmp4.master == nil && fmp4.segmentContainer == "fragmented MP4" && fmp4.format.formatID == .aacLC)
        var forced = HLSConfiguration()
        forced.variant = .index(2)
        let (_, outcome) = await playStreamToTheEnd([.hls(server.url("master.m3u8"), configuration: forced)])
        #expect("\(outcome)".contains("404"), "\(outcome)")
    }

    @Test func aMissingSegmentAndSampleAESAreClearErrors() async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.removeItem(atPath: root + "/ts/seg002.ts")
        let playlist = try String(contentsOfFile: root + "/ts/index.m3u8", encoding: .utf8)
        try playlist.replacingOccurrences(of: "#EXT-X-PLAYLIST-TYPE:VOD\n", with: "#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"k\"\n")
            .write(toFile: root + "/ts/sample-aes.m3u8", atomically: true, encoding: .utf8)
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        var quickRetries = HLSConfiguration()
        quickRetries.http.maximumReconnects = 1
        quickRetries.http.initialBackoff = .milliseconds(10)
        let (capture, outcome) = await playStreamToTheEnd([.hls(server.url("ts/index.m3u8"), configuration: quickRetries)])
        #expect("\(outcome)".contains("segment 2") && "\(outcome)".contains("404"), "\(outcome)")
        // What came before the missing segment was played: segments 0 and 1 hold 88 packets.
        let heard = capture.samples.count / 2
        #expect(heard >= 80 * 1024 && heard <= 88 * 1024, "\(heard) frames heard before the error")
        let (_, refused) = await playStreamToTheEnd([.hls(server.url("ts/sample-aes.m3u8"))])
        #expect("\(refused)".contains("SAMPLE-AES") && "\(refused)".contains("does not decrypt"), "\(refused)")
    }
}

/// A live presentation that ffmpeg writes in real time into nginx's folder: a three-segment
/// sliding window whose old segments are deleted, ended with `EXT-X-ENDLIST` when ffmpeg finishes.
@Suite(.serialized) struct LiveHLSTests {
    /// ffmpeg's `-re` HLS muxer on a 22 s ADTS file; `playlists` counts the playlists it wrote.
    final class LiveWriter: @unchecked Sendable {
        let process = Process()
        let playlists = Watched<Int>(0)
        let exited = Watched<Int32?>(nil)
        private var reader: LineReader?

        init(input: String, folder: String, extra: [String] = []) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
            process.standardInput = FileHandle.nullDevice
            process.arguments = ["-v", "verbose", "-nostats", "-y", "-re", "-i", input, "-c:a", "copy", "-f", "hls", "-hls_time", "1",
                                 "-hls_list_size", "3", "-hls_flags", "delete_segments",
                                 "-hls_segment_filename", folder + "/seg%03d.ts"] + extra + [folder + "/index.m3u8"]
            process.standardOutput = FileHandle.nullDevice
            let pipe = Pipe()
            process.standardError = pipe
            let count = playlists
            // ffmpeg writes each playlist to index.m3u8.tmp, then renames it.
            reader = LineReader(pipe.fileHandleForReading, onEnd: {}) { line in
                if line.contains("index.m3u8.tmp' for writing") { count.update { $0 += 1 } }
            }
            let exit = exited
            process.terminationHandler = { finished in exit.update { $0 = finished.terminationStatus } }
            try process.run()
            reader?.start()
        }

        func stop() { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        deinit { stop() }
    }

    /// 22 s of a stereo chirp (never periodic, so a slice of it is found at one place only), AAC
    /// without perceptual noise substitution (its noise would depend on where decoding started).
    static func source(_ root: String) async throws -> String {
        let path = root + "/all.aac"
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i",
                                                           "aevalsrc=0.4*sin(2*PI*(220+40*t)*t)|0.4*sin(2*PI*(330+25*t)*t):s=44100:d=22",
                                                           "-c:a", "aac", "-b:a", "96k", "-aac_pns", "0", "-f", "adts", path])
        #expect(result.status == 0, "ffmpeg could not encode the live source")
        return path
    }

    /// Where `heard` (from its `skip`th frame on) sits inside `reference`, in frames.
    static func offset(of heard: [Float], skip: Int, in reference: [Float]) -> Int? {
        let window = 256 * 2
        guard heard.count >= skip * 2 + window else { return nil }
        let probe = Array(heard[(skip * 2)..<(skip * 2 + window)])
        var frame = 0
        while (frame * 2 + window) <= reference.count {
            if reference[frame * 2] == probe[0], Array(reference[(frame * 2)..<(frame * 2 + window)]) == probe { return frame }
            frame += 1
        }
        return nil
    }

    @Test func aLivePlaylistWrittenInRealTimePlaysWithoutAGap() async throws {
        if NginxServer.missing { print("nginx or ffmpeg is not installed: skipped"); return }
        let root = NSTemporaryDirectory() + "aq-hls-live-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root + "/live", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let input = try await Self.source(root)
        let server = try await NginxServer.start(root: root)
        defer { server.stop() }
        let writer = try LiveWriter(input: input, folder: root + "/live")
        defer { writer.stop() }
        // Join once the window is full (three segments, about 4 s in): the player starts three
        // target durations back from the live edge and follows the reloads to ffmpeg's ENDLIST.
        #expect(await writer.playlists.wait(timeout: .seconds(20)) { $0 >= 4 }, "ffmpeg wrote no live playlist")
        let listed = try String(contentsOfFile: root + "/live/index.m3u8", encoding: .utf8)
        #expect(!listed.contains("#EXT-X-ENDLIST"), "the playlist ended before the player joined:\n\(listed)")
        let (capture, outcome) = await playStreamToTheEnd([.url(server.url("live/index.m3u8"))])
        #expect(await writer.exited.wait(timeout: .seconds(30)) { $0 != nil })
        let frames = try outcome.get()
        let heard = capture.samples
        #expect(Int64(heard.count / 2) == frames)
        #expect(!capture.events.contains { if case .property("hls-gap", _, _) = $0 { true } else { false } }, "a gap was reported")

        // What was heard is one contiguous slice of the source that runs to its end: nothing lost
        // or repeated at any of the segment joins or reloads. The first two packets may differ
        // from a decode that started earlier (the decoder had no previous frame to overlap).
        let reference = try localRender(input)
        let skip = 2048
        let start = try #require(Self.offset(of: heard, skip: skip, in: reference), "the heard audio is not in the source")
        let count = heard.count / 2 - skip
        #expect(start + count == reference.count / 2, "the slice ends \(reference.count / 2 - start - count) frames before the source's end")
        let contiguous = start + count <= reference.count / 2 && Array(reference[(start * 2)..<((start + count) * 2)]) == Array(heard[(skip * 2)...])
        #expect(contiguous, "the heard audio is not one contiguous slice of the source")
        // It joined near the live edge, about 1 s in, and played the remaining ~20 s.
        #expect(heard.count / 2 >= 17 * 44_100, "only \(heard.count / 2) frames heard")
    }
}

/// HLS under the faults the HTTP tests inject, from a loopback server that serves the presentation
/// ffmpeg wrote and misbehaves on one path.
@Suite(.serialized) struct HLSFaultTests {
    static func files(_ root: String, _ folder: String) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: root + "/" + folder) where !name.hasPrefix(".") {
            files[folder + "/" + name] = Array(try Data(contentsOf: URL(fileURLWithPath: root + "/" + folder + "/" + name)))
        }
        return files
    }

    /// ffmpeg's VOD playlist made live: no `EXT-X-ENDLIST`, and `tags` where the playlist type was.
    static func live(_ vod: String, tags: String = "") -> [UInt8] {
        Array(vod.replacingOccurrences(of: "#EXT-X-ENDLIST\n", with: "").replacingOccurrences(of: "#EXT-X-PLAYLIST-TYPE:VOD\n", with: tags).utf8)
    }

    static func quick() -> HLSConfiguration {
        var configuration = HLSConfiguration()
        configuration.http.stallTimeout = .milliseconds(500)
        configuration.http.initialBackoff = .milliseconds(10)
        configuration.http.maximumReconnects = 2
        return configuration
    }

    @Test func aDroppedOrStalledSegmentResumesAtTheNextByte() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let expected = try HLSTests.localJoin(root, "ts")
        var drop = LoopbackServer.Faults()
        drop.closeAfter = 5000
        var stall = LoopbackServer.Faults()
        stall.stallAfter = 7000
        for (faults, path) in [(drop, "ts/seg001.ts"), (stall, "ts/seg002.ts")] {
            let server = try LoopbackServer(files: try Self.files(root, "ts"), faults: faults, faultyPath: path)
            defer { server.shutdown() }
            let (capture, frames) = try await playStream([.hls(server.url("ts/index.m3u8"), configuration: Self.quick())])
            #expect(frames == 174 * 1024)
            #expect(HLSTests.same(capture.samples, expected) == true, "\(path): \(capture.samples.count / 2) frames heard, \(expected.count / 2) rendered")
            // The segment was asked for again from the byte where it broke, once.
            let asked = server.requestLog.filter { $0.path == path }.map(\.range)
            #expect(asked == ["", "bytes=\(faults.closeAfter ?? faults.stallAfter ?? 0)-"], "\(path): \(asked)")
        }
    }

    @Test func aLiveSegmentThatStaysMissingIsAGapAndAStalePlaylistEndsTheStream() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        var files = try Self.files(root, "ts")
        let vod = try String(contentsOfFile: root + "/ts/index.m3u8", encoding: .utf8)
        // A live playlist that stops changing (no EXT-X-ENDLIST), whose segment 2 is gone.
        files["ts/live.m3u8"] = Self.live(vod)
        let lines = vod.split(separator: "\n").map(String.init)
        let second = try #require(lines.firstIndex(of: "seg002.ts"))
        files["ts/only2.m3u8"] = Array((lines[..<(lines.firstIndex { $0.hasPrefix("#EXTINF") } ?? 0)] + lines[(second - 1)...second] + ["#EXT-X-ENDLIST", ""])
            .joined(separator: "\n").utf8)
        let server = try LoopbackServer(files: files, faults: LoopbackServer.Faults(), faultyPath: nil)
        defer { server.shutdown() }
        let (_, missingFrames) = try await playStream([.hls(server.url("ts/only2.m3u8"), configuration: Self.quick())])
        var gone = files
        gone["ts/seg002.ts"] = nil
        let goneServer = try LoopbackServer(files: gone, faults: LoopbackServer.Faults(), faultyPath: nil)
        defer { goneServer.shutdown() }

        var live = Self.quick()
        live.liveStartDistance = 100
        live.stalePlaylistTimeout = .seconds(2)
        let started = ContinuousClock.now
        let (capture, outcome) = await playStreamToTheEnd([.hls(goneServer.url("ts/live.m3u8"), configuration: live)])
        #expect("\(outcome)".contains("has not changed"), "\(outcome)")
        #expect(ContinuousClock.now - started < .seconds(30), "the stale playlist was not noticed")
        let gaps = capture.events.compactMap { if case .property("hls-gap", let value, _) = $0 { value } else { nil } }
        #expect(gaps.count == 1 && gaps.first?.contains("segment 2") == true, "\(gaps)")
        // Everything but segment 2 was heard, and what came before it exactly.
        let heard = capture.samples
        #expect(Int64(heard.count / 2) == 174 * 1024 - missingFrames, "\(heard.count / 2) frames heard, segment 2 holds \(missingFrames)")
        let expected = try HLSTests.localJoin(root, "ts")
        #expect(heard.count > 40 * 1024 * 2 && HLSTests.same(Array(heard[..<(40 * 1024 * 2)]), Array(expected[..<(40 * 1024 * 2)])))
    }
}
