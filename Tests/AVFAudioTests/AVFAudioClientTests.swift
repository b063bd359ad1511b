import Foundation
import Testing
import TestSupport

/// `avlevels`, a program written against Apple's AVFAudio only (Swift 5 mode, `import
/// AVFoundation`), run on a WAV: its levels and its normalised mono mix are what the same
/// arithmetic gives on ffmpeg's decoding of the file, bit for bit.
@Suite(.timeLimit(.minutes(2)))
struct AVFAudioClientTests {
    static let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    static var avlevels: String { directory.appendingPathComponent("avlevels").path }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: avlevels), "avlevels is not built beside the tests"))
    func aLevelAnalyserWrittenForAppleRunsUnchanged() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let input = folder + "/in.wav", output = folder + "/mono.wav"
        try await AVFAudioFileTests.make(input, frames: 30_011, codec: ["-c:a", "pcm_s16le"])
        let decoded = try await AVFAudioFileTests.reference(input)
        let run = try await runTool(Self.avlevels, [input, output])
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0, "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")

        var peaks: [Float] = [0, 0], squares: [Double] = [0, 0], monoPeak: Float = 0
        let frames = decoded.count / 2
        for frame in 0..<frames {
            var sum: Float = 0
            for channel in 0..<2 {
                let sample = decoded[frame * 2 + channel]
                peaks[channel] = max(peaks[channel], abs(sample))
                squares[channel] += Double(sample) * Double(sample)
                sum += sample
            }
            monoPeak = max(monoPeak, abs(sum / 2))
        }
        var expected = "frames \(frames)\n"
        for channel in 0..<2 {
            expected += String(format: "channel %d peak %.6f rms %.6f\n", channel, peaks[channel], (squares[channel] / Double(frames)).squareRoot())
        }
        expected += "written \(frames) frames\n"
        #expect(frames == 30_011 && printed == expected)

        let mono = try await AVFAudioFileTests.reference(output)
        let gain = 1 / monoPeak
        let expectedMono = (0..<frames).map { (decoded[$0 * 2] + decoded[$0 * 2 + 1]) / 2 * gain }
        #expect(difference(mono, expectedMono) == nil)
        let probe = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,channels", "-of", "csv=p=0", output])
        #expect(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "pcm_f32le,1")
    }
}
