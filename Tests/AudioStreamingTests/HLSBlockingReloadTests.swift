import Foundation
import Testing
import AudioPlayback
import BufferQueue
@testable import AudioStreaming
import TestSupport

/// A live media playlist whose server holds blocking reloads (Low-Latency HLS, RFC 8216bis
/// 6.2.5.2): the segments ffmpeg cut from a fixture are published one at a time, each only once a
/// reload asking for it (`_HLS_msn`) is being held; after the last, the held reload gets
/// `EXT-X-ENDLIST`. A reload that is never asked for publishes nothing, so a client that reloaded
/// on a timer instead would show in the request log (and wait out a 20 s target duration).
final class BlockingLivePlaylist: @unchecked Sendable {
    private let entries: [String]
    private let condition = NSCondition()
    private var published = 1
    private var ended = false
    private var stopped = false
    /// The sequence number the reload being held now waits for.
    private var waitingFor: Int?
    /// Every sequence number a reload was held for before its segment existed.
    private var held: [Int] = []

    /// `vod`: ffmpeg's VOD playlist, whose segments are published.
    init(vod: String) {
        let lines = vod.split(separator: "\n").map(String.init)
        var entries: [String] = []
        for (index, line) in lines.enumerated() where line.hasPrefix("#EXTINF") && index + 1 < lines.count {
            entries.append(line + "\n" + lines[index + 1] + "\n")
        }
        self.entries = entries
    }

    var segmentCount: Int { entries.count }
    var heldFor: [Int] { condition.lock(); defer { condition.unlock() }; return held }

    private func playlist() -> [UInt8] {
        var text = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:20\n#EXT-X-MEDIA-SEQUENCE:0\n"
            + "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES\n"
        text += entries[..<published].joined()
        if ended { text += "#EXT-X-ENDLIST\n" }
        return Array(text.utf8)
    }

    /// The server's side: answers `live.m3u8`, holding a reload with `_HLS_msn=N` until segment N
    /// is published or the playlist ends (503 after 20 s, as a server that gives up would).
    func answer(path: String, query: String) -> (status: Int, body: [UInt8])? {
        guard path == "ts/live.m3u8" else { return nil }
        let msn = query.split(separator: "&").first { $0.hasPrefix("_HLS_msn=") }.flatMap { Int($0.dropFirst("_HLS_msn=".count)) }
        condition.lock()
        defer { condition.unlock() }
        if let msn, msn >= published, !ended {
            held.append(msn)
            let deadline = Date() + 20
            while msn >= published && !ended && !stopped {
                waitingFor = msn
                condition.broadcast()
                if !condition.wait(until: deadline) { waitingFor = nil; return (503, []) }
            }
            waitingFor = nil
        }
        return (200, playlist())
    }

    /// The publisher (a thread of its own): each time a reload is held for the next segment,
    /// publishes it; after the last segment, ends the playlist. Gives up when no reload comes
    /// within 20 s.
    func publish() {
        condition.lock()
        defer { condition.unlock() }
        while !ended && !stopped {
            let deadline = Date() + 20
            while waitingFor != published && !stopped {
                if !condition.wait(until: deadline) { stopped = true }
            }
            if stopped { break }
            if published < entries.count { published += 1 } else { ended = true }
            condition.broadcast()
        }
        condition.broadcast()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}

@Suite(.serialized) struct HLSBlockingReloadTests {
    /// A live stream from a server with blocking reloads plays every segment, bit for bit, with
    /// one reload per new segment, each asking for that segment and held until it existed: no
    /// reload timer between them.
    @Test func aServerThatHoldsReloadsIsAskedForEachSegmentAndNeverOnATimer() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let vod = try String(contentsOfFile: root + "/ts/index.m3u8", encoding: .utf8)
        let live = BlockingLivePlaylist(vod: vod)
        let count = live.segmentCount
        try #require(count >= 3, "ffmpeg cut \(count) segments")
        let server = try LoopbackServer(files: try HLSFaultTests.files(root, "ts"), handler: { live.answer(path: $0, query: $1) })
        defer { server.shutdown() }
        let publisher = Thread { live.publish() }
        publisher.start()
        defer { live.stop() }

        var configuration = HLSConfiguration()
        configuration.liveStartDistance = 1000   // from the first segment
        let (capture, frames) = try await playStream([.hls(server.url("ts/live.m3u8"), configuration: configuration)])

        #expect(frames == 174 * 1024)
        let expected = try HLSTests.localJoin(root, "ts")
        let same = HLSTests.same(capture.samples, expected)
        #expect(same, "\(capture.samples.count / 2) frames heard, \(expected.count / 2) rendered")
        // The first load, then one blocking reload per segment after the first, and the one the
        // end of the playlist answered.
        let queries = server.queryLog.filter { $0.path == "ts/live.m3u8" }.map(\.query)
        #expect(queries == [""] + (1...count).map { "_HLS_msn=\($0)" }, "\(queries)")
        #expect(live.heldFor == Array(1...count), "held for \(live.heldFor)")
    }

    /// A server that offers blocking reloads but answers at once with nothing new (it ignores the
    /// directive) is not asked again in a tight loop: the next reload waits for the RFC 8216 timer,
    /// and a playlist that stays unchanged ends the stream as a stale one.
    @Test func aServerThatDoesNotHoldIsReloadedOnTheTimerInstead() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        var files = try HLSFaultTests.files(root, "ts")
        let vod = try String(contentsOfFile: root + "/ts/index.m3u8", encoding: .utf8)
        files["ts/live.m3u8"] = HLSFaultTests.live(vod, tags: "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES\n")
        let server = try LoopbackServer(files: files, faults: LoopbackServer.Faults(), faultyPath: nil)
        defer { server.shutdown() }
        var configuration = HLSConfiguration()
        configuration.liveStartDistance = 1000
        configuration.stalePlaylistTimeout = .seconds(2)
        let (capture, outcome) = await playStreamToTheEnd([.hls(server.url("ts/live.m3u8"), configuration: configuration)])
        #expect("\(outcome)".contains("has not changed"), "\(outcome)")
        #expect(capture.samples.count == 174 * 1024 * 2, "\(capture.samples.count / 2) frames heard")
        let queries = server.queryLog.filter { $0.path == "ts/live.m3u8" }.map(\.query)
        let segments = vod.split(separator: "\n").filter { $0.hasPrefix("#EXTINF") }.count
        // The first load, one blocking reload, then ordinary reloads on the timer (half a target
        // duration apart) until 2 s without a change.
        #expect(queries.first == "" && queries.dropFirst().first == "_HLS_msn=\(segments)", "\(queries)")
        #expect(queries.dropFirst(2).allSatisfy { $0.isEmpty }, "\(queries)")
        #expect(queries.count >= 3 && queries.count <= 12, "\(queries.count) playlist requests")
    }

    /// A blocking reload the server refuses (503) is reported and followed at once by an ordinary
    /// reload, which here brings the end of the playlist: the stream ends normally, whole.
    @Test func aRefusedBlockingReloadIsFollowedByAnOrdinaryOne() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let vod = try String(contentsOfFile: root + "/ts/index.m3u8", encoding: .utf8)
        let live = HLSFaultTests.live(vod, tags: "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES\n")
        let ended = Array(vod.utf8)
        let refused = Lock(false)
        let server = try LoopbackServer(files: try HLSFaultTests.files(root, "ts"), handler: { path, query in
            guard path == "ts/live.m3u8" else { return nil }
            if query.contains("_HLS_msn=") {
                refused.withLock { $0 = true }
                return (503, [])
            }
            return (200, refused.withLock { $0 } ? ended : live)
        })
        defer { server.shutdown() }
        var configuration = HLSConfiguration()
        configuration.liveStartDistance = 1000
        let (capture, frames) = try await playStream([.hls(server.url("ts/live.m3u8"), configuration: configuration)])
        #expect(frames == 174 * 1024)
        let segments = vod.split(separator: "\n").filter { $0.hasPrefix("#EXTINF") }.count
        let queries = server.queryLog.filter { $0.path == "ts/live.m3u8" }.map(\.query)
        #expect(queries == ["", "_HLS_msn=\(segments)", ""], "\(queries)")
        let reports = capture.events.compactMap { if case .property("hls-blocking-reload", let value, _) = $0 { value } else { nil } }
        #expect(reports.count == 1 && reports.first?.contains("503") == true, "\(reports)")
    }

    @Test func theDeliveryDirectiveJoinsTheQueryAndReplacesAnEarlierOne() throws {
        let plain = try #require(URL(string: "http://example.com/a/live.m3u8"))
        #expect(HLSLoader.blockingReloadURL(plain, sequence: 7)?.absoluteString == "http://example.com/a/live.m3u8?_HLS_msn=7")
        let query = try #require(URL(string: "http://example.com/live.m3u8?token=x%20y&_HLS_msn=3&_HLS_part=1"))
        #expect(HLSLoader.blockingReloadURL(query, sequence: 4)?.absoluteString == "http://example.com/live.m3u8?token=x%20y&_HLS_msn=4")
    }
}
