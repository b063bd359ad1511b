import Foundation
import Testing
import TestSupport

/// `avrecorder`, a program written against Apple's AVFAudio only (Swift 6 mode): an
/// AVAudioRecorder into a 16 kHz mono 16-bit WAV, for a duration (exact to the frame), paused and
/// stopped, deleted; from the null input and from a private PulseAudio server's monitor.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct AVAudioRecorderTests {
    static var avrecorder: String { AVFAudioClientTests.directory.appendingPathComponent("avrecorder").path }
    static var built: Bool { FileManager.default.isExecutableFile(atPath: avrecorder) }
    static let paplay = "/usr/bin/paplay"
    static var canPlay: Bool { FileManager.default.isExecutableFile(atPath: paplay) }

    @Test(.enabled(if: built, "avrecorder is not built beside the tests"))
    func aRecordingForADurationHoldsExactlyItsFrames() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/memo.wav"
        let run = try await runTool(Self.avrecorder, [path, "0.5"], environment: ["AQ_INPUT": "null"])
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0, "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        #expect(printed == "recording\nfinished true\nfile 8000 frames 16000 Hz 1 ch\nafter the end: recording false at 0.000\n", "\(printed)")
        let probe = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels,duration_ts",
                                                           "-of", "csv=p=0", path])
        #expect(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "pcm_s16le,16000,1,8000")
    }

    @Test(.enabled(if: built, "avrecorder is not built beside the tests"))
    func pauseStopAndDeleteAsOnAMac() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let run = try await runTool(Self.avrecorder, [folder + "/take.wav", "pause"], environment: ["AQ_INPUT": "null"])
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0, "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        let lines = printed.split(separator: "\n")
        #expect(lines.contains("paused true held true"), "\(printed)")
        #expect(lines.contains("stopped: finished true"), "\(printed)")
        // 0.3 s recorded, a pause of 0.2 s, 0.3 s more: the file holds what the recorder's clock
        // counted at the stop (within a tenth of a second), not the pause's 3200 frames more.
        let frames = lines.first { $0.hasPrefix("file ") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        let counted = lines.first { $0.hasPrefix("at the stop ") }.flatMap { Double($0.split(separator: " ")[3]) } ?? 0
        #expect(frames >= 8_000 && abs(Double(frames) - counted * 16_000) < 1_600, "\(printed)")
        #expect(lines.contains("second: finished true"), "\(printed)")
        #expect(lines.contains("deleted true exists false"), "\(printed)")
        #expect(lines.contains { $0.hasPrefix("unknown extension: NSOSStatusErrorDomain /tmp/take.xyz: ") }, "\(printed)")
    }

    /// While paplay plays a tone into a private server, the recorder takes its monitor: the file
    /// holds exactly the frames asked for, and the tone (converted to 16 kHz mono) is in it.
    @Test(.enabled(if: built && !PrivateServer.missing && canPlay, "avrecorder, PulseAudio or paplay is missing"))
    func aRecordingFromPulseAudioHoldsWhatWasPlayed() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try await PrivateServer.start(rate: 44100, channels: 2)
        defer { Task { await server.kill() } }
        let environment = server.environment(["AQ_INPUT": "pulse:out.monitor"])
        let tone = folder + "/tone.wav", path = folder + "/memo.wav"
        let made = try await runTool("/usr/bin/sox", ["-n", "-r", "44100", "-c", "2", "-b", "16", tone, "synth", "1", "sine", "440", "vol", "0.5"])
        try #require(made.status == 0)

        let (lines, exit) = try startReadingLines(Self.avrecorder, [path, "2"], environment: environment)
        #expect(await lines.wait(timeout: .seconds(10)) { $0.contains("recording") })
        let playing = try await runTool(Self.paplay, [tone], environment: environment, timeout: .seconds(20))
        #expect(playing.status == 0, "\(String(decoding: playing.errorOutput, as: UTF8.self))")
        #expect(await exit.wait(timeout: .seconds(20)) == 0)
        #expect(await lines.wait(timeout: .seconds(5)) { $0.contains("file 32000 frames 16000 Hz 1 ch") }, "\(lines.current)")

        let recorded = try await AVFAudioFileTests.reference(path)
        #expect(recorded.count == 32_000)
        // The tone at 0.5 in both channels, mixed to mono: about 0.5 at its peaks.
        let peak = recorded.map(abs).max() ?? 0
        #expect(peak > 0.45 && peak < 0.55, "the recording's peak is \(peak)")
    }
}
