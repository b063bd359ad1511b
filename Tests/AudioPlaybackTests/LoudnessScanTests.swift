import Foundation
import Testing
import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue
import TestSupport

/// Whole files measured against libebur128 (Debian's `loudgain`, which decodes with ffmpeg):
/// music-like material (pink noise and a tone under a slow swell) made by ffmpeg in each format.
@Suite(.timeLimit(.minutes(3))) struct LoudnessScanTests {
    static let loudgain = "/usr/bin/loudgain"
    static let aqinfo = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqinfo").path
    static let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqrender").path

    /// `name` made by ffmpeg in `directory`: 20 s (libebur128 steps its short-term blocks by 1 s, the current Tech 3342 by 100 ms at most: the ranges agree once there are enough blocks) at `rate`, `layout` channels, encoded with `codec`.
    static func make(_ name: String, in directory: String, rate: Int, layout: String, codec: [String], decibels: Double = 0) async throws -> String {
        let path = directory + "/" + name
        // Distinct channels: the noise and the tone mixed differently in each, an LFE of the tone.
        let pan: String
        switch layout {
        case "5.1": pan = "pan=5.1|FL=c0|FR=c1|FC=0.5*c0+0.5*c1|LFE=0.8*c1|BL=0.6*c0|BR=0.4*c1"
        case "mono": pan = "pan=mono|c0=0.5*c0+0.5*c1"
        default: pan = "pan=stereo|c0=c0|c1=0.7*c0+0.3*c1"
        }
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y",
            "-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.3:duration=20:seed=11",
            "-f", "lavfi", "-i", "sine=frequency=220:duration=20",
            "-filter_complex", "[0][1]amerge=inputs=2,\(pan),volume='0.2+0.8*abs(sin(t*0.5))':eval=frame,volume=\(decibels)dB",
            "-ar", String(rate)] + codec + [path])
        try #require(made.status == 0, "ffmpeg could not make \(name): \(String(decoding: made.errorOutput, as: UTF8.self))")
        return path
    }

    /// loudgain's integrated (LUFS), range (LU) and true peak (dBTP) for `path`.
    static func reference(_ path: String) async throws -> (integrated: Double, range: Double, truePeak: Double) {
        let run = try await runTool(loudgain, ["-O", "-q", path])
        let lines = String(decoding: run.output, as: UTF8.self).split(separator: "\n")
        let fields = try #require(lines.count >= 2 ? lines[1].split(separator: "\t") : nil, "loudgain said \(String(decoding: run.output, as: UTF8.self)) \(String(decoding: run.errorOutput, as: UTF8.self))")
        func number(_ index: Int) throws -> Double {
            let word = try #require(fields.count > index ? fields[index].split(separator: " ").first : nil, "\(fields)")
            return try #require(Double(word), "\(fields)")
        }
        return (try number(1), try number(2), try number(4))
    }

    @Test(.disabled(if: isUnderThreadSanitizer, "decoding and measuring on one thread: the plain pass compares every format"), arguments: [
        ("flac.flac", 44100, "stereo", ["-c:a", "flac"]),
        ("mp3.mp3", 44100, "stereo", ["-c:a", "libmp3lame", "-b:a", "192k"]),
        ("aac.m4a", 48000, "stereo", ["-c:a", "aac", "-b:a", "160k"]),
        ("opus.opus", 48000, "stereo", ["-c:a", "libopus", "-b:a", "128k"]),
        ("vorbis.ogg", 44100, "stereo", ["-c:a", "libvorbis", "-q:a", "5"]),
        ("surround.flac", 48000, "5.1", ["-c:a", "flac"]),
        ("surround.ogg", 48000, "5.1", ["-c:a", "libvorbis", "-q:a", "5"]),
        ("mono16k.mp3", 16000, "mono", ["-c:a", "libmp3lame", "-b:a", "64k"]),
        ("mono22k.flac", 22050, "mono", ["-c:a", "flac"]),
    ])
    func aFileMeasuresAsLibebur128Does(_ name: String, rate: Int, layout: String, codec: [String]) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.loudgain) else { print("loudgain is not installed (make test installs it): skipped"); return }
        let directory = NSTemporaryDirectory() + "loudness-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.make(name, in: directory, rate: rate, layout: layout, codec: codec)
        AudioCodecs.registerAll()
        let reading = try LoudnessMeter.measuring(try AudioFile(path: path)).reading
        let expected = try await Self.reference(path)
        #expect(abs(reading.integrated - expected.integrated) <= 0.1, "integrated \(reading.integrated), libebur128 \(expected.integrated)")
        #expect(abs(reading.range - expected.range) <= 1, "range \(reading.range), libebur128 \(expected.range)")
        #expect(reading.truePeak - expected.truePeak <= 0.2 && expected.truePeak - reading.truePeak <= 0.4,
                "true peak \(reading.truePeak), libebur128 \(expected.truePeak)")
        #expect(reading.samplePeak <= reading.truePeak && reading.momentaryMax >= reading.shortTermMax)
    }

    @Test func aqinfoPrintsTheLoudnessAsJSON() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.loudgain) else { print("loudgain is not installed (make test installs it): skipped"); return }
        try #require(FileManager.default.isExecutableFile(atPath: Self.aqinfo), "aqinfo is built with the tests")
        let directory = NSTemporaryDirectory() + "loudness-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.make("tone.flac", in: directory, rate: 44100, layout: "stereo", codec: ["-c:a", "flac"])
        let run = try await runTool(Self.aqinfo, ["--loudness", "--json", path])
        #expect(run.status == 0, "\(String(decoding: run.errorOutput, as: UTF8.self))")
        let object = try JSONSerialization.jsonObject(with: run.output) as? [String: Any]
        let loudness = try #require(object?["loudness"] as? [String: Any], "\(String(decoding: run.output, as: UTF8.self))")
        #expect(Set(loudness.keys) == ["integrated", "range", "truePeak", "samplePeak", "momentaryMax", "shortTermMax"])
        let expected = try await Self.reference(path)
        let integrated = try #require(loudness["integrated"] as? Double)
        #expect(abs(integrated - expected.integrated) <= 0.1, "aqinfo \(integrated), libebur128 \(expected.integrated)")
        // The text form names each number with its unit.
        let text = try await runTool(Self.aqinfo, ["--loudness", path])
        let printed = String(decoding: text.output, as: UTF8.self)
        #expect(printed.contains("loudness: integrated ") && printed.contains(" dBTP"), "\(printed)")

        // Silence: −∞ is null, and nothing fails.
        let silent = directory + "/silent.wav"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=44100:cl=stereo", "-t", "2", silent])
        try #require(made.status == 0)
        let quiet = try await runTool(Self.aqinfo, ["--loudness", "--json", silent])
        #expect(quiet.status == 0, "\(String(decoding: quiet.errorOutput, as: UTF8.self))")
        let quietObject = try JSONSerialization.jsonObject(with: quiet.output) as? [String: Any]
        let quietLoudness = try #require(quietObject?["loudness"] as? [String: Any], "\(String(decoding: quiet.output, as: UTF8.self))")
        #expect(quietLoudness["integrated"] is NSNull && quietLoudness["truePeak"] is NSNull, "\(quietLoudness)")
        #expect(quietLoudness["range"] as? Double == 0)
    }

    @Test func aqrenderNormalizesToTheTargetOrToTheCeiling() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.aqrender), "aqrender is built with the tests")
        let directory = NSTemporaryDirectory() + "loudness-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = try await Self.make("quiet.mp3", in: directory, rate: 44100, layout: "stereo",
                                         codec: ["-c:a", "libmp3lame", "-b:a", "192k"], decibels: -14)
        AudioCodecs.registerAll()
        let before = try LoudnessMeter.measuring(try AudioFile(path: source)).reading
        // To −16 LUFS: the gain fits under −1 dBTP.
        let out = directory + "/normalized.wav"
        let run = try await runTool(Self.aqrender, [source, out, "--normalize", "-16"])
        #expect(run.status == 0, "\(String(decoding: run.errorOutput, as: UTF8.self))")
        let after = try LoudnessMeter.measuring(try AudioFile(path: out)).reading
        #expect(abs(after.integrated - -16) <= 0.1, "\(before.integrated) LUFS normalised to \(after.integrated)")
        #expect(after.truePeak <= -1 + 0.05, "\(after.truePeak) dBTP")
        // A ceiling below where the gain would take the peak: the peak sits at it, and it is said.
        let limited = directory + "/limited.wav"
        let ceiling = before.truePeak + 2
        let capped = try await runTool(Self.aqrender, [source, limited, "--normalize", "-16", "--true-peak-ceiling", String(ceiling)])
        #expect(capped.status == 0)
        let said = String(decoding: capped.errorOutput, as: UTF8.self)
        #expect(said.contains("true-peak ceiling"), "\(said)")
        let limitedReading = try LoudnessMeter.measuring(try AudioFile(path: limited)).reading
        #expect(abs(limitedReading.truePeak - ceiling) < 0.05, "true peak \(limitedReading.truePeak), ceiling \(ceiling)")
        #expect(abs(limitedReading.integrated - (before.integrated + 2)) < 0.05, "\(limitedReading.integrated)")
    }
}
