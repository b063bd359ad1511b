import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport

/// Offline render at another rate or channel count, against `sox rate -v` run on mpg123's decode.
@Suite(.enabled(if: Where.tool("mpg123") != nil && Where.tool("sox") != nil,
                "mpg123 or sox is missing (make deps installs them): conversion reference tests skipped"))
struct ConversionTests {
    /// mpg123's gapless decode, converted by sox's very-high-quality rate effect.
    /// `upmix`: mono input duplicated to two channels first.
    func soxReference(_ name: String, rate: Int, upmix: Bool = false) async throws -> [Float] {
        let directory = FileManager.default.temporaryDirectory
        let decoded = directory.appendingPathComponent("dec-\(UUID()).wav").path
        let converted = directory.appendingPathComponent("sox-\(UUID()).wav").path
        defer { for path in [decoded, converted] { try? FileManager.default.removeItem(atPath: path) } }
        _ = try await run(try #require(Where.tool("mpg123")), ["-q", "-e", "f32", "-w", decoded, Where.fixture(name)])
        var arguments = [decoded, "-e", "floating-point", "-b", "32", converted]
        if upmix { arguments += ["remix", "1", "1"] }
        arguments += ["rate", "-v", "\(rate)"]
        _ = try await run(try #require(Where.tool("sox")), arguments)
        return floats(wav: try Data(contentsOf: URL(fileURLWithPath: converted)))
    }

    @Test func renderingAt48kHzIsExactAndMatchesSox() async throws {
        let (ours, format, renderer) = try await rendered(Where.fixture("lame-vbr-v2-44k-stereo.mp3"), sampleRate: 48000)
        #expect(format == .float32(sampleRate: 48000, channels: 2))
        #expect(ours.count == 52800 * 2)                        // round(48510 × 48000 / 44100)
        #expect(renderer.expectedFrames == 52800)
        #expect(renderer.lastConverterError == nil)
        let reference = try await soxReference("lame-vbr-v2-44k-stereo.mp3", rate: 48000)
        #expect(reference.count == ours.count)
        // Both are 28-bit-precision resamplers of the same design: they agree far below 16 bits.
        #expect(snr(reference[...], ours[...]) >= 70, "SNR against sox: \(snr(reference[...], ours[...])) dB")
    }

    /// Loops joined by flushes round once over the whole render: 3 × 48510 frames at 11025 Hz
    /// make round(36382.5) = 36383 frames, where rounding each loop would make 3 × 12128 = 36384.
    @Test func loopsRoundOnceOverTheWholeRender() async throws {
        let (ours, _, renderer) = try await rendered(Where.fixture("lame-vbr-v2-44k-stereo.mp3"), loops: 3, sampleRate: 11025)
        #expect(renderer.expectedFrames == 36383)
        #expect(ours.count == 36383 * 2)
        let reference = try await soxReference("lame-vbr-v2-44k-stereo.mp3", rate: 11025)
        #expect(reference.count == 12128 * 2)
        // The first loop is the file converted on its own (it ends at a flush, as sox's input ends).
        #expect(snr(reference[0..<(12000 * 2)], ours[0..<(12000 * 2)]) >= 70)
    }

    @Test func stereoToMonoIsTheAverageOfLeftAndRight() async throws {
        let (stereo, _, _) = try await rendered(Where.fixture("lame-vbr-v2-44k-stereo.mp3"))
        let (mono, format, _) = try await rendered(Where.fixture("lame-vbr-v2-44k-stereo.mp3"), channels: 1)
        #expect(format.channelsPerFrame == 1)
        #expect(mono.count == 48510)
        let expected: [Float] = (0..<48510).map { (i: Int) -> Float in
            let left: Float = stereo[2 * i], right: Float = stereo[2 * i + 1]
            return (left + right) * 0.5
        }
        #expect(difference(mono, expected) == nil)
    }

    @Test func monoToStereoAt48kHzMatchesSox() async throws {
        let (ours, format, _) = try await rendered(Where.fixture("lame-cbr64-22k-mono-mpeg2.mp3"), sampleRate: 48000, channels: 2)
        #expect(format == .float32(sampleRate: 48000, channels: 2))
        #expect(ours.count == 52800 * 2)                        // round(24255 × 48000 / 22050)
        let reference = try await soxReference("lame-cbr64-22k-mono-mpeg2.mp3", rate: 48000, upmix: true)
        #expect(reference.count == ours.count)
        #expect(snr(reference[...], ours[...]) >= 70)
        #expect((0..<52800).allSatisfy { ours[2 * $0] == ours[2 * $0 + 1] })
    }
}
