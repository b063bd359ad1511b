import Foundation
import Testing
import AudioFileStream
import CodecTestSupport
import TestSupport

/// `aqmix` as a user runs it, against `sox -m`.
@Suite(.enabled(if: Where.tool("sox") != nil, "sox is missing (make deps installs it)"))
struct AQMixExampleTests {
    static let aqmix = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqmix").path

    static func sox(_ arguments: [String]) async throws {
        _ = try await run(try #require(Where.tool("sox")), ["-D"] + arguments)
    }

    static func aqmix(_ arguments: [String]) async throws -> ToolResult {
        try await runTool(aqmix, arguments)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqmix), "aqmix is not built beside the tests"))
    func twoFilesMixAsSoxMixesThem() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("aqmix-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let a = directory + "/a.wav", b = directory + "/b.wav", c = directory + "/c.wav"
        try await Self.sox(["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", a, "synth", "66150s", "sine", "440", "sine", "550", "vol", "0.3"])
        try await Self.sox(["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", b, "synth", "44100s", "sine", "660", "vol", "0.3"])
        try await Self.sox(["-r", "22050", "-n", "-r", "22050", "-c", "1", "-b", "16", c, "synth", "15435s", "sine", "330", "vol", "0.3"])

        // Two stereo files, the first 6 dB down: sox -m with the same volumes.
        let ours = directory + "/ours.wav", reference = directory + "/sox.wav"
        let result = try await Self.aqmix([ours, a, b, "--gains", "-6,0"])
        #expect(result.status == 0, "\(String(decoding: result.errorOutput, as: UTF8.self))")
        #expect(String(decoding: result.output, as: UTF8.self).contains("Mixed 2 inputs into 66150 frames at 44100 Hz, 2 ch"))
        try await Self.sox(["-m", "-v", "\(pow(10, -6.0 / 20))", a, "-v", "1", b, "-e", "floating-point", "-b", "32", reference])
        let mixed = floats(wav: try Data(contentsOf: URL(fileURLWithPath: ours)))
        let expected = floats(wav: try Data(contentsOf: URL(fileURLWithPath: reference)))
        #expect(mixed.count == 66150 * 2 && expected.count == mixed.count)
        let worst = zip(mixed, expected).map { abs($0 - $1) }.max() ?? .infinity
        #expect(worst <= 1e-6, "largest difference from sox -m: \(worst)")

        // A 22.05 kHz mono file converted and started at 2 s: the mix ends where it does, exactly.
        let converted = directory + "/converted.flac"
        let second = try await Self.aqmix([converted, a, c, "--offsets", "0,2", "--format", "s24"])
        #expect(second.status == 0, "\(String(decoding: second.errorOutput, as: UTF8.self))")
        #expect(try AudioFile(path: converted).packetTableInfo?.validFrames ?? -1 == 88_200 + 30_870, "2 s + round(15435 × 2)")

        // An input that cannot be read is named, and nothing is claimed.
        let missing = try await Self.aqmix([directory + "/never.wav", a, directory + "/absent.mp3"])
        #expect(missing.status == 1)
        #expect(String(decoding: missing.errorOutput, as: UTF8.self).contains("absent.mp3"))
    }
}

/// `aqrender --eq` and `aqplay --eq` as a user runs them, against sox's equaliser.
@Suite(.enabled(if: Where.tool("sox") != nil, "sox is missing (make deps installs it)"))
struct EQExampleTests {
    static let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    static let aqrender = directory.appendingPathComponent("aqrender").path
    static let aqplay = directory.appendingPathComponent("aqplay").path

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqrender) && FileManager.default.isExecutableFile(atPath: aqplay),
                   "aqrender or aqplay is not built beside the tests"))
    func aqrenderAndAqplayEqualiseAsSoxDoes() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("eq-example-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = folder + "/noise.wav", ours = folder + "/ours.wav", played = folder + "/played.wav", reference = folder + "/sox.wav"
        try await AQMixExampleTests.sox(["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", source, "synth", "30011s", "pinknoise", "vol", "0.3"])
        let rendered = try await runTool(Self.aqrender, [source, ours, "--eq", "lowshelf:150:4", "--eq", "peak:2500:-6:1.2", "--eq", "highpass:40"])
        #expect(rendered.status == 0, "\(String(decoding: rendered.errorOutput, as: UTF8.self))")
        let playedRun = try await runTool(Self.aqplay, ["--sink", "null", "--fast", "--record", played, source,
                                                        "--eq", "lowshelf:150:4", "--eq", "peak:2500:-6:1.2", "--eq", "highpass:40"])
        #expect(playedRun.status == 0, "\(String(decoding: playedRun.errorOutput, as: UTF8.self))")
        try await AQMixExampleTests.sox(["-D", source, "-e", "floating-point", "-b", "32", reference,
                                         "bass", "4", "150", "0.7071q", "equalizer", "2500", "1.2q", "-6", "highpass", "-2", "40", "0.7071q"])
        let expected = floats(wav: try Data(contentsOf: URL(fileURLWithPath: reference)))
        for (name, path) in [("aqrender", ours), ("aqplay", played)] {
            let samples = floats(wav: try Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(samples.count == 30011 * 2, "\(name): \(samples.count / 2) frames")
            let worst = zip(samples, expected).map { abs($0 - $1) }.max() ?? .infinity
            #expect(worst <= 2e-5, "\(name): largest difference from sox: \(worst)")
        }
        let refused = try await runTool(Self.aqrender, [source, ours, "--eq", "peak:23000:3"])
        #expect(refused.status != 0 && String(decoding: refused.errorOutput, as: UTF8.self).contains("below half the sample rate"))
    }
}

/// One AAC decoder everywhere: what `aqrender` writes of an M4A is what `aqplay` hands its sink,
/// to the bit (libavcodec's decoder in both; libfaad2's differs where ffmpeg's encoder used noise
/// substitution).
@Suite struct OneAACDecoderTests {
    static let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    static let aqrender = directory.appendingPathComponent("aqrender").path
    static let aqplay = directory.appendingPathComponent("aqplay").path

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqrender) && FileManager.default.isExecutableFile(atPath: aqplay),
                   "aqrender or aqplay is not built beside the tests"))
    func aqplayPlaysWhatAqrenderWrites() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("one-aac-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let m4a = Where.fixture("ffmpeg-aac-44k-moov-first.m4a")
        let rendered = folder + "/rendered.wav", played = folder + "/played.wav"
        let render = try await runTool(Self.aqrender, [m4a, rendered])
        #expect(render.status == 0, "\(String(decoding: render.errorOutput, as: UTF8.self))")
        let play = try await runTool(Self.aqplay, ["--sink", "null", "--fast", "--record", played, m4a])
        #expect(play.status == 0, "\(String(decoding: play.errorOutput, as: UTF8.self))")
        let a = floats(wav: try Data(contentsOf: URL(fileURLWithPath: rendered)))
        let b = floats(wav: try Data(contentsOf: URL(fileURLWithPath: played)))
        #expect(a.count > 0 && difference(b, a) == nil)
    }
}
