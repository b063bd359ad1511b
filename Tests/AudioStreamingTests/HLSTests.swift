import Foundation
import Testing
import AudioFileStream
import AudioPlayback
@testable import AudioStreaming
import BufferQueue
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

    /// Starts nginx on `root`; returns once it says its worker started.
    init(root: String) async throws {
        self.root = root
        port = Int.random(in: 20000...40000)
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
          types { application/vnd.apple.mpegurl m3u8; video/mp2t ts; audio/aac aac; audio/mp4 m4s; video/mp4 mp4; }
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
@Suite(.serialized) struct HLSTests {
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
        try makePacked(root: root)
        return root
    }

    /// Packed audio: the fixture's ADTS frames cut into segments of 43 frames, each opening with an
    /// ID3 tag whose PRIV frame carries the segment's 90 kHz timestamp (what Apple's packagers write).
    static func makePacked(root: String) throws {
        let adts = root + "/packed/all.aac"
        let made = Process()
        made.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        made.arguments = ["-v", "error", "-y", "-i", TestPaths.fixture("demo-melody.m4a"), "-c:a", "copy", "-f", "adts", adts]
        try made.run()
        made.waitUntilExit()
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

    @Test(arguments: ["ts", "fmp4", "mp3", "packed"])
    func segmentsJoinBitExactly(_ folder: String) async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await NginxServer(root: root)
        defer { server.stop() }
        let (capture, frames) = try await playStream([.url(server.url("\(folder)/index.m3u8"))])
        let expected = try Self.localJoin(root, folder)
        // AAC: 174 packets of 1024 frames; MP3: the 44 frames ffmpeg copied, 1152 each.
        #expect(frames == (folder == "mp3" ? 44 * 1152 : 174 * 1024))
        #expect(Self.same(capture.samples, expected), "\(folder): \(capture.samples.count / 2) frames heard, \(expected.count / 2) rendered")
        if folder != "mp3" {
            // The join is the source file's packets: its gapless render is inside, 1024 priming frames in.
            let source = try localRender(TestPaths.fixture("demo-melody.m4a"))
            #expect(Self.same(Array(capture.samples[(1024 * 2)..<(1024 * 2 + source.count)]), source))
        }
    }

    @Test(arguments: ["ts", "fmp4", "packed"])
    func seekingLandsWhereALocalSeekLands(_ folder: String) async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await NginxServer(root: root)
        defer { server.stop() }
        for seconds in [1.0, 2.0, 3.5] {
            let (capture, frames) = try await playStream([.url(server.url("\(folder)/index.m3u8"))], seek: seconds)
            let expected = try Self.localJoin(root, folder, startSeconds: seconds)
            #expect(frames == 174 * 1024 - Int64((seconds * 44_100).rounded()))
            #expect(Self.same(capture.samples, expected), "\(folder) from \(seconds) s: \(capture.samples.count / 2) frames heard, \(expected.count / 2) rendered")
        }
    }

    @Test func aes128SegmentsDecryptToTheSameAudio() async throws {
        guard let root = try await Self.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await NginxServer(root: root)
        defer { server.stop() }
        let playlist = try String(contentsOfFile: root + "/aes/index.m3u8", encoding: .utf8)
        #expect(playlist.contains("#EXT-X-KEY:METHOD=AES-128"))
        let (capture, frames) = try await playStream([.url(server.url("aes/index.m3u8"))])
        #expect(frames == 174 * 1024)
        #expect(Self.same(capture.samples, try Self.localJoin(root, "ts")))
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
        let server = try await NginxServer(root: root)
        defer { server.stop() }
        // The highest bandwidth that can be decoded: the AAC one, not AC-3.
        let (best, bestFrames) = try await playStream([.url(server.url("master.m3u8"))])
        #expect(bestFrames == 174 * 1024)
        #expect(best.events.contains { if case .property(let name, let value, _) = $0 { name == "hls-variant" && value.contains("BANDWIDTH=130000") } else { false } })
        var lowest = HLSConfiguration()
        lowest.variant = .lowestBandwidth
        let (_, lowFrames) = try await playStream([.hls(server.url("master.m3u8"), configuration: lowest)])
        #expect(lowFrames == 44 * 1152)
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
        let server = try await NginxServer(root: root)
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
