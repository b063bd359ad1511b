import Foundation
import Testing
import AudioFileStream
import CodecTestSupport
import TestSupport

/// Class 17 of issue 37: `aqplay --record` stopped by SIGTERM finishes its file as SIGINT does.
@Suite struct AQPlaySignalTests {
    static let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqplay").path

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqplay), "aqplay is not built beside the tests"),
          arguments: [SIGTERM, SIGINT])
    func aSignalFinishesTheRecording(_ number: Int32) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("aqplay-signal-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/out.wav"
        // Written past its header: sound is being recorded.
        let recording = Watched(false)
        let watcher = try DirectoryWatcher(directory, everyWrite: true) { _ in
            let size = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0
            if size > 4096 { recording.update { $0 = true } }
        }
        defer { watcher.stop() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.aqplay)
        // The null sink in real time: four seconds of melody, interrupted while it plays.
        process.arguments = ["--record", output, Where.fixture("demo-melody.m4a")]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exit = Watched<Int32?>(nil)
        process.terminationHandler = { finished in exit.update { $0 = finished.terminationStatus } }
        try process.run()
        #expect(await recording.wait { $0 })
        kill(process.processIdentifier, number)
        guard await exit.wait(timeout: .seconds(10), until: { $0 != nil }) else {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("aqplay did not finish after signal \(number)")
            return
        }
        #expect(exit.current == 128 + number)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: output)[.size] as? Int)
        let file = try AudioFile(path: output)
        let dataBytes = Int(file.packetCount) * file.dataFormat.bytesPerPacket
        #expect(file.packetCount > 4096, "\(file.packetCount) frames recorded")
        #expect(Int(file.dataOffset ?? 0) + dataBytes == size, "the header's sizes cover the file")
        #expect(file.warnings.isEmpty, "\(file.warnings)")
    }
}

/// `aqplay --events`: what happens to each item as JSON Lines, the exit status for skips, and
/// `--loudness` of what was played.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: AQPlaySignalTests.aqplay), "aqplay is not built beside the tests"),
       .enabled(if: ["sox", "flac", "metaflac", "lame"].allSatisfy { Where.tool($0) != nil }, "sox, flac, metaflac or lame is missing"))
struct AQPlayEventsTests {
    static func lines(_ data: Data) -> [[String: Any]] {
        String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    /// A crossfading list whose last item is not audio: every frame of the others plays (the item
    /// before it to its end), the events say so item by item, and the exit status is 2.
    @Test func aSkippedLastItemIsReportedAndItsNeighbourPlaysToItsEnd() async throws {
        let material = try await PlayerCompositionTests.Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        let (a, b) = (try await rendered(material.a).samples.count / 2, try await rendered(material.b).samples.count / 2)
        let d = Int((0.25 * 44_100).rounded())
        let run = try await runTool(AQPlaySignalTests.aqplay, ["--fast", "--crossfade", "0.25", "--events", "--loudness",
                                                               material.a, material.b, material.notAudio])
        #expect(run.status == 2, "\(String(decoding: run.errorOutput, as: UTF8.self))")
        let lines = Self.lines(run.output)
        // Item by item in order (the items are read ahead of what is heard: their lines interleave).
        func of(_ item: Int) -> [String] { lines.filter { $0["item"] as? Int == item }.compactMap { $0["event"] as? String } }
        #expect(of(0) == ["opened", "started", "finished"] && of(1) == ["opened", "started", "finished"] && of(2) == ["skipped"], "\(lines)")
        #expect(lines.suffix(2).compactMap { $0["event"] as? String } == ["loudness", "end"], "\(lines)")
        let starts = lines.filter { $0["event"] as? String == "started" }
        #expect(starts.compactMap { $0["outputFrame"] as? Int } == [0, a - d])
        #expect(starts.compactMap { $0["gain"] as? Double } == [0, 0])
        let skipped = try #require(lines.first { $0["event"] as? String == "skipped" })
        #expect(skipped["item"] as? Int == 2 && (skipped["error"] as? String)?.contains("notes.txt.mp3") == true, "\(skipped)")
        let end = try #require(lines.last)
        #expect(end["framesPlayed"] as? Int == a + b - d && end["itemsPlayed"] as? Int == 2 && end["skipped"] as? Int == 1, "\(end)")
        let loudness = try #require(lines.first { $0["event"] as? String == "loudness" })
        let integrated = try #require(loudness["integrated"] as? Double)
        #expect(integrated > -20 && integrated < -5, "\(loudness)")
    }

    /// Nothing could play: exit status 1, the first item's error.
    @Test func nothingPlayableExitsWithOne() async throws {
        let material = try await PlayerCompositionTests.Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        let run = try await runTool(AQPlaySignalTests.aqplay, ["--fast", "--events", material.notAudio, "/nonexistent/x.flac"])
        #expect(run.status == 1)
        let lines = Self.lines(run.output)
        #expect(lines.compactMap { $0["event"] as? String } == ["skipped", "skipped", "end"], "\(lines)")
        #expect((lines.last?["error"] as? String)?.contains("notes.txt.mp3") == true, "\(lines)")
    }
}
