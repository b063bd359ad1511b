import Foundation
import Testing
import TestSupport

/// `avplayer`, a program written against Apple's AVFAudio only (Swift 6 mode): AVAudioPlayers
/// with a delegate, from a file and from memory, looped, paused, stopped and moved — their
/// delegate told in Apple's order and no earlier than the sound was heard — and a file played
/// through a private PulseAudio server bit for bit.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct AVAudioPlayerTests {
    static var avplayer: String { AVFAudioClientTests.directory.appendingPathComponent("avplayer").path }
    static var built: Bool { FileManager.default.isExecutableFile(atPath: avplayer) }

    /// The seconds a "NAME finished true after S s" line says.
    static func seconds(_ lines: [Substring], _ name: String) -> Double? {
        guard let line = lines.first(where: { $0.hasPrefix("\(name) finished true after ") }) else { return nil }
        return Double(line.split(separator: " ")[4])
    }

    @Test(.enabled(if: built, "avplayer is not built beside the tests"))
    func playersTellTheirDelegateAsOnAMac() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let long = folder + "/long.wav", short = folder + "/short.m4a"
        try await AVFAudioFileTests.make(long, frames: 44_100, codec: ["-c:a", "pcm_s16le"])
        try await AVFAudioFileTests.make(short, frames: 17_640, codec: ["-c:a", "aac", "-b:a", "128k"])
        let run = try await runTool(Self.avplayer, ["players", long, short], environment: ["AQ_OUTPUT": "null"])
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0, "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        let lines = printed.split(separator: "\n")
        // The lengths are the valid frames: the AAC's priming and padding are not counted.
        #expect(lines.first == "durations 1.000 0.400 channels 2 2", "\(printed)")
        // Once sound was heard (on a loaded machine it may not be yet), the meter shows its level.
        #expect(lines.contains("playing true heard true metered true") || lines.contains("playing true heard false metered false")
                || lines.contains("playing true heard false metered true"), "\(printed)")
        #expect(lines.contains { $0.hasPrefix("paused true held true at ") }, "\(printed)")
        #expect(lines.contains("after the end: playing false at 0.000"), "\(printed)")
        #expect(lines.contains("stopped playing false kept true"), "\(printed)")
        #expect(lines.contains("after a stop: no finish"), "\(printed)")
        // Each finish comes once its sound was heard: 3 × 0.4 s; 1 s and a 0.3 s pause; the last 0.5 s.
        #expect((Self.seconds(lines, "short") ?? 0) >= 1.15, "\(printed)")
        #expect((Self.seconds(lines, "long") ?? 0) >= 1.25, "\(printed)")
        #expect((Self.seconds(lines, "stopped") ?? 0) >= 0.45, "\(printed)")
        #expect(lines.contains { $0.hasPrefix("missing file: NSOSStatusErrorDomain /nonexistent/sound.wav: ") }, "\(printed)")
    }

    @Test(.enabled(if: built && !PrivateServer.missing, "avplayer or PulseAudio is missing"))
    func aFilePlaysBitForBitThroughPulseAudio() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/sound.wav"
        try await AVFAudioFileTests.make(path, frames: 30_011, codec: ["-c:a", "pcm_s16le"])
        let reference = withoutSilence(try await AVFAudioFileTests.reference(path), channels: 2)
        let server = try await PrivateServer.start(rate: 44_100, channels: 2)
        defer { Task { await server.kill() } }
        try await server.startRecording()
        let run = try await runTool(Self.avplayer, ["play", path], environment: server.environment(["AQ_OUTPUT": "pulse"]))
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0 && printed.hasPrefix("file finished true after "), "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        let captured = withoutSilence(await server.stopRecording(soundFrames: reference.count / 2), channels: 2)
        #expect(captured.count == reference.count, "\(captured.count / 2) frames of sound played, \(reference.count / 2) in the file")
        #expect(difference(captured, reference) == nil)
    }
}
