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
