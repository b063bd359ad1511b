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

/// The disk cache against real sockets and real files: what plays from the cache equals what
/// played from the server, only missing bytes are fetched, a killed download leaves a consistent
/// cache, and the size cap evicts the least recently used resource.
@Suite(.serialized) struct DiskCacheTests {
    static func folder() -> String {
        NSTemporaryDirectory() + "aq-cache-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    }

    static func configuration(_ cache: AudioDiskCache) -> HTTPStreamConfiguration {
        HTTPStreamConfiguration(stallTimeout: .seconds(2), maximumReconnects: 2, initialBackoff: .milliseconds(10), cache: cache)
    }

    /// Every held range of every cached resource holds exactly the resource's bytes there.
    static func heldBytesAreTheResources(_ cache: AudioDiskCache, _ bodies: [String: [UInt8]]) throws -> Bool {
        for item in cache.items() {
            guard let body = bodies[item.key] else { continue }
            let data = Array(try Data(contentsOf: cache.directory.appendingPathComponent(AudioDiskCache.name(item.key) + ".data")))
            for range in item.heldRanges {
                guard range.upperBound <= data.count, range.upperBound <= body.count,
                      data[Int(range.lowerBound)..<Int(range.upperBound)] == body[Int(range.lowerBound)..<Int(range.upperBound)] else { return false }
            }
        }
        return true
    }

    @Test(arguments: ["lame-cbr128-44k-stereo.mp3", "ffmpeg-aac-44k-moov-last.m4a"])
    func aSecondPlayComesFromTheCacheWithTheServerGone(_ name: String) async throws {
        let directory = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try AudioDiskCache(directory: directory)
        let body = try bytes(name)
        let server = try LoopbackServer(files: [name: body], faultyPath: nil)
        let url = server.url(name)
        let (first, firstFrames) = try await playStream([.url(url, configuration: Self.configuration(cache))])
        let expected = try localRender(TestPaths.fixture(name))
        let firstIsTheFile = HLSTests.same(first.samples, expected)
        #expect(firstIsTheFile, "\(name): the first play differs from the local render")
        #expect(cache.item(forKey: url)?.isComplete == true, "\(String(describing: cache.item(forKey: url)))")
        #expect(try Self.heldBytesAreTheResources(cache, [url: body]))
        server.shutdown()
        let (second, secondFrames) = try await playStream([.url(url, configuration: Self.configuration(cache))])
        #expect(secondFrames == firstFrames)
        let secondIsTheFirst = HLSTests.same(second.samples, first.samples)
        #expect(secondIsTheFirst, "\(name): the cached play differs")
    }

    /// Class 13 of issue 37: the cache checks what it holds. Bytes flipped in a complete entry's
    /// data file are found by the block's CRC-32C: with the server up the block is fetched again
    /// and the play equals the first; with the server gone the play fails naming the block. A
    /// clean run leaves no `*.json.tmp`.
    @Test func flippedBytesInTheCacheAreFoundAndFetchedAgain() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else { print("ffmpeg is not installed: skipped"); return }
        let name = "long.mp3"
        let directory = Self.folder(), sources = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory); try? FileManager.default.removeItem(atPath: sources) }
        let cache = try AudioDiskCache(directory: directory)
        let body = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try await Self.longMP3(sources))))
        try #require(body.count > Int(2 * AudioDiskCache.blockSize), "the file spans more than two blocks")
        let server = try LoopbackServer(files: [name: body], faultyPath: nil)
        let url = server.url(name)
        let (first, _) = try await playStream([.url(url, configuration: Self.configuration(cache))])
        #expect(cache.item(forKey: url)?.isComplete == true)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        // Flip bytes in the second block.
        let dataPath = cache.directory.appendingPathComponent(AudioDiskCache.name(url) + ".data").path
        var data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dataPath)))
        let at = Int(AudioDiskCache.blockSize) + 1000
        for i in at..<(at + 16) { data[i] ^= 0xA5 }
        try Data(data).write(to: URL(fileURLWithPath: dataPath))
        let requestsBefore = server.requestLog.count
        let (second, _) = try await playStream([.url(url, configuration: Self.configuration(cache))])
        #expect(HLSTests.same(second.samples, first.samples), "the damaged block was played")
        #expect(server.requestLog.count > requestsBefore, "the damaged block was not fetched again")
        // Damage again, with the server gone: a clear error, not garbage.
        let (third, _) = try await playStream([.url(url, configuration: Self.configuration(cache))])
        #expect(HLSTests.same(third.samples, first.samples))
        data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dataPath)))
        for i in at..<(at + 16) { data[i] ^= 0x5A }
        try Data(data).write(to: URL(fileURLWithPath: dataPath))
        server.shutdown()
        // (AsyncHTTPClient keeps trying a refused connection until the connect timeout.)
        var gone = Self.configuration(cache)
        gone.connectTimeout = .milliseconds(300)
        let (fourth, outcome) = await playStreamToTheEnd([.url(url, configuration: gone)])
        guard case .failure(let error) = outcome else {
            Issue.record("a damaged cache with the server gone played \(fourth.samples.count / 2) frames without an error")
            return
        }
        #expect("\(error)".contains("checksum"), "\(error)")
        #expect(fourth.samples.count < first.samples.count)
        #expect(Array(fourth.samples.prefix(fourth.samples.count)) == Array(first.samples.prefix(fourth.samples.count)), "what played before the damage is the file's")
    }

    /// 60 s of MP3 (about 960 kB) made by ffmpeg in `directory`.
    static func longMP3(_ directory: String) async throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/long.mp3"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=330:duration=60", "-ac", "2",
                                                         "-c:a", "libmp3lame", "-b:a", "128k", path])
        #expect(made.status == 0, "ffmpeg could not encode the MP3")
        return path
    }

    @Test func aSeekIntoAHeldRangeNeedsNoRequestAndOnlyMissingBytesAreFetched() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else { print("ffmpeg is not installed: skipped"); return }
        let directory = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = try await Self.longMP3(directory)
        let cache = try AudioDiskCache(directory: directory + "/cache")
        let body = Array(try Data(contentsOf: URL(fileURLWithPath: source)))
        let server = try LoopbackServer(files: ["long.mp3": body], faultyPath: nil)
        defer { server.shutdown() }
        let url = server.url("long.mp3")
        // A small read-ahead, so that the head's request is cut short by the seek.
        var configuration = Self.configuration(cache)
        configuration.readAheadBytes = 64 << 10
        // From 30 s: the head (for the parser) and the part from the seek point on are fetched.
        let (seeked, _) = try await playStream([.url(url, configuration: configuration)], seek: 30)
        let held = try #require(cache.item(forKey: url))
        #expect(!held.isComplete && held.heldRanges.count == 2, "\(held)")
        let requestsBefore = server.requestLog.count
        // The same seek again: everything it needs is held, so no request at all.
        let (again, _) = try await playStream([.url(url, configuration: configuration)], seek: 30)
        #expect(server.requestLog.count == requestsBefore, "\(server.requestLog.suffix(from: requestsBefore))")
        let sameAgain = HLSTests.same(again.samples, seeked.samples)
        #expect(sameAgain, "the second seek heard \(again.samples.count / 2) frames, the first \(seeked.samples.count / 2)")
        // The whole file: exactly the missing ranges are asked for, each bounded by the held
        // range after it.
        let (whole, _) = try await playStream([.url(url, configuration: configuration)])
        let asked = server.requestLog.suffix(from: requestsBefore).map(\.range)
        var gaps: [String] = [], at: Int64 = 0
        for range in held.heldRanges {
            if range.lowerBound > at { gaps.append("bytes=\(at)-\(range.lowerBound - 1)") }
            at = range.upperBound
        }
        if at < Int64(body.count) { gaps.append("bytes=\(at)-") }
        #expect(!gaps.isEmpty && asked == gaps, "asked \(asked), missing \(gaps), held \(held.heldRanges)")
        let wholeIsTheFile = HLSTests.same(whole.samples, try localRender(source))
        #expect(wholeIsTheFile)
        #expect(cache.item(forKey: url)?.isComplete == true)
        #expect(try Self.heldBytesAreTheResources(cache, [url: body]))
    }

    @Test func theLeastRecentlyUsedResourceIsEvictedAtTheCap() async throws {
        let directory = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let body = try bytes("demo-melody.m4a")   // 65 463 bytes
        let cache = try AudioDiskCache(directory: directory, capacity: 150_000, commitInterval: 16_384)
        let server = try LoopbackServer(files: ["a.m4a": body, "b.m4a": body, "c.m4a": body], faultyPath: nil)
        defer { server.shutdown() }
        for name in ["a.m4a", "b.m4a", "a.m4a", "c.m4a"] {
            _ = try await playStream([.url(server.url(name), configuration: Self.configuration(cache))])
            #expect(cache.heldBytes <= 150_000, "\(cache.heldBytes) bytes held after \(name)")
        }
        // a was used after b: b goes when c arrives.
        #expect(Set(cache.items().map(\.key)) == [server.url("a.m4a"), server.url("c.m4a")], "\(cache.items().map(\.key))")
    }

    @Test func aChangedResourceDropsWhatIsHeld() async throws {
        let directory = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try AudioDiskCache(directory: directory)
        let entry = try await cache.entry(forKey: "http://example/x")
        try await entry.validate(.init(etag: "\"1\"", length: 8), contentType: nil, acceptsRanges: true)
        try await entry.write([1, 2, 3, 4], at: 0)
        try await entry.commit()
        #expect(entry.held(containing: 2) == 0..<4)
        #expect(try await entry.validate(.init(etag: "\"1\"", length: 8), contentType: nil, acceptsRanges: true) == false)
        #expect(try await entry.validate(.init(etag: "\"2\"", length: 8), contentType: nil, acceptsRanges: true) == true)
        #expect(entry.held(containing: 2) == nil)
        await entry.release()
        #expect(cache.item(forKey: "http://example/x")?.heldBytes == 0)
    }

    /// `aqplay --cache` killed mid-download (SIGKILL, while the server stalls after 600 000
    /// bytes), then run again: what the record claims is on disk, and nothing held is fetched again.
    @Test(.timeLimit(.minutes(3))) func aKilledDownloadLeavesAConsistentCacheAndIsNotFetchedAgain() async throws {
        let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("aqplay").path
        #expect(FileManager.default.isExecutableFile(atPath: aqplay), "aqplay is not built beside the tests (\(aqplay))")
        guard FileManager.default.isExecutableFile(atPath: aqplay), FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else { return }
        let directory = Self.folder()
        try FileManager.default.createDirectory(atPath: directory + "/cache", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = try await Self.longMP3(directory)
        let body = Array(try Data(contentsOf: URL(fileURLWithPath: source)))
        var faults = LoopbackServer.Faults()
        faults.stallAfter = 600_000
        let server = try LoopbackServer(files: ["long.mp3": body], faults: faults, faultyPath: "long.mp3")
        defer { server.shutdown() }
        let url = server.url("long.mp3")
        let cache = try AudioDiskCache(directory: directory + "/cache")
        let recordName = AudioDiskCache.name(url) + ".json"
        // Every record update is a rename into the folder: look at the record then.
        let held = Watched<Int64>(0)
        let watcher = try DirectoryWatcher(directory + "/cache") { name in
            if name == recordName, let item = cache.item(forKey: url) { held.update { $0 = item.heldBytes } }
        }
        defer { watcher.stop() }

        let first = Process()
        first.executableURL = URL(fileURLWithPath: aqplay)
        first.standardInput = FileHandle.nullDevice
        first.arguments = ["--fast", "--cache", directory + "/cache", url]
        first.standardOutput = FileHandle.nullDevice
        first.standardError = FileHandle.nullDevice
        try first.run()
        // Two record updates of 256 KiB each fit before the stall at 600 000 bytes.
        let recorded = await held.wait(timeout: .seconds(30)) { $0 >= 2 * 262_144 }
        kill(first.processIdentifier, SIGKILL)
        #expect(recorded, "the cache recorded \(held.current) bytes before the kill")
        let afterKill = try #require(cache.item(forKey: url))
        #expect(try Self.heldBytesAreTheResources(cache, [url: body]), "a range is recorded that is not on disk")
        let heldEnd = afterKill.heldRanges.first?.upperBound ?? 0
        #expect(afterKill.heldRanges.count == 1 && afterKill.heldRanges.first?.lowerBound == 0 && heldEnd >= 2 * 262_144, "\(afterKill)")

        let before = server.requestLog.count
        let output = directory + "/out.wav"
        let second = try await runTool(aqplay, ["--fast", "--cache", directory + "/cache", "--record", output, url], timeout: .seconds(60))
        #expect(second.status == 0)
        let asked = server.requestLog.suffix(from: before).map(\.range)
        #expect(asked.first == "bytes=\(heldEnd)-" && asked.count == 1, "the second run asked for \(asked); \(heldEnd) bytes were held")
        #expect(cache.item(forKey: url)?.isComplete == true)
        #expect(try Self.heldBytesAreTheResources(cache, [url: body]))
        let resumedIsTheFile = HLSTests.same(try localRender(output), try localRender(source))
        #expect(resumedIsTheFile, "the resumed play differs from the file's render")
    }

    /// A cache in `directory` and an HLS configuration that uses it.
    static func cachedHLS(_ directory: String) throws -> (AudioDiskCache, HLSConfiguration) {
        let cache = try AudioDiskCache(directory: directory)
        var configuration = HLSConfiguration()
        configuration.http.cache = cache
        return (cache, configuration)
    }

    @Test func hlsSegmentsAndPlaylistsPlayFromTheCacheWithTheServerGone() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let directory = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (_, configuration) = try Self.cachedHLS(directory)
        for folder in ["ts", "fmp4"] {
            let server = try LoopbackServer(files: try HLSFaultTests.files(root, folder), faultyPath: nil)
            let url = server.url("\(folder)/index.m3u8")
            let (first, frames) = try await playStream([.hls(url, configuration: configuration)])
            // 174 packets of 1024 frames (fMP4's shortened last sample is not a trim in segments).
            #expect(frames == 174 * 1024)
            server.shutdown()
            let (second, _) = try await playStream([.hls(url, configuration: configuration)])
            let cachedIsTheFirst = HLSTests.same(second.samples, first.samples)
            #expect(cachedIsTheFirst, "\(folder): \(second.samples.count / 2) frames from the cache")
            #expect(second.events.contains { if case .property("hls-cache", _, _) = $0 { true } else { false } })
        }
    }

    /// Class 13 for HLS: a cached segment whose bytes changed on disk is fetched again.
    @Test func aDamagedCachedSegmentIsFetchedAgain() async throws {
        guard let root = try await HLSTests.presentation() else { return }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let directory = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (cache, configuration) = try Self.cachedHLS(directory)
        let server = try LoopbackServer(files: try HLSFaultTests.files(root, "ts"), faultyPath: nil)
        defer { server.shutdown() }
        let url = server.url("ts/index.m3u8")
        let (first, _) = try await playStream([.hls(url, configuration: configuration)])
        let segment = server.url("ts/seg001.ts")
        let dataPath = cache.directory.appendingPathComponent(AudioDiskCache.name(segment) + ".data").path
        var data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dataPath)))
        for i in 2000..<2016 { data[i] ^= 0xA5 }
        try Data(data).write(to: URL(fileURLWithPath: dataPath))
        let before = server.requestLog.filter { $0.path == "ts/seg001.ts" }.count
        let (second, _) = try await playStream([.hls(url, configuration: configuration)])
        #expect(HLSTests.same(second.samples, first.samples), "the damaged segment was played")
        #expect(server.requestLog.filter { $0.path == "ts/seg001.ts" }.count == before + 1, "the damaged segment was not fetched again")
        #expect(second.events.contains { if case .property("cache", let value, _) = $0 { value.contains("checksum") } else { false } })
    }
}
