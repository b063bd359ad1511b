import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import AudioStreaming
import BufferQueue
import TestSupport
import VorbisDecoder
#if canImport(Glibc)
import Glibc
#endif

/// An Icecast source client speaking HTTP PUT (Icecast 2.4), as Ogg sources do: it sends the
/// bytes it is given on its connection.
final class OggSourceClient: @unchecked Sendable {
    private let fd: Int32

    init(port: Int, mount: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
        guard connected else {
            Glibc.close(fd)
            throw IcecastServer.IcecastError("cannot connect to icecast on port \(port)")
        }
        var limit = timeval(tv_sec: 5, tv_usec: 0)   // an answer that never comes is an error, not a hang
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let auth = Data("source:sourcepw".utf8).base64EncodedString()
        try send(Array("PUT \(mount) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic \(auth)\r\nContent-Type: application/ogg\r\nIce-Public: 0\r\n\r\n".utf8))
        var reply = [UInt8](repeating: 0, count: 1024)
        let n = recv(fd, &reply, reply.count, 0)
        let text = String(decoding: reply.prefix(max(n, 0)), as: UTF8.self)
        guard text.contains(" 200 ") else {
            Glibc.close(fd)
            throw IcecastServer.IcecastError("icecast refused the source: \(text.prefix(200))")
        }
    }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw IcecastServer.IcecastError("sending to icecast failed (errno \(errno))") }
            sent += n
        }
    }

    func close() { Glibc.close(fd) }
}

/// Icecast relaying a chained Ogg Vorbis stream (two links, as a radio sends at a track change):
/// the player hears every frame of both links exactly as a local render of the same bytes, and
/// each link's title arrives as a stream title.
@Suite(.serialized, .timeLimit(.minutes(2)),
       .enabled(if: !IcecastServer.missing && FileManager.default.isExecutableFile(atPath: "/usr/bin/oggenc")
                    && FileManager.default.isExecutableFile(atPath: "/usr/bin/sox"),
                "icecast2, ffmpeg, sox or vorbis-tools is missing (make deps installs them): Icecast Ogg test skipped"))
struct IcecastOggTests {
    static func encode(_ name: String, frames: Int, tone: Int, title: String, in folder: String) async throws -> [UInt8] {
        let wav = "\(folder)/\(name).wav", ogg = "\(folder)/\(name).ogg"
        let made = try await runTool("/usr/bin/sox", ["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "\(frames)s",
                                                      "sine", "\(tone)", "sine", "\(tone * 3 / 2)", "vol", "0.4"])
        try #require(made.status == 0)
        let encoded = try await runTool("/usr/bin/oggenc", ["-Q", "-t", title, "-a", "Tests", wav, "-o", ogg])
        try #require(encoded.status == 0, "\(String(decoding: encoded.errorOutput, as: UTF8.self))")
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: ogg)))
    }

    @Test func aChainedVorbisStreamPlaysBothLinksExactlyWithTheirTitles() async throws {
        VorbisDecoder.register()
        let folder = NSTemporaryDirectory() + "aq-icecast-ogg-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = try await Self.encode("first", frames: 66_151, tone: 440, title: "First Song", in: folder)
        let second = try await Self.encode("second", frames: 50_021, tone: 330, title: "Second Song", in: folder)
        // Icecast sends a page once the next one has come: a third link makes it send the second whole.
        let third = try await Self.encode("third", frames: 30_011, tone: 550, title: "Third Song", in: folder)
        let chain = first + second + third
        let local = folder + "/chain.ogg"
        try Data(chain).write(to: URL(fileURLWithPath: local))
        let expected = try await onOwnThread { () throws -> [Float] in
            let renderer = try AudioFileRenderer(file: try AudioFile(path: local))
            var all: [Float] = [], scratch = [Float](repeating: 0, count: 8192)
            while true {
                let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
                if n == 0 { return all }
                all += scratch[0..<(n * 2)]
            }
        }
        #expect(expected.count == 2 * 146_183)   // the three links: 66 151 + 50 021 + 30 011 frames

        // A server whose port a source can reach (another, on a new port, when it cannot: a port
        // drawn at random may be taken).
        var started: (IcecastServer, OggSourceClient)?
        for _ in 0..<3 where started == nil {
            let server = try await IcecastServer.started()
            if let client = try? await onOwnThread({ try OggSourceClient(port: server.port, mount: "/live.ogg") }) {
                started = (server, client)
            } else {
                server.stop()
            }
        }
        let (icecast, source) = try #require(started, "no icecast server took a source in three tries")
        defer { icecast.stop() }
        defer { source.close() }

        // The source sends the first link's headers; a listener joins; the source sends the rest.
        let pages = OggTestPages.ranges(first)
        let headerBytes = pages.prefix { !Self.isAudioPage(first, $0) }.last.map { $0.upperBound } ?? 0
        try source.send(Array(chain[..<headerBytes]))
        let mounted = await icecast.log.wait(timeout: .seconds(15)) { $0.contains { $0.contains("listener count on /live.ogg") } }
        let ended = mounted ? "" : await icecast.exits()
        try #require(mounted, "the mount never appeared (\(ended)): \(icecast.log.current.suffix(5).joined(separator: " | "))")
        let events = EventBox()
        let reader = StreamReader(url: "http://127.0.0.1:\(icecast.port)/live.ogg",
                                  configuration: HTTPStreamConfiguration(stallTimeout: .seconds(10), maximumReconnects: 0), events: events)
        defer { reader.stop() }
        let joined = await icecast.log.wait(timeout: .seconds(15)) { $0.contains { $0.contains("listener count on /live.ogg now 1") } }
        try #require(joined, "the listener never joined: \(icecast.log.current.suffix(6).joined(separator: " | "))")
        try source.send(Array(chain[headerBytes...]))
        // The source then falls silent: icecast drops it after its source timeout (5 s), which
        // ends the stream; the player plays what it got and finishes.
        let finished = await events.count.wait(timeout: .seconds(40)) { _ in
            events.all.contains { if case .state(.finished) = $0 { return true } else { return false } }
        }
        #expect(finished, "\(events.all.suffix(6))")
        let titles = Array(events.titles.prefix(3))
        #expect(titles == ["First Song", "Second Song", "Third Song"], "\(events.titles)")

        // Icecast starts a new listener at its second audio page, and keeps the last page back:
        // what is heard is one run of the local render, exact, from inside the first link to inside
        // the third, across both joins without a gap or a repeated frame.
        let samples = reader.samples
        let heard = samples.count / 2
        try #require(heard > 60_000, "\(heard) frames heard")
        let probe = 2 * 1_000
        let offset = (0..<66_151).first { (lag: Int) -> Bool in
            let at = 2 * lag + probe
            guard expected.count >= at + 128 else { return false }
            return (0..<128).allSatisfy { samples[probe + $0] == expected[at + $0] }
        }
        let start = try #require(offset, "what was heard is nowhere in the local render")
        // Compared up to 10 000 frames into the third link: the stream ends inside it where icecast
        // stopped (and the sink then captures silence).
        let through = 66_151 + 50_021 + 10_000
        #expect(start + heard > through, "heard frames \(start)..<\(start + heard) of the local render")
        let compared = 2 * (through - start)
        let differing = zip(samples[0..<compared], expected[(2 * start)..<(2 * through)]).filter { $0 != $1 }.count
        #expect(differing == 0, "\(differing) of \(compared) samples differ from the local render from frame \(start)")
    }

    /// Whether a Vorbis page holds audio (its granule is set and above 0, or it follows them).
    static func isAudioPage(_ bytes: [UInt8], _ page: Range<Int>) -> Bool {
        let granule = OggTestPages.granule(bytes, page)
        return granule != 0 && granule != -1
    }
}
